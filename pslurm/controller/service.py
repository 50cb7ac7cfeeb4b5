"""The controller's behaviour, independent of gRPC: submit, cancel, node life, job ends, scheduling.

The servicer translates RPCs to these methods; the scheduler loop calls :meth:`Controller.schedule`.
Every state change goes through the store's compare-and-set and wakes whoever waits on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from pslurm.controller import priority as prio
from pslurm.controller.admission import admit
from pslurm.controller.agents import AgentClient, AgentUnreachable
from pslurm.controller.policy import UNLIMITED, Limits, NodeView, PendingJob, RunningJob, Snapshot, plan
from pslurm.controller.store import Allocation, QueuedJob, Store
from pslurm.core.arrays import parse_array, parse_task_selector
from pslurm.core.config import ClusterConfig, scheduler_config
from pslurm.core.dependency import DepStatus, Ref, RefJob, evaluate, parse_dependency
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.node import GpuInfo, NodeRecord
from pslurm.core.states import InvalidTransition, JobState, NodeState, node_display_state

log = logging.getLogger("psctld")

HEARTBEAT_INTERVAL = 2.0
MIN_PASS_GAP = 0.01  # seconds between scheduler passes at the most busy
SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


class NotFound(LookupError):
    """An unknown job or node; the message is for the user."""


@dataclass
class NodeUsage:
    """What active jobs hold on one node, derived from the store's allocations."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: list[int] = field(default_factory=list)
    jobs: int = 0


