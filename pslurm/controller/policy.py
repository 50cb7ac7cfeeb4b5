"""The scheduling policy: a pure function from a snapshot of the cluster to placements.

No I/O and no clock: the controller's scheduler loop takes the snapshot (priorities already
computed, dependencies already evaluated), calls :func:`plan`, and commits each placement with a
compare-and-set. Tests drive :func:`plan` directly.

Jobs are taken in priority order (then job id). A job starts now where it fits and where starting
it delays no reservation; a job that cannot start gets a reservation at its earliest expected start
(computed from the time limits of running jobs and the reservations before it), up to
``max_reservations`` per pass (Slurm's bf_max_job_test). So lower-priority jobs backfill into holes
without delaying the expected start of any higher-priority job that holds a reservation.

Each node's future is a step function of what it has free: now, plus what running jobs release at
their expected ends, less what reservations hold from their start to their end. Resources are a
vector per node: (CPUs, memory, GPUs, GPUs of each type the node has). A running job without a
time limit is expected to end a year from now, as Slurm plans INFINITE limits; a pending one, to
hold what it takes for good (so it never backfills in front of a reservation).

That is the backfill pass (``plan(snapshot, backfill=True)``, Slurm's sched/backfill, run every
bf_interval). The main pass (``backfill=False``, Slurm's schedule() in job_scheduler.c, run on every
change) computes no reservations: it takes jobs in the same order and starts what fits now, and a job
that cannot start claims every node it could use (an available node of its partition, allowed by
-w/-x, whose GPU inventory holds the count and types it asks), so no lower-priority job starts there
(reason Priority). Slurm closes the whole partition's nodes; claiming only the nodes a job could use
is as safe (its reservation can only be on one of them) and lets a job of the same partition that
asks another GPU type start. So a main pass never starts a job that a backfill pass would hold back
for a higher-priority job's reservation: only the backfill pass starts jobs out of priority order.

GPU sharing (:mod:`pslurm.controller.sharing_policy`, taken only for jobs with a ``share``): a job may
ask a share of one GPU (``shard:K``, ``mps:N``, ``gpumem:MB``) instead of whole GPUs. A GPU is free,
held whole, or shared in one mode up to its capacity in that mode (``NodeView.shared_gpus``), by one
user at a time in mps mode. A share goes best fit to a GPU already shared in its mode, to a free GPU
only when none takes it. For whole-GPU planning a shared GPU is busy (not in ``free_gpus``) until the
last job sharing it is expected to end; a shared job counts no whole GPU (limits included), starts on a
node with a reservation only if it delays none, reserves one whole GPU when it cannot start, and in
the main pass claims the nodes with a GPU that could ever hold its share.

Multi-node jobs (``num_nodes`` > 1, or ``required_nodes`` given): each node takes a share, ``per_node[i]``
(CPUs, memory) for the i-th node, the GPU request ``gres`` on every node. The job starts only on N distinct
nodes that can each take their share now (partition, -w/-x, every node of ``required_nodes`` among them, and
on a node holding a reservation only where it delays none), all at once or not at all: the placement's
``node`` takes share 0 and ``more`` the others, in order. The largest shares are matched first (a block
distribution's shares only shrink). One that cannot start claims the nodes it could use in the main pass, as
a single-node job, unless fewer than N could ever take it (nodes down): then it claims none. The backfill
pass reserves it at the earliest time T at which N nodes each hold their share throughout [T, T + its limit)
(candidates: each node's own earliest start, in increasing order), on all N (``reserved_on`` the first,
``reserved_more`` the others). A share of a GPU is never multi-node (BadConstraints).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from pslurm.controller.sharing_policy import Sharing, hold_running
from pslurm.core.gres import GresRequest
from pslurm.core.sharing import GpuShare

INF = math.inf
UNLIMITED = 365 * 86400.0  # how long a job without a time limit is planned to run
SCAN_LIMIT = 256  # nodes tried for one job's start now (bounds a pass when reservations block many)


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


@dataclass(frozen=True)
class Limits:
    """Per-user limits on what runs at once (0: none). Slurm's QOS MaxJobsPerUser / MaxTRESPerUser."""

    max_jobs_per_user: int = 0
    max_gpus_per_user: int = 0
    max_cpus_per_user: int = 0


