"""The store's records and the codecs between rows and domain objects.

The records are what the controller reads for a pass (a pending job, an allocation, a finished run)
without decoding a job's whole request; the codecs turn the jobs' and nodes' columns into
``JobRecord`` and ``NodeRecord`` and back (GRES and GPU indices are kept as short strings).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Row

from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import GpuInfo, NodeRecord
from pslurm.core.states import JobReason, JobState, NodeState


@dataclass(frozen=True)
class Allocation:
    """What one RUNNING or COMPLETING job holds on its node."""

    job_id: int
    node: str
    cpus: int
    mem_mb: int
    gpu_indices: tuple[int, ...]
    user: str = ""
    account: str = ""
    start_time: float | None = None
    time_limit: int | None = None
    array_job_id: int | None = None
    gres: tuple[GresRequest, ...] = ()  # what it asked per node: a shared GPU's share is here (shard:2, gpumem:8192)
    assoc_id: int = 0  # the association it charges (0: none), for association limits
    qos: str = ""


@dataclass(frozen=True)
class NodeShare:
    """One node of a job's allocation as ``start`` writes it (a ``job_nodes`` row)."""

    node: str
    gpu_indices: tuple[int, ...]
    cpus: int
    mem_mb: int


@dataclass(frozen=True)
class ActiveRun:
    """A run the controller holds RUNNING or COMPLETING on a node: what reconciliation compares
    with what the node's agent says it runs."""

    job_id: int
    restarts: int
    start_time: float


@dataclass(frozen=True)
class RunEnd:
    """An agent's report that a run ended (or never started: ``launch_failure`` says why)."""

    job_id: int
    node: str
    restarts: int
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float
    usage: dict[str, float | None] | None = None
    launch_failure: str = ""
    comment: str = ""  # why the agent ended it (a GPU memory slice overrun): the job's SystemComment


@dataclass(frozen=True)
class StepRecord:
    """A job step (J.S): psrun's command run inside its job's allocation, on some of its nodes."""

    job_id: int
    step_id: int
    name: str
    state: JobState
    nodes: str  # a hostlist expression
    ntasks: int
    cpus: int
    gres: str
    overlap: bool
    argv: tuple[str, ...]
    workdir: str
    start_time: float
    end_time: float | None = None
    exit_code: int = 0
    exit_signal: int = 0
    exact: bool = False  # --exact: it holds only node_cpus/node_gpus; else the whole allocation on its nodes
    node_cpus: tuple[int, ...] = ()  # the CPUs it holds on each of its nodes (in ``nodes`` order)
    node_gpus: tuple[tuple[int, ...], ...] = ()  # the GPU indices it holds (and sees) on each of its nodes


@dataclass(frozen=True)
class NewStep:
    """What a step is created with (Store.create_step): its id is the job's next."""

    name: str
    nodes: str
    ntasks: int
    cpus: int
    gres: str
    overlap: bool
    argv: tuple[str, ...]
    workdir: str
    exact: bool = False
    node_cpus: tuple[int, ...] = ()  # the CPUs it asks on each node (tasks there x cpus per task)
    gpus_wanted: tuple[int | None, ...] = ()  # GPUs it asks on each node (None, or none given: all of the job's)
    alloc_cpus: tuple[int, ...] = ()  # the job's CPUs on each of the step's nodes
    alloc_gpus: tuple[tuple[int, ...], ...] = ()  # the job's GPU indices on each of the step's nodes
    first_id: int = 0  # the job's first step's id: 1 in a psrun job, whose command is its step 0


@dataclass(frozen=True)
class StepEnd:
    """An agent's report that a step's tasks on its node ended (or the controller's decision)."""

    job_id: int
    step_id: int
    node: str
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float