class Controller:
    """Owns the protocol: snapshot -> plan -> compare-and-set -> launch."""

    def __init__(self, config: ClusterConfig, store: Store, agents: AgentClient,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.agents = agents
        self.clock = clock
        self.sched = scheduler_config(config)
        # fair share: decayed usage of finished runs per (account, user), as of _usage_at
        self._usage: dict[tuple[str, str], float] = defaultdict(float)
        self._usage_at: float | None = None
        self._usage_mark = 0.0  # the latest end time counted
        self._usage_seen: dict[tuple[int, float], float] = {}
        self._dep_cache: dict[str, object] = {}
        # Agents beat a few times per SlurmdTimeout, and at least every 2 s on small local timeouts.
        self.heartbeat_interval = max(0.5, min(HEARTBEAT_INTERVAL * 15, config.slurmd_timeout / 4))
        self._changed = threading.Condition()
        self._version = 0  # bumped on every job state change, for waiters
        self._wake = threading.Event()
        # After a restart every node gets a full SlurmdTimeout to be heard from again.
        self._started = clock()
        self._stopping = threading.Event()
        self._partitions_of: dict[str, frozenset[str]] = defaultdict(frozenset)
        for part in config.partitions.values():
            for name in part.nodes:
                self._partitions_of[name] = self._partitions_of[name] | {part.name}
        store.ensure_nodes([
            NodeRecord(n.name, n.addr, n.port, n.cpus, n.real_memory, n.gres) for n in config.nodes.values()
        ])

    # -- clients ---------------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> int:
        """Check the request and the limits, store it PENDING (every task of an array; committed before
        we answer), wake the scheduler. Returns the job id (the array's id)."""
        sched = self.sched
        admitted = admit(spec, self.config, enforce_part_limits=sched.enforce_part_limits,
                         groups=_group_names(spec.user, spec.gid))
        if spec.nice < 0 and spec.uid != 0:
            raise SpecError("Invalid --nice value: only privileged users can set a negative nice")
        if abs(spec.nice) > 2147483645:
            raise SpecError("Invalid --nice value")
        array_ids: tuple[int, ...] = ()
        throttle = None
        if spec.array:
            if spec.interactive:
                raise SpecError("--array is for batch jobs (psbatch)")
            array_ids, throttle = parse_array(spec.array, sched.max_array_size)
        count = max(1, len(array_ids))
        if sched.max_job_count and self.store.count_active() + count > sched.max_job_count:
            raise SpecError(f"MaxJobCount ({sched.max_job_count} jobs in the queue) reached: job not accepted, "
                            f"try again later")
        if sched.max_submit_jobs_per_user and \
                self.store.count_active(spec.user) + count > sched.max_submit_jobs_per_user:
            raise SpecError(f"{SUBMIT_LIMIT}: MaxSubmitJobsPerUser={sched.max_submit_jobs_per_user}")
        dep = parse_dependency(spec.dependency)
        if dep is not None:
            found = self.store.refs(r.job_id for r in dep.refs)
            known = {r.job_id for r in found} | {r.array_job_id for r in found if r.array_job_id is not None}
            tasks = {(r.array_job_id, r.array_task_id) for r in found}
            for ref in dep.refs:
                if ref.job_id not in known or (ref.task_id is not None and (ref.job_id, ref.task_id) not in tasks):
                    raise SpecError(f"Job dependency problem: no job {ref}")
        requeue = spec.requeue if spec.requeue is not None else (sched.job_requeue and not spec.interactive)
        job_id = self.store.submit(spec, admitted.partition, admitted.time_limit, self.clock(), requeue=requeue,
                                   array_ids=array_ids, throttle=throttle)
        self._notify()
        return job_id

    def resolve(self, text: str) -> list[int]:
        """The job ids ``14``, ``14_3`` or ``14_[5-9]`` names (an array's id: every task). SpecError
        for a malformed id; [] for an unknown one."""
        job_id, tasks = parse_task_selector(text)
        return self.store.resolve(job_id, tasks)

    def update_job(self, text: str, requester_uid: int, action: str = "", priority: int | None = None,
                   nice: int | None = None) -> list[str]:
        """pscontrol hold|release|requeue ID, update JobId=ID Priority=N Nice=N. One error line per job
        that could not be changed."""
        ids = self.resolve(text)
        if not ids:
            return [f"Invalid job id specified: {text}"]
        admin = requester_uid == 0
        errors = []
        for job in self.store.get_jobs(job_ids=ids, include_finished=True):
            if job.job_id not in ids:
                continue
            name = job.display_id
            if not admin and requester_uid != job.spec.uid:
                errors.append(f"Job {name}: Access/permission denied")
                continue
            if action in ("hold", "release", "uhold") or priority is not None or nice is not None:
                if job.state is not JobState.PENDING:
                    errors.append(f"Job {name}: Job is no longer pending execution")
                    continue
            if action in ("hold", "uhold"):
                self.store.update_jobs([job.job_id], pending_only=True,
                                       hold="admin" if admin and action == "hold" else "user")
            elif action == "release":
                if job.hold == "admin" and not admin:
                    errors.append(f"Job {name}: Access/permission denied (held by an operator)")
                    continue
                self.store.update_jobs([job.job_id], pending_only=True, hold="")
            elif action == "requeue":
                if job.state is JobState.PENDING:
                    errors.append(f"Job {name}: Job is pending execution")
                    continue
                if not job.state.holds_resources:
                    errors.append(f"Job {name}: Job/step already completing or completed")
                    continue
                self.store.update_jobs([job.job_id], requeue_requested=True)
                try:
                    self._cancel_one(job, 0, detail="requeue requested")
                except InvalidTransition:
                    pass
            elif action:
                raise SpecError(f"Invalid job action: {action}")
            if priority is not None:
                if not admin:
                    errors.append(f"Job {name}: Access/permission denied (setting a priority needs an operator)")
                    continue
                self.store.update_jobs([job.job_id], pending_only=True, admin_priority=priority, priority=priority)
            if nice is not None:
                if nice < 0 and not admin:
                    errors.append(f"Job {name}: Access/permission denied (a negative nice needs an operator)")
                    continue
                self.store.update_jobs([job.job_id], pending_only=True, nice=nice)
        self._notify()
        return errors

    def jobs(self, job_ids: Sequence[int] = (), users: Sequence[str] = (),
             states: Sequence[JobState] = (), include_finished: bool = False,
             since: float | None = None) -> list[JobRecord]:
        return self.store.get_jobs(job_ids, users, states, include_finished, since)

    def cancel(self, job_ids: Sequence[int], requester_uid: int, signal: int = 0,
               job_specs: Sequence[str] = ()) -> list[str]:
        """Cancel (or signal) jobs; an array's id cancels every task, ``14_3`` / ``14_[5-9]`` some.
        Returns one error line per job that could not be."""
        errors = []
        wanted: list[int] = []
        quiet: set[int] = set()
        for text in [*map(str, job_ids), *job_specs]:
            try:
                found = self.resolve(text)
            except SpecError as exc:
                errors.append(f"Kill job error on job id {text}: {exc}")
                continue
            if not found:
                errors.append(f"Kill job error on job id {text}: Invalid job id specified")
            if len(found) > 1 or not text.isdigit():
                quiet.update(found)  # tasks of an array: the ones already ended are skipped silently
            wanted.extend(i for i in found if i not in wanted)
        for job_id in wanted:
            job = self.store.get_job(job_id)
            if job is None:
                errors.append(f"Kill job error on job id {job_id}: Invalid job id specified")
                continue
            if requester_uid not in (0, job.spec.uid):
                errors.append(f"Kill job error on job id {job_id}: Access/permission denied")
                continue
            if job.state.is_final and job_id in quiet:
                continue
            if job.state.is_final:
                errors.append(f"Kill job error on job id {job_id}: Job/step already completing or completed")
                continue
            try:
                self._cancel_one(job, signal)
            except InvalidTransition:
                pass  # it ended meanwhile: nothing left to cancel
        return errors

    def _cancel_one(self, job: JobRecord, signal: int, detail: str = "cancel requested") -> None:
        now = self.clock()
        if job.state is JobState.PENDING and signal == 0:
            self.store.transition(job.job_id, JobState.CANCELLED, now, "cancelled while pending",
                                  end_time=now, exit_signal=15, reason="None")
            self._notify()
            return
        if job.state is JobState.PENDING:
            return  # a signal to a pending job has nothing to reach
        if signal == 0 and job.state is JobState.RUNNING:
            self.store.transition(job.job_id, JobState.COMPLETING, now, detail, cancel_requested=True)
            self._notify()
        node = self.store.get_node(job.node or "")
        if node is not None:
            try:
                self.agents.signal(node.target, job.job_id, signal)
            except AgentUnreachable as exc:
                log.warning("cannot reach %s to signal job %d: %s", node.name, job.job_id, exc)

    def wait(self, job_id: int, timeout: float | None = None) -> Iterator[JobRecord]:
        """The job now, then again each time it changes, until it reaches a final state."""
        last: tuple[JobState, str | None, str] | None = None
        deadline = None if timeout is None else self.clock() + timeout
        while not self._stopping.is_set():
            with self._changed:
                version = self._version
            job = self.store.get_job(job_id)
            if job is None:
                raise NotFound(f"Invalid job id specified: {job_id}")
            if (job.state, job.node, job.reason) != last:
                last = (job.state, job.node, job.reason)
                yield job
            if job.state.is_final or (deadline is not None and self.clock() > deadline):
                return
            self._wait_change(version)

    def _wait_change(self, seen: int, timeout: float = 1.0) -> None:
        """Block until a job state changes after version ``seen`` (or the timeout passes)."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != seen, timeout=timeout)

    # -- nodes -----------------------------------------------------------------------------

    def usage(self) -> dict[str, NodeUsage]:
        return _usage_by_node(self.store.allocations())

    def nodes(self) -> list[tuple[NodeRecord, NodeUsage, str]]:
        """Each node with what is allocated on it and its sinfo state word."""
        usage = self.usage()
        out = []
        for node in self.store.get_nodes():
            used = usage.get(node.name, NodeUsage())
            total_gpus = len(node.gpus) or sum(g.count for g in node.gres if g.name == "gpu")
            word = node_display_state(node.state, node.drain, len(used.gpus), total_gpus, used.cpus,
                                      node.cpus, used.jobs)
            out.append((node, used, word))
        return out

    def partitions_of(self, node: str) -> frozenset[str]:
        return self._partitions_of[node]

    def update_node(self, name: str, state: str, reason: str) -> NodeRecord:
        """pscontrol update NodeName=X State=DRAIN|RESUME|DOWN|UNDRAIN Reason=..."""
        node = self._known_node(name)
        now = self.clock()
        state = state.upper()
        if state in ("DRAIN", "DOWN") and not reason:
            raise SpecError("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        if state == "DRAIN":
            self.store.update_node(name, drain=True, reason=reason)
        elif state in ("RESUME", "UNDRAIN", "IDLE"):
            self.store.update_node(name, drain=False, reason="")
            if node.state is NodeState.DOWN and now - node.last_heartbeat < self.config.slurmd_timeout:
                self.store.set_node_state(name, NodeState.UP, now)
        elif state == "DOWN":
            if node.state is not NodeState.DOWN:
                self.store.set_node_state(name, NodeState.DOWN, now, reason=reason)
            self._fail_jobs_on(name, now, reason)
        else:
            raise SpecError(f"Invalid node state specified: {state}")
        self._notify()
        return self._known_node(name)

    def register(self, name: str, addr: str, port: int, gpus: Sequence[GpuInfo], running: Sequence[int],
                 drain_reason: str, isolation: str) -> list[int]:
        """An agent (re)starts: record its inventory, mark it UP, reconcile jobs. Returns the
        jobs it runs that the controller has already ended (the agent kills them)."""
        node = self._known_node(name)
        now = self.clock()
        values: dict[str, object] = dict(addr=addr, port=port, gpus=list(gpus), isolation=isolation,
                                         last_heartbeat=now)
        if drain_reason:
            values.update(drain=True, reason=drain_reason)
        elif node.state is NodeState.DOWN and node.reason == "Not responding":
            values.update(reason="")
        self.store.update_node(name, **values)
        self.store.set_node_state(name, NodeState.UP, now)
        lost = set(self.store.active_job_ids_on(name)) - set(running)
        for job_id in lost:  # the agent restarted and no longer runs them
            self._end_job(job_id, JobState.NODE_FAIL, now, "agent restarted without the job", 0, 0)
        log.info("node %s registered at %s:%d with %d GPUs", name, addr, port, len(gpus))
        self._notify()
        return self._stale(name, running)

    def heartbeat(self, name: str, running: Sequence[int], health_reason: str) -> tuple[bool, list[int]]:
        """Returns (re-register?, jobs to kill)."""
        node = self._known_node(name)
        if node.state is not NodeState.UP:
            return True, []
        values: dict[str, object] = {"last_heartbeat": self.clock()}
        if health_reason and not node.drain:
            values.update(drain=True, reason=health_reason)
            self._wake.set()
        self.store.update_node(name, **values)
        return False, self._stale(name, running)

    def _stale(self, name: str, running: Sequence[int]) -> list[int]:
        if not running:
            return []
        active = {j.job_id for j in self.store.get_jobs(job_ids=running)
                  if j.state.holds_resources and j.node == name}
        return [j for j in running if j not in active]

    def check_heartbeats(self) -> None:
        """Nodes silent for longer than SlurmdTimeout go DOWN; their jobs end NODE_FAIL."""
        now = self.clock()
        for node in self.store.get_nodes():
            heard = max(node.last_heartbeat, self._started)
            if node.state is NodeState.UP and now - heard > self.config.slurmd_timeout:
                log.warning("node %s not responding, setting DOWN", node.name)
                try:
                    self.store.set_node_state(node.name, NodeState.DOWN, now, reason="Not responding")
                except InvalidTransition:
                    continue
                self._fail_jobs_on(node.name, now, "node not responding")
                self._notify()

    def _fail_jobs_on(self, node: str, now: float, why: str) -> None:
        for job_id in self.store.active_job_ids_on(node):
            self._end_job(job_id, JobState.NODE_FAIL, now, why, 0, 0)

    def _known_node(self, name: str) -> NodeRecord:
        node = self.store.get_node(name)
        if node is None:
            raise NotFound(f"Invalid node name specified: {name}")
        return node

    # -- job ends --------------------------------------------------------------------------

    def job_ended(self, job_id: int, node: str, state: JobState, exit_code: int, exit_signal: int,
                  end_time: float, usage: dict[str, float | None] | None = None) -> None:
        """The agent saw the job's processes end. Idempotent: a repeated report is ignored."""
        job = self.store.get_job(job_id)
        if job is None or job.state.is_final or job.node != node:
            return
        if job.requeue_requested:
            try:
                self.store.requeue(job_id, end_time, f"requeued (pscontrol requeue), ended on {node}")
            except InvalidTransition as exc:
                log.info("job %d requeue not recorded: %s", job_id, exc)
            self._notify()
            return
        if job.cancel_requested and state is not JobState.TIMEOUT:
            state = JobState.CANCELLED
        self._end_job(job_id, state, end_time, f"ended on {node}", exit_code, exit_signal, usage or {})

    def _end_job(self, job_id: int, state: JobState, now: float, detail: str, exit_code: int,
                 exit_signal: int, usage: dict[str, float | None] | None = None) -> None:
        if state is JobState.NODE_FAIL:
            job = self.store.get_job(job_id)
            if job is not None and job.requeue and job.state.holds_resources:
                try:  # the job keeps its id and runs again elsewhere; its events keep this run
                    self.store.requeue(job_id, now, f"requeued after node failure: {detail}"[:250])
                    self._notify()
                    return
                except InvalidTransition:
                    pass
        reason = {JobState.FAILED: "NonZeroExitCode", JobState.TIMEOUT: "TimeLimit",
                  JobState.NODE_FAIL: "NodeDown"}.get(state, "None")
        try:
            self.store.transition(job_id, state, now, detail, end_time=now, exit_code=exit_code,
                                  exit_signal=exit_signal, reason=reason, **(usage or {}))
        except InvalidTransition as exc:
            log.info("job %d end not recorded: %s", job_id, exc)
            return
        self._notify()

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self) -> int:
        """One pass: snapshot, plan, commit each placement, launch. Returns jobs started."""
        pending = self.store.queue()
        if not pending:
            return 0
        now = self.clock()
        nodes = self.store.get_nodes()
        allocations = self.store.allocations()
        usage = _usage_by_node(allocations)
        priorities = {q.job_id: p for q, _, p in self._priorities(pending, allocations, now)}
        deps = self._dependencies(pending)
        for q in pending:  # --kill-on-invalid-dep=yes: a dependency that can never be met cancels the job
            if q.kill_on_invalid_dep and deps.get(q.job_id) is DepStatus.NEVER:
                try:
                    self.store.transition(q.job_id, JobState.CANCELLED, now, "dependency never satisfied",
                                          end_time=now, reason="DependencyNeverSatisfied")
                except InvalidTransition:
                    pass
                deps[q.job_id] = DepStatus.WAITING  # not considered below
        sched = self.sched
        parts = self.config.partitions.values()
        snapshot = Snapshot(
            pending=[PendingJob(q.job_id, q.partition, q.cpus, q.mem_mb, q.gres, priorities[q.job_id], q.time_limit,
                                q.user, q.array_job_id, q.array_max_running,
                                deps.get(q.job_id, DepStatus.SATISFIED).value, q.hold) for q in pending],
            nodes=[_node_view(n, usage.get(n.name, NodeUsage()), self._partitions_of[n.name]) for n in nodes],
            now=now,
            running=[RunningJob(a.job_id, a.node, a.cpus, a.mem_mb, a.gpu_indices,
                                None if a.time_limit is None or a.start_time is None else a.start_time + a.time_limit,
                                a.user, a.array_job_id) for a in allocations],
            partition_state={p.name: p.state.upper() for p in parts},
            partition_max_time={p.name: p.max_time for p in parts},
            limits=Limits(sched.max_jobs_per_user, sched.max_gpus_per_user, sched.max_cpus_per_user),
            max_reservations=sched.bf_max_job_test,
        )
        decided = plan(snapshot)
        targets = {n.name: n.target for n in nodes}
        started = self.store.start_jobs(
            [(p.job_id, p.node, p.gpu_indices) for p in decided.placements], self.clock())
        for job in self.store.get_jobs(job_ids=started) if started else ():
            if job.state is JobState.RUNNING and job.node:
                self.agents.launch_async(targets[job.node], job, self._launch_failed)
        placed = set(started)
        changes = {}
        for q in pending:
            if q.job_id in placed:
                continue
            estimate = decided.estimates.get(q.job_id)
            if estimate is not None:
                estimate = None if estimate - now > UNLIMITED / 2 else float(round(estimate))
            value = (decided.reasons.get(q.job_id, q.reason), priorities[q.job_id], estimate)
            if value != (q.reason, q.priority, q.start_estimate):
                changes[q.job_id] = value
        self.store.update_pending(changes)
        if started or changes:
            self._notify(wake_scheduler=False)
        return len(started)

    # -- priority and fair share ----------------------------------------------------------

    def _priorities(self, pending: Sequence[QueuedJob], allocations: Sequence[Allocation],
                    now: float) -> list[tuple[QueuedJob, prio.Factors, int]]:
        """Each pending job with its factors and priority (an operator's Priority= wins)."""
        sched = self.sched
        usage = dict(self._finished_usage(now))
        for a in allocations:  # running jobs count as they go
            if a.start_time is not None:
                rate = prio.billing_rate(sched.billing_weights, a.cpus, a.mem_mb, len(a.gpu_indices))
                key = (a.account or prio.DEFAULT_ACCOUNT, a.user)
                usage[key] = usage.get(key, 0.0) + prio.run_usage(rate, a.start_time, now, now,
                                                                  sched.decay_half_life)
        shares = prio.fairshare_factors(usage, {(q.account or prio.DEFAULT_ACCOUNT, q.user) for q in pending})
        cluster = sum(prio.billing_rate(sched.billing_weights, n.cpus, n.real_memory, n.gpus())
                      for n in self.config.nodes.values())
        top = max((p.priority_job_factor for p in self.config.partitions.values()), default=1) or 1
        ctx = prio.PriorityContext(sched, now, shares, cluster,
                                   {p.name: p.priority_job_factor / top for p in self.config.partitions.values()})
        out = []
        for q in pending:
            gpus = sum(g.count for g in q.gres if g.name == "gpu")
            f = prio.factors(ctx, submit_time=q.submit_time, account=q.account, user=q.user, partition=q.partition,
                             cpus=q.cpus, mem_mb=q.mem_mb, gpus=gpus, nice=q.nice)
            out.append((q, f, q.admin_priority if q.admin_priority is not None else prio.priority(f, sched)))
        return out

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
        if self._usage_at is None:
            since = now - 20 * half_life if half_life > 0 else 0.0
        else:
            factor = prio.decay(1.0, now - self._usage_at, half_life)
            for key in self._usage:
                self._usage[key] *= factor
            since = self._usage_mark - 60.0
        self._usage_at = now
        for r in self.store.finished_usage(since):
            seen = (r.job_id, r.end_time)
            if seen in self._usage_seen:
                continue
            self._usage_seen[seen] = r.end_time
            self._usage_mark = max(self._usage_mark, r.end_time)
            rate = prio.billing_rate(self.sched.billing_weights, r.cpus, r.mem_mb, r.gpus)
            self._usage[(r.account or prio.DEFAULT_ACCOUNT, r.user)] += prio.run_usage(
                rate, r.start_time, r.end_time, now, half_life)
        if len(self._usage_seen) > 10000:
            self._usage_seen = {k: v for k, v in self._usage_seen.items() if v >= self._usage_mark - 120.0}
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

    def _launch_failed(self, job: JobRecord, error: Exception) -> None:
        """The agent could not be reached or refused: requeue the job and set the node DOWN."""
        now = self.clock()
        log.warning("launch of job %d on %s failed: %s", job.job_id, job.node, error)
        try:
            self.store.transition(job.job_id, JobState.PENDING, now, f"launch failed: {error}"[:250],
                                  node=None, gpu_indices="", start_time=None, reason="None")
        except InvalidTransition:
            return
        if job.node and isinstance(error, AgentUnreachable):
            try:
                self.store.set_node_state(job.node, NodeState.DOWN, now, reason="Not responding")
            except InvalidTransition:
                pass
        self._notify()

    # -- loop ------------------------------------------------------------------------------

    def _notify(self, wake_scheduler: bool = True) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()
        if wake_scheduler:
            self._wake.set()

    def run_loop(self, interval: float = 1.0, min_gap: float = MIN_PASS_GAP) -> None:
        """Schedule on every change and at least every ``interval`` seconds; watch heartbeats.

        Passes are at least ``min_gap`` apart, and as far again as the last pass took: a
        burst of submits or job ends is taken in one pass (Slurm's batch_sched_delay), and a long
        queue cannot keep the controller from answering RPCs.
        """
        last_check = 0.0
        next_pass = 0.0
        while not self._stopping.is_set():
            self._wake.wait(interval)
            self._stopping.wait(max(0.0, next_pass - time.monotonic()))
            self._wake.clear()
            started = time.monotonic()
            try:
                self.schedule()
                next_pass = started + max(min_gap, 2 * (time.monotonic() - started))
                if self.clock() - last_check >= 1.0:
                    last_check = self.clock()
                    self.check_heartbeats()
            except Exception:  # the loop must outlive a bad pass; the next one retries
                log.exception("scheduler pass failed")

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        with self._changed:
            self._changed.notify_all()