@dataclass(frozen=True)
class Snapshot:
    pending: Sequence[PendingJob]  # any order: plan() takes them by priority, then id
    nodes: Sequence[NodeView]
    now: float
    partition_up: dict[str, bool] = field(default_factory=dict)  # missing: up
    running: Sequence[RunningJob] = ()
    partition_state: dict[str, str] = field(default_factory=dict)  # UP, DOWN, DRAIN, INACTIVE; missing: UP
    partition_max_time: dict[str, int | None] = field(default_factory=dict)  # MaxTime, seconds
    limits: Limits = Limits()
    max_reservations: int = 500


@dataclass(frozen=True)
class Placement:
    job_id: int
    node: str
    gpu_indices: tuple[int, ...]  # a shared job: its one GPU
    more: tuple[tuple[str, tuple[int, ...]], ...] = ()  # a multi-node job: the nodes after the first, GPUs on each


@dataclass
class Plan:
    placements: list[Placement]
    reasons: dict[int, str]  # why each job left pending waits, in Slurm's words
    estimates: dict[int, float] = field(default_factory=dict)  # expected start of jobs holding a reservation
    reserved_on: dict[int, str] = field(default_factory=dict)  # the node each reservation is on (the first one)
    reserved_more: dict[int, tuple[str, ...]] = field(default_factory=dict)  # a multi-node one: its other nodes


def pick_gpus(free: Sequence[tuple[int, str | None]], gres: Sequence[GresRequest]) -> tuple[int, ...] | None:
    """GPU indices from ``free`` that satisfy ``gres``, or None. Typed requests are served first,
    so that an untyped one does not take the only GPU of a type another item needs."""
    taken: list[int] = []
    remaining = list(free)
    for req in sorted((g for g in gres if g.name == "gpu"), key=lambda g: g.type is None):
        matches = [gpu for gpu in remaining if req.type is None or gpu[1] == req.type][: req.count]
        if len(matches) < req.count:
            return None
        taken.extend(index for index, _ in matches)
        remaining = [gpu for gpu in remaining if gpu not in matches]
    return tuple(sorted(taken))


def _fits(avail: tuple[float, ...], need: tuple[float, ...]) -> bool:
    for a, n in zip(avail, need, strict=False):
        if a < n:
            return False
    return True


@functools.lru_cache(maxsize=256)
def _inventory_maps(inventory: tuple[tuple[int, str | None], ...]) -> tuple[dict[int, str | None], dict[str, int]]:
    """A GPU inventory's types by index and its type slots (a vector's places), made once for all
    the nodes of one shape: at 1000 nodes making them was most of a pass's setup."""
    return dict(inventory), {t: i for i, t in enumerate(sorted({t for _, t in inventory if t is not None}))}


