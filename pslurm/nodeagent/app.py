"""psd: the node agent's composition root."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pslurm import __version__
from pslurm.auth.credential import AuthError, load_key
from pslurm.auth.secretfiles import check_private
from pslurm.core.config import (
    CgroupConfig,
    ClusterConfig,
    ConfigError,
    GresConfLine,
    NodeConfig,
    find_config_path,
    load_cgroup_conf,
    load_cluster_config,
    load_gres_conf,
)
from pslurm.nodeagent.gpus import (
    SHARED,
    GpuDevice,
    GpuDiscoveryError,
    check_inventory,
    default_shares,
    format_gres_conf,
    inventory_from_gres_conf,
)

# Jobs with a device cgroup or CPU affinity start through Popen's preexec_fn, i.e. a real fork() of
# this threaded gRPC server. With gRPC's fork support on (grpcio 1.85 has it on), its at-fork
# handlers crash the child before exec (every such job ended SIGSEGV). The child only execs, it
# never uses gRPC, so the support is turned off before grpc is first imported.
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"

if TYPE_CHECKING:
    from pslurm.nodeagent.gpumon import GpuMeter

RPC_WORKERS_KEPT_FREE = 16  # the agent's RPC threads psrun's streams may never take


def main(argv: list[str] | None = None) -> None:
    """``psd [-f CONF] [-N NODE] [-G]``: serve one node, or print its GPUs as gres.conf lines.
    ``psd --virtual -N HOSTLIST``: serve every node of the hostlist in this process (scale tests:
    :mod:`pslurm.nodeagent.virtual`)."""
    parser = argparse.ArgumentParser(prog="psd", description="pslurm node agent")
    parser.add_argument("-f", "--conf", default=None, help="pslurm.conf (default: $PSLURM_CONF, ...)")
    parser.add_argument("-N", "--node-name", default=None, help="this node's NodeName in pslurm.conf")
    parser.add_argument("-G", "--print-gres", action="store_true", help="print the GPUs found, as gres.conf")
    parser.add_argument("--virtual", action="store_true",
                        help="-N is a hostlist: serve all its nodes in this process, each on its own port")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("-V", "--version", action="version", version=f"pslurm {__version__}")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format=f"%(asctime)s psd[{args.node_name}] %(levelname)s %(message)s")
    from pslurm.core.ratelog import bound_logging

    bound_logging()  # a message that repeats (a user's refused streams) is written at a bounded rate
    conf_path = args.conf or find_config_path()
    try:
        config = load_cluster_config(conf_path)
        gres_lines = load_gres_conf(conf_path)
        cgroup_conf = load_cgroup_conf(conf_path)
    except ConfigError as exc:
        sys.exit(f"psd: error: {exc}")
    names = [args.node_name or _guess_node()]
    if args.virtual:
        from pslurm.core.hostlists import expand

        names = expand(args.node_name or "")
    inventories: dict[str, tuple[list[GpuDevice], str | None, GpuMeter | None]] = {}
    for name in names:
        if name not in config.nodes and not args.print_gres:  # -G only reads gres.conf, like slurmd -G
            sys.exit(f"psd: error: node {name} is not in {conf_path}")
        try:
            inventories[name] = node_inventory(config.nodes.get(name), gres_lines, name, print_only=args.print_gres)
        except (GpuDiscoveryError, ConfigError) as exc:  # e.g. AutoDetect=nvml without the NVML library: one line
            sys.exit(f"psd: error: {exc}")
    if args.print_gres:
        sys.stdout.write(format_gres_conf(inventories[names[0]][0]))
        return
    try:
        key = load_key(config.auth_key_path)
        check_private(config.auth_key_path, "the cluster key")  # whoever reads it can sign as root
    except AuthError as exc:
        sys.exit(f"psd: error: {exc} (every node needs a copy of the controller's key)")
    if args.virtual:
        from pslurm.nodeagent.virtual import serve_nodes

        if not names or any(monitor is not None for _, _, monitor in inventories.values()):
            sys.exit("psd: error: --virtual needs nodes (-N) without GPUs of their own to detect (AutoDetect=nvml)")
        serve_nodes(config, names, cgroup_conf, key, {n: (d, drain) for n, (d, drain, _) in inventories.items()},
                    RPC_WORKERS_KEPT_FREE)
        return
    devices, drain, monitor = inventories[names[0]]
    serve(config, config.nodes[names[0]], devices, cgroup_conf, drain, key, monitor=monitor)


def node_inventory(node: NodeConfig | None, gres_lines: list[GresConfLine], name: str, print_only: bool = False
                   ) -> tuple[list[GpuDevice], str | None, GpuMeter | None]:
    """The node's GPUs (gres.conf, NVML, or simulated for a ``Gres=`` without gres.conf lines), the
    drain reason when fewer were found than configured, and NVML's monitor when autodetected.
    ``print_only`` (psd -G): the gres.conf devices alone. GpuDiscoveryError, ConfigError."""
    devices, autodetect = inventory_from_gres_conf(gres_lines, name)
    if print_only or node is None:
        return devices, None, None
    if not devices and node.gpus():  # Gres= in pslurm.conf and no gres.conf lines: simulated GPUs
        devices = simulated_devices(node)
    devices = default_shares(devices, node.gres)
    typed = {g.type: g.count for g in node.gres if g.name == "gpu" and g.type}
    shares = {kind: total for kind in SHARED if (total := sum(g.count for g in node.gres if g.name == kind))}
    drain = check_inventory(devices, node.gpus(), typed or None, shares or None)
    if drain:
        logging.getLogger("psd").warning("node %s will register drained: %s", name, drain)
    monitor = None
    if autodetect:
        from pslurm.nodeagent.gpumon import GpuMonitor

        monitor = GpuMonitor(devices)  # without it, GPUs with gres.conf Memory= get a simulated one (Agent)
    return devices, drain, monitor


def simulated_devices(node: NodeConfig) -> list[GpuDevice]:
    """File-less GPUs for a node whose pslurm.conf Gres= has no gres.conf lines behind it."""
    types = [g.type for g in node.gres if g.name == "gpu" for _ in range(g.count)]
    return [GpuDevice(index=i, name=t or "gpu", type=t, file=None, minor=None) for i, t in enumerate(types)]


def serve(config: ClusterConfig, node: NodeConfig, devices: list[GpuDevice], cgroup_conf: CgroupConfig,
          drain: str | None, key: bytes, stop: threading.Event | None = None,
          monitor: GpuMeter | None = None) -> None:
    """Run the agent's gRPC server, registration, heartbeats (and usage sampling) until stopped."""
    import grpc

    from pslurm.auth.credential import CONTROLLER, node_audience
    from pslurm.auth.transport import SERVER_OPTIONS, Authenticator, signed_metadata
    from pslurm.nodeagent import runner as job_runner
    from pslurm.nodeagent.agent import Agent
    from pslurm.nodeagent.controllers import link_for
    from pslurm.nodeagent.servicer import AgentServicer
    from pslurm.proto import pslurm_pb2_grpc as pb_grpc

    job_runner.begin()  # the jobs' processes are forked there, not in this threaded process
    auth = Authenticator(key, audience=node_audience(node.name))  # credentials made for this node only
    link = link_for(config, credentials=lambda: signed_metadata(key, CONTROLLER))  # psd's way to the controller
    agent = Agent(config, node, devices, cgroup_conf, link, drain, monitor)
    # A psrun job's output and input streams each hold a thread while the job runs, and a node runs at
    # most one job per CPU: streams may take two threads per CPU (48 at least, however many streams
    # users open), the rest stay free for the controller's launches and signals.
    workers = max(64, 2 * node.cpus + RPC_WORKERS_KEPT_FREE)
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"),
                         interceptors=[auth.interceptor()], options=SERVER_OPTIONS)
    pb_grpc.add_NodeAgentServicer_to_server(
        AgentServicer(agent, auth, stream_slots=workers - RPC_WORKERS_KEPT_FREE), server)
    try:
        server.add_insecure_port(f"{node.addr}:{node.port}")
    except RuntimeError as exc:
        sys.exit(f"psd: error: cannot listen on {node.addr}:{node.port}: {exc}")
    # With the port ours (no other agent serves this node), what a previous agent left running goes,
    # before any launch is taken and before the controller hears from us: it may run those jobs
    # again once it sees they are not ours any more.
    agent.recover()
    server.start()
    halt = stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: halt.set())

    def run() -> None:  # off the main thread: a SIGTERM while the controller is not answering yet ends us
        agent.heartbeats.register()
        if halt.is_set():
            return
        if agent.gpus.monitor is not None:  # NVML's, or the agent's own for simulated GPUs with memory
            threading.Thread(target=agent.usage_loop, name="gpu-usage", daemon=True).start()
        agent.heartbeats.loop()

    threading.Thread(target=run, name="heartbeat", daemon=True).start()
    stop.wait()
    agent.stop()
    job_runner.end()
    server.stop(grace=1).wait()


def _guess_node() -> str:
    import socket

    return socket.gethostname().split(".")[0]


if __name__ == "__main__":
    main()
