"""The scheduling policy: a pure function from a snapshot of the cluster to placements.

No I/O and no clock: the controller's scheduler loop takes the snapshot (priorities already
computed, dependencies already evaluated), calls :func:`plan`, and commits each placement with a
compare-and-set. Tests drive :func:`plan` directly.

Jobs are taken in priority order (then job id). A job starts now where it fits and where starting
it delays no reservation; a job that cannot start gets a reservation at its earliest expected start
(computed from the time limits of running jobs and the reservations before it), up to
``max_reservations`` per pass (Slurm's bf_max_job_test). So lower-priority jobs backfill into holes
without delaying the expected start of any higher-priority job that holds a reservation. Each
node's future is a step function of what it has free (:mod:`pslurm.controller.nodemodel`). A
running job without a time limit is expected to end a year after it started (:func:`expected_end`, as
slurmctld's job_end_time_reset sets the end of an INFINITE limit, which its backfill's will-run test
takes as the job's end): so a job waiting for what such jobs hold has an expected start, as in Slurm
(squeue --start). A pending one without a limit is planned to hold what it takes for good (so it
never backfills in front of a reservation).

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

Multi-node jobs (``num_nodes`` > 1, or ``required_nodes`` given; :mod:`pslurm.controller.multinode_policy`)
start on all their nodes at once or not at all, and reserve all of them at one time.

The parts: the snapshot and the plan (:mod:`pslurm.controller.snapshot`), a node and its timeline
(:mod:`pslurm.controller.nodemodel`), shares of a GPU and multi-node placement (the two modules
above), and here the pass (:class:`_Pass`): the order, the reasons, what each user and array runs
(:class:`_Usage`, counted once for running jobs and starts alike), the starts, the main pass's
claims and the backfill pass's reservations.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Hashable, Sequence

from pslurm.controller.acct_policy import AcctUsage
from pslurm.controller.multinode_policy import enough_nodes, reserve_many, start_many
from pslurm.controller.nodemodel import (
    INF,
    Bounds,
    Inventory,
    NodeTimeline,
    Shape,
    Vector,
    could_use,
    earliest_start,
    gpu_ask,
    pick_gpus,
)
from pslurm.controller.sharing_policy import Sharing, hold_running
from pslurm.controller.snapshot import (
    Limits,
    NodeView,
    PendingJob,
    Placement,
    Plan,
    RunningJob,
    SharedGpu,
    Snapshot,
)
from pslurm.core.gres import GresRequest
from pslurm.core.sharing import GpuShare

__all__ = ["INF", "UNLIMITED", "Limits", "NodeView", "PendingJob", "Placement", "Plan", "RunningJob", "SharedGpu",
           "Snapshot", "deadline_time_limit", "expected_end", "misses_deadline", "pick_gpus", "plan"]

UNLIMITED = 365 * 86400.0  # how long a job without a time limit is planned to run
SCAN_LIMIT = 256  # nodes tried for one job's start now (bounds a pass when reservations block many)
_Shares = tuple[tuple[int, int], ...]  # a multi-node job's (cpus, mem_mb) on each of its nodes, in node order


def plan(snapshot: Snapshot, backfill: bool = True) -> Plan:
    """One pass, ``snapshot.now`` its clock: the backfill pass, or with ``backfill=False`` the main
    pass (no reservations, no estimates; a blocked job blocks the jobs after it that compete for its
    nodes). See the module's docstring."""
    return _Pass(snapshot, backfill).run()