class _Node:
    """One node's state during a pass: free now, and its future as events."""

    __slots__ = ("view", "name", "parts", "cpus", "mem", "free", "slots", "types", "events", "_steps", "now",
                 "reserved", "unknown")

    def __init__(self, view: NodeView, now: float) -> None:
        self.view = view
        self.name = view.name
        self.parts = view.partitions
        self.cpus = view.free_cpus
        self.mem = view.free_mem_mb
        self.free = list(view.free_gpus)
        self.types, self.slots = _inventory_maps(view.gpus or view.free_gpus)  # read only: shared
        self.events: list[tuple[float, tuple[float, ...]]] = []
        self._steps: list[tuple[float, tuple[float, ...]]] | None = None
        self.now = now
        self.reserved = False
        self.unknown = 0  # GPUs running jobs hold that the view does not list (no inventory given): any type

    def vector(self, cpus: int, mem: int, gpus: Sequence[int]) -> tuple[float, ...]:
        per = [0] * len(self.slots)
        for index in gpus:
            t = self.types.get(index)
            if t is not None:
                per[self.slots[t]] += 1
        return (cpus, mem, len(gpus), *per)

    def free_vector(self) -> tuple[float, ...]:
        return self.vector(self.cpus, self.mem, [i for i, _ in self.free])

    def whole(self) -> tuple[float, ...]:
        """The whole node as a vector: what an --exclusive job holds."""
        view = self.view
        return self.vector(view.total_cpus or view.free_cpus, view.total_mem_mb or view.free_mem_mb,
                           [i for i, _ in view.gpus or view.free_gpus])

    def idle(self) -> bool:
        """Nothing runs here, nor was started here in this pass: an --exclusive job may start."""
        view = self.view
        return (self.cpus == (view.total_cpus or view.free_cpus) and self.mem == (view.total_mem_mb or view.free_mem_mb)
                and len(self.free) == len(view.gpus or view.free_gpus) and not self.unknown)

    def need(self, job: PendingJob) -> tuple[float, ...] | None:
        """The job's request as this node's vector; None when the node lacks a GPU type it asks."""
        per = [0] * len(self.slots)
        total = 0
        for g in job.gres:
            if g.name != "gpu":
                continue
            total += g.count
            if g.type is not None:
                slot = self.slots.get(g.type)
                if slot is None:
                    return None
                per[slot] += g.count
        need = (job.cpus, job.mem_mb, total, *per)
        if job.exclusive:  # the whole node, which must hold what it asks
            whole = self.whole()
            return whole if _fits(whole, need) else None
        return need

    def add_event(self, time: float, delta: tuple[float, ...]) -> None:
        self.events.append((max(time, self.now + 1e-3), delta))
        self._steps = None

    def steps(self) -> list[tuple[float, tuple[float, ...]]]:
        """(time, what is free from then on), from now, one point per distinct event time."""
        if self._steps is None:
            cur = list(self.free_vector())
            pts = [(self.now, tuple(cur))]
            for time, delta in sorted(self.events, key=lambda e: e[0]):
                for i, d in enumerate(delta):
                    cur[i] += d
                if time <= pts[-1][0]:
                    pts[-1] = (pts[-1][0], tuple(cur))
                else:
                    pts.append((time, tuple(cur)))
            self._steps = pts
        return self._steps

    def first_time_with(self, gpus: int) -> float:
        """The first time this node has ``gpus`` GPUs free: a lower bound on any start needing them."""
        for time, avail in self.steps():
            if avail[2] >= gpus:
                return time
        return INF

    def earliest(self, need: tuple[float, ...], duration: float, stop: float = INF) -> float:
        """The earliest time (before ``stop``) from which ``need`` is free for ``duration``, or INF."""
        pts = self.steps()
        i, n = 0, len(pts)
        while i < n:
            start = pts[i][0]
            if start >= stop:
                return INF
            end = start + duration
            bad = -1
            k = i
            while k < n and (k == i or pts[k][0] < end):
                if not _fits(pts[k][1], need):
                    bad = k
                    break
                k += 1
            if bad < 0:
                return start
            i = bad + 1  # every start up to pts[bad] would cover pts[bad], which does not fit
        return INF

    def fits_during(self, need: tuple[float, ...], start: float, end: float) -> bool:
        """Whether ``need`` is free on this node throughout [start, end)."""
        pts = self.steps()
        k = max(0, bisect.bisect_right(pts, start, key=lambda p: p[0]) - 1)  # the step in effect at start
        n = len(pts)
        while k < n:
            if not _fits(pts[k][1], need):
                return False
            k += 1
            if k < n and pts[k][0] >= end:
                break
        return True


def _gpu_ask(job: PendingJob) -> tuple[int, tuple[tuple[str, int], ...]]:
    """The job's GPU count and its typed counts: what a node's inventory must hold to ever run it."""
    typed: dict[str, int] = defaultdict(int)
    total = 0
    for g in job.gres:
        if g.name == "gpu":
            total += g.count
            if g.type is not None:
                typed[g.type] += g.count
    return total, tuple(sorted(typed.items()))


def _could_use(node: _Node, job: PendingJob, ask: tuple[int, tuple[tuple[str, int], ...]]) -> bool:
    """Whether ``job`` could ever run on ``node`` (partition, -w/-x, GPU inventory): the nodes it competes for."""
    if not node.view.available or job.partition not in node.parts:
        return False
    if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
        return False
    total, typed = ask
    if len(node.types) + node.unknown < total:
        return False
    return all(sum(1 for t in node.types.values() if t == kind) + node.unknown >= count for kind, count in typed)