def _group_names(user: str, gid: int) -> list[str]:
    """The user's group names, for AllowGroups (none where the user is unknown on this host)."""
    import grp
    import os

    try:
        ids = os.getgrouplist(user, gid)
    except (KeyError, OSError):
        return []
    names = []
    for g in ids:
        try:
            names.append(grp.getgrgid(g).gr_name)
        except KeyError:
            continue
    return names


def _usage_by_node(allocations: Sequence[Allocation]) -> dict[str, NodeUsage]:
    usage: dict[str, NodeUsage] = defaultdict(NodeUsage)
    for alloc in allocations:
        used = usage[alloc.node]
        used.cpus += alloc.cpus
        used.mem_mb += alloc.mem_mb
        used.gpus.extend(alloc.gpu_indices)
        used.jobs += 1
    return usage


def _node_view(node: NodeRecord, used: NodeUsage, partitions: frozenset[str]) -> NodeView:
    if node.gpus:
        inventory = [(g.index, g.type) for g in node.gpus]
    else:  # not registered yet: the configured Gres, numbered in order
        inventory = []
        for g in node.gres:
            if g.name == "gpu":
                inventory.extend((len(inventory) + i, g.type) for i in range(g.count))
    busy = set(used.gpus)
    return NodeView(
        name=node.name, partitions=partitions, free_cpus=node.cpus - used.cpus,
        free_mem_mb=node.real_memory - used.mem_mb,
        free_gpus=tuple(g for g in inventory if g[0] not in busy), available=node.available,
    )
