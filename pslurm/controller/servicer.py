"""gRPC glue for the controller's agent-facing RPCs: protobuf in, the node monitor's call, protobuf
out, errors as status codes. Users speak HTTP/JSON (pslurm.controller.rest)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

import grpc

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.transport import Authenticator
from pslurm.controller.monitor import NodeMonitor, Run
from pslurm.controller.rest import access
from pslurm.controller.steps import StepService
from pslurm.controller.store import RunEnd, StepEnd
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

T = TypeVar("T")
NODE_MESSAGES_ONLY_FROM_AGENTS = "node messages come only from an agent (root or the SlurmUser)"


_CODES = {access.INVALID: grpc.StatusCode.INVALID_ARGUMENT, access.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
          access.PERMISSION: grpc.StatusCode.PERMISSION_DENIED, access.CONFLICT: grpc.StatusCode.FAILED_PRECONDITION,
          access.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE}


def _guard(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    """``fn()``, its refusals (pslurm.controller.rest.access.ERROR_KINDS) aborted with their status."""
    try:
        return fn()
    except Exception as exc:
        kind = access.error_kind(exc)
        if kind is None:
            raise
        context.abort(_CODES[kind], str(exc))
    raise AssertionError("unreachable")


class ControllerServicer(pb_grpc.ControllerServicer):
    """Translates the agents' RPCs (registration, heartbeats, job ends) to the node monitor; only
    operators (root, or the user psctld runs as: the agents) may send them."""

    def __init__(self, monitor: NodeMonitor, auth: Authenticator, operators: Collection[int],
                 steps: StepService | None = None) -> None:
        self.monitor = monitor
        self.steps = steps
        self.auth = auth
        self.operators = operators

    def _caller(self, context: grpc.ServicerContext) -> Identity:
        """Who sent the request, from its credential (the interceptor has refused those without one)."""
        try:
            return self.auth.identity(context)
        except AuthError as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {exc}")
        raise AssertionError("unreachable")

    def _operator(self, context: grpc.ServicerContext, what: str) -> None:
        """Refuse unless the caller is root or the user psctld runs as (agents, operators)."""
        if self._caller(context).uid not in self.operators:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Access/permission denied: {what}")

    def RegisterNode(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.RegisterReply:
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        gpus = [convert.gpu_from_pb(g) for g in request.gpus]
        kill = _guard(context, lambda: self.monitor.register(
            request.name, request.addr, request.port, gpus, _runs(request.runs), request.drain_reason,
            request.isolation))
        return pb.RegisterReply(heartbeat_interval=self.monitor.heartbeat_interval, kill=_runs_pb(kill))

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatReply:
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        again, kill = _guard(context, lambda: self.monitor.heartbeat(request.name, _runs(request.runs),
                                                                     request.health_reason,
                                                                     _measured(request.gpu_use),
                                                                     [(s.job_id, s.step_id) for s in request.steps],
                                                                     request.sent_at or None))
        return pb.HeartbeatReply(reregister=again, kill=_runs_pb(kill))

    def JobEnded(self, request: pb.JobEndedRequest, context: grpc.ServicerContext) -> pb.Empty:
        """One end (an agent that predates JobsEnded): the same path as a batch of one."""
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        end = _guard(context, lambda: _run_end(request, request.node))
        _guard(context, lambda: self.monitor.runs_ended(request.node, [end]))
        return pb.Empty()

    def JobsEnded(self, request: pb.JobsEndedRequest, context: grpc.ServicerContext) -> pb.Empty:
        """An agent's ends in one call, recorded in one transaction (the node monitor's runs_ended)."""
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        ends = _guard(context, lambda: [_run_end(e, request.node) for e in request.ends])
        _guard(context, lambda: self.monitor.runs_ended(request.node, ends))
        return pb.Empty()

    def StepsEnded(self, request: pb.StepsEndedRequest, context: grpc.ServicerContext) -> pb.Empty:
        """An agent's step ends in one call, recorded in one transaction (the step service's steps_ended)."""
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        service = self.steps
        if service is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this controller has no step service")
            raise AssertionError("unreachable")
        ends = _guard(context, lambda: [StepEnd(e.job_id, e.step_id, e.node or request.node,
                                                convert.job_state_from_pb(e.state), e.exit_code, e.exit_signal,
                                                e.end_time) for e in request.ends])
        _guard(context, lambda: service.steps_ended(request.node, ends))
        return pb.Empty()


def _run_end(e: pb.JobEndedRequest, node: str) -> RunEnd:
    usage: dict[str, float | None] | None = None
    if e.HasField("usage"):
        u = e.usage
        usage = {}
        if u.gpu_count:
            # peak memory and utilisation only where measured (NVML); left NULL otherwise
            usage.update(gpu_seconds=u.gpu_seconds,
                         peak_gpu_memory_mb=u.peak_gpu_memory_mb if u.HasField("peak_gpu_memory_mb") else None,
                         mean_gpu_util=u.mean_gpu_util if u.HasField("mean_gpu_util") else None)
        if u.HasField("max_rss_kb"):  # the job's memory cgroup's peak (ConstrainRAMSpace=yes)
            usage["max_rss_kb"] = u.max_rss_kb
        if u.HasField("total_cpu_usec"):  # its cgroup's CPU time (seff's CPU Utilized, sacct's TotalCPU)
            usage["total_cpu_seconds"] = u.total_cpu_usec / 1e6
        for part in ("user", "system"):  # its user and system parts (sacct's UserCPU, SystemCPU)
            if u.HasField(f"{part}_cpu_usec"):
                usage[f"{part}_cpu_seconds"] = getattr(u, f"{part}_cpu_usec") / 1e6
        usage = usage or None
    return RunEnd(e.job_id, e.node or node, e.restarts, convert.job_state_from_pb(e.state), e.exit_code,
                  e.exit_signal, e.end_time, usage, e.launch_failure, e.comment)


def _measured(gpu_use: Iterable[pb.GpuUse]) -> dict[int, tuple[int, float]]:
    return {u.index: (u.memory_used_mb, u.util) for u in gpu_use}


def _runs(runs: Iterable[pb.JobRun]) -> list[Run]:
    return [Run(r.job_id, r.restarts) for r in runs]


def _runs_pb(runs: Iterable[Run]) -> list[pb.JobRun]:
    return [pb.JobRun(job_id=r.job_id, restarts=r.restarts) for r in runs]