def plan(snapshot: Snapshot, backfill: bool = True) -> Plan:
    """One pass, ``snapshot.now`` its clock: the backfill pass, or with ``backfill=False`` the main
    pass (no reservations, no estimates; a blocked job blocks the jobs after it that compete for its
    nodes). See the module's docstring."""
    now = snapshot.now
    nodes = [_Node(v, now) for v in snapshot.nodes]
    by_name = {n.name: n for n in nodes}
    by_index = {n.name: i for i, n in enumerate(nodes)}
    array_running: dict[int, int] = defaultdict(int)
    user_jobs: dict[str, int] = defaultdict(int)
    user_gpus: dict[str, int] = defaultdict(int)
    user_cpus: dict[str, int] = defaultdict(int)
    shared_runs: list[RunningJob] = []
    for r in snapshot.running:
        if r.share is not None:
            shared_runs.append(r)  # several may share a GPU: accounted together below
        else:
            node = by_name.get(r.node)
            if node is not None:
                node.unknown += sum(1 for index in r.gpu_indices if index not in node.types)
            if node is not None and backfill:  # the future of each node matters only to reservations
                end = now + UNLIMITED if r.end_time is None else r.end_time
                node.add_event(end, node.vector(r.cpus, r.mem_mb, r.gpu_indices))
            user_gpus[r.user] += len(r.gpu_indices)
        if r.array_job_id is not None:
            array_running[r.array_job_id] += 1
        user_jobs[r.user] += 1
        user_cpus[r.user] += r.cpus
    if shared_runs:
        hold_running(by_name, shared_runs, now + UNLIMITED, backfill)
    sharing: Sharing | None = None  # made when the first pending shared job comes
    taken: list[tuple[int, tuple[int, ...], float]] = []  # whole-GPU starts (node, GPUs, end): for sharing
    # per partition: available nodes bucketed by how many GPUs they have free now
    max_gpus = max((len(n.view.gpus or n.view.free_gpus) for n in nodes), default=0)
    buckets: dict[str, list[dict[int, None]]] = {}
    for i, n in enumerate(nodes):
        if not n.view.available:
            continue
        for p in n.parts:
            if p not in buckets:
                buckets[p] = [{} for _ in range(max_gpus + 1)]
            buckets[p][len(n.free)][i] = None
    heaps: dict[tuple[str, int], list[tuple[float, int]]] = {}

    def take(i: int, cpus: int, mem: int, gpus: tuple[int, ...], end: float) -> None:
        """A job starting now takes ``cpus``, ``mem`` and ``gpus`` of node ``i`` until ``end``: the node's
        free resources, its future (backfill) and its bucket by free GPUs follow."""
        node = nodes[i]
        old = len(node.free)
        release = node.vector(cpus, mem, gpus)
        node.cpus -= cpus
        node.mem -= mem
        node.free = [g for g in node.free if g[0] not in gpus]
        if backfill:
            node.add_event(end, release)
        if len(node.free) != old:
            for p in node.parts:
                if p in buckets:
                    del buckets[p][old][i]
                    buckets[p][len(node.free)][i] = None
        taken.append((i, gpus, end))

    def heap_for(part: str, gpus: int) -> list[tuple[float, int]]:
        key = (part, gpus)
        heap = heaps.get(key)
        if heap is None:
            heap = []
            for level in buckets.get(part, ()):
                for i in level:
                    bound = nodes[i].first_time_with(gpus)
                    if bound < INF:
                        heap.append((bound, i))
            heapq.heapify(heap)
            heaps[key] = heap
        return heap

    available = {n.name for n in nodes if n.view.available}
    limits = snapshot.limits
    placements: list[Placement] = []
    reasons: dict[int, str] = {}
    estimates: dict[int, float] = {}
    reserved_on: dict[int, str] = {}
    reserved_more: dict[int, tuple[str, ...]] = {}
    waiting_in: set[str] = set()
    reservations = 0
    # main pass: nodes claimed by a blocked job, and the (partition, -w/-x, GPU ask) whose nodes all are
    claimed: set[int] = set()
    claimed_for: set[tuple[str, frozenset[str] | None, Hashable]] = set()
    asks: dict[tuple[GresRequest, ...], Hashable] = {}  # a whole-GPU ask (_gpu_ask) or a share
    for job in sorted(snapshot.pending, key=lambda j: (-j.priority, j.job_id)):
        reason = _static_reason(job, snapshot)
        gpus = sum(g.count for g in job.gres if g.name == "gpu")  # per node
        # a multi-node job (or one naming the nodes it must have): its shares, one per node, in node order
        many = job.num_nodes != 1 or job.required_nodes is not None
        if many:
            shares = job.per_node or ((job.cpus, job.mem_mb),) * job.num_nodes
            total_cpus, total_gpus = sum(c for c, _ in shares), gpus * len(shares)
            if reason is None and (job.share is not None or len(job.required_nodes or ()) > len(shares)):
                reason = "BadConstraints"  # a share is on one GPU; -w names more nodes than it takes
            if reason is None and job.required_nodes and not job.required_nodes <= available:
                reason = "ReqNodeNotAvail"
        if reason is None and job.array_job_id is not None and job.array_max_running:
            if array_running[job.array_job_id] >= job.array_max_running:
                reason = "JobArrayTaskLimit"
        if reason is None and limits.max_jobs_per_user and user_jobs[job.user] >= limits.max_jobs_per_user:
            reason = "QOSMaxJobsPerUserLimit"
        if (reason is None and limits.max_gpus_per_user
                and user_gpus[job.user] + (total_gpus if many else gpus) > limits.max_gpus_per_user):
            reason = "QOSMaxGRESPerUser"
        if (reason is None and limits.max_cpus_per_user
                and user_cpus[job.user] + (total_cpus if many else job.cpus) > limits.max_cpus_per_user):
            reason = "QOSMaxCpuPerUserLimit"
        if reason is None and job.allowed_nodes is not None and not job.allowed_nodes & available:
            reason = "ReqNodeNotAvail"  # every node it may run on is down or drained
        if reason is not None:
            reasons[job.job_id] = reason
            continue
        if not backfill:
            # few distinct requests; a share's nodes are those that could hold it (its gres says which)
            ask = asks.get(job.gres) or asks.setdefault(job.gres, _gpu_ask(job) if job.share is None else job.share)
            key = (job.partition, job.allowed_nodes, ask)
            if key in claimed_for:  # every node it could use is claimed: Slurm's failed partition, fast
                reasons[job.job_id] = "Priority"
                continue
        # without a limit a job is expected to outlast every running one: it needs what it takes for good
        duration = float(job.time_limit) if job.time_limit is not None else INF
        share = job.share
        if share is None:
            levels = buckets.get(job.partition, [])
        else:
            levels = []
            if sharing is None:
                sharing = Sharing(nodes, snapshot.running, now, now + UNLIMITED, SCAN_LIMIT, taken)
            gpu = sharing.find(job, share, duration, claimed)
            if gpu is not None:
                node = nodes[gpu.node]
                old = len(node.free)
                sharing.start(job, share, gpu, duration, backfill)
                if len(node.free) != old:  # it took a free GPU
                    for p in node.parts:
                        if p in buckets:
                            del buckets[p][old][gpu.node]
                            buckets[p][len(node.free)][gpu.node] = None
                placements.append(Placement(job.job_id, node.name, (gpu.index,)))
                if job.array_job_id is not None:
                    array_running[job.array_job_id] += 1
                user_jobs[job.user] += 1
                user_cpus[job.user] += job.cpus
                continue
        placed = None
        if many:
            group = _start_many(job, shares, duration, nodes, levels, gpus, now, by_index)
            if group is not None and job.exclusive:  # each node whole
                group = [(i, tuple(g for g, _ in nodes[i].free), nodes[i].cpus, nodes[i].mem) for i, _, _, _ in group]
            if group is not None:  # all its nodes at once, each with its share
                for i, on_node, c, m in group:
                    take(i, c, m, on_node, now + duration)
                first, more = group[0], group[1:]
                placements.append(Placement(job.job_id, nodes[first[0]].name, first[1],
                                            tuple((nodes[i].name, on) for i, on, _, _ in more)))
                if job.array_job_id is not None:
                    array_running[job.array_job_id] += 1
                user_jobs[job.user] += 1
                user_gpus[job.user] += total_gpus
                user_cpus[job.user] += total_cpus
                continue
        else:
            tried = 0
            for level in range(gpus, len(levels)):
                for i in levels[level]:
                    node = nodes[i]
                    if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                        continue  # -w / -x: not counted as tried, so a named node is always reached
                    tried += 1
                    if node.cpus < job.cpus or node.mem < job.mem_mb:
                        continue
                    chosen = pick_gpus(node.free, job.gres)
                    if chosen is None:
                        continue
                    if job.exclusive:
                        if not node.idle():
                            continue
                        chosen = tuple(g for g, _ in node.free)
                    if node.reserved:
                        # what it would take is the GPUs chosen, types included: an untyped request
                        # that gets a typed GPU must not hold it into a reservation for that type
                        need = node.whole() if job.exclusive else node.vector(job.cpus, job.mem_mb, chosen)
                        if node.earliest(need, duration, stop=now + 1e-6) != now:
                            continue
                    placed = (i, chosen)
                    break
                if placed or tried >= SCAN_LIMIT:
                    break
        if placed is not None:
            i, chosen = placed
            node = nodes[i]
            cpus, mem = (node.cpus, node.mem) if job.exclusive else (job.cpus, job.mem_mb)
            take(i, cpus, mem, chosen, now + duration)
            placements.append(Placement(job.job_id, node.name, chosen))
            if job.array_job_id is not None:
                array_running[job.array_job_id] += 1
            user_jobs[job.user] += 1
            user_gpus[job.user] += len(chosen) if job.exclusive else gpus
            user_cpus[job.user] += cpus
            continue
        if not backfill:
            # claim the nodes it could use: a lower-priority job there might delay it (no reservation says when)
            if share is None:
                whole = _gpu_ask(job)
                mine = [i for i, n in enumerate(nodes) if _could_use(n, job, whole)]
                if many and not _could_hold(job, shares, mine, nodes):
                    # too few nodes could ever take it (some are down): it waits, claiming none
                    reasons[job.job_id] = "Priority" if job.partition in waiting_in else "Resources"
                    waiting_in.add(job.partition)
                    continue
            else:
                assert sharing is not None
                mine = sharing.could_use(job, share)
            behind = job.partition in waiting_in or any(i in claimed for i in mine)
            reasons[job.job_id] = "Priority" if behind else "Resources"
            waiting_in.add(job.partition)
            for i in mine:
                if i not in claimed:
                    claimed.add(i)
                    for p in nodes[i].parts:
                        if p in buckets:
                            buckets[p][len(nodes[i].free)].pop(i, None)
            claimed_for.add(key)
            continue
        reasons[job.job_id] = "Priority" if job.partition in waiting_in else "Resources"
        waiting_in.add(job.partition)
        if reservations >= snapshot.max_reservations:
            continue
        if many:
            multi = _reserve_many(job, shares, duration, buckets.get(job.partition, []), nodes)
            if multi is None:
                continue
            start, held = multi
            for i, need in held:
                node = nodes[i]
                node.add_event(start, tuple(-x for x in need))
                node.add_event(start + duration, need)
                node.reserved = True
            estimates[job.job_id] = start
            reserved_on[job.job_id] = nodes[held[0][0]].name
            reserved_more[job.job_id] = tuple(nodes[i].name for i, _ in held[1:])
            reservations += 1
            continue
        if share is None:
            found = _earliest(job, gpus, duration, heap_for(job.partition, gpus), nodes)
        else:  # as if it held one whole GPU, on a node with a GPU that could hold its share
            assert sharing is not None
            found = sharing.reserve(job, share, duration, heap_for(job.partition, 1))
        if found is None:
            continue
        start, i, need = found
        node = nodes[i]
        node.add_event(start, tuple(-x for x in need))
        node.add_event(start + duration, need)
        node.reserved = True
        estimates[job.job_id] = start
        reserved_on[job.job_id] = node.name
        reservations += 1
    return Plan(placements, reasons, estimates, reserved_on, reserved_more)