@dataclass(frozen=True)
class QueuedJob:
    """A pending job's resource request, for the scheduler's snapshot."""

    job_id: int
    partition: str
    cpus: int
    mem_mb: int
    gres: tuple[GresRequest, ...]
    reason: str
    user: str = ""
    name: str = ""
    account: str = ""
    nice: int = 0
    submit_time: float = 0.0
    time_limit: int | None = None
    dependency: str = ""
    kill_on_invalid_dep: bool = False
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_max_running: int | None = None
    hold: str = ""
    admin_priority: int | None = None
    priority: int = 0
    start_estimate: float | None = None
    req_nodes: str = ""  # -w, a hostlist ("" any)
    exc_nodes: str = ""  # -x, a hostlist
    eligible_time: float | None = None  # since when it may start (not held, dependencies met); age counts from it
    begin_time: float | None = None  # --begin: not before this time
    deadline: float | None = None  # --deadline: ended DEADLINE once it can no longer end before it
    num_nodes: int = 1  # -N
    node_cpus: tuple[int, ...] = ()  # each node's CPUs of a multi-node job (core/layout.py); (): ``cpus`` on one
    constraint: str = ""  # --constraint: the node features it needs ("" none)
    exclusive: bool = False  # --exclusive: whole nodes
    assoc_id: int = 0  # the association it charges (0: none), for association limits
    qos: str = ""


@dataclass(frozen=True)
class UsageRecord:
    """A finished run, for fair share: who used what, for how long."""

    job_id: int
    user: str
    account: str
    cpus: int
    mem_mb: int
    gpus: int
    start_time: float
    end_time: float


def usage_record(r: Any, end_time: float = 0.0) -> UsageRecord:
    """A run's row (job_id, user_name, account, cpus, mem_mb, gpu_indices, start_time, end_time,
    num_nodes, node_cpus) as a UsageRecord: a multi-node job used its share on each node, the CPUs of
    all, memory and GPUs (per node) times its nodes. ``end_time``: for a run not ended yet."""
    nodes = r.num_nodes or 1
    return UsageRecord(r.job_id, r.user_name, r.account,
                       sum(indices_from_column(r.node_cpus)) if r.node_cpus else r.cpus, r.mem_mb * nodes,
                       len(indices_from_column(r.gpu_indices)) * nodes, r.start_time,
                       r.end_time if r.end_time is not None else end_time)


@dataclass(frozen=True)
class RefRow:
    """A job a dependency may name, as dependency evaluation needs it."""

    job_id: int
    state: JobState
    started: bool
    array_job_id: int | None
    array_task_id: int | None
    user: str
    name: str


@dataclass(frozen=True)
class JobPage:
    """A page of a listing (Store.job_page): the jobs, a key per job (jobs with equal keys have equal
    requests), the last job's id (where the next page starts) and whether there may be more."""

    jobs: list[JobRecord]
    keys: list[Hashable]
    last_id: int
    full: bool


@dataclass(frozen=True)
class JobEvent:
    """One row of a job's history: the lifecycle operation that wrote it, and its state change."""

    job_id: int
    time: float
    from_state: JobState | None
    to_state: JobState
    detail: str
    op: str = ""


def indices_to_column(indices: Iterable[int]) -> str:
    return ",".join(str(i) for i in indices)


def indices_from_column(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",")) if text else ()


def gres_to_column(gres: Sequence[GresRequest]) -> str:
    return ",".join(str(g) for g in gres)


def gres_from_column(text: str) -> tuple[GresRequest, ...]:
    out = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        out.append(GresRequest(parts[0], parts[1] if len(parts) == 3 else None, int(parts[-1])))
    return tuple(out)