class _Usage:
    """What runs at once, per user (jobs, GPUs, CPUs) and per array (tasks), against the limits: the
    running jobs of the snapshot and the starts of the pass, each counted by :meth:`add`."""

    __slots__ = ("limits", "limited", "array_running", "user_jobs", "user_gpus", "user_cpus")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.limited = bool(limits.max_jobs_per_user or limits.max_gpus_per_user or limits.max_cpus_per_user)
        self.array_running: dict[int, int] = defaultdict(int)
        self.user_jobs: dict[str, int] = defaultdict(int)
        self.user_gpus: dict[str, int] = defaultdict(int)
        self.user_cpus: dict[str, int] = defaultdict(int)

    def add(self, user: str, array_job_id: int | None, cpus: int, gpus: int) -> None:
        """One more job runs: ``user``'s, a task of ``array_job_id`` (None: no array's)."""
        if array_job_id is not None:
            self.array_running[array_job_id] += 1
        self.user_jobs[user] += 1
        self.user_gpus[user] += gpus
        self.user_cpus[user] += cpus

    def over(self, job: PendingJob, cpus: int, gpus: int) -> str | None:
        """Why ``job``, taking ``cpus`` and ``gpus`` in all, may not start now (its array's throttle,
        its user's limits, in Slurm's words), or None."""
        if job.array_job_id is not None and job.array_max_running:
            if self.array_running[job.array_job_id] >= job.array_max_running:
                return "JobArrayTaskLimit"
        limits = self.limits
        if limits.max_jobs_per_user and self.user_jobs[job.user] >= limits.max_jobs_per_user:
            return "QOSMaxJobsPerUserLimit"
        if limits.max_gpus_per_user and self.user_gpus[job.user] + gpus > limits.max_gpus_per_user:
            return "QOSMaxGRESPerUser"
        if limits.max_cpus_per_user and self.user_cpus[job.user] + cpus > limits.max_cpus_per_user:
            return "QOSMaxCpuPerUserLimit"
        return None