DEADLINE_MIN_TIME = 60  # a job without a time limit needs at least this long before its deadline (Slurm's time_min)


def misses_deadline(deadline: float, time_limit: int | None, begin_time: float | None, now: float) -> bool:
    """Whether a pending job with this ``deadline`` can no longer end before it: its earliest end
    (now, or its begin time if later, plus its time limit; a minute without one, as Slurm's
    deadline_ok takes time_min) is past it. Slurm asks this of a job once it is eligible; pslurm of
    every pending job on every pass, since a job that cannot end in time now never will."""
    start = now if begin_time is None else max(now, begin_time)
    return start + (DEADLINE_MIN_TIME if time_limit is None else time_limit) > deadline


def deadline_time_limit(deadline: float, time_limit: int | None, now: float) -> int | None:
    """The limit a job with a deadline starts with: its own, or without one the time left until the
    deadline (Slurm's schedule(): a job never runs past its deadline)."""
    return time_limit if time_limit is not None else max(1, int(deadline - now))


def _static_reason(job: PendingJob, snapshot: Snapshot) -> str | None:
    """Why a job may not be considered at all this pass (held, dependency, partition), or None."""
    if job.hold:
        return "JobHeldAdmin" if job.hold == "admin" else "JobHeldUser"
    if job.dependency == "waiting":
        return "Dependency"
    if job.dependency == "never":
        return "DependencyNeverSatisfied"
    if job.begin_time is not None and job.begin_time > snapshot.now:
        return "BeginTime"  # after its dependencies, as Slurm's job_independent
    state = snapshot.partition_state.get(job.partition)
    if state is None:
        state = "UP" if snapshot.partition_up.get(job.partition, True) else "DOWN"
    if state == "DOWN":
        return "PartitionDown"
    if state == "INACTIVE":
        return "PartitionInactive"
    max_time = snapshot.partition_max_time.get(job.partition)
    if max_time is not None and (job.time_limit is None or job.time_limit > max_time):
        return "PartitionTimeLimit"
    return None


