"""The user API's logic apart from its wire: who may see what of a job, the cluster's nodes and
partitions as clients see them, the priorities, and how a part's refusal maps to an error kind
(which the agents' gRPC servicer maps to a status too). No wire types here."""

from __future__ import annotations

import functools
import pwd
from collections.abc import Collection, Sequence
from dataclasses import replace
from typing import Any

from pslurm.controller.errors import NotFound, PermissionDenied
from pslurm.controller.monitor import NodeMonitor
from pslurm.controller.monitor import NodeStatus as MonitorNodeStatus
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import Fenced, StoreError
from pslurm.core.config import ClusterConfig, PartitionConfig
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError, display_id
from pslurm.core.node import NodeStatus
from pslurm.core.states import InvalidTransition

# A part's exception -> the kind of error the caller gets (gRPC status / HTTP status pick from it).
INVALID, NOT_FOUND, PERMISSION, CONFLICT = "invalid", "not_found", "permission", "conflict"
UNAVAILABLE = "unavailable"  # not done here, ask the active controller (this one lost the lease)
ERROR_KINDS: tuple[tuple[type[Exception], str], ...] = (
    (Fenced, UNAVAILABLE),
    (SpecError, INVALID), (NotFound, NOT_FOUND), (PermissionDenied, PERMISSION),
    (InvalidTransition, CONFLICT),  # not in the job's present state
    (StoreError, INVALID),  # one line, no SQL: the store logged the rest
)


def error_kind(exc: BaseException) -> str | None:
    """The kind of a refusal (its message is one line for the user), None for a fault."""
    for cls, kind in ERROR_KINDS:
        if isinstance(exc, cls):
            return kind
    return None


def private_for(uid: int, jobs: list[JobRecord]) -> list[JobRecord]:
    """``jobs`` as user ``uid`` may see them: the environment, script and submit line (which holds a
    ``--wrap``'s script and ``--export``'s values) of other users' jobs left out, whatever
    PrivateData says (its argv stays, squeue shows the command). Records that shared a spec (an
    array's tasks) share the stripped one."""
    stripped: dict[int, JobSpec] = {}
    out = []
    for job in jobs:
        spec = job.spec
        if spec.uid == uid or (not spec.environment and spec.script is None and not spec.submit_line):
            out.append(job)
            continue
        bare = stripped.get(id(spec))
        if bare is None:
            bare = stripped[id(spec)] = replace(spec, environment={}, script=None, submit_line="")
        out.append(replace(job, spec=bare))
    return out


def visible_to(uid: int, operators: Collection[int], jobs: list[JobRecord]) -> list[JobRecord]:
    """The jobs as ``uid`` may see them: all of every job for an operator, else :func:`private_for`."""
    return jobs if uid in operators else private_for(uid, jobs)


def node_status(monitor: NodeMonitor, status: MonitorNodeStatus) -> NodeStatus:
    """A node as clients see it: configuration, state, allocation and sinfo's word."""
    n, used = status.node, status.used
    return NodeStatus(
        name=n.name, addr=n.addr, port=n.port, cpus=n.cpus, real_memory=n.real_memory, gres=n.gres, state=n.state,
        drain=n.drain, reason=n.reason, reason_user=user_name(n.reason_uid) if n.reason else "",
        reason_time=n.reason_time if n.reason else None, partitions=tuple(sorted(monitor.partitions_of(n.name))),
        alloc_cpus=used.cpus, alloc_mem=used.mem_mb, alloc_gpus=tuple(sorted(set(used.gpus))),
        display_state=status.word, running_jobs=used.jobs, last_heartbeat=n.last_heartbeat, gpus=tuple(n.gpus),
        isolation=n.isolation, gpu_usage=status.gpus,
        features=config.features if (config := monitor.config.nodes.get(n.name)) is not None else (),
    )


@functools.lru_cache(maxsize=4096)
def user_name(uid: int | None) -> str:
    """The name of ``uid`` ("" for None; the number where the system knows no name)."""
    if uid is None:
        return ""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def nodes(monitor: NodeMonitor) -> list[NodeStatus]:
    return [node_status(monitor, s) for s in monitor.nodes()]


def partitions(config: ClusterConfig) -> list[PartitionConfig]:
    """The partitions in configuration order, ``default`` set on the cluster's default one only
    (the first, where none says Default=YES)."""
    default = config.default_partition
    return [replace(p, default=p is default) for p in config.partitions.values()]


def priorities(scheduler: Scheduler, job_ids: Sequence[int], users: Sequence[str]
               ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """psprio: each pending job's priority and factors (the fields of ``JobPriority``), and the
    configured weights (those of ``PriorityWeights``)."""
    sched = scheduler.sched
    weights = {"age": sched.weight_age, "fairshare": sched.weight_fairshare, "jobsize": sched.weight_jobsize,
               "partition": sched.weight_partition, "qos": sched.weight_qos}
    rows = []
    for q, f, value in scheduler.priorities(list(job_ids), list(users)):
        rows.append({"job_id": q.job_id, "display_id": display_id(q.job_id, q.array_job_id, q.array_task_id),
                     "user": q.user, "account": q.account, "partition": q.partition, "priority": value,
                     "age": f.age, "fairshare": f.fairshare, "jobsize": f.jobsize, "partition_factor": f.partition,
                     "qos": f.qos, "nice": f.nice, "admin_set": q.admin_priority is not None})
    return rows, weights
