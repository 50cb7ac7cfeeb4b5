"""The agent's link to the controller over gRPC: the one adapter of the ``link.ControllerLink``
port, and the only module of the agent's calls to the controller that knows protobuf and gRPC
(the controller's calls to the node are ``servicer.py``'s).

:class:`GrpcLink` converts the port's plain types to the wire and back, adds a fresh credential to
each call, and turns any failed call into ``LinkDown``; a controller older than a call it makes is
answered as that controller would want (JobsEnded one end at a time with JobEnded; StepsEnded
dropped: it has no steps).

The active controller is one of the SlurmctldHost= lines, tried in order. With one controller the
agent calls its stub directly. With backups, :class:`FailoverStub` stands in for the stub: a call
goes to the controller that answered last, and one that finds it UNAVAILABLE (nothing listens there:
it died or stands by, or it lost the lease and refused) goes to the others in SlurmctldHost= order,
the first that answers becoming the one asked next; so does a call that got no answer in time
(DEADLINE_EXCEEDED: a controller cut off from its database, about to stop). The agent's calls
(registration, heartbeats, job and step ends) may be sent again: the controller reconciles them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import grpc

from pslurm.auth.transport import Metadata
from pslurm.core.config import ClusterConfig
from pslurm.nodeagent.gpumon import JobGpuUsage
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.link import Beat, LinkDown, NodeReport, Orders, RunEnded, RunKey, StepEnded
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

log = logging.getLogger("psd")
# A channel to a controller that was down (or standing by) waits this long at most before it connects
# again: gRPC's default backoff grows to two minutes, and fails calls fast meanwhile, which would keep
# an agent from a backup that has just taken over.
# A call that ends so goes to the next controller: nothing listens (dead, or standing by), it lost the
# lease (its refusal), or it did not answer in time (its database is cut off: it stops serving soon).
PASS_ON = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
RECONNECT = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
             ("grpc.max_reconnect_backoff_ms", 1000)]


def controller_stub(config: ClusterConfig) -> Any:
    """The Controller stub the agent calls: the one controller's, or a FailoverStub over all of them."""
    targets = [f"{addr}:{config.controller_port}" for _, addr in config.controller_hosts]
    if len(targets) == 1:
        return pb_grpc.ControllerStub(grpc.insecure_channel(targets[0]))
    return FailoverStub(targets)


CALL_TIMEOUT = 5.0  # seconds each call may take


class GrpcLink:
    """The agent's ``ControllerLink`` over gRPC (see the module's docstring)."""

    def __init__(self, stub: Any, credentials: Callable[[], Metadata] = lambda: ()) -> None:
        self.stub = stub  # the Controller stub, or a FailoverStub over several
        self._credentials = credentials  # gRPC metadata with a fresh credential, for each call
        self._batch_ends = True  # JobsEnded; False once the controller says it has no such call

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self.stub, method)(request, timeout=CALL_TIMEOUT, metadata=self._credentials())
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            raise LinkDown(str(code or exc)) from exc

    def register(self, report: NodeReport) -> Orders:
        reply = self._call("RegisterNode", pb.RegisterRequest(
            name=report.name, addr=report.addr, port=report.port, cpus=report.cpus,
            real_memory=report.real_memory, gpus=[_gpu_pb(d) for d in report.gpus], runs=_runs_pb(report.runs),
            drain_reason=report.drain_reason, isolation=report.isolation))
        return Orders(kill=_runs(reply.kill), heartbeat_interval=reply.heartbeat_interval or None)

    def heartbeat(self, beat: Beat) -> Orders:
        reply = self._call("Heartbeat", pb.HeartbeatRequest(
            name=beat.name, runs=_runs_pb(beat.runs), health_reason=beat.health_reason,
            gpu_use=[pb.GpuUse(index=u.index, memory_used_mb=u.memory_used_mb, util=u.util) for u in beat.gpu_use],
            steps=[pb.StepRef(job_id=j, step_id=s) for j, s in beat.steps], sent_at=beat.sent_at))
        return Orders(kill=_runs(reply.kill), reregister=reply.reregister)

    def jobs_ended(self, ends: Sequence[RunEnded]) -> None:
        messages = [_end_pb(end) for end in ends]
        if self._batch_ends:
            try:
                self._call("JobsEnded", pb.JobsEndedRequest(node=ends[0].node if ends else "", ends=messages))
                return
            except LinkDown as exc:
                cause = exc.__cause__
                if not (isinstance(cause, grpc.Call) and cause.code() is grpc.StatusCode.UNIMPLEMENTED):
                    raise
                self._batch_ends = False  # a controller from before JobsEnded
        for message in messages:
            self._call("JobEnded", message)

    def steps_ended(self, ends: Sequence[StepEnded]) -> None:
        request = pb.StepsEndedRequest(node=ends[0].node if ends else "", ends=[pb.StepEnded(
            job_id=e.job_id, step_id=e.step_id, node=e.node, state=convert.job_state_to_pb(e.state),
            exit_code=e.exit_code, exit_signal=e.exit_signal, end_time=e.end_time) for e in ends])
        try:
            self._call("StepsEnded", request)
        except LinkDown as exc:
            cause = exc.__cause__
            if not (isinstance(cause, grpc.Call) and cause.code() is grpc.StatusCode.UNIMPLEMENTED):
                raise
            log.warning("the controller has no StepsEnded: dropping the ends of %d step(s)", len(ends))