def _earliest(job: PendingJob, gpus: int, duration: float, heap: list[tuple[float, int]],
              nodes: list[_Node]) -> tuple[float, int, tuple[float, ...]] | None:
    """The node and time where ``job`` can start earliest, given every reservation so far.

    ``heap`` holds (lower bound, node) pairs: the first time the node has ``gpus`` GPUs free. Bounds
    only grow during a pass (starts and reservations take resources, nothing gives them back), so a
    stale bound is still a bound: pop the smallest, tighten it if it grew, and stop when no bound left
    can beat the best start found."""
    best: tuple[float, int, tuple[float, ...]] | None = None
    held: list[tuple[float, int]] = []
    while heap and (best is None or heap[0][0] < best[0]):
        bound, i = heapq.heappop(heap)
        node = nodes[i]
        tighter = node.first_time_with(gpus)
        if tighter > bound:
            if tighter < INF:
                heapq.heappush(heap, (tighter, i))
            continue
        held.append((bound, i))
        if job.partition not in node.parts or (job.allowed_nodes is not None and node.name not in job.allowed_nodes):
            continue
        need = node.need(job)
        if need is None:
            continue
        start = node.earliest(need, duration, stop=best[0] if best else INF)
        if start < INF and (best is None or start < best[0]):
            best = (start, i, need)
            if start <= bound:
                break
    for item in held:
        heapq.heappush(heap, item)
    return best


