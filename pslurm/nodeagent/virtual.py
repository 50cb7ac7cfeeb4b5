"""``psd --virtual -N HOSTLIST``: the agents of many nodes in one process, for clusters larger than the machine.

Slurm's multiple-slurmd and Flux's ``--test-size`` are the models: every node keeps its own
address and port in pslurm.conf and its own :class:`~pslurm.nodeagent.agent.Agent` (registration,
heartbeats, launches, real job processes, cgroups where the agent may make them), exactly as a
node of its own would; only the process is shared. One gRPC server listens on all of the process's
ports and hands each call to the agent of the port the caller dialled (the call's ``:authority``,
which a gRPC client sets to the target it dialled: ``addr:port``), so the controller sees one agent
per node on the wire and needs no change. A server per node costs a polling thread each (measured:
3 % of a core idle for 250 servers in one process, against nothing for one server with 250 ports).

The nodes of a process share its RPC threads, and so the bound on the threads psrun's streams may
hold (a real node has its own): this mode is for measuring the controller and the wire at scale, not
for running many users' work.
"""

from __future__ import annotations

import logging
import random
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pslurm.auth.credential import CONTROLLER, AuthError, node_audience
from pslurm.auth.transport import Authenticator
from pslurm.core.config import CgroupConfig, ClusterConfig
from pslurm.nodeagent.gpus import GpuDevice

log = logging.getLogger("psd")

WORKERS = 128  # RPC threads of the process, all its nodes together


class NoRoute(LookupError):
    """A call for a port this process does not serve."""


def authority_port(context: Any) -> int:
    """The port the caller dialled, from the call's ``:authority`` (``host:port``); NoRoute when the
    call carries none. grpc's Python server keeps it on the call's event, filled for calls served
    by generic handlers (a registered method's call has none): see :func:`serve_nodes`."""
    details = getattr(getattr(context, "_rpc_event", None), "call_details", None)
    host = getattr(details, "host", b"") or b""
    text = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    port = text.rpartition(":")[2]
    if not port.isdigit():
        raise NoRoute(f"the call names no node (authority {text!r})")
    return int(port)


def router(servicers: Mapping[int, tuple[Authenticator, Any]]) -> Any:
    """A NodeAgent servicer that hands each call to the servicer of the port it came to, once that
    node's authenticator admitted its credential (made for that node: its audience). A call's
    credential is checked here, after its request was read, not by an interceptor before it: an
    interceptor is not told the port (the one difference from a node's own psd)."""
    import grpc

    from pslurm.proto import pslurm_pb2_grpc as pb_grpc

    def delegate(name: str) -> Callable[[Any, Any, grpc.ServicerContext], Any]:
        def call(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                auth, target = servicers[authority_port(context)]
            except (NoRoute, KeyError) as exc:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no node of this process there: {exc}")
            try:
                auth.admit(context.invocation_metadata())
            except AuthError as exc:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {exc}")
            return getattr(target, name)(request, context)

        call.__name__ = name
        return call

    methods = {name: delegate(name) for name in vars(pb_grpc.NodeAgentServicer) if not name.startswith("_")}
    return type("NodeRouter", (pb_grpc.NodeAgentServicer,), methods)()


class _GenericOnly:
    """A server seen by the generated ``add_..._to_server`` as offering only generic handlers: calls
    to registered methods carry no ``:authority`` in grpc's Python server, generic ones do."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service: str, handlers: Any) -> None:
        pass


def serve_nodes(config: ClusterConfig, names: list[str], cgroup_conf: CgroupConfig, key: bytes,
                inventories: Mapping[str, tuple[list[GpuDevice], str | None]], kept_free: int,
                stop: threading.Event | None = None) -> None:
    """Run the agents of ``names`` (their GPUs and drain reasons in ``inventories``) behind one gRPC
    server until ``stop`` (SIGTERM or SIGINT when none is given); then end their jobs, as each agent
    does, and stop. ``kept_free``: the RPC threads psrun's streams may never take (psd's own rule).
    Called by psd's composition root (:mod:`pslurm.nodeagent.app`), which turns gRPC's fork support off."""
    import grpc

    from pslurm.auth.transport import SERVER_OPTIONS, signed_metadata
    from pslurm.nodeagent import runner as job_runner
    from pslurm.nodeagent.agent import Agent
    from pslurm.nodeagent.controllers import link_for
    from pslurm.nodeagent.servicer import AgentServicer
    from pslurm.proto import pslurm_pb2_grpc as pb_grpc

    if stop is None:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())  # type: ignore[union-attr]
    job_runner.begin()  # one for the process: the jobs of all its nodes are forked there
    agents = {}
    servicers = {}
    slots = threading.BoundedSemaphore(WORKERS - kept_free)  # threads psrun's streams may take
    for name in names:
        node = config.nodes[name]
        devices, drain = inventories[name]
        link = link_for(config, credentials=lambda: signed_metadata(key, CONTROLLER))
        agent = Agent(config, node, devices, cgroup_conf, link, drain)
        auth = Authenticator(key, audience=node_audience(name))  # credentials made for this node only
        agents[name], servicers[node.port] = agent, (auth, AgentServicer(agent, auth, stream_slots=slots))
    server = grpc.server(ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="rpc"), options=SERVER_OPTIONS)
    pb_grpc.add_NodeAgentServicer_to_server(router(servicers), _GenericOnly(server))
    for name in names:
        node = config.nodes[name]
        try:
            server.add_insecure_port(f"{node.addr}:{node.port}")
        except RuntimeError as exc:
            sys.exit(f"psd: error: cannot listen on {node.addr}:{node.port} for {name}: {exc}")
    for agent in agents.values():
        agent.recover()
    server.start()

    halt = stop

    def run(agent: Agent) -> None:
        # a cluster's agents boot together, but their heartbeats should not stay in step
        if halt.wait(random.uniform(0, 0.2)):
            return
        agent.heartbeats.register()
        if not halt.is_set():
            agent.heartbeats.loop()

    for name, agent in agents.items():
        threading.Thread(target=run, args=(agent,), name=f"heartbeat-{name}", daemon=True).start()
    log.info("serving %d nodes %s", len(names), names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}")
    stop.wait()
    stoppers = [threading.Thread(target=agent.stop, daemon=True) for agent in agents.values()]
    for thread in stoppers:
        thread.start()
    for thread in stoppers:
        thread.join()
    job_runner.end()
    server.stop(grace=1).wait()
