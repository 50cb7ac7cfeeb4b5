"""What a scheduling pass sees and what it decides: the snapshot of the cluster (pending and
running jobs, nodes as the scheduler sees them, partitions, limits, the clock) and the plan.

Plain records, no behaviour: the scheduler builds a :class:`Snapshot`, the pure pass
(:func:`pslurm.controller.policy.plan`) returns a :class:`Plan`. Every part of the policy (the pass,
the node model, sharing, multi-node placement) reads these; this module imports none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pslurm.controller.acct_policy import AcctLimits
from pslurm.core.gres import GresRequest
from pslurm.core.sharing import GpuShare


@dataclass(frozen=True)
class SharedGpu:
    """One GPU of a node as sharing sees it: its capacity, and what was measured on it."""

    index: int
    type: str | None
    memory_mb: int = 0  # 0: unknown
    shards: int = 0
    mps: int = 0
    memory_used_mb: int = 0  # measured (heartbeat), for display/tie-breaks only
    util: float = 0.0  # measured percent, the tie-break after best fit


@dataclass(frozen=True)
class NodeView:
    """A node as the scheduler sees it: what is free now, and which GPUs those are."""

    name: str
    partitions: frozenset[str]
    free_cpus: int
    free_mem_mb: int
    free_gpus: tuple[tuple[int, str | None], ...]  # (node GPU index, type), in index order
    available: bool = True  # UP and not draining
    gpus: tuple[tuple[int, str | None], ...] = ()  # the whole inventory (free and busy); () = free_gpus
    shared_gpus: tuple[SharedGpu, ...] = ()  # every GPU (free and busy) with its sharing capacity
    total_cpus: int = 0  # the node's CPUs, free or not (an --exclusive job takes them all); 0: free_cpus
    total_mem_mb: int = 0  # its memory, MB; 0: free_mem_mb


@dataclass(frozen=True)
class PendingJob:
    """A pending job as the scheduler sees it."""

    job_id: int
    partition: str
    cpus: int
    mem_mb: int
    gres: tuple[GresRequest, ...]
    priority: int = 0
    time_limit: int | None = None  # seconds; None: unlimited
    user: str = ""
    array_job_id: int | None = None
    array_max_running: int | None = None  # the array's %N throttle
    dependency: str = "satisfied"  # satisfied, waiting, never (pslurm.core.dependency.DepStatus)
    hold: str = ""  # "", "user", "admin"
    allowed_nodes: frozenset[str] | None = None  # -w / -x: the only nodes it may run on; None: any
    share: GpuShare | None = None  # a share of one GPU: share_of(gres) (then ``gres`` asks no whole GPU)
    begin_time: float | None = None  # --begin: not considered before this time (reason BeginTime)
    num_nodes: int = 1  # -N: the job takes this many distinct nodes, all at once (a share: one only)
    per_node: tuple[tuple[int, int], ...] = ()  # (cpus, mem_mb) of each node's share, in node order; (): cpus, mem_mb
    required_nodes: frozenset[str] | None = None  # -w naming several nodes: all of them among the job's nodes
    exclusive: bool = False  # --exclusive: whole nodes only, on which nothing else runs (all CPUs, memory, GPUs)
    assoc_id: int = 0  # the association it charges (0: none), for its limits (acct_policy)
    qos: str = ""  # its QOS, for its limits


@dataclass(frozen=True)
class RunningJob:
    """A running (or completing) job: what it holds, and when it is expected to release it."""

    job_id: int
    node: str
    cpus: int
    mem_mb: int
    gpu_indices: tuple[int, ...]
    end_time: float | None  # start + time limit; None: unlimited
    user: str = ""
    array_job_id: int | None = None
    share: GpuShare | None = None  # a share of its one GPU, ``gpu_indices[0]``
    assoc_id: int = 0  # the association it charges (0: none); one row per node of a multi-node job
    qos: str = ""


@dataclass(frozen=True)
class Limits:
    """Per-user limits on what runs at once (0: none). Slurm's QOS MaxJobsPerUser / MaxTRESPerUser."""

    max_jobs_per_user: int = 0
    max_gpus_per_user: int = 0
    max_cpus_per_user: int = 0


@dataclass(frozen=True)
class Snapshot:
    """Everything one pass sees: the pending and running jobs, the nodes, the partitions, the clock."""

    pending: Sequence[PendingJob]  # any order: plan() takes them by priority, then id
    nodes: Sequence[NodeView]
    now: float
    partition_up: dict[str, bool] = field(default_factory=dict)  # missing: up
    running: Sequence[RunningJob] = ()
    partition_state: dict[str, str] = field(default_factory=dict)  # UP, DOWN, DRAIN, INACTIVE; missing: UP
    partition_max_time: dict[str, int | None] = field(default_factory=dict)  # MaxTime, seconds
    limits: Limits = Limits()
    max_reservations: int = 500
    acct: AcctLimits = AcctLimits()  # association and QOS limits (AccountingStorageEnforce=limits)


@dataclass(frozen=True)
class Placement:
    """A job the pass starts now, on its nodes and GPUs."""

    job_id: int
    node: str
    gpu_indices: tuple[int, ...]  # a shared job: its one GPU
    more: tuple[tuple[str, tuple[int, ...]], ...] = ()  # a multi-node job: the nodes after the first, GPUs on each


@dataclass
class Plan:
    """What a pass decides: the starts, and why each job left pending waits (and until when)."""

    placements: list[Placement]
    reasons: dict[int, str]  # why each job left pending waits, in Slurm's words
    estimates: dict[int, float] = field(default_factory=dict)  # expected start of jobs holding a reservation
    reserved_on: dict[int, str] = field(default_factory=dict)  # the node each reservation is on (the first one)
    reserved_more: dict[int, tuple[str, ...]] = field(default_factory=dict)  # a multi-node one: its other nodes
