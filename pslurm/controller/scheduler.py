"""The scheduler: snapshot, priorities, dependencies, the pure plan, start operations, launches.

It owns the doorbell (:meth:`Scheduler.reschedule`) that the job service and the node monitor ring
when something changed, and the loop that runs a pass on every ring and on a timer.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pslurm.controller import priority as prio
from pslurm.controller.acct_policy import AcctLimits, LimitsCache, config_enforcement
from pslurm.controller.agents import AgentUnreachable
from pslurm.controller.allocations import NodeUsage, NodeViews, usage_by_node
from pslurm.controller.policy import (
    Limits,
    PendingJob,
    Placement,
    RunningJob,
    Snapshot,
    deadline_time_limit,
    expected_end,
    misses_deadline,
    plan,
)
from pslurm.controller.ports import Agents, NodeHealth
from pslurm.controller.store import Allocation, LiveJobs, NodeShare, QueuedJob, Store
from pslurm.core.assoc import Associations, config_associations
from pslurm.core.config import ClusterConfig, scheduler_config
from pslurm.core.dependency import DepStatus, Ref, RefJob, evaluate, parse_dependency
from pslurm.core.features import parse_constraint, satisfies
from pslurm.core.hostlists import collect, expand
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.layout import node_layout
from pslurm.core.node import NodeRecord
from pslurm.core.sharing import share_of
from pslurm.core.states import InvalidTransition, JobReason, JobState
from pslurm.core.timefmt import format_timestamp

log = logging.getLogger("psctld")

MIN_PASS_GAP = 0.01  # seconds between scheduler passes at the most busy
IDLE_REPLAN = 10  # with nothing new, re-plan after at most this many passes' worth of time
WAITING = ("Resources", "Priority")  # the reasons a main pass leaves to the backfill pass


@dataclass(frozen=True)
class WillRun:
    """Where and when a job would start (Slurm's will_run_response_msg)."""

    job_id: int  # the id it would likely get (not reserved)
    start_time: float
    node_list: str
    proc_cnt: int  # its CPUs
    part_name: str


class Scheduler:
    """Owns the protocol: snapshot -> plan -> start (compare-and-set) -> launch."""

    def __init__(self, config: ClusterConfig, store: Store, agents: Agents, nodes: NodeHealth,
                 partitions_of: Callable[[str], frozenset[str]], clock: Callable[[], float] = time.time,
                 after_start: Callable[[list[int]], None] | None = None) -> None:
        self.config = config
        self.store = store
        self.agents = agents
        self.nodes = nodes
        self.partitions_of = partitions_of
        self.clock = clock
        self.sched = scheduler_config(config)
        fixed = config_associations(config)
        # the accounts' tree for fair share: the association service's (controller/assocs.py) once assembled
        self.associations: Callable[[], Associations] = lambda: fixed
        self._enforce_limits = "limits" in config_enforcement(config.extra)  # AccountingStorageEnforce
        self._acct_limits = LimitsCache()
        # a fault point for tests: called between the start commit and the launches
        self._after_start = after_start
        # fair share: decayed usage of finished runs per (account, user), as of _usage_at
        self._usage: dict[tuple[str, str], float] = defaultdict(float)
        self._usage_at: float | None = None
        self._usage_mark = 0  # the last job event whose end is counted
        self._allowed_cache: dict[tuple[str, ...], frozenset[str]] = {}
        # the pending queue and the allocations in memory, kept current from the store's change notices
        self._live = LiveJobs(store)
        self._views = NodeViews()  # the nodes as the policy sees them, remade only where something changed
        # the pending jobs as the policy saw them in the last pass: (queue entry, priority, dependency, view)
        self._pending_made: dict[int, tuple[QueuedJob, int, DepStatus, PendingJob]] = {}
        self._wake = threading.Event()
        self._stopping = threading.Event()
        # after each pass of the loop: (backfill?, its seconds, jobs it started); observe.py's metrics
        self.on_pass: Callable[[bool, float, int], None] = lambda backfill, seconds, started: None

    def reschedule(self) -> None:
        """Something changed (a submit, an end, a node): run a pass soon."""
        self._wake.set()

    def run_loop(self, interval: float = 1.0, min_gap: float = MIN_PASS_GAP) -> None:
        """Schedule on every change, and backfill on a timer, until :meth:`stop`.

        Slurm's split: a ring runs a main pass (priority order, no reservations: cheap), and every
        ``bf_interval`` seconds (SchedulerParameters; pslurm's default 1) a backfill pass computes the
        reservations, starts lower-priority jobs behind them, and writes reasons and expected starts.
        Passes are at least ``min_gap`` apart, and as far again as the last pass took: a burst of
        submits or job ends is taken in one pass (Slurm's batch_sched_delay), and a long queue cannot
        keep the controller from answering RPCs. A backfill pass waits at least twice its own cost
        after the last one; with nothing new since it (Slurm's backfill skips such cycles too), the
        next re-plans (ages, start estimates) after ``interval`` seconds or IDLE_REPLAN passes' worth
        of time, whichever is longer: on a 100,000-job queue a pass costs a second, and an idle
        controller should not spend a third of a core re-planning what did not change.
        """
        bf_interval = self.sched.bf_interval  # -1: no backfill passes (the timer runs main passes)
        next_pass = 0.0
        last_backfill, bf_cost = -math.inf, 0.0
        last_pass, cost = -math.inf, 0.0
        changed = True  # something new since the last backfill pass
        while not self._stopping.is_set():
            if bf_interval < 0:
                due = last_pass + max(interval, IDLE_REPLAN * cost)
            elif changed:
                due = last_backfill + max(bf_interval, 2 * bf_cost)
            else:
                due = last_backfill + max(bf_interval, interval, IDLE_REPLAN * bf_cost)
            woken = self._wake.wait(max(0.0, min(interval, due - time.monotonic())))
            self._stopping.wait(max(0.0, next_pass - time.monotonic()))
            self._wake.clear()
            started = time.monotonic()
            changed = changed or woken
            timer = started >= due
            if not (woken or timer):
                continue
            backfill = timer and bf_interval >= 0
            begun = 0
            try:
                begun = self.schedule(backfill=backfill)
            except Exception:  # the loop must outlive a bad pass; the next one retries
                log.exception("scheduler pass failed")
            last_pass, cost = started, time.monotonic() - started
            self.on_pass(backfill, cost, begun)
            if backfill:
                last_backfill, bf_cost, changed = started, cost, False
            next_pass = started + max(min_gap, 2 * cost)

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self, backfill: bool = True) -> int:
        """One pass: snapshot, plan, commit each placement, launch. Returns jobs started.

        ``backfill=False``: a main pass (see :func:`plan`); the expected starts and the Resources /
        Priority reasons of the last backfill pass stay as they are."""
        self._live.refresh()
        pending = self._live.queue()
        if not pending:
            return 0
        now = self.clock()
        if any(q.deadline is not None for q in pending):
            pending = self._end_missed_deadlines(pending, now)
            if not pending:
                return 0
        nodes = self.store.get_nodes()
        allocations = self._live.allocations()
        priorities = self._priority_of(pending, allocations, now)
        deps = self._dependencies(pending)
        for q in pending:  # --kill-on-invalid-dep=yes: a dependency that can never be met cancels the job
            if q.kill_on_invalid_dep and deps.get(q.job_id) is DepStatus.NEVER:
                try:
                    self.store.cancel(q.job_id, now, "dependency never satisfied",
                                      reason=JobReason.DEPENDENCY_NEVER_SATISFIED)
                except InvalidTransition:
                    pass
                deps[q.job_id] = DepStatus.WAITING  # not considered below
        decided = plan(self._snapshot(pending, priorities, deps, nodes, allocations, now), backfill=backfill)
        targets = {n.name: n.target for n in nodes}
        # one transaction for the pass's starts (none when nothing fits: a full cluster's passes write nothing)
        started = self._start(decided.placements, pending) if decided.placements else []
        if self._after_start is not None and started:
            self._after_start(started)
        for job in self.store.jobs_with_ids(started):  # these jobs only (an array's id is its first task here)
            if job.state is JobState.RUNNING and job.node:
                self._launch(job, targets)
        placed = set(started)
        changes = {}
        for q in pending:
            if q.job_id in placed:
                continue
            reason = decided.reasons.get(q.job_id, q.reason)
            if backfill:
                estimate = decided.estimates.get(q.job_id)
                if estimate is not None:
                    estimate = float(round(estimate))
            else:  # the backfill pass's, until the next one: no write per main pass for what it cannot know
                estimate = q.start_estimate
                if reason in WAITING and q.reason in WAITING:
                    reason = q.reason
            # eligible: may start but for resources (not held, dependencies met); age counts from then.
            # A begin time still to come is its EligibleTime (as Slurm shows it, held or not)
            eligible = not q.hold and deps.get(q.job_id, DepStatus.SATISFIED) is DepStatus.SATISFIED
            if q.begin_time is not None and q.begin_time > now:
                since: float | None = q.begin_time
            else:
                since = (q.eligible_time or now) if eligible else None
            value = (reason, priorities[q.job_id], estimate, since)
            if value != (q.reason, q.priority, q.start_estimate, q.eligible_time):
                changes[q.job_id] = value
        with self._live.own_notes():  # waiters hear of these (and of the starts) from the store
            self.store.update_pending(changes)
        self._live.note(changes)
        return len(started)

    def _priority_of(self, pending: Sequence[QueuedJob], allocations: Sequence[Allocation], now: float
                     ) -> dict[int, int]:
        """Each pending job's priority (an operator's Priority= wins)."""
        if prio.weighted(self.sched):
            return {q.job_id: p for q, _, p in self._priorities(pending, allocations, now)}
        # every weight 0 (FIFO, the default): no factor to compute, the sum is 0 less nice
        return {q.job_id: q.admin_priority if q.admin_priority is not None else max(0, -q.nice) for q in pending}

    def _pending_view(self, q: QueuedJob, priority: int, dep: DepStatus, now: float) -> PendingJob:
        """A pending job as the policy sees it: the last pass's while its queue entry (the same object
        until the job changes), priority and dependency status are the same."""
        made = self._pending_made.get(q.job_id)
        if made is not None and made[0] is q and made[1] == priority and made[2] is dep:
            return made[3]
        return PendingJob(q.job_id, q.partition, q.cpus, q.mem_mb, q.gres, priority,
                          q.time_limit if q.deadline is None else deadline_time_limit(q.deadline, q.time_limit, now),
                          q.user, q.array_job_id, q.array_max_running, dep.value, q.hold,
                          self._allowed_nodes(q.req_nodes, q.exc_nodes, q.num_nodes, q.constraint),
                          share_of(q.gres), q.begin_time, q.num_nodes, tuple((c, q.mem_mb) for c in q.node_cpus),
                          self._required_nodes(q.req_nodes, q.num_nodes), q.exclusive, q.assoc_id, q.qos)

    def _snapshot(self, pending: Sequence[QueuedJob], priorities: dict[int, int], deps: dict[int, DepStatus],
                  nodes: Sequence[NodeRecord], allocations: Sequence[Allocation], now: float,
                  keep: bool = True) -> Snapshot:
        """What :func:`plan` decides on: the pending jobs (a job with a deadline and no time limit is
        planned to run until its deadline), the nodes with what is free on them, the running jobs.
        ``keep``: remember the pending jobs' views for the next pass (the scheduler's passes, not a
        question such as will_run's)."""
        usage = usage_by_node(allocations)
        sched = self.sched
        parts = self.config.partitions.values()
        made: dict[int, tuple[QueuedJob, int, DepStatus, PendingJob]] = {}
        views = []
        for q in pending:
            view = self._pending_view(q, priorities[q.job_id], deps.get(q.job_id, DepStatus.SATISFIED), now)
            views.append(view)
            if q.deadline is None:  # a deadline's limit is the time left to it: made again each pass
                made[q.job_id] = (q, priorities[q.job_id], deps.get(q.job_id, DepStatus.SATISFIED), view)
        if keep:
            self._pending_made = made
        return Snapshot(
            pending=views,
            nodes=[self._views.view(n, usage.get(n.name, NodeUsage()), self.partitions_of(n.name),
                                    self.nodes.gpu_measured(n.name)) for n in nodes],
            now=now,
            running=[RunningJob(a.job_id, a.node, a.cpus, a.mem_mb, a.gpu_indices,
                                None if a.start_time is None else expected_end(a.start_time, a.time_limit),
                                a.user, a.array_job_id, share_of(a.gres), a.assoc_id, a.qos) for a in allocations],
            partition_state={p.name: p.state.upper() for p in parts},
            partition_max_time={p.name: p.max_time for p in parts},
            limits=Limits(sched.max_jobs_per_user, sched.max_gpus_per_user, sched.max_cpus_per_user),
            max_reservations=sched.bf_max_job_test,
            acct=self._acct_limits.get(self.associations()) if self._enforce_limits else AcctLimits(),
        )

    def will_run(self, spec: JobSpec, partition: str, time_limit: int | None, job_id: int) -> WillRun:
        """psbatch --test-only (Slurm's will_run): when and where a job of ``spec`` (accepted into
        ``partition`` with ``time_limit``, by :meth:`JobService.check_submission`) would start if
        submitted now, as a backfill pass plans it behind the pending jobs of higher priority;
        nothing is stored. As Slurm's, it ignores the job's hold and dependency, and it starts no
        earlier than its --begin (a future begin time: the plan's start for it now, or the begin time
        if later, an estimate). ``job_id``: the name it is answered under. SpecError with the reason
        (``PartitionDown``, ...) when the plan gives it neither a start nor a reservation."""
        now = self.clock()
        pending = self.store.queue()  # the API's thread: the store's, not the loop's copy in memory
        allocations = self.store.allocations()
        probe = QueuedJob(job_id, partition, spec.cpus, spec.mem_mb, spec.gres, JobReason.NONE.value, spec.user,
                          spec.name, spec.account, spec.nice, now, time_limit, req_nodes=spec.nodelist,
                          exc_nodes=spec.exclude, eligible_time=now, deadline=spec.deadline, num_nodes=spec.num_nodes,
                          node_cpus=tuple(n.cpus for n in node_layout(spec)) if spec.num_nodes > 1 else (),
                          constraint=spec.constraint, exclusive=spec.exclusive)
        queue = [*pending, probe]
        priorities = self._priority_of(queue, allocations, now)
        snapshot = self._snapshot(queue, priorities, self._dependencies(pending), self.store.get_nodes(),
                                  allocations, now, keep=False)
        decided = plan(dataclasses.replace(snapshot, max_reservations=len(queue)), backfill=True)
        placed = next((p for p in decided.placements if p.job_id == job_id), None)
        if placed is not None:
            start, node = now, collect((placed.node, *(n for n, _ in placed.more))) if placed.more else placed.node
        elif job_id in decided.estimates:
            start, node = decided.estimates[job_id], decided.reserved_on[job_id]
        else:
            raise SpecError(f"Job would not start: {decided.reasons.get(job_id, JobReason.RESOURCES.value)}")
        if spec.begin_time is not None:
            start = max(start, spec.begin_time)
        return WillRun(job_id, start, node, spec.cpus, partition)

    def _end_missed_deadlines(self, pending: list[QueuedJob], now: float) -> list[QueuedJob]:
        """--deadline: end DEADLINE each pending job that can no longer end before its deadline
        (:func:`misses_deadline`); the others, to be scheduled."""
        kept = []
        for q in pending:
            if q.deadline is None or not misses_deadline(q.deadline, q.time_limit, q.begin_time, now):
                kept.append(q)
                continue
            try:
                self.store.deadline(q.job_id, now, f"cannot end before its deadline {format_timestamp(q.deadline)}")
            except InvalidTransition:
                pass  # it changed meanwhile (cancelled, held...): the next pass sees it as it is
        return kept

    def _start(self, placements: Sequence[Placement], pending: Sequence[QueuedJob]) -> list[int]:
        """``start`` the plan's placements in one transaction; a job with a deadline and no time limit
        runs until its deadline (:func:`deadline_time_limit`)."""
        now = self.clock()
        limits: dict[int, int] = {}
        ends = {q.job_id: q.deadline for q in pending if q.deadline is not None and q.time_limit is None}
        for p in placements:
            end = ends.get(p.job_id)
            if end is not None:
                limits[p.job_id] = max(1, int(end - now))  # deadline_time_limit without a limit of its own
        shares = {}
        queued = {q.job_id: q for q in pending} if any(p.more for p in placements) else {}
        exclusive = {q.job_id for q in pending if q.exclusive}
        for p in placements:
            if p.job_id in exclusive:  # its nodes whole: every CPU, all memory, the GPUs the plan gave it (all)
                whole = [(p.node, p.gpu_indices), *p.more]
                shares[p.job_id] = [NodeShare(node, tuple(gpus), self.config.nodes[node].cpus,
                                              self.config.nodes[node].real_memory) for node, gpus in whole]
            elif p.more:
                q = queued[p.job_id]
                cpus = q.node_cpus or (q.cpus,) * q.num_nodes
                nodes = ((p.node, p.gpu_indices), *p.more)
                shares[p.job_id] = [NodeShare(node, tuple(gpus), cpus[i] if i < len(cpus) else cpus[-1], q.mem_mb)
                                    for i, (node, gpus) in enumerate(nodes)]
        return self.store.start_jobs([(p.job_id, p.node, p.gpu_indices) for p in placements], now,
                                     time_limits=limits, shares=shares)

    def _launch(self, job: JobRecord, targets: dict[str, str]) -> None:
        """Launch a started job on every node of its allocation: the first runs it (the batch script,
        psrun's command, or psalloc's hold), the others hold the allocation for its steps. Each node
        is sent its own GPU indices and its position (node_index)."""
        nodes = job.all_nodes
        if len(nodes) <= 1:
            self.agents.launch_async(targets[job.node or ""], job, self._launch_failed)
            return
        for index, node in enumerate(nodes):
            launch = dataclasses.replace(job, gpu_indices=job.node_gpus[index] if index < len(job.node_gpus) else ())
            self.agents.launch_async(targets[node], launch, self._launch_failed_on(node), node_index=index)

    def _launch_failed_on(self, node: str) -> Callable[[JobRecord, Exception], None]:
        return lambda job, error: self._launch_failed(job, error, node)

    def _allowed_nodes(self, required: str, excluded: str, num_nodes: int = 1,
                       constraint: str = "") -> frozenset[str] | None:
        """The nodes a job may run on by its -w, -x and --constraint (None: any), from a cache of the
        expressions. A multi-node job's -w names nodes it must have among others (``_required_nodes``):
        only -x and the constraint limit it."""
        if num_nodes > 1:
            required = ""
        if not required and not excluded and not constraint:
            return None
        key = (required, excluded) if not constraint else (required, excluded, constraint)
        found = self._allowed_cache.get(key)
        if found is None:
            names = set(expand(required)) if required else set(self.config.nodes)
            names -= set(expand(excluded) if excluded else ())
            if constraint:
                try:
                    wanted = parse_constraint(constraint)
                except SpecError:  # admission refuses it; a row from elsewhere runs nowhere
                    wanted = (frozenset({"\0"}),)
                nodes = self.config.nodes
                names = {n for n in names if n in nodes and satisfies(wanted, nodes[n].features)}
            found = self._allowed_cache[key] = frozenset(names)
        return found

    def _required_nodes(self, required: str, num_nodes: int) -> frozenset[str] | None:
        """A multi-node job's -w: the nodes that must all be among its nodes (None: none named)."""
        if num_nodes <= 1 or not required:
            return None
        key = (required, "+")
        found = self._allowed_cache.get(key)
        if found is None:
            found = self._allowed_cache[key] = frozenset(expand(required))
        return found

    # -- priority and fair share ----------------------------------------------------------

    def _priorities(self, pending: Sequence[QueuedJob], allocations: Sequence[Allocation],
                    now: float) -> list[tuple[QueuedJob, prio.Factors, int]]:
        """Each pending job with its factors and priority (an operator's Priority= wins)."""
        sched = self.sched
        usage = self._usage_now(allocations, now)
        shares = prio.user_factors(prio.share_rows(
            usage, {(q.account or prio.DEFAULT_ACCOUNT, q.user) for q in pending}, self.associations()))
        cluster = sum(prio.billing_rate(sched.billing_weights, n.cpus, n.real_memory, n.gpus())
                      for n in self.config.nodes.values())
        top = max((p.priority_job_factor for p in self.config.partitions.values()), default=1) or 1
        ctx = prio.PriorityContext(sched, now, shares, cluster,
                                   {p.name: p.priority_job_factor / top for p in self.config.partitions.values()})
        out = []
        for q in pending:
            gpus = sum(g.count for g in q.gres if g.name == "gpu")
            f = prio.factors(ctx, eligible_time=q.eligible_time, account=q.account, user=q.user,
                             partition=q.partition, cpus=q.cpus, mem_mb=q.mem_mb, gpus=gpus, nice=q.nice)
            out.append((q, f, q.admin_priority if q.admin_priority is not None else prio.priority(f, sched)))
        return out

    def _usage_now(self, allocations: Sequence[Allocation], now: float) -> dict[tuple[str, str], float]:
        """Decayed billable usage per (account, user): finished runs, and running jobs as they go."""
        sched = self.sched
        usage = dict(self._finished_usage(now))
        for a in allocations:
            if a.start_time is not None:
                rate = prio.billing_rate(sched.billing_weights, a.cpus, a.mem_mb, len(a.gpu_indices))
                key = (a.account or prio.DEFAULT_ACCOUNT, a.user)
                usage[key] = usage.get(key, 0.0) + prio.run_usage(rate, a.start_time, now, now,
                                                                  sched.decay_half_life)
        return usage

    def fair_share(self) -> list[prio.ShareRow]:
        """sshare (``pslurm accounts``): every account and user of the fair-share tree with their
        shares, usage and factor, as the next pass computes them."""
        usage = self._usage_now(self.store.allocations(), self.clock())
        return prio.share_rows(usage, (), self.associations())

    def priorities(self, job_ids: Sequence[int] = (), users: Sequence[str] = ()
                   ) -> list[tuple[QueuedJob, prio.Factors, int]]:
        """psprio: the pending jobs' factors as the scheduler computes them now."""
        pending = self.store.queue()
        if job_ids:
            wanted = set(job_ids)
            pending = [q for q in pending if q.job_id in wanted or q.array_job_id in wanted]
        if users:
            pending = [q for q in pending if q.user in users]
        return self._priorities(pending, self.store.allocations(), self.clock())

    def _finished_usage(self, now: float) -> dict[tuple[str, str], float]:
        """Decayed billable usage of finished runs per (account, user), updated incrementally."""
        half_life = self.sched.decay_half_life
        if self._usage_at is not None:
            factor = prio.decay(1.0, now - self._usage_at, half_life)
            for key in self._usage:
                self._usage[key] *= factor
        self._usage_at = now
        since = now - 20 * half_life if half_life > 0 else 0.0  # older runs have decayed to nothing
        # only the ends recorded since the last pass: a pass costs the same with a long history
        ended, self._usage_mark = self.store.finished_usage(since, self._usage_mark)
        for r in ended:
            rate = prio.billing_rate(self.sched.billing_weights, r.cpus, r.mem_mb, r.gpus)
            self._usage[(r.account or prio.DEFAULT_ACCOUNT, r.user)] += prio.run_usage(
                rate, r.start_time, r.end_time, now, half_life)
        return self._usage

    # -- dependencies ---------------------------------------------------------------------

    def _dependencies(self, pending: Sequence[QueuedJob]) -> dict[int, DepStatus]:
        """Each pending job's dependency status (jobs without one are left out: satisfied)."""
        parsed = {}
        for q in pending:
            if q.dependency:
                try:
                    parsed[q.job_id] = parse_dependency(q.dependency)
                except SpecError:
                    parsed[q.job_id] = None  # accepted at submit; unreadable now: treat as never
        if not parsed:
            return {}
        refs = {r for d in parsed.values() if d is not None for r in d.refs}
        rows = self.store.refs(r.job_id for r in refs)
        plain = {r.job_id: r for r in rows}
        arrays: dict[int, list[RefJob]] = defaultdict(list)
        for r in rows:
            if r.array_job_id is not None:
                arrays[r.array_job_id].append(RefJob(r.job_id, r.state, r.started, r.array_task_id))
        table: dict[Ref, list[RefJob]] = {}
        for ref in refs:
            if ref.task_id is not None:
                table[ref] = [j for j in arrays.get(ref.job_id, []) if j.array_task_id == ref.task_id]
            elif ref.job_id in arrays:
                table[ref] = arrays[ref.job_id]
            elif ref.job_id in plain:
                r = plain[ref.job_id]
                table[ref] = [RefJob(r.job_id, r.state, r.started, r.array_task_id)]
        singles = {q.job_id: q for q in pending if q.job_id in parsed and parsed[q.job_id] is not None
                   and any(t.kind == "singleton" for t in parsed[q.job_id].terms)}  # type: ignore[union-attr]
        others = self.store.active_named({q.name for q in singles.values()}) if singles else []
        out = {}
        for q in pending:
            if q.job_id not in parsed:
                continue
            dep = parsed[q.job_id]
            if dep is None:
                out[q.job_id] = DepStatus.NEVER
                continue
            clear = True
            if q.job_id in singles:
                clear = not any(o.user == q.user and o.name == q.name and o.job_id != q.job_id and
                                (o.state is not JobState.PENDING or o.job_id < q.job_id) for o in others)
            out[q.job_id] = evaluate(dep, table, own_task_id=q.array_task_id, singleton_clear=clear)
        return out

    def _launch_failed(self, job: JobRecord, error: Exception, node: str | None = None) -> None:
        """The launch did not reach the agent: the node is taken as unreachable (its jobs lost,
        requeued where they may be). The agent refused it: the job ends FAILED, JobLaunchFailure
        (a multi-node job's too, whichever node refused; the others' runs are then ended)."""
        node = node or job.node or ""
        log.warning("launch of job %d on %s failed: %s", job.job_id, node, error)
        if isinstance(error, AgentUnreachable):
            self.nodes.unreachable(node, f"launch of job {job.job_id} failed: {error}")
            return
        try:
            why = str(error) if node == job.node else f"on {node}: {error}"
            self.store.launch_failed(job.job_id, job.node or "", job.restarts, why, self.clock())
        except InvalidTransition as exc:
            log.info("job %d: launch failure not recorded: %s", job.job_id, exc)
        self.reschedule()
