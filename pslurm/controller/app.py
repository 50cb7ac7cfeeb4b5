"""psctld: the controller's composition root.

The parts, each with one job, know each other only through the small interfaces in ``ports``:
the job service (requests to lifecycle operations), the step service (job steps), the scheduler (snapshot, plan, starts,
launches; it owns the doorbell the others ring), the node monitor (registration, heartbeats,
timeouts, reconciliation) and the job watch (the API's waits). The store is their only shared state.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from pslurm import __version__
from pslurm.auth.credential import CONTROLLER, AuthError, create_key, load_key, node_audience
from pslurm.auth.secretfiles import check_cluster_secrets, read_database_url
from pslurm.auth.transport import SERVER_OPTIONS, Authenticator, CredentialService, Metadata, signed_metadata
from pslurm.controller import failover
from pslurm.controller.agents import AgentClient
from pslurm.controller.assocs import AssocService
from pslurm.controller.jobs import JobService
from pslurm.controller.limits import ServerLimits, max_tasks_per_node, raise_descriptor_limit, server_limits
from pslurm.controller.monitor import NodeMonitor
from pslurm.controller.observe import Observer
from pslurm.controller.ports import Agents
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.servicer import ControllerServicer
from pslurm.controller.steps import StepService
from pslurm.controller.store import Lease, Store
from pslurm.controller.store.revisions import StoreTooNew
from pslurm.controller.watch import JobWatch
from pslurm.core.config import ClusterConfig, ConfigError, find_config_path, load_cluster_config
from pslurm.core.ratelog import bound_logging
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from pslurm.auth.jwt import TokenCheck
    from pslurm.controller.rest.observed import WebObservability
    from pslurm.controller.rest.routes import Api
    from pslurm.controller.rest.server import RestServer, Routes

# Every RPC (an agent's registration, heartbeat or job ends) holds one of these threads while it runs;
# users' requests, waits included, are the HTTP API's (its own loop and pool), not these.
log = logging.getLogger("psctld")
RPC_WORKERS = 32
# Tests only: PSLURM_TEST_FAULT=crash-after-start makes psctld die between a pass's start commit and its
# launches (the moment where a controller's death used to leave jobs RUNNING with no process anywhere).
FAULT_ENV = "PSLURM_TEST_FAULT"


@dataclass
class Parts:
    """The controller, assembled."""

    store: Store
    agents: Agents
    scheduler: Scheduler
    monitor: NodeMonitor
    jobs: JobService
    watch: JobWatch
    steps: StepService
    assocs: AssocService


def assemble(config: ClusterConfig, store: Store, agents: Agents, clock: Callable[[], float] = time.time,
             operators: frozenset[int] = frozenset({0})) -> Parts:
    """Wire the parts through their interfaces (the doorbell, the agents, the node monitor's health)."""
    after_start = _crash if os.environ.get(FAULT_ENV) == "crash-after-start" else None
    monitor: NodeMonitor
    scheduler = Scheduler(config, store, agents, nodes=_Late(lambda: monitor),
                          partitions_of=lambda name: monitor.partitions_of(name), clock=clock,
                          after_start=after_start)
    monitor = NodeMonitor(config, store, scheduler.reschedule, clock)
    jobs = JobService(config, store, agents, scheduler.reschedule, clock, operators)
    monitor.end_on_nodes = jobs.end_on_nodes
    assocs = AssocService(store.assoc, config.cluster_name, operators)
    assocs.load_config(config)
    scheduler.associations = jobs.associations = assocs.current  # read at each submit and pass
    return Parts(store, agents, scheduler, monitor, jobs, JobWatch(store, clock),
                 StepService(store, agents, clock, operators, max_tasks_per_node(config)), assocs)


class _Late:
    """The node monitor for the scheduler, made after it (the monitor needs the scheduler's doorbell)."""

    def __init__(self, get: Callable[[], NodeMonitor]) -> None:
        self._get = get

    def unreachable(self, node: str, why: str) -> None:
        self._get().unreachable(node, why)

    def gpu_measured(self, node: str) -> Mapping[int, tuple[int, float]]:
        return self._get().gpu_measured(node)


def _crash(started: list[int]) -> None:
    log.error("%s: dying after the start commit of jobs %s, before their launch", FAULT_ENV, started)
    os._exit(86)


def serve(conf_path: str, ready: threading.Event | None = None, stop: threading.Event | None = None,
          host: str | None = None) -> None:
    """Run the controller until ``stop`` is set (or SIGTERM/SIGINT when run as a program). With several
    SlurmctldHost= lines, ``host`` (else this machine's name) says which of them this one is: it
    stands by until it holds the controller lease (:mod:`pslurm.controller.failover`)."""
    config = load_cluster_config(conf_path)
    me = failover.this_controller(config, host)
    config = failover.as_seen_by(config, me)
    if config.database_url:  # before anything is made: several controllers on SQLite is refused
        failover.require_shared_database(config, config.database_url)
    if create_key(config.auth_key_path):
        log.info("created the cluster key %s: every node's agent needs a copy", config.auth_key_path)
    check_cluster_secrets(config)  # before anything is served: a readable secret is no secret
    key = load_key(config.auth_key_path)
    raise_descriptor_limit()
    limits = server_limits(config)
    database_url = config.database_url or read_database_url(config.database_url_file)
    failover.require_shared_database(config, database_url)
    make_state_private(config, database_url)
    store = Store(database_url)
    store.migrate()
    operators = frozenset({0, os.getuid()})
    poll = config.slurmctld_timeout * failover.RENEW_SHARE
    lease = Lease(store.engine, me.name, config.slurmctld_timeout * failover.LEASE_SHARE,
                  grace=max(0, me.index - 1) * poll)  # backups take over in order
    role = failover.Role(config, me, lease, operators)
    stop = stop or threading.Event()
    try:
        if not config.backup_controllers:
            _serve_active(config, key, limits, store, role, ready, stop)
            return

        def stand_by() -> Callable[[], None]:
            from pslurm.controller.rest.standby import StandbyApi

            rest = _rest_server(config, Authenticator(key), StandbyApi(role), limits=limits, operators=operators)
            log.info("psctld %s (%s) standing by on http://%s: the controller lease is another's", me.name,
                     role.me.role(role.count), config.rest_target)
            if ready is not None:
                ready.set()
            return rest.stop

        failover.run(role, stop, stand_by, lambda end: _serve_active(config, key, limits, store, role, ready, end),
                     lambda held: store.fence(None if held is None else held.check))
    finally:
        store.close()


def _serve_active(config: ClusterConfig, key: bytes, limits: ServerLimits, store: Store, role: failover.Role,
                  ready: threading.Event | None, stop: threading.Event) -> None:
    """Serve as the active controller until ``stop`` is set: the agents' gRPC, the user API, the
    credential socket and the two loops, then stop them all."""
    for_agent = _agent_credentials(config, key)
    agents = AgentClient(for_agent)
    operators = role.operators
    parts = assemble(config, store, agents, operators=operators)
    observer = Observer(parts, config).attach()  # metrics and the GPU history, fed by the parts' hooks
    # the agents' path: credentials made for the controller's gRPC, from daemons only, with their own replay
    # cache and threads; users' requests (the HTTP API: its own cache, loop and pool) cannot stall it
    auth = Authenticator(key, audience=CONTROLLER, only=operators)
    server = grpc.server(ThreadPoolExecutor(max_workers=RPC_WORKERS, thread_name_prefix="rpc"),
                         interceptors=[observer.grpc_interceptor(), auth.interceptor()], options=SERVER_OPTIONS)
    servicer = ControllerServicer(parts.monitor, auth, parts.jobs.operators, parts.steps)
    pb_grpc.add_ControllerServicer_to_server(servicer, server)
    server.add_insecure_port(config.controller_target)
    server.start()
    api_auth = Authenticator(key)  # the API's: its credentials' audience, its own replay cache
    rest = _rest_server(config, api_auth, *_api(parts, api_auth, config, role, for_agent, observer), limits=limits,
                        operators=parts.jobs.operators)
    # Users who cannot read the key get credentials here. Only a controller running as root serves
    # them: a personal cluster's agents cannot run jobs as anybody but its owner, so only they may use it.
    credentials = (CredentialService(config.auth_socket_path, key, rate=limits.credential_rate)
                   if os.geteuid() == 0 else None)
    if credentials is not None:
        credentials.start()
    stopping = threading.Event()
    threading.Thread(target=parts.scheduler.run_loop, name="scheduler", daemon=True).start()
    threading.Thread(target=parts.monitor.run_loop, args=(stopping,), name="monitor", daemon=True).start()
    log.info("psctld for %s listening on %s, its API on http://%s (store %s)", config.cluster_name,
             config.controller_target, config.rest_target, store.engine.url.render_as_string())
    if ready is not None:
        ready.set()
    stop.wait()
    stopping.set()
    parts.scheduler.stop()
    parts.watch.stop()
    if credentials is not None:
        credentials.close()
    rest.stop()
    server.stop(grace=1).wait()
    agents.close()


def _agent_credentials(config: ClusterConfig, key: bytes) -> Callable[[str], Metadata]:
    """Fresh gRPC metadata for a call to the agent at ``target`` (host:port): a credential made for
    that node alone (its name from pslurm.conf's NodeName= lines), refused by any other."""
    names = {f"{n.addr}:{n.port}": n.name for n in config.nodes.values()}
    return lambda target: signed_metadata(key, node_audience(names.get(target, target)))


def _api(parts: Parts, auth: Authenticator, config: ClusterConfig, role: failover.Role,
         for_agent: Callable[[str], Metadata], observer: Observer) -> tuple[Api, WebObservability, TokenCheck]:
    """The user API over the parts (with sacctmgr's, sdiag's and sstat's routes), metrics and the dashboard
    beside it, and the check of scontrol token's JWTs; ``auth``: the API's."""
    from pslurm.auth.jwt import TokenCheck, key_path, load_or_create_key, token_policy
    from pslurm.controller.diag import Diag
    from pslurm.controller.rest.acct_routes import AcctApi
    from pslurm.controller.rest.dashlink import DashboardLink
    from pslurm.controller.rest.observed import WebObservability
    from pslurm.controller.rest.relay import AgentRelay
    from pslurm.controller.rest.routes import Api
    from pslurm.controller.rest.slurm_routes import SlurmApi
    from pslurm.controller.rest.stats_relay import StatsRelay

    api = Api(parts.jobs, parts.scheduler, parts.monitor, parts.watch, AgentRelay(for_agent), parts.steps, role=role)
    path = key_path(config.state_dir, config.extra)
    try:  # scontrol token's JWT: the key (read again when it changes), AuthAltParameters' bounds
        tokens = TokenCheck(load_or_create_key(path), path=path, policy=token_policy(config.extra))
    except ValueError as exc:
        raise ConfigError(f"{config.path}: {exc}") from None
    diag = Diag(parts.store, observer.measurements)  # sdiag's figures: the observer's scheduler passes
    api.more.append(AcctApi(api, parts.assocs, tokens, diag, StatsRelay(for_agent)))
    api.more.append(SlurmApi(api, parts.assocs.current, diag))  # slurmrestd v0.0.41-v0.0.44
    observed = WebObservability(observer, auth, api, tokens.identity)
    api.more.append(DashboardLink(observed))  # pslurm dashboard's one-time login link
    return api, observed, tokens


def _rest_server(config: ClusterConfig, auth: Authenticator, api: Routes, observed: WebObservability | None = None,
                 tokens: TokenCheck | None = None, *, limits: ServerLimits, operators: frozenset[int]) -> RestServer:
    """The user API (HTTP/JSON; metrics and the dashboard with ``observed``) on RestPort, serving from
    its own thread and event loop."""
    from pslurm.controller.rest.server import RestServer

    rest = RestServer(api, auth, config.controller_addr, config.rest_port, limits, operators, observed=observed,
                      tokens=tokens)
    try:
        rest.start()
    except OSError as exc:
        raise ConfigError(f"cannot serve the API on {config.rest_target} (RestPort): {exc.strerror or exc}") from None
    return rest


def make_state_private(config: ClusterConfig, database_url: str) -> None:
    """StateSaveLocation 0700 and the SQLite database with its -wal, -shm (and -journal) files 0600,
    made so when created and fixed at every start: they hold every job's environment and script,
    and whoever could lock pslurm.db-shm would stall every write of the controller.

    Where SlurmdSpoolDir lies inside StateSaveLocation (one host for both), the directory is 0711
    instead: an agent's jobs, running as their users, pass through it to their scripts; no other
    user may list it, and every file of the controller's in it is 0600. Raises ConfigError."""
    state = os.path.abspath(config.state_dir)
    spool = os.path.abspath(config.spool_dir)
    mode = 0o711 if os.path.commonpath([state, spool]) == state else 0o700
    try:
        os.makedirs(state, mode=mode, exist_ok=True)
        now = os.stat(state).st_mode
        if now & (stat.S_ISVTX | stat.S_IWOTH):  # /tmp, /var/tmp: not a directory to take over
            raise ConfigError(f"StateSaveLocation {state} is a shared directory (mode {stat.S_IMODE(now):04o}): "
                              "give psctld a directory of its own")
        if stat.S_IMODE(now) != mode:
            os.chmod(state, mode)
    except OSError as exc:
        raise ConfigError(f"cannot make StateSaveLocation {state} private (mode {mode:04o}): {exc.strerror}") from None
    try:
        url = make_url(database_url)
    except ArgumentError:
        return  # not a URL: the store says so
    if not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
        return
    db = os.path.abspath(url.database)
    try:
        # SQLite gives the -wal, -shm and -journal files the database file's mode: make it 0600 first
        os.close(os.open(db, os.O_RDWR | os.O_CREAT, 0o600))
        for path in (db, f"{db}-wal", f"{db}-shm", f"{db}-journal"):
            if os.path.exists(path) and stat.S_IMODE(os.stat(path).st_mode) != 0o600:
                os.chmod(path, 0o600)
    except OSError as exc:
        raise ConfigError(f"cannot make the database {db} private (mode 0600): {exc.strerror}") from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="psctld", description="pslurm controller")
    parser.add_argument("-f", "--conf", default=None, help="pslurm.conf (default: $PSLURM_CONF, ...)")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("-V", "--version", action="version", version=f"pslurm {__version__}")
    parser.add_argument("--host", default=None, help="which SlurmctldHost= this controller is (default: this "
                        "machine's name; pslurm's own, for several controllers on one machine)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    bound_logging()  # a message that repeats is written at a bounded rate: no user fills the disk with it
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    os.umask(0o077)  # whatever psctld creates (the store, its journals, a new key) is its user's alone
    try:
        serve(args.conf or find_config_path(), stop=stop, host=args.host)
    except (ConfigError, AuthError, StoreTooNew) as exc:
        sys.exit(f"psctld: error: {exc}")
    except RuntimeError as exc:  # grpc: the port is taken
        sys.exit(f"psctld: error: {exc}")


if __name__ == "__main__":
    main()