class _Pass:
    """One pass over a snapshot: the nodes as the pass's starts and reservations take them, the usage
    the limits count, the main pass's claims, and the plan so far. :meth:`run` makes the plan."""

    def __init__(self, snapshot: Snapshot, backfill: bool) -> None:
        self.snapshot = snapshot
        self.backfill = backfill
        self.now = now = snapshot.now
        shapes: dict[Inventory, Shape] = {}
        self.nodes = nodes = [NodeTimeline(v, now, shapes) for v in snapshot.nodes]
        self.by_index = {n.name: i for i, n in enumerate(nodes)}
        self.available = {n.name for n in nodes if n.view.available}
        self.usage = _Usage(snapshot.limits)
        # association and QOS limits: counted only where some limit is set (a pass without costs nothing)
        self.acct = AcctUsage(snapshot.acct) if snapshot.acct.active else None
        self._hold_running(snapshot.running)
        self.sharing: Sharing | None = None  # made when the first pending shared job comes
        self.taken: list[tuple[int, tuple[int, ...], float]] = []  # whole-GPU starts (node, GPUs, end): for sharing
        # per partition: available nodes bucketed by how many GPUs they have free now (not claimed)
        max_gpus = max((len(n.view.gpus or n.view.free_gpus) for n in nodes), default=0)
        self.buckets: dict[str, list[dict[int, None]]] = {}
        for i, n in enumerate(nodes):
            if not n.view.available:
                continue
            for p in n.parts:
                if p not in self.buckets:
                    self.buckets[p] = [{} for _ in range(max_gpus + 1)]
                self.buckets[p][len(n.free)][i] = None
        self.heaps: dict[tuple[str, int], Bounds] = {}  # see nodemodel.earliest_start
        self.plan = Plan([], {})
        self.waiting_in: set[str] = set()  # partitions where a job waits: the jobs after it wait for Priority
        self.reservations = 0
        # main pass: nodes claimed by a blocked job, and the (partition, -w/-x, GPU ask) whose nodes all are
        self.claimed: set[int] = set()
        self.claimed_for: set[tuple[str, frozenset[str] | None, Hashable]] = set()
        self.asks: dict[tuple[GresRequest, ...], Hashable] = {}  # a whole-GPU ask (gpu_ask) or a share

    def _hold_running(self, running: Sequence[RunningJob]) -> None:
        """What running jobs hold: their usage; their nodes' releases at their ends (backfill only:
        the future of each node matters only to reservations)."""
        now, backfill = self.now, self.backfill
        by_name = {n.name: n for n in self.nodes}
        shared_runs: list[RunningJob] = []
        for r in running:
            if r.share is not None:
                shared_runs.append(r)  # several may share a GPU: accounted together below
            else:
                node = by_name.get(r.node)
                if node is not None:
                    node.unknown += sum(1 for index in r.gpu_indices if index not in node.types)
                    if backfill:
                        end = now + UNLIMITED if r.end_time is None else r.end_time
                        node.add_event(end, node.vector(r.cpus, r.mem_mb, r.gpu_indices))
            self.usage.add(r.user, r.array_job_id, r.cpus, 0 if r.share is not None else len(r.gpu_indices))
        if self.acct is not None:
            seen: set[int] = set()
            for r in running:  # a multi-node job: one row per node, one job
                gpus = 0 if r.share is not None else len(r.gpu_indices)
                self.acct.add(r.assoc_id, r.qos, r.user, (r.cpus, r.mem_mb, 1, gpus), 0 if r.job_id in seen else 1)
                seen.add(r.job_id)
        if shared_runs:
            hold_running(by_name, shared_runs, now + UNLIMITED, backfill)

    def run(self) -> Plan:
        """Every pending job in priority order (then job id): started, or why it waits. A job that
        cannot start claims the nodes it could use (main pass) or reserves (backfill pass)."""
        reasons, backfill, claimed_for, asks = self.plan.reasons, self.backfill, self.claimed_for, self.asks
        waiting_in, max_reservations = self.waiting_in, self.snapshot.max_reservations
        key = None
        for job in sorted(self.snapshot.pending, key=lambda j: (-j.priority, j.job_id)):
            gpus = 0  # per node; a plain loop: it runs for every job of every pass, and sum(generator) costs 3x
            for g in job.gres:
                if g.name == "gpu":
                    gpus += g.count
            # a multi-node job (or one naming the nodes it must have): its shares, one per node, in node order
            shares = None
            if job.num_nodes != 1 or job.required_nodes is not None:
                shares = job.per_node or ((job.cpus, job.mem_mb),) * job.num_nodes
            reason = self._held_back(job, gpus, shares)
            if reason is not None:
                reasons[job.job_id] = reason
                continue
            if not backfill:
                # few distinct requests; a share's nodes are those that could hold it (its gres says which)
                ask = asks.get(job.gres) or asks.setdefault(job.gres, gpu_ask(job) if job.share is None else job.share)
                key = (job.partition, job.allowed_nodes, ask)
                if key in claimed_for:  # every node it could use is claimed: Slurm's failed partition, fast
                    reasons[job.job_id] = "Priority"
                    continue
            # without a limit a job is expected to outlast every running one: it needs what it takes for good
            duration = float(job.time_limit) if job.time_limit is not None else INF
            if job.share is not None:
                started = self._start_shared(job, job.share, duration)
            elif shares is not None:
                started = self._start_many(job, gpus, shares, duration)
            else:
                started = self._start_one(job, gpus, duration)
            if started or (key is not None and self._claim(job, shares, key)):
                continue
            # it waits, behind a job of its partition that waits (Priority) or for resources
            reasons[job.job_id] = "Priority" if job.partition in waiting_in else "Resources"
            waiting_in.add(job.partition)
            if key is None and self.reservations < max_reservations:
                self._reserve(job, gpus, shares, duration)
        return self.plan

    def _held_back(self, job: PendingJob, gpus: int, shares: _Shares | None) -> str | None:
        """Why ``job`` is not considered at all this pass, in Slurm's words (held, dependency, begin
        time, partition, a request no node can take, an array's throttle or a user's limit), or None."""
        if job.hold:
            return "JobHeldAdmin" if job.hold == "admin" else "JobHeldUser"
        if job.dependency == "waiting":
            return "Dependency"
        if job.dependency == "never":
            return "DependencyNeverSatisfied"
        snapshot = self.snapshot
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
        cpus = job.cpus
        if shares is not None:
            if job.share is not None or len(job.required_nodes or ()) > len(shares):
                return "BadConstraints"  # a share is on one GPU; -w names more nodes than it takes
            if job.required_nodes and not job.required_nodes <= self.available:
                return "ReqNodeNotAvail"
            cpus, gpus = sum(c for c, _ in shares), gpus * len(shares)
        if job.array_max_running or self.usage.limited:  # a throttle or a limit to check
            reason = self.usage.over(job, cpus, gpus)
            if reason is not None:
                return reason
        if self.acct is not None:
            nodes = len(shares) if shares is not None else 1
            reason = self.acct.over(job.assoc_id, job.qos, job.user, (cpus, job.mem_mb * nodes, nodes, gpus),
                                    job.time_limit)
            if reason is not None:
                return reason
        if job.allowed_nodes is not None and not job.allowed_nodes & self.available:
            return "ReqNodeNotAvail"  # every node it may run on is down or drained
        return None

    # -- starts ------------------------------------------------------------------------------

    def _start_one(self, job: PendingJob, gpus: int, duration: float) -> bool:
        """Start a single-node job now on the first node that fits and delays no reservation, among the
        nodes of its partition not claimed, those with the fewest free GPUs first (up to SCAN_LIMIT
        tried); False where none does."""
        levels = self.buckets.get(job.partition, [])
        nodes, now, allowed = self.nodes, self.now, job.allowed_nodes
        tried = 0
        for level in range(gpus, len(levels)):
            for i in levels[level]:
                node = nodes[i]
                if allowed is not None and node.name not in allowed:
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
                cpus, mem = (node.cpus, node.mem) if job.exclusive else (job.cpus, job.mem_mb)
                self._take(i, cpus, mem, chosen, now + duration)
                self._started(job, Placement(job.job_id, node.name, chosen), cpus,
                              len(chosen) if job.exclusive else gpus)
                return True
            if tried >= SCAN_LIMIT:
                break
        return False

    def _start_many(self, job: PendingJob, gpus: int, shares: _Shares, duration: float) -> bool:
        """Start a multi-node job now on all its nodes at once, each with its share; False where it cannot."""
        nodes = self.nodes
        group = start_many(job, shares, duration, nodes, self.buckets.get(job.partition, []), gpus, self.now,
                           self.by_index, SCAN_LIMIT)
        if group is None:
            return False
        if job.exclusive:  # each node whole
            group = [(i, tuple(g for g, _ in nodes[i].free), nodes[i].cpus, nodes[i].mem) for i, _, _, _ in group]
        for i, on_node, c, m in group:
            self._take(i, c, m, on_node, self.now + duration)
        (first, chosen, _, _), more = group[0], group[1:]
        self._started(job, Placement(job.job_id, nodes[first].name, chosen,
                                     tuple((nodes[i].name, on) for i, on, _, _ in more)),
                      sum(c for c, _ in shares), gpus * len(shares))
        return True

    def _start_shared(self, job: PendingJob, share: GpuShare, duration: float) -> bool:
        """Start a job asking a share of one GPU where :class:`Sharing` finds it a GPU now."""
        if self.sharing is None:  # from the nodes as they are now, the pass's whole-GPU starts included
            self.sharing = Sharing(self.nodes, self.snapshot.running, self.now, self.now + UNLIMITED, SCAN_LIMIT,
                                   self.taken)
        gpu = self.sharing.find(job, share, duration, self.claimed)
        if gpu is None:
            return False
        node = self.nodes[gpu.node]
        old = len(node.free)
        self.sharing.start(job, share, gpu, duration, self.backfill)
        self._rebucket(gpu.node, old)  # where it took a free GPU
        self._started(job, Placement(job.job_id, node.name, (gpu.index,)), job.cpus, 0)
        return True

    def _take(self, i: int, cpus: int, mem: int, gpus: tuple[int, ...], end: float) -> None:
        """A job starting now takes ``cpus``, ``mem`` and ``gpus`` of node ``i`` until ``end``: the node's
        free resources, its future (backfill) and its bucket by free GPUs follow."""
        node = self.nodes[i]
        old = len(node.free)
        release = node.vector(cpus, mem, gpus)
        node.cpus -= cpus
        node.mem -= mem
        node.free = [g for g in node.free if g[0] not in gpus]
        if self.backfill:
            node.add_event(end, release)
        self._rebucket(i, old)
        self.taken.append((i, gpus, end))

    def _rebucket(self, i: int, old: int) -> None:
        """Node ``i`` had ``old`` GPUs free: in each of its partitions, move it to its bucket for now."""
        node = self.nodes[i]
        if len(node.free) == old:
            return
        buckets = self.buckets
        for p in node.parts:
            if p in buckets:
                del buckets[p][old][i]
                buckets[p][len(node.free)][i] = None

    def _started(self, job: PendingJob, placement: Placement, cpus: int, gpus: int) -> None:
        """``job`` starts now as ``placement``, taking ``cpus`` and ``gpus`` in all of what the limits count."""
        self.plan.placements.append(placement)
        self.usage.add(job.user, job.array_job_id, cpus, gpus)
        if self.acct is not None:
            nodes = 1 + len(placement.more)
            self.acct.add(job.assoc_id, job.qos, job.user, (cpus, job.mem_mb * nodes, nodes, gpus))

    # -- jobs that cannot start --------------------------------------------------------------

    def _claim(self, job: PendingJob, shares: _Shares | None, key: tuple[str, frozenset[str] | None, Hashable]
               ) -> bool:
        """The main pass: ``job`` claims the nodes it could use, so that no lower-priority job starts there
        (no reservation says when it could start: one there might delay it), and waits for Priority
        (behind a claim) or Resources. False, claiming none, where too few nodes could ever take a
        multi-node job (some are down)."""
        nodes, claimed = self.nodes, self.claimed
        if job.share is None:
            ask = gpu_ask(job)
            mine = [i for i, n in enumerate(nodes) if could_use(n, job, ask)]
            if shares is not None and not enough_nodes(job, shares, mine, nodes):
                return False
        else:
            assert self.sharing is not None
            mine = self.sharing.could_use(job, job.share)
        behind = job.partition in self.waiting_in or any(i in claimed for i in mine)
        self.plan.reasons[job.job_id] = "Priority" if behind else "Resources"
        self.waiting_in.add(job.partition)
        buckets = self.buckets
        for i in mine:
            if i not in claimed:
                claimed.add(i)
                for p in nodes[i].parts:
                    if p in buckets:
                        buckets[p][len(nodes[i].free)].pop(i, None)
        self.claimed_for.add(key)
        return True

    def _reserve(self, job: PendingJob, gpus: int, shares: _Shares | None, duration: float) -> None:
        """The backfill pass (up to ``max_reservations`` a pass): ``job`` holds what it asks on the nodes
        and from the time it can start earliest, if it ever can."""
        nodes = self.nodes
        held: list[tuple[int, Vector]]
        if shares is not None:
            many = reserve_many(job, shares, duration, self.buckets.get(job.partition, []), nodes)
            if many is None:
                return
            start, held = many
        else:
            if job.share is None:
                found = _earliest(job, gpus, duration, self._heap(job.partition, gpus), nodes)
            else:  # as if it held one whole GPU, on a node with a GPU that could hold its share
                assert self.sharing is not None
                found = self.sharing.reserve(job, job.share, duration, self._heap(job.partition, 1))
            if found is None:
                return
            start, i, need = found
            held = [(i, need)]
        for i, need in held:
            node = nodes[i]
            node.add_event(start, tuple(-x for x in need))
            node.add_event(start + duration, need)
            node.reserved = True
        self.plan.estimates[job.job_id] = start
        self.plan.reserved_on[job.job_id] = nodes[held[0][0]].name
        if shares is not None:
            self.plan.reserved_more[job.job_id] = tuple(nodes[i].name for i, _ in held[1:])
        self.reservations += 1

    def _heap(self, part: str, gpus: int) -> Bounds:
        """The (lower bound, node) heap of partition ``part`` for ``gpus`` GPUs (see
        :func:`~pslurm.controller.nodemodel.earliest_start`), made when first asked and kept for the pass."""
        key = (part, gpus)
        heap = self.heaps.get(key)
        if heap is None:
            heap = []
            nodes = self.nodes
            for level in self.buckets.get(part, ()):
                for i in level:
                    bound = nodes[i].first_time_with(gpus)
                    if bound < INF:
                        heap.append((bound, i))
            heapq.heapify(heap)
            self.heaps[key] = heap
        return heap


DEADLINE_MIN_TIME = 60  # a job without a time limit needs at least this long before its deadline (Slurm's time_min)


def expected_end(start_time: float, time_limit: int | None) -> float:
    """When a job started at ``start_time`` is expected to end: at its time limit, or a year after its
    start without one (slurmctld's job_end_time_reset: YEAR_SECONDS for an INFINITE limit)."""
    return start_time + (UNLIMITED if time_limit is None else time_limit)


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


def _earliest(job: PendingJob, gpus: int, duration: float, heap: Bounds,
              nodes: list[NodeTimeline]) -> tuple[float, int, Vector] | None:
    """The node and time where ``job`` can start earliest, given every reservation so far (``heap``:
    its partition's bounds for ``gpus`` GPUs, :func:`~pslurm.controller.nodemodel.earliest_start`)."""

    def start_on(i: int, _bound: float, stop: float) -> tuple[float, Vector] | None:
        node = nodes[i]
        if job.partition not in node.parts or (job.allowed_nodes is not None and node.name not in job.allowed_nodes):
            return None
        need = node.need(job)
        return None if need is None else (node.earliest(need, duration, stop=stop), need)

    return earliest_start(heap, nodes, gpus, start_on)