def job_from_row(row: Row[Any], spec: JobSpec) -> JobRecord:
    """The record of a ``jobs`` row (its columns but ``spec``) with its request ``spec`` (read from
    ``job_specs``, or :func:`light_spec` for a listing)."""
    if spec.nice != row.nice:  # changed since submit (pscontrol update Nice=): the column is the truth
        spec = dataclasses.replace(spec, nice=row.nice)
    return JobRecord(
        job_id=row.job_id, spec=spec, state=JobState(row.state),
        reason=JobReason.parse(row.reason), submit_time=row.submit_time, start_time=row.start_time,
        end_time=row.end_time,
        node=row.node, gpu_indices=indices_from_column(row.gpu_indices), exit_code=row.exit_code,
        exit_signal=row.exit_signal, cancel_requested=bool(row.cancel_requested), partition=row.partition,
        time_limit=row.time_limit, gpu_seconds=row.gpu_seconds, peak_gpu_memory_mb=row.peak_gpu_memory_mb,
        mean_gpu_util=row.mean_gpu_util, max_rss_kb=row.max_rss_kb, array_job_id=row.array_job_id,
        total_cpu_seconds=row.total_cpu_seconds, user_cpu_seconds=row.user_cpu_seconds,
        system_cpu_seconds=row.system_cpu_seconds,
        array_task_id=row.array_task_id,
        priority=row.admin_priority if row.admin_priority is not None else row.priority, hold=row.hold,
        restarts=row.restarts, start_estimate=row.start_estimate, eligible_time=row.eligible_time,
        requeue=bool(row.requeue),
        requeue_requested=bool(row.requeue_requested), system_comment=row.system_comment or "",
        nodes=row_nodes(row.node, row.nodes), node_gpus=(indices_from_column(row.gpu_indices),) if row.node else (),
        assoc_id=row.assoc_id or 0,
        suspend_time=row.suspend_time, suspended_seconds=row.suspended_seconds or 0.0,
        state_desc=row.state_desc or "", reason_prev=JobReason.parse(row.reason_prev),
    )


def row_nodes(node: str | None, hostlist: str | None) -> tuple[str, ...]:
    """A record's nodes from its row: ``(node,)``, or a multi-node job's hostlist expanded, the first
    node first (Store.get_jobs then reads their order and GPUs from ``job_nodes``)."""
    if not node:
        return ()
    if not hostlist or hostlist == node:
        return (node,)
    from pslurm.core.hostlists import expand

    return (node, *(n for n in expand(hostlist) if n != node))


def light_spec(row: Row[Any], specs: dict[Any, JobSpec]) -> JobSpec:
    """A listing's spec, from the job's own columns (see Store.get_jobs(light=True)); the rows that
    agree on them (an array's tasks) share one, kept in ``specs``. Of an array's expression only the
    throttle is kept (``%2``): that is what a listing shows of it."""
    key = (row.name, row.user_name, row.uid, row.partition, row.time_limit, row.cpus, row.mem_mb, row.gres,
           row.account, row.nice, row.dependency, row.array_max_running, row.comment, row.qos, row.num_nodes)
    found = specs.get(key)
    if found is None:
        found = specs[key] = JobSpec(
            name=row.name, user=row.user_name, uid=row.uid, gid=0, workdir="", partition=row.partition,
            time_limit=row.time_limit, cpus_per_task=row.cpus, mem_mb=row.mem_mb, gres=gres_from_column(row.gres),
            account=row.account or "", nice=row.nice or 0, dependency=row.dependency or "",
            array=f"%{row.array_max_running}" if row.array_max_running else "", comment=row.comment or "",
            qos=row.qos or "", num_nodes=row.num_nodes or 1)
    return found


def node_from_row(row: Row[Any]) -> NodeRecord:
    gpus = tuple(GpuInfo(**{**g, "cores": tuple(g.get("cores") or ())}) for g in json.loads(row.gpus))
    return NodeRecord(
        name=row.name, addr=row.addr, port=row.port, cpus=row.cpus, real_memory=row.real_memory,
        gres=gres_from_column(row.gres), state=NodeState(row.state), drain=bool(row.drain), reason=row.reason,
        reason_uid=row.reason_uid, reason_time=row.reason_time,
        last_heartbeat=row.last_heartbeat, gpus=gpus, isolation=row.isolation,
    )


def step_from_row(row: Row[Any]) -> StepRecord:
    return StepRecord(row.job_id, row.step_id, row.name, JobState(row.state), row.nodes, row.ntasks, row.cpus,
                      row.gres, bool(row.overlap), tuple(json.loads(row.argv)), row.workdir, row.start_time,
                      row.end_time, row.exit_code, row.exit_signal, bool(row.exact), _ints(row.node_cpus),
                      tuple(_ints(part) for part in row.node_gpus.split(";")) if row.node_gpus else ())


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def held_text(node_gpus: tuple[tuple[int, ...], ...]) -> str:
    """A step's GPUs per node as the job_steps row keeps them: ``0,1;2`` (nodes by ``;``)."""
    return ";".join(",".join(map(str, gpus)) for gpus in node_gpus)