def link_for(config: ClusterConfig, credentials: Callable[[], Metadata] = lambda: ()) -> GrpcLink:
    """The link to the active one of the SlurmctldHost= lines."""
    return GrpcLink(controller_stub(config), credentials)


def _runs(runs: Iterable[pb.JobRun]) -> tuple[RunKey, ...]:
    return tuple((r.job_id, r.restarts) for r in runs)


def _runs_pb(runs: Iterable[RunKey]) -> list[pb.JobRun]:
    return [pb.JobRun(job_id=j, restarts=r) for j, r in runs]


def _end_pb(end: RunEnded) -> pb.JobEndedRequest:
    return pb.JobEndedRequest(
        job_id=end.job_id, node=end.node, state=convert.job_state_to_pb(end.state), restarts=end.restarts,
        exit_code=end.exit_code, exit_signal=end.exit_signal, end_time=end.end_time,
        usage=_usage_pb(end.gpu_usage, end.max_rss_bytes, end.cpu_times),
        launch_failure=end.launch_failure, comment=end.comment)


def _usage_pb(usage: JobGpuUsage | None, max_rss_bytes: int | None = None,
              cpu_times: tuple[float, float, float] | None = None) -> pb.JobUsage | None:
    """A run's usage for its end: the GPU measures (jobs with GPUs), its MaxRSS (jobs with a memory
    cgroup) and its CPU time (jobs with a cgroup); None when there is none of them."""
    if usage is None and max_rss_bytes is None and cpu_times is None:
        return None
    msg = pb.JobUsage()
    if usage is not None:
        msg.gpu_count, msg.gpu_seconds = usage.gpu_count, usage.gpu_seconds
        if usage.peak_gpu_memory_mb is not None:
            msg.peak_gpu_memory_mb = usage.peak_gpu_memory_mb
        if usage.mean_gpu_util is not None:
            msg.mean_gpu_util = usage.mean_gpu_util
    if max_rss_bytes is not None:
        msg.max_rss_kb = max_rss_bytes // 1024
    if cpu_times is not None:  # in all, user, system
        msg.total_cpu_usec, msg.user_cpu_usec, msg.system_cpu_usec = (int(t * 1e6) for t in cpu_times)
    return msg


def _gpu_pb(d: GpuDevice) -> pb.GpuInfo:
    return pb.GpuInfo(index=d.index, name=d.name, type=d.type or "", file=d.file or "",
                      minor=-1 if d.minor is None else d.minor, uuid=d.uuid or "", memory_mb=d.memory_mb or 0,
                      cores=list(d.cores or ()), shards=d.shards, mps=d.mps)


class FailoverStub:
    """A Controller stub over several controllers (see the module's docstring)."""

    def __init__(self, targets: list[str]) -> None:
        self.targets = targets
        self._stubs = [pb_grpc.ControllerStub(grpc.insecure_channel(t, options=RECONNECT)) for t in targets]
        self._current = 0  # the controller that answered last
        self._lock = threading.Lock()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def call(request: Any, **kwargs: Any) -> Any:
            first = self._current
            order = [first, *(i for i in range(len(self._stubs)) if i != first)]
            for place, i in enumerate(order):
                try:
                    reply = getattr(self._stubs[i], method)(request, **kwargs)
                except grpc.RpcError as exc:
                    code = exc.code() if isinstance(exc, grpc.Call) else None
                    if code not in PASS_ON or place == len(order) - 1:
                        raise
                    continue
                if i != first:
                    with self._lock:
                        self._current = i
                    log.info("the active controller is now %s", self.targets[i])
                return reply
            raise AssertionError("unreachable")

        return call
