"""Domain <-> protobuf conversion, in one place for the controller and the agents (their gRPC wire).

The wire's adapter: the domain (:mod:`pslurm.core`) knows nothing of protobuf; the controller's and the
agent's gRPC faces convert here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from pslurm.core.gres import GresRequest
from pslurm.core.jobfields import FIELDS
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import GpuInfo
from pslurm.core.states import JobReason, JobState
from pslurm.core.steplaunch import StepLaunch
from pslurm.core.steps import TaskEnd
from pslurm.proto import pslurm_pb2 as pb

# Enums travel as the proto's enums: JOB_ and REASON_ plus the domain member's name.
_JOB_STATE_TO_PB = {s: pb.JobState.Value(f"JOB_{s.name}") for s in JobState}
_JOB_STATE_FROM_PB = {v: k for k, v in _JOB_STATE_TO_PB.items()}
# a pending job's reason the agents never see (the association and QOS limits') has no proto value: NONE
_REASON_TO_PB = {r: pb.JobReason.Value(f"REASON_{r.name}") for r in JobReason
                 if f"REASON_{r.name}" in pb.JobReason.keys()}
_REASON_FROM_PB = {v: k for k, v in _REASON_TO_PB.items()}


def job_state_to_pb(state: JobState) -> pb.JobState:
    return cast(pb.JobState, _JOB_STATE_TO_PB[state])


def job_state_from_pb(value: int) -> JobState:
    """The domain state; ValueError for a value this side does not know (a newer peer, or unset)."""
    try:
        return _JOB_STATE_FROM_PB[value]
    except KeyError:
        raise ValueError(f"unknown job state {value}") from None


def reason_to_pb(reason: JobReason | str) -> pb.JobReason:
    return cast(pb.JobReason, _REASON_TO_PB.get(JobReason.parse(reason), pb.REASON_NONE))


def reason_from_pb(value: int) -> JobReason:
    return _REASON_FROM_PB.get(value, JobReason.NONE)


def gres_to_pb(gres: Iterable[GresRequest]) -> list[pb.Gres]:
    return [pb.Gres(name=g.name, type=g.type or "", count=g.count) for g in gres]


def gres_from_pb(items: Iterable[pb.Gres]) -> tuple[GresRequest, ...]:
    return tuple(GresRequest(g.name, g.type or None, g.count) for g in items)


def spec_to_pb(spec: JobSpec) -> pb.JobSpec:
    """The wire's JobSpec: each field core/jobfields.py gives a ``wire`` number; one that says whether it
    is set (``optional``) only when it is not its default, so that a request without the newer fields
    is the message it always was."""
    values: dict[str, Any] = {}
    for f in _WIRE:
        value = getattr(spec, f.name)
        if value is not None and (f.name not in _PRESENCE or value != f.default):
            values[f.name] = gres_to_pb(value) if f.name == "gres" else value
    return pb.JobSpec(**values)


def spec_from_pb(msg: pb.JobSpec) -> JobSpec:
    """The JobSpec of the wire's: a field unset (or, without presence, at the wire's zero) is its
    default; the fields the agents are not sent are at theirs."""
    values: dict[str, Any] = {}
    for f in _WIRE:
        if f.name in _PRESENCE:
            values[f.name] = getattr(msg, f.name) if msg.HasField(f.name) else f.default
        elif f.name == "gres":
            values[f.name] = gres_from_pb(msg.gres)
        else:
            value = getattr(msg, f.name)
            values[f.name] = (tuple(value) if f.type is tuple else dict(value) if f.type is dict
                              else value or f.default)
    return JobSpec(**values)


_WIRE = tuple(f for f in FIELDS if f.wire)
# the wire's fields that say whether they are set (proto3 ``optional``)
_PRESENCE = frozenset(f.name for f in pb.JobSpec.DESCRIPTOR.fields if f.has_presence)


def job_to_pb(job: JobRecord, specs: dict[int, pb.JobSpec] | None = None) -> pb.Job:
    """``specs``: converted specs by ``id(job.spec)``, for records that share one (an array's tasks)."""
    spec = specs.get(id(job.spec)) if specs is not None else None
    if spec is None:
        spec = spec_to_pb(job.spec)
        if specs is not None:
            specs[id(job.spec)] = spec
    msg = pb.Job(
        job_id=job.job_id, spec=spec, state=job_state_to_pb(job.state), reason=reason_to_pb(job.reason),
        submit_time=job.submit_time, system_comment=job.system_comment, requeue=job.requeue,
        node=job.node or "", gpu_indices=list(job.gpu_indices),
        exit_code=job.exit_code, exit_signal=job.exit_signal, priority=job.priority,
        hold=job.hold, restarts=job.restarts, collapsed_tasks=job.collapsed_tasks,
    )
    if job.nodes:
        msg.nodes.extend(job.nodes)
        msg.node_gpus.extend(pb.NodeGpus(indices=list(g)) for g in job.node_gpus)
    if job.array_job_id is not None:
        msg.array_job_id = job.array_job_id
        msg.array_task_id = job.array_task_id or 0
    msg.spec.partition = job.partition or msg.spec.partition
    _set_present(msg, job, _JOB_OPTIONAL)
    return msg


# Job fields that are unset on the wire when the record has None (times not reached, usage not measured).
_JOB_OPTIONAL = ("start_estimate", "start_time", "end_time", "time_limit", "gpu_seconds", "peak_gpu_memory_mb",
                 "mean_gpu_util", "eligible_time", "max_rss_kb")


def _set_present(msg: Any, source: object, names: tuple[str, ...]) -> None:
    """Copy the attributes of ``source`` that are not None onto the optional fields of ``msg``."""
    for name in names:
        value = getattr(source, name)
        if value is not None:
            setattr(msg, name, value)


def job_from_pb(msg: pb.Job, specs: dict[bytes, JobSpec] | None = None) -> JobRecord:
    """``specs``: specs already converted, by their wire bytes: the records of equal specs (an array's
    tasks in a listing) share one JobSpec, converted once."""
    if specs is None:
        spec = spec_from_pb(msg.spec)
    else:
        key = msg.spec.SerializeToString()
        spec = specs.get(key)  # type: ignore[assignment]
        if spec is None:
            spec = specs[key] = spec_from_pb(msg.spec)
    return JobRecord(
        job_id=msg.job_id, spec=spec, state=job_state_from_pb(msg.state), reason=reason_from_pb(msg.reason),
        submit_time=msg.submit_time, start_time=msg.start_time if msg.HasField("start_time") else None,
        end_time=msg.end_time if msg.HasField("end_time") else None, node=msg.node or None,
        gpu_indices=tuple(msg.gpu_indices), exit_code=msg.exit_code, exit_signal=msg.exit_signal,
        partition=msg.spec.partition, time_limit=msg.time_limit if msg.HasField("time_limit") else None,
        array_job_id=msg.array_job_id if msg.HasField("array_job_id") else None,
        array_task_id=msg.array_task_id if msg.HasField("array_task_id") else None,
        priority=msg.priority, hold=msg.hold, restarts=msg.restarts,
        start_estimate=msg.start_estimate if msg.HasField("start_estimate") else None,
        eligible_time=msg.eligible_time if msg.HasField("eligible_time") else None,
        gpu_seconds=msg.gpu_seconds if msg.HasField("gpu_seconds") else None,
        peak_gpu_memory_mb=msg.peak_gpu_memory_mb if msg.HasField("peak_gpu_memory_mb") else None,
        mean_gpu_util=msg.mean_gpu_util if msg.HasField("mean_gpu_util") else None,
        max_rss_kb=msg.max_rss_kb if msg.HasField("max_rss_kb") else None,
        system_comment=msg.system_comment, requeue=msg.requeue, collapsed_tasks=msg.collapsed_tasks,
        nodes=tuple(msg.nodes), node_gpus=tuple(tuple(g.indices) for g in msg.node_gpus),
    )


def gpu_from_pb(msg: pb.GpuInfo) -> GpuInfo:
    return GpuInfo(index=msg.index, name=msg.name, type=msg.type or None, file=msg.file or None,
                   minor=None if msg.minor < 0 else msg.minor, uuid=msg.uuid or None,
                   memory_mb=msg.memory_mb or None, cores=tuple(msg.cores), shards=msg.shards, mps=msg.mps)



def step_launch_to_pb(launch: StepLaunch) -> pb.StepLaunch:
    return pb.StepLaunch(
        job_id=launch.job_id, restarts=launch.restarts, step_id=launch.step_id, name=launch.name,
        argv=list(launch.argv), environment=dict(launch.environment), workdir=launch.workdir, uid=launch.uid,
        gid=launch.gid, user=launch.user, ntasks=launch.ntasks, task_offset=launch.task_offset,
        total_tasks=launch.total_tasks, node_index=launch.node_index, step_nodelist=launch.step_nodelist,
        tasks_per_node=launch.tasks_per_node, cpus_per_task=launch.cpus_per_task,
        gpu_indices=list(launch.gpu_indices), label=launch.label, pty=launch.pty,
        task_gpus=[pb.TaskGpus(gpu_indices=list(t)) for t in launch.task_gpus], no_gpus=launch.no_gpus)


def step_launch_from_pb(msg: pb.StepLaunch) -> StepLaunch:
    return StepLaunch(
        job_id=msg.job_id, restarts=msg.restarts, step_id=msg.step_id, name=msg.name, argv=tuple(msg.argv),
        environment=dict(msg.environment), workdir=msg.workdir, uid=msg.uid, gid=msg.gid, user=msg.user,
        ntasks=msg.ntasks, task_offset=msg.task_offset, total_tasks=msg.total_tasks, node_index=msg.node_index,
        step_nodelist=msg.step_nodelist, tasks_per_node=msg.tasks_per_node, cpus_per_task=msg.cpus_per_task,
        gpu_indices=tuple(msg.gpu_indices), label=msg.label, pty=msg.pty,
        task_gpus=tuple(tuple(t.gpu_indices) for t in msg.task_gpus), no_gpus=msg.no_gpus)


def task_ends_to_pb(ends: Iterable[TaskEnd]) -> list[pb.TaskEnded]:
    return [pb.TaskEnded(rank=e.rank, exit_code=e.exit_code, signal=e.signal, node=e.node) for e in ends]


def task_ends_from_pb(items: Iterable[pb.TaskEnded]) -> tuple[TaskEnd, ...]:
    return tuple(TaskEnd(t.rank, t.exit_code, t.signal, t.node) for t in items)