_Group = list[tuple[int, tuple[int, ...], int, int]]  # (node, GPUs, cpus, mem_mb) of each share, in share order


def _assign(shares: Sequence[tuple[int, int]], cands: Sequence[tuple[int, tuple[int, ...]]], required: int,
            fits: Callable[[int, tuple[int, ...], tuple[int, int]], bool]) -> _Group | None:
    """One candidate node per share (``cands``: (node, GPUs), the ``required`` first ones must all be
    taken), each fitting its share, or None. The largest shares are matched first, each to the first
    candidate that fits it: the shares of a block distribution only shrink, so a node that fits a
    larger share fits every smaller one and this finds a match wherever there is one."""
    n = len(shares)
    order = sorted(range(n), key=lambda k: (-shares[k][0], -shares[k][1]))
    out: list[tuple[int, tuple[int, ...], int, int] | None] = [None] * n
    used: set[int] = set()
    left_required = required
    for pos, k in enumerate(order):
        only_required = left_required >= n - pos  # the slots left are the required nodes'
        for rank, (i, chosen) in enumerate(cands):
            if i in used:
                continue
            if only_required and rank >= required:
                break
            if fits(i, chosen, shares[k]):
                used.add(i)
                out[k] = (i, chosen, *shares[k])
                if rank < required:
                    left_required -= 1
                break
        if out[k] is None:
            return None
    return [o for o in out if o is not None]


