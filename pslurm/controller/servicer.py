"""gRPC glue for the controller: protobuf in, a part's call, protobuf out, errors as status codes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import grpc

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.transport import Authenticator
from pslurm.controller.jobs import JobService
from pslurm.controller.monitor import NodeMonitor, NodeStatus, Run
from pslurm.controller.rest import access
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import RunEnd
from pslurm.controller.watch import JobWatch
from pslurm.core import convert
from pslurm.core.jobspec import JobRecord
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

T = TypeVar("T")
NODE_MESSAGES_ONLY_FROM_AGENTS = "node messages come only from an agent (root or the SlurmUser)"


_CODES = {access.INVALID: grpc.StatusCode.INVALID_ARGUMENT, access.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
          access.PERMISSION: grpc.StatusCode.PERMISSION_DENIED, access.CONFLICT: grpc.StatusCode.FAILED_PRECONDITION}


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
    """Translates RPCs to the controller's parts: the job service, the scheduler (priorities), the
    node monitor (nodes, agents' messages) and the job watch (WaitJob)."""

    def __init__(self, jobs: JobService, scheduler: Scheduler, monitor: NodeMonitor, watch: JobWatch,
                 auth: Authenticator, wait_slots: int = 24) -> None:
        self.jobs = jobs
        self.scheduler = scheduler
        self.monitor = monitor
        self.watch = watch
        self.config = jobs.config
        self.auth = auth
        self._wait_slots = threading.BoundedSemaphore(wait_slots)  # WaitJob calls that may block at once

    def _caller(self, context: grpc.ServicerContext) -> Identity:
        """Who sent the request, from its credential (the interceptor has refused those without one)."""
        try:
            return self.auth.identity(context)
        except AuthError as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {exc}")
        raise AssertionError("unreachable")

    def _operator(self, context: grpc.ServicerContext, what: str) -> None:
        """Refuse unless the caller is root or the user psctld runs as (agents, operators)."""
        if self._caller(context).uid not in self.jobs.operators:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Access/permission denied: {what}")

    def _job_pb(self, job: JobRecord) -> pb.Job:
        node = self.jobs.store.get_node(job.node) if job.node else None
        return convert.job_to_pb(job, node.target if node else "")

    def SubmitJob(self, request: pb.SubmitRequest, context: grpc.ServicerContext) -> pb.SubmitReply:
        spec = convert.spec_from_pb(request.spec)
        caller = self._caller(context)
        return pb.SubmitReply(job_id=_guard(context, lambda: self.jobs.submit(spec, caller)))

    def GetJobs(self, request: pb.JobQuery, context: grpc.ServicerContext) -> pb.JobList:
        """The jobs asked for; another user's without their environment and script unless the
        caller is an operator (Slurm's PrivateData=jobs, for what a job carries: its argv stays,
        squeue shows the command)."""
        states = _guard(context, lambda: [convert.job_state_from_pb(s) for s in request.states])
        since = request.since if request.HasField("since") else None
        caller = self._caller(context)
        jobs = self.jobs.jobs(list(request.job_ids), list(request.users), states, request.include_finished,
                           since, light=request.light, collapse_arrays=request.collapse_arrays)
        jobs = access.visible_to(caller.uid, self.jobs.operators, jobs)
        specs: dict[int, pb.JobSpec] = {}  # converted once per shared spec (an array's tasks)
        return pb.JobList(jobs=[convert.job_to_pb(j, specs=specs) for j in jobs])

    def CancelJobs(self, request: pb.CancelRequest, context: grpc.ServicerContext) -> pb.CancelReply:
        errors = self.jobs.cancel(list(request.job_ids), self._caller(context).uid, request.signal,
                               list(request.job_specs))
        return pb.CancelReply(errors=errors)

    def UpdateJob(self, request: pb.UpdateJobRequest, context: grpc.ServicerContext) -> pb.UpdateJobReply:
        errors = _guard(context, lambda: self.jobs.update_job(
            request.job, self._caller(context).uid, request.action.lower(),
            request.priority if request.HasField("priority") else None,
            request.nice if request.HasField("nice") else None))
        return pb.UpdateJobReply(errors=errors)

    def GetPriorities(self, request: pb.PriorityQuery, context: grpc.ServicerContext) -> pb.PriorityList:
        rows, weights = access.priorities(self.scheduler, list(request.job_ids), list(request.users))
        return pb.PriorityList(jobs=[pb.JobPriority(**row) for row in rows], weights=pb.PriorityWeights(**weights))

    def GetCluster(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.ClusterInfo:
        partitions = [convert.partition_to_pb(p) for p in access.partitions(self.config)]
        nodes = [self._node_pb(status) for status in self.monitor.nodes()]
        return pb.ClusterInfo(cluster_name=self.config.cluster_name, partitions=partitions, nodes=nodes)

    def _node_pb(self, status: NodeStatus) -> pb.Node:
        return convert.node_status_to_pb(access.node_status(self.monitor, status))

    def UpdateNode(self, request: pb.UpdateNodeRequest, context: grpc.ServicerContext) -> pb.Node:
        self._operator(context, "only root or the SlurmUser may update nodes")
        return self._node_pb(_guard(context, lambda: self.monitor.update_node(request.name, request.state,
                                                                              request.reason)))

    def _visible(self, uid: int, job: JobRecord) -> JobRecord:
        """The job as ``uid`` may see it (PrivateData: another user's environment and script left out)."""
        return access.visible_to(uid, self.jobs.operators, [job])[0]

    def WaitJob(self, request: pb.WaitRequest, context: grpc.ServicerContext) -> Iterator[pb.Job]:
        """The job now and at each change until it ends. With every waiting slot taken, the job
        now and no more: the caller (psrun) asks again shortly, and no thread is held meanwhile."""
        caller = self._caller(context)
        updates = self.watch.wait(request.job_id)  # light records: no environment, no script
        if not self._wait_slots.acquire(blocking=False):
            try:
                yield self._job_pb(self._visible(caller.uid, _guard(context, lambda: next(updates))))
            finally:
                updates.close()
            return
        try:
            while context.is_active():
                job = _guard(context, lambda: next(updates, None))
                if job is None:
                    return
                yield self._job_pb(self._visible(caller.uid, job))
        finally:
            updates.close()  # the controller stops watching the job (the client may have gone)
            self._wait_slots.release()

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
                                                                     request.health_reason))
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


def _run_end(e: pb.JobEndedRequest, node: str) -> RunEnd:
    usage = None
    if e.HasField("usage") and e.usage.gpu_count:
        # peak memory and utilisation only where measured (NVML); left NULL otherwise
        u = e.usage
        usage = {"gpu_seconds": u.gpu_seconds,
                 "peak_gpu_memory_mb": u.peak_gpu_memory_mb if u.HasField("peak_gpu_memory_mb") else None,
                 "mean_gpu_util": u.mean_gpu_util if u.HasField("mean_gpu_util") else None}
    return RunEnd(e.job_id, e.node or node, e.restarts, convert.job_state_from_pb(e.state), e.exit_code,
                  e.exit_signal, e.end_time, usage, e.launch_failure)


def _runs(runs: Iterable[pb.JobRun]) -> list[Run]:
    return [Run(r.job_id, r.restarts) for r in runs]


def _runs_pb(runs: Iterable[Run]) -> list[pb.JobRun]:
    return [pb.JobRun(job_id=r.job_id, restarts=r.restarts) for r in runs]
