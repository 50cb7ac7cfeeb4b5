"""psd: the node agent's composition root."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from pslurm.core.config import (
    ConfigError,
    find_config_path,
    load_cgroup_conf,
    load_cluster_config,
    load_gres_conf,
)
from pslurm.nodeagent.gpus import GpuDiscoveryError, check_inventory, format_gres_conf, inventory_from_gres_conf


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="psd", description="pslurm node agent")
    parser.add_argument("-f", "--conf", default=None, help="pslurm.conf (default: $PSLURM_CONF, ...)")
    parser.add_argument("-N", "--node-name", default=None, help="this node's NodeName in pslurm.conf")
    parser.add_argument("-G", "--print-gres", action="store_true", help="print the GPUs found, as gres.conf")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format=f"%(asctime)s psd[{args.node_name}] %(levelname)s %(message)s")
    conf_path = args.conf or find_config_path()
    try:
        config = load_cluster_config(conf_path)
        gres_lines = load_gres_conf(conf_path)
        cgroup_conf = load_cgroup_conf(conf_path)
    except ConfigError as exc:
        sys.exit(f"psd: error: {exc}")
    name = args.node_name or _guess_node(config.nodes)
    node = config.nodes.get(name)
    if node is None:
        sys.exit(f"psd: error: node {name} is not in {conf_path}")
    try:
        devices, _autodetect = inventory_from_gres_conf(gres_lines, node.name)
    except GpuDiscoveryError as exc:
        sys.exit(f"psd: error: {exc}")
    if args.print_gres:
        print(format_gres_conf(devices))
        return
    if not devices and node.gpus():  # Gres= in pslurm.conf and no gres.conf lines: simulated GPUs
        from pslurm.nodeagent.gpus import GpuDevice

        devices = [GpuDevice(index=i, name="gpu", type=t, file=None, minor=None)
                   for i, t in enumerate(t for g in node.gres if g.name == "gpu" for t in [g.type] * g.count)]
    typed = {g.type: g.count for g in node.gres if g.name == "gpu" and g.type}
    drain = check_inventory(devices, node.gpus(), typed or None)
    serve(config, node, devices, cgroup_conf, drain)


def serve(config, node, devices, cgroup_conf, drain, stop: threading.Event | None = None) -> None:  # type: ignore[no-untyped-def]
    import grpc

    from pslurm.nodeagent.agent import Agent, AgentServicer
    from pslurm.proto import pslurm_pb2_grpc as pb_grpc

    agent = Agent(config, node, devices, cgroup_conf, drain)
    server = grpc.server(ThreadPoolExecutor(max_workers=64, thread_name_prefix="rpc"),
                         options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_NodeAgentServicer_to_server(AgentServicer(agent), server)
    try:
        server.add_insecure_port(f"{node.addr}:{node.port}")
    except RuntimeError as exc:
        sys.exit(f"psd: error: cannot listen on {node.addr}:{node.port}: {exc}")
    server.start()
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    agent.register()
    beat = threading.Thread(target=agent.heartbeat_loop, name="heartbeat", daemon=True)
    beat.start()
    stop.wait()
    agent.stop()
    server.stop(grace=1).wait()


def _guess_node(nodes: dict) -> str:  # type: ignore[type-arg]
    import socket

    host = socket.gethostname().split(".")[0]
    return host


if __name__ == "__main__":
    main()
