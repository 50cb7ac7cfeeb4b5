"""The controller's behaviour, independent of gRPC: submit, cancel, node life, job ends, scheduling.

The servicer translates RPCs to these methods; the scheduler loop calls :meth:`Controller.schedule`.
Node life is in ``nodes.py`` and the scheduler pass in ``scheduling.py`` (mixins of Controller).
Every state change goes through the store's compare-and-set and wakes whoever waits on it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Generator, Sequence

from pslurm.auth.credential import Identity
from pslurm.controller.admission import admit
from pslurm.controller.agents import AgentClient, AgentUnreachable
from pslurm.controller.nodes import NodeLife, NotFound, PermissionDenied
from pslurm.controller.scheduling import SchedulerPass
from pslurm.controller.store import Store
from pslurm.core.arrays import parse_array, parse_task_selector
from pslurm.core.config import ClusterConfig, scheduler_config
from pslurm.core.dependency import parse_dependency
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.node import NodeRecord
from pslurm.core.states import InvalidTransition, JobState

log = logging.getLogger("psctld")

HEARTBEAT_INTERVAL = 2.0
MIN_PASS_GAP = 0.01  # seconds between scheduler passes at the most busy
IDLE_REPLAN = 10  # with nothing new, re-plan after at most this many passes' worth of time
SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


class Controller(NodeLife, SchedulerPass):
    """Owns the protocol: snapshot -> plan -> compare-and-set -> launch."""

    def __init__(self, config: ClusterConfig, store: Store, agents: AgentClient,
                 clock: Callable[[], float] = time.time, operators: frozenset[int] = frozenset({0})) -> None:
        self.config = config
        self.operators = operators  # uids with operator rights: root and the user psctld runs as (SlurmUser)
        self.store = store
        self.agents = agents
        self.clock = clock
        self.sched = scheduler_config(config)
        # fair share: decayed usage of finished runs per (account, user), as of _usage_at
        self._usage: dict[tuple[str, str], float] = defaultdict(float)
        self._usage_at: float | None = None
        self._usage_mark = 0  # the last job event whose end is counted
        self._dep_cache: dict[str, object] = {}
        self._allowed_cache: dict[tuple[str, str], frozenset[str]] = {}
        # Agents beat a few times per SlurmdTimeout, and at least every 2 s on small local timeouts.
        self.heartbeat_interval = max(0.5, min(HEARTBEAT_INTERVAL * 15, config.slurmd_timeout / 4))
        self._changed = threading.Condition()
        self._watched: Counter[int] = Counter()  # job id -> how many wait for it (WaitJob)
        self._job_versions: Counter[int] = Counter()  # job id -> changes seen since waiting began
        store.subscribe(self._jobs_changed)
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

    def submit(self, spec: JobSpec, requester: Identity) -> int:
        """Check the request and the limits, store it PENDING (every task of an array; committed before
        we answer), wake the scheduler. Returns the job id (the array's id). A job runs as the user it
        names: only an operator may submit one for somebody else."""
        if requester.uid not in self.operators:
            _check_own(spec, requester)
        sched = self.sched
        admitted = admit(spec, self.config, enforce_part_limits=sched.enforce_part_limits,
                         groups=_group_names(spec.user, spec.gid))
        if spec.nice < 0 and requester.uid not in self.operators:
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
        self._reschedule()
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
        admin = requester_uid in self.operators
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
                if job.spec.interactive:
                    errors.append(f"Job {name}: Only batch jobs are accepted or processed")
                    continue
                if job.state.is_final:  # as scontrol requeue: a finished batch job runs again
                    self.store.requeue(job.job_id, self.clock(), f"requeued (pscontrol requeue) after {job.state}")
                    self._reschedule()
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
        self._reschedule()
        return errors

    def jobs(self, job_ids: Sequence[int] = (), users: Sequence[str] = (),
             states: Sequence[JobState] = (), include_finished: bool = False,
             since: float | None = None, light: bool = False, collapse_arrays: bool = False) -> list[JobRecord]:
        return self.store.get_jobs(job_ids, users, states, include_finished, since, light, collapse_arrays)

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
            if requester_uid not in self.operators and requester_uid != job.spec.uid:
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
            self._reschedule()
            return
        if job.state is JobState.PENDING:
            return  # a signal to a pending job has nothing to reach
        if signal == 0 and job.state is JobState.RUNNING:
            self.store.transition(job.job_id, JobState.COMPLETING, now, detail, cancel_requested=True)
            self._reschedule()
        node = self.store.get_node(job.node or "")
        if node is not None:
            try:
                self.agents.signal(node.target, job.job_id, signal)
            except AgentUnreachable as exc:
                log.warning("cannot reach %s to signal job %d: %s", node.name, job.job_id, exc)

    def wait(self, job_id: int, timeout: float | None = None) -> Generator[JobRecord, None, None]:
        """The job now, then again each time it changes, until it reaches a final state. The job is
        read again only when the store says it changed (and once a second, to be safe): waiters do
        not all re-read their jobs on every change in the cluster."""
        last: tuple[JobState, str | None, str] | None = None
        deadline = None if timeout is None else self.clock() + timeout
        with self._changed:
            self._watched[job_id] += 1
        try:
            while not self._stopping.is_set():
                with self._changed:
                    seen = self._job_versions[job_id]
                job = self.store.get_job(job_id, light=True)
                if job is None:
                    raise NotFound(f"Invalid job id specified: {job_id}")
                if (job.state, job.node, job.reason) != last:
                    last = (job.state, job.node, job.reason)
                    yield job
                if job.state.is_final or (deadline is not None and self.clock() > deadline):
                    return
                self._wait_for_change(job_id, seen)
        finally:
            with self._changed:
                self._watched[job_id] -= 1
                if self._watched[job_id] <= 0:
                    del self._watched[job_id]
                    self._job_versions.pop(job_id, None)

    def _wait_for_change(self, job_id: int, seen: int, timeout: float = 1.0) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._job_versions[job_id] != seen or self._stopping.is_set(),
                                   timeout=timeout)

    # -- job ends --------------------------------------------------------------------------

    def job_ended(self, job_id: int, node: str, state: JobState, exit_code: int, exit_signal: int,
                  end_time: float, usage: dict[str, float | None] | None = None) -> None:
        """The agent saw the job's processes end. Idempotent: a repeated report is ignored."""
        job = self.store.get_job(job_id, light=True)  # its state and flags; not its request
        if job is None or job.state.is_final or job.node != node:
            # an agent repeats a report whose answer it did not get; one that repeats for no reason wastes work
            log.info("job %d: end reported again by %s, ignored (job is %s)", job_id, node,
                     job.state.value if job else "unknown")
            return
        if job.requeue_requested:
            try:
                self.store.requeue(job_id, end_time, f"requeued (pscontrol requeue), ended on {node}")
            except InvalidTransition as exc:
                log.info("job %d requeue not recorded: %s", job_id, exc)
            self._reschedule()
            return
        if job.cancel_requested and state is not JobState.TIMEOUT:
            state = JobState.CANCELLED
        self._end_job(job_id, state, end_time, f"ended on {node}", exit_code, exit_signal, usage or {})

    def _end_job(self, job_id: int, state: JobState, now: float, detail: str, exit_code: int,
                 exit_signal: int, usage: dict[str, float | None] | None = None) -> None:
        if state is JobState.NODE_FAIL:
            job = self.store.get_job(job_id, light=True)
            if job is not None and job.requeue and job.state.holds_resources:
                try:  # the job keeps its id and runs again elsewhere; its events keep this run
                    self.store.requeue(job_id, now, f"requeued after node failure: {detail}"[:250])
                    self._reschedule()
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
        self._reschedule()

    # -- loop ------------------------------------------------------------------------------

    def _reschedule(self) -> None:
        """Something changed (a submit, an end, a node): run a scheduling pass soon."""
        self._wake.set()

    def _jobs_changed(self, job_ids: Collection[int]) -> None:
        """The store committed changes to these jobs: wake whoever waits for one of them."""
        with self._changed:
            watched = [i for i in job_ids if i in self._watched]
            for job_id in watched:
                self._job_versions[job_id] += 1
            if watched:
                self._changed.notify_all()

    def run_loop(self, interval: float = 1.0, min_gap: float = MIN_PASS_GAP) -> None:
        """Schedule on every change, and on a timer; watch heartbeats every ``interval`` seconds.

        Passes are at least ``min_gap`` apart, and as far again as the last pass took: a
        burst of submits or job ends is taken in one pass (Slurm's batch_sched_delay), and a long
        queue cannot keep the controller from answering RPCs. With nothing new, the timer re-plans
        (ages, start estimates) every ``interval`` seconds or IDLE_REPLAN passes' worth of time,
        whichever is longer: on a 100,000-job queue a pass costs a second, and an idle controller
        should not spend a third of a core re-planning what did not change.
        """
        last_check = 0.0
        next_pass = 0.0
        last_pass, cost = -math.inf, 0.0
        while not self._stopping.is_set():
            woken = self._wake.wait(interval)
            self._stopping.wait(max(0.0, next_pass - time.monotonic()))
            self._wake.clear()
            started = time.monotonic()
            try:
                if woken or started - last_pass >= max(interval, IDLE_REPLAN * cost):
                    self.schedule()
                    last_pass, cost = started, time.monotonic() - started
                    next_pass = started + max(min_gap, 2 * cost)
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


def _check_own(spec: JobSpec, requester: Identity) -> None:
    """A user's job names the user's own uid, primary gid and (where this host knows the uid) name."""
    import pwd

    if (spec.uid, spec.gid) != (requester.uid, requester.gid):
        raise PermissionDenied(f"Access/permission denied: the job is for uid {spec.uid} gid {spec.gid}, "
                               f"the request comes from uid {requester.uid} gid {requester.gid}")
    try:
        name = pwd.getpwuid(spec.uid).pw_name
    except KeyError:
        return  # a uid this host does not know: its name is what the client says
    if spec.user != name:
        raise PermissionDenied(f"Access/permission denied: uid {spec.uid} is {name}, not {spec.user}")


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
