"""psctld: the controller's composition root."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from pslurm.auth.credential import AuthError, create_key, load_key
from pslurm.auth.transport import Authenticator, CredentialService, signed_metadata
from pslurm.controller.agents import AgentClient
from pslurm.controller.service import Controller
from pslurm.controller.servicer import ControllerServicer
from pslurm.controller.store import Store
from pslurm.core.config import ConfigError, find_config_path, load_cluster_config
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

# Every RPC holds one of these threads while it runs, a WaitJob (psrun) for as long as it waits.
# Waits may take all but RPC_WORKERS_KEPT_FREE of them, so that agents' heartbeats and job ends, and
# submits and listings, always find a thread however many psrun are waiting.
log = logging.getLogger("psctld")
RPC_WORKERS = 32
RPC_WORKERS_KEPT_FREE = 8


def serve(conf_path: str, ready: threading.Event | None = None, stop: threading.Event | None = None) -> None:
    """Run the controller until ``stop`` is set (or SIGTERM/SIGINT when run as a program)."""
    config = load_cluster_config(conf_path)
    if create_key(config.auth_key_path):
        log.info("created the cluster key %s: every node's agent needs a copy", config.auth_key_path)
    auth = Authenticator(load_key(config.auth_key_path))
    store = Store(config.database_url)
    store.migrate()
    agents = AgentClient(lambda: signed_metadata(auth.key))
    controller = Controller(config, store, agents, operators=frozenset({0, os.getuid()}))
    server = grpc.server(ThreadPoolExecutor(max_workers=RPC_WORKERS, thread_name_prefix="rpc"),
                         interceptors=[auth.interceptor()],
                         options=[("grpc.so_reuseport", 0)])
    servicer = ControllerServicer(controller, auth, wait_slots=RPC_WORKERS - RPC_WORKERS_KEPT_FREE)
    pb_grpc.add_ControllerServicer_to_server(servicer, server)
    server.add_insecure_port(config.controller_target)
    server.start()
    # Users who cannot read the key get credentials here. Only a controller running as root serves
    # them: a personal cluster's agents cannot run jobs as anybody but its owner, so only they may use it.
    credentials = CredentialService(config.auth_socket_path, auth.key) if os.geteuid() == 0 else None
    if credentials is not None:
        credentials.start()
    loop = threading.Thread(target=controller.run_loop, name="scheduler", daemon=True)
    loop.start()
    log.info("psctld for %s listening on %s (store %s)", config.cluster_name,
                                     config.controller_target, store.engine.url.render_as_string())
    if ready is not None:
        ready.set()
    stop = stop or threading.Event()
    stop.wait()
    controller.stop()
    if credentials is not None:
        credentials.close()
    server.stop(grace=1).wait()
    agents.close()
    store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="psctld", description="pslurm controller")
    parser.add_argument("-f", "--conf", default=None, help="pslurm.conf (default: $PSLURM_CONF, ...)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve(args.conf or find_config_path(), stop=stop)
    except (ConfigError, AuthError) as exc:
        sys.exit(f"psctld: error: {exc}")
    except RuntimeError as exc:  # grpc: the port is taken
        sys.exit(f"psctld: error: {exc}")


if __name__ == "__main__":
    main()