def _start_many(job: PendingJob, shares: tuple[tuple[int, int], ...], duration: float, nodes: list[_Node],
                levels: Sequence[dict[int, None]], gpus: int, now: float,
                by_index: dict[str, int]) -> _Group | None:
    """The nodes (with their GPUs and shares, in share order) where a multi-node job starts now, or None:
    distinct available nodes of its partition not claimed (those in ``levels``), allowed by -w/-x, every
    node -w names among them, each with its share and GPUs free now and, where it holds a reservation,
    free for the job's whole duration (a start delays no reservation)."""
    n = len(shares)
    small = (min(c for c, _ in shares), min(m for _, m in shares))

    def fits(i: int, chosen: tuple[int, ...], share: tuple[int, int]) -> bool:
        node = nodes[i]
        if node.cpus < share[0] or node.mem < share[1]:
            return False
        if job.exclusive and not node.idle():
            return False
        if node.reserved:
            need = node.whole() if job.exclusive else node.vector(share[0], share[1], chosen)
            return node.earliest(need, duration, stop=now + 1e-6) == now
        return True

    cands: list[tuple[int, tuple[int, ...]]] = []
    required = sorted(job.required_nodes or ())
    for name in required:
        i = by_index.get(name)
        if i is None:
            return None
        node = nodes[i]
        level = len(node.free)
        if level >= len(levels) or i not in levels[level]:
            return None  # not in its partition, down, or claimed by a higher-priority job
        if job.allowed_nodes is not None and name not in job.allowed_nodes:
            return None
        chosen = pick_gpus(node.free, job.gres)
        if chosen is None or not fits(i, chosen, small):
            return None
        cands.append((i, chosen))
    seen = {i for i, _ in cands}
    tried = 0
    for level in range(gpus, len(levels)):
        for i in levels[level]:
            if i in seen:
                continue
            node = nodes[i]
            if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                continue
            tried += 1
            chosen = pick_gpus(node.free, job.gres)
            if chosen is None or not fits(i, chosen, small):
                continue
            cands.append((i, chosen))
            if len(cands) >= n:
                got = _assign(shares, cands, len(required), fits)
                if got is not None:
                    return got
            if tried >= SCAN_LIMIT:
                break
        if tried >= SCAN_LIMIT:
            break
    return _assign(shares, cands, len(required), fits) if len(cands) >= n else None


def _could_hold(job: PendingJob, shares: tuple[tuple[int, int], ...], mine: Sequence[int], nodes: list[_Node]) -> bool:
    """Whether the nodes a multi-node job could use (``mine``) are enough: as many as it takes, every
    node -w names among them."""
    names = {nodes[i].name for i in mine}
    return len(mine) >= len(shares) and (job.required_nodes or frozenset()) <= names


def _reserve_many(job: PendingJob, shares: tuple[tuple[int, int], ...], duration: float,
                  levels: Sequence[dict[int, None]],
                  nodes: list[_Node]) -> tuple[float, list[tuple[int, tuple[float, ...]]]] | None:
    """The earliest time T at which N distinct nodes each hold their share of a multi-node job from T
    for its duration, given every start and reservation so far, and what it holds on each (in share
    order), or None. Candidate times: each node's own earliest start for a share, in increasing order;
    at each, the nodes whose earliest start is by then are tested with ``fits_during``."""
    n = len(shares)
    required = job.required_nodes or frozenset()
    kinds = sorted(set(shares))
    base: dict[int, tuple[float, ...]] = {}
    first: list[tuple[float, int]] = []  # (the node's earliest start for any share, node)
    for level in levels:
        for i in level:
            node = nodes[i]
            if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                continue
            need = node.need(job)
            if need is None:
                continue
            base[i] = need
            if job.exclusive:
                e = node.earliest(need, duration)
            else:
                e = min(node.earliest((c, m, *need[2:]), duration) for c, m in kinds)
            if e < INF:
                first.append((e, i))
    first.sort()
    req_idx = [i for _, i in first if nodes[i].name in required]
    if len(req_idx) < len(required) or len(first) < n:
        return None
    start_at = max((e for e, i in first if nodes[i].name in required), default=-INF)
    times = sorted({e for e, _ in first if e >= start_at})
    for t in times:
        end = t + duration

        def fits(i: int, _chosen: tuple[int, ...], share: tuple[int, int], t: float = t, end: float = end) -> bool:
            need = base[i] if job.exclusive else (share[0], share[1], *base[i][2:])
            return nodes[i].fits_during(need, t, end)

        active = req_idx + [i for e, i in first if e <= t and nodes[i].name not in required]
        if len(active) < n:
            continue
        got = _assign(shares, [(i, ()) for i in active], len(req_idx), fits)
        if got is not None:
            return t, [(i, base[i] if job.exclusive else (c, m, *base[i][2:])) for i, _, c, m in got]
    return None
