"""gRPC glue for the controller: protobuf in, Controller call, protobuf out, errors as status codes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import grpc

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.transport import Authenticator
from pslurm.controller.nodes import PermissionDenied
from pslurm.controller.service import Controller, NotFound
from pslurm.core import convert
from pslurm.core.jobspec import SpecError
from pslurm.core.states import InvalidTransition, JobState
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

T = TypeVar("T")
NODE_MESSAGES_ONLY_FROM_AGENTS = "node messages come only from an agent (root or the SlurmUser)"


def _guard(context: grpc.ServicerContext, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except SpecError as exc:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except NotFound as exc:
        context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
    except PermissionDenied as exc:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
    except InvalidTransition as exc:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
    raise AssertionError("unreachable")


class ControllerServicer(pb_grpc.ControllerServicer):
    def __init__(self, controller: Controller, auth: Authenticator, wait_slots: int = 24) -> None:
        self.c = controller
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
        if self._caller(context).uid not in self.c.operators:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Access/permission denied: {what}")

    def _job_pb(self, job, targets: dict[str, str] | None = None) -> pb.Job:  # type: ignore[no-untyped-def]
        target = ""
        if job.node:
            if targets is not None:
                target = targets.get(job.node, "")
            else:
                node = self.c.store.get_node(job.node)
                target = node.target if node else ""
        return convert.job_to_pb(job, target)

    def SubmitJob(self, request: pb.SubmitRequest, context: grpc.ServicerContext) -> pb.SubmitReply:
        spec = convert.spec_from_pb(request.spec)
        caller = self._caller(context)
        return pb.SubmitReply(job_id=_guard(context, lambda: self.c.submit(spec, caller)))

    def GetJobs(self, request: pb.JobQuery, context: grpc.ServicerContext) -> pb.JobList:
        states = _guard(context, lambda: [JobState.parse(s) for s in request.states])
        since = request.since if request.HasField("since") else None
        jobs = self.c.jobs(list(request.job_ids), list(request.users), states, request.include_finished,
                           since, light=request.light, collapse_arrays=request.collapse_arrays)
        specs: dict[int, pb.JobSpec] = {}  # converted once per shared spec (an array's tasks)
        return pb.JobList(jobs=[convert.job_to_pb(j, specs=specs) for j in jobs])

    def CancelJobs(self, request: pb.CancelRequest, context: grpc.ServicerContext) -> pb.CancelReply:
        errors = self.c.cancel(list(request.job_ids), self._caller(context).uid, request.signal,
                               list(request.job_specs))
        return pb.CancelReply(errors=errors)

    def UpdateJob(self, request: pb.UpdateJobRequest, context: grpc.ServicerContext) -> pb.UpdateJobReply:
        errors = _guard(context, lambda: self.c.update_job(
            request.job, self._caller(context).uid, request.action.lower(),
            request.priority if request.HasField("priority") else None,
            request.nice if request.HasField("nice") else None))
        return pb.UpdateJobReply(errors=errors)

    def GetPriorities(self, request: pb.PriorityQuery, context: grpc.ServicerContext) -> pb.PriorityList:
        sched = self.c.sched
        weights = pb.PriorityWeights(age=sched.weight_age, fairshare=sched.weight_fairshare,
                                     jobsize=sched.weight_jobsize, partition=sched.weight_partition,
                                     qos=sched.weight_qos)
        out = []
        for q, f, value in self.c.priorities(list(request.job_ids), list(request.users)):
            display = str(q.job_id) if q.array_job_id is None else f"{q.array_job_id}_{q.array_task_id}"
            out.append(pb.JobPriority(job_id=q.job_id, display_id=display, user=q.user, account=q.account,
                                      partition=q.partition, priority=value, age=f.age, fairshare=f.fairshare,
                                      jobsize=f.jobsize, partition_factor=f.partition, qos=f.qos, nice=f.nice,
                                      admin_set=q.admin_priority is not None))
        return pb.PriorityList(jobs=out, weights=weights)

    def GetCluster(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.ClusterInfo:
        cfg = self.c.config
        partitions = []
        for p in cfg.partitions.values():
            msg = pb.Partition(name=p.name, nodes=list(p.nodes), default=p is cfg.default_partition,
                               state=p.state, priority_job_factor=p.priority_job_factor,
                               allow_groups=list(p.allow_groups))
            if p.max_nodes is not None:
                msg.max_nodes = p.max_nodes
            if p.max_time is not None:
                msg.max_time = p.max_time
            if p.default_time is not None:
                msg.default_time = p.default_time
            partitions.append(msg)
        nodes = [self._node_pb(n, used, word) for n, used, word in self.c.nodes()]
        return pb.ClusterInfo(cluster_name=cfg.cluster_name, partitions=partitions, nodes=nodes)

    def _node_pb(self, n, used, word) -> pb.Node:  # type: ignore[no-untyped-def]
        return pb.Node(
            name=n.name, addr=n.addr, port=n.port, cpus=n.cpus, real_memory=n.real_memory,
            gres=convert.gres_to_pb(n.gres), state=n.state.value, drain=n.drain, reason=n.reason,
            partitions=sorted(self.c.partitions_of(n.name)), alloc_cpus=used.cpus, alloc_mem=used.mem_mb,
            alloc_gpus=sorted(used.gpus), display_state=word, running_jobs=used.jobs,
            last_heartbeat=n.last_heartbeat, gpus=[convert.gpu_to_pb(g) for g in n.gpus],
            isolation=n.isolation,
        )

    def UpdateNode(self, request: pb.UpdateNodeRequest, context: grpc.ServicerContext) -> pb.Node:
        self._operator(context, "only root or the SlurmUser may update nodes")
        _guard(context, lambda: self.c.update_node(request.name, request.state, request.reason))
        for n, used, word in self.c.nodes():
            if n.name == request.name:
                return self._node_pb(n, used, word)
        context.abort(grpc.StatusCode.NOT_FOUND, f"Invalid node name specified: {request.name}")
        raise AssertionError("unreachable")

    def WaitJob(self, request: pb.WaitRequest, context: grpc.ServicerContext) -> Iterator[pb.Job]:
        """The job now and at each change until it ends. With every waiting slot taken, the job
        now and no more: the caller (psrun) asks again shortly, and no thread is held meanwhile."""
        updates = self.c.wait(request.job_id)
        if not self._wait_slots.acquire(blocking=False):
            try:
                yield self._job_pb(_guard(context, lambda: next(updates)))
            finally:
                updates.close()
            return
        try:
            while context.is_active():
                job = _guard(context, lambda: next(updates, None))
                if job is None:
                    return
                yield self._job_pb(job)
        finally:
            updates.close()  # the controller stops watching the job (the client may have gone)
            self._wait_slots.release()

    def RegisterNode(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.RegisterReply:
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        gpus = [convert.gpu_from_pb(g) for g in request.gpus]
        kill = _guard(context, lambda: self.c.register(
            request.name, request.addr, request.port, gpus, list(request.running_job_ids),
            request.drain_reason, request.isolation))
        return pb.RegisterReply(heartbeat_interval=self.c.heartbeat_interval, kill_job_ids=kill)

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatReply:
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        again, kill = _guard(context, lambda: self.c.heartbeat(
            request.name, list(request.running_job_ids), request.health_reason))
        return pb.HeartbeatReply(reregister=again, kill_job_ids=kill)

    def JobEnded(self, request: pb.JobEndedRequest, context: grpc.ServicerContext) -> pb.Empty:
        self._operator(context, NODE_MESSAGES_ONLY_FROM_AGENTS)
        usage = None
        if request.HasField("usage") and request.usage.gpu_count:
            # peak memory and utilisation only where measured (NVML); left NULL otherwise
            u = request.usage
            usage = {"gpu_seconds": u.gpu_seconds,
                     "peak_gpu_memory_mb": u.peak_gpu_memory_mb if u.HasField("peak_gpu_memory_mb") else None,
                     "mean_gpu_util": u.mean_gpu_util if u.HasField("mean_gpu_util") else None}
        self.c.job_ended(request.job_id, request.node, JobState(request.state), request.exit_code,
                         request.exit_signal, request.end_time, usage)
        return pb.Empty()
