"""The job service: users' and agents' requests about jobs, turned into the lifecycle's operations.

Submit (what admission accepts, :mod:`pslurm.controller.admission`, committed PENDING before it
answers), cancel and signal, hold, release, requeue, scontrol update JobId= (time limit, partition,
name, account, priority, nice, ...: the rules are :func:`pslurm.core.jobupdate.update_values`'s),
and the ends the agents report. Every state change is one of the store's lifecycle operations,
every other change a guarded update of the store's; this service decides which one a request is,
checks who may ask it, signals agents where a running job must end (or has a new time limit), and
rings the scheduler's doorbell.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from signal import SIGKILL
from typing import Any

from pslurm.auth.credential import Identity
from pslurm.controller.admission import Admission, Submission
from pslurm.controller.agents import AgentRefused, AgentUnreachable
from pslurm.controller.errors import NotFound, PermissionDenied
from pslurm.controller.ports import Agents, Reschedule
from pslurm.controller.store import Store
from pslurm.core.arrays import format_ranges, parse_job_selector
from pslurm.core.assoc import Associations
from pslurm.core.config import ClusterConfig
from pslurm.core.hostlists import expand
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.jobupdate import (
    ACCESS_DENIED,
    INVALID_JOB_ID,
    JOB_FINISHED,
    NOT_PENDING,
    PENDING_ONLY,
    checked_changes,
    update_values,
)
from pslurm.core.lifecycle import Change, NotPermitted
from pslurm.core.states import InvalidTransition, JobState
from pslurm.core.steps import BATCH_STEP, step_name

log = logging.getLogger("psctld")

JOB_ENDED_ALREADY = "Job/step already completing or completed"  # ESLURM_ALREADY_DONE
MAX_SELECTORS = 10_000  # job ids and selectors in one cancel request


class JobService:
    def __init__(self, config: ClusterConfig, store: Store, agents: Agents, reschedule: Reschedule,
                 clock: Callable[[], float] = time.time, operators: frozenset[int] = frozenset({0})) -> None:
        self.config = config
        self.store = store
        self.agents = agents
        self.reschedule = reschedule
        self.clock = clock
        self.operators = operators  # uids with operator rights: root and the user psctld runs as (SlurmUser)
        self.admission = Admission(config, store, clock, operators)

    @property
    def associations(self) -> Callable[[], Associations]:
        """Accounts and QOS now (admission's: pslurm.conf's until app.py hands it the store's service)."""
        return self.admission.associations

    @associations.setter
    def associations(self, current: Callable[[], Associations]) -> None:
        self.admission.associations = current

    def submit(self, spec: JobSpec, requester: Identity) -> int:
        """Check the request and the limits, store it PENDING (every task of an array; committed before
        we answer), wake the scheduler. Returns the job id (the array's id). A job runs as the user it
        names: only an operator may submit one for somebody else."""
        checked = self.check_submission(spec, requester)
        job_id = self.store.submit(checked.spec, checked.partition, checked.time_limit, self.clock(),
                                   requeue=checked.requeue, array_ids=checked.array_ids, throttle=checked.throttle,
                                   assoc_id=checked.assoc_id)
        self.reschedule()
        return job_id

    def check_submission(self, spec: JobSpec, requester: Identity) -> Submission:
        """What :meth:`submit` checks (:meth:`Admission.check`), nothing stored: the request as it would
        be stored, or the refusal (SpecError, PermissionDenied). psbatch --test-only asks the scheduler
        about the request so checked."""
        return self.admission.check(spec, requester)

    def resolve(self, text: str) -> list[int]:
        """The job ids ``14``, ``14_3`` or ``14_[5-9]`` names (an array's id: every task), at most the
        array's tasks whatever the selector spans (core.jobids.TaskRanges, Store.resolve). SpecError
        for a malformed id; [] for an unknown one."""
        job_id, tasks = parse_job_selector(text)
        return self.store.resolve(job_id, tasks)

    def update_job(self, text: str, requester_uid: int, action: str = "", priority: int | None = None,
                   nice: int | None = None, changes: Mapping[str, object] | None = None) -> list[str]:
        """pscontrol hold|uhold|release|requeue|requeuehold ID (``action``), and update JobId=ID KEY=VALUE...
        (``changes``, as :mod:`pslurm.core.jobupdate` names them; ``priority`` and ``nice`` are two of
        them). One error line per job that could not be changed."""
        fields = {**(changes or {}), **({"priority": priority} if priority is not None else {}),
                  **({"nice": nice} if nice is not None else {})}
        if not action:
            return self.update_fields(text, requester_uid, fields)
        ids = self.resolve(text)
        if not ids:
            return [f"Invalid job id specified: {text}"]
        admin = requester_uid in self.operators
        if action not in ("hold", "uhold", "release", "requeue", "requeuehold"):
            raise SpecError(f"Invalid job action: {action}")
        errors = []
        for job in self.store.jobs_with_ids(ids):  # the whole request: requeue asks whether it is a batch job
            name = job.display_id
            if not admin and requester_uid != job.spec.uid:
                errors.append(f"Job {name}: Access/permission denied")
                continue
            if action in ("hold", "release", "uhold") and job.state is not JobState.PENDING:
                errors.append(f"Job {name}: Job is no longer pending execution")
                continue
            error = self._act(job, action, admin)
            if error is not None:
                errors.append(f"Job {name}: {error}")
        self.reschedule()
        return errors + (self.update_fields(text, requester_uid, fields) if fields else [])

    def update_fields(self, text: str, requester_uid: int, changes: Mapping[str, object]) -> list[str]:
        """scontrol update JobId=TEXT KEY=VALUE...: every change checked first for every job named
        (``14``, an array's id: each task, ``14_3``, ``14_[5-9]``), then the job's changes written at
        once (:meth:`Store.update_fields`), or none of them. The lines are scontrol's: ``<why> for job
        14``; for array tasks ``14_[ranges]: <why>`` per outcome (``No error`` beside a failure, as
        scontrol prints it). SpecError for a malformed request."""
        try:
            wanted = checked_changes(changes)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        if not wanted:
            raise SpecError("No changes specified")
        try:
            ids = self.resolve(text)
        except SpecError:
            ids = []
        if not ids:
            return [f"{text}: {INVALID_JOB_ID}" if "_" in text else f"{INVALID_JOB_ID} for job {text}"]
        admin = requester_uid in self.operators
        outcome: dict[int, str | None] = {}
        found = self.store.jobs_with_ids(ids)
        for job in found:
            outcome[job.job_id] = self._update_one(job, wanted, requester_uid, admin)
        self.reschedule()
        return update_report(text, found, outcome)

    def _update_one(self, job: JobRecord, changes: Mapping[str, Any], uid: int, admin: bool) -> str | None:
        """One job's update: its error in scontrol's words, or None once written. A job that started
        (or ended) between the read and the write is read again and checked again, once."""
        for _ in range(2):
            try:
                own, request, detail = update_values(job, changes, uid, admin, self.config,
                                                     partial(self._readmit, job),
                                                     self.associations().job_account)
            except SpecError as exc:
                return str(exc)
            if not own and not request:
                return None  # every value as it was: nothing to write, as slurmctld
            if self.store.update_fields(job.job_id, job.state, job.restarts, self.clock(), detail, own, request):
                if "time_limit" in own and job.state in (JobState.RUNNING, JobState.SUSPENDED):
                    self._send_time_limit(job, own["time_limit"])
                return None
            fresh = self.store.get_job(job.job_id)
            if fresh is None:
                return INVALID_JOB_ID
            job = fresh
        return NOT_PENDING if changes.keys() & PENDING_ONLY else JOB_FINISHED

    def _readmit(self, job: JobRecord, spec: JobSpec) -> int | None:
        """A pending job's request as an update changes it (``spec``), admitted again (its dependency
        checked when it changed). The time limit in force stays as it was where neither the partition
        nor the limit asked changed (slurmctld's update of NumTasks=, Deadline=, QOS=... leaves it:
        an owner's TimeLimit=UNLIMITED under a MaxWall is not undone, nor a MaxWall's limit reset)."""
        limit = self.admission.readmit(spec, dependency=spec.dependency != job.spec.dependency)
        if spec.partition == job.partition and spec.time_limit == job.spec.time_limit:
            return job.time_limit
        return limit

    def _send_time_limit(self, job: JobRecord, limit: int | None) -> None:
        """A running job's new limit to its agent, which enforces it (the store holds it already: an
        agent out of reach keeps the old one, and says so in psctld's log)."""
        node = self.store.get_node(job.node or "")
        if node is None:
            return
        try:
            self.agents.set_time_limit(node.target, job.job_id, job.restarts, limit)
        except Exception as exc:  # AgentUnreachable, AgentRefused, an agent from before this RPC
            log.warning("job %d: the new time limit did not reach %s: %s", job.job_id, node.name, exc)

    def _act(self, job: JobRecord, action: str, admin: bool) -> str | None:
        """hold, uhold, release, requeue or requeuehold one job; the error's words, or None.
        requeuehold: requeued held (JobHeldUser, as slurmctld's), in the same operation as the requeue."""
        now = self.clock()
        hold = "user" if action == "requeuehold" else ""
        try:
            if action in ("hold", "uhold"):
                self.store.hold(job.job_id, now, by_operator=admin and action == "hold")
            elif action == "release":
                self.store.release(job.job_id, now, by_operator=admin)
            elif job.state is JobState.PENDING:
                return "Job is pending execution"
            elif job.spec.interactive:
                return "Only batch jobs are accepted or processed"
            elif job.state.is_final:  # as scontrol requeue: a finished batch job runs again
                self.store.requeue(job.job_id, now, f"requeued (pscontrol {action}) after {job.state}", hold)
            else:  # it ends first: its next run never starts while a process of this one is alive
                self._end_on_node(job, self.store.request_requeue(job.job_id, now, hold))
        except NotPermitted as exc:
            return f"Access/permission denied ({exc})"
        except InvalidTransition as exc:
            log.info("job %d: %s not applied: %s", job.job_id, action, exc)
        return None

    def jobs(self, job_ids: Sequence[int] = (), users: Sequence[str] = (),
             states: Sequence[JobState] = (), include_finished: bool = False,
             since: float | None = None, light: bool = False, collapse_arrays: bool = False) -> list[JobRecord]:
        return self.store.get_jobs(job_ids, users, states, include_finished, since, light, collapse_arrays)

    def cancel(self, job_ids: Sequence[int], requester_uid: int, signal: int = 0,
               job_specs: Sequence[str] = (), scope: str = "") -> list[str]:
        """Cancel (or signal) jobs; an array's id cancels every task, ``14_3`` / ``14_[5-9]`` some.
        Returns one error line per job that could not be. At most MAX_SELECTORS ids and selectors
        (SpecError beyond); each selector names at most its array's tasks (Store.resolve), and the
        jobs named are read without their requests and cancelled in one transaction. A signal goes
        where scancel's flags say (``scope``, see :meth:`signal_scoped`)."""
        texts = [*map(str, job_ids), *job_specs]
        if len(texts) > MAX_SELECTORS:
            raise SpecError(f"Too many job ids: {len(texts)} (at most {MAX_SELECTORS} in one request)")
        errors = []
        wanted: dict[int, None] = {}  # in the order named, each once
        quiet: set[int] = set()
        for text in texts:
            try:
                found = self.resolve(text)
            except SpecError as exc:
                errors.append(f"Kill job error on job id {text[:40]}: {exc}")
                continue
            if not found:
                errors.append(f"Kill job error on job id {text}: Invalid job id specified")
            if len(found) > 1 or not text.isdigit():
                quiet.update(found)  # tasks of an array: the ones already ended are skipped silently
            wanted.update(dict.fromkeys(found))
        jobs = {job.job_id: job for job in self.store.jobs_with_ids(wanted, light=True)}
        to_end: list[JobRecord] = []
        for job_id in wanted:
            job = jobs.get(job_id)
            if job is None:
                errors.append(f"Kill job error on job id {job_id}: Invalid job id specified")
            elif requester_uid not in self.operators and requester_uid != job.spec.uid:
                errors.append(f"Kill job error on job id {job_id}: Access/permission denied")
            elif job.state.is_final:
                if job_id not in quiet:
                    errors.append(f"Kill job error on job id {job_id}: Job/step already completing or completed")
            elif signal == 0:
                to_end.append(job)
            elif job.state.holds_resources:  # a signal to a pending job has nothing to reach
                self.signal_scoped(job, signal, scope)
        outcome = self.store.cancel_jobs([job.job_id for job in to_end], self.clock(), "cancel requested")
        for job, change in zip(to_end, outcome, strict=True):
            if isinstance(change, Change) and change.to is JobState.COMPLETING:
                self._signal(job, 0)  # a running job: its agents end it (it ended meanwhile: nothing to do)
        if to_end:
            self.reschedule()
        return errors

    def relinquish(self, job_id: int, requester_uid: int, exit_code: int = 0) -> None:
        """psalloc's end (salloc's slurm_complete_job): the owner gives an allocation job back with
        its command's exit code. A running one is COMPLETING until its agent, told to end the run,
        reports the end; it then ends COMPLETED (FAILED for a non-zero exit code). A pending one is
        cancelled. NotFound, PermissionDenied, SpecError (not an allocation job), InvalidTransition
        (already completing or completed)."""
        job = self.store.get_job(job_id)
        if job is None:
            raise NotFound(f"{INVALID_JOB_ID}: {job_id}")
        if requester_uid not in self.operators and requester_uid != job.spec.uid:
            raise PermissionDenied(f"{ACCESS_DENIED}: job {job_id} is not yours")
        if not job.spec.allocation:
            raise SpecError(f"Job {job.display_id} is not an allocation (psalloc): only an allocation is relinquished")
        now = self.clock()
        try:
            if job.state is JobState.PENDING:
                change = self.store.cancel(job_id, now, "relinquished while pending")
            else:
                change = self.store.relinquish(job_id, exit_code, now)
        except InvalidTransition:
            raise InvalidTransition(JOB_ENDED_ALREADY) from None
        self._end_on_node(job, change)

    def suspend(self, text: str, requester_uid: int, resume: bool = False) -> list[str]:
        """pscontrol suspend|resume ID (operators only, as slurmctld's validate_operator): each job
        ``text`` names (``14``, an array's id: its tasks, ``14_[5-9]``) SUSPENDED, its processes stopped
        on every node of its allocation, or RUNNING again, continued. The time it was suspended moves
        its time limit's end later (lifecycle.resume). One line per refusal, as scontrol prints them
        (:func:`update_report`: ``Job is pending execution for job 14``)."""
        try:
            ids = self.resolve(text)
        except SpecError:
            ids = []
        if requester_uid not in self.operators:
            return [f"{ACCESS_DENIED} for job {text}"]
        if not ids:
            return [f"{INVALID_JOB_ID} for job {text}"]
        outcome: dict[int, str | None] = {}
        found = self.store.jobs_with_ids(ids, light=True)
        for job in found:
            now = self.clock()
            try:
                change = self.store.resume(job.job_id, now) if resume else self.store.suspend(job.job_id, now)
            except InvalidTransition as exc:
                outcome[job.job_id] = str(exc)
                continue
            outcome[job.job_id] = None
            if change.from_state is not change.to:
                self._suspend_on_nodes(job, resume)
        return update_report(text, found, outcome)

    def _suspend_on_nodes(self, job: JobRecord, resume: bool) -> None:
        """Tell each agent of the job's allocation to stop or continue its run there (an agent out
        of reach is left as it was, and psctld's log says so: the node monitor takes a silent one as lost)."""
        for name in job.all_nodes:
            node = self.store.get_node(name)
            if node is None:
                continue
            try:
                self.agents.suspend(node.target, job.job_id, job.restarts, resume)
            except Exception as exc:  # AgentUnreachable, AgentRefused, an agent from before this RPC
                log.warning("job %d: %s did not reach %s: %s", job.job_id, "resume" if resume else "suspend",
                            name, exc)

    def _end_on_node(self, job: JobRecord, change: Change) -> None:
        """After a cancel or requeue request: a job now COMPLETING is ended by its agent."""
        if change.to is JobState.COMPLETING:
            self._signal(job, 0)
        self.reschedule()

    def signal_scoped(self, job: JobRecord, signal: int, scope: str = "") -> None:
        """scancel -s's signal where Slurm sends it (slurmctld's job_signal): a batch job's steps
        only (``scope`` ""), its batch shell only (``"batch"``, scancel -b) or both (``"full"``,
        scancel --full). SIGKILL, and any signal to a job that has no batch shell (psrun's,
        psalloc's: its command is its step), reach the whole job."""
        batch = scope != "full" and signal != SIGKILL and self._is_batch(job.job_id)
        if not batch:
            self._signal(job, signal)
        elif scope == "batch":
            self._signal_step(job.job_id, BATCH_STEP, job.all_nodes[:1], signal)
        else:
            for step in self.store.steps([job.job_id]).get(job.job_id, []):
                if step.state is JobState.RUNNING and step.step_id >= 0:
                    self._signal_step(job.job_id, step.step_id, expand(step.nodes), signal)

    def _is_batch(self, job_id: int) -> bool:
        full = self.store.get_job(job_id)  # a listing's record (light) does not say whether it has a script
        return full is not None and full.spec.script is not None

    def _signal_step(self, job_id: int, step_id: int, nodes: Sequence[str], signal: int) -> None:
        for name in nodes:
            node = self.store.get_node(name)
            if node is None:
                continue
            try:
                self.agents.signal_step(node.target, job_id, step_id, signal)
            except (AgentUnreachable, AgentRefused) as exc:  # the node monitor ends it if the agent lost it
                log.warning("cannot signal step %d.%s on %s: %s", job_id, step_name(step_id), name, exc)

    def _signal(self, job: JobRecord, signal: int, nodes: Sequence[str] | None = None) -> None:
        """Signal the job's processes on every node of its allocation (or on ``nodes``); 0 cancels."""
        for name in job.all_nodes if nodes is None else nodes:
            node = self.store.get_node(name)
            if node is None:
                continue
            try:
                self.agents.signal(node.target, job.job_id, signal)
            except AgentUnreachable as exc:  # the node monitor will take it as lost when it stays silent
                log.warning("cannot reach %s to signal job %d: %s", node.name, job.job_id, exc)

    def end_on_nodes(self, job_id: int, nodes: Sequence[str]) -> None:
        """A multi-node job's run ended (its first node's end, a lost node): its runs on these other
        nodes are ended at once (reconciliation kills whatever is left). Their own ends are then
        ignored: the controller no longer holds them."""
        for name in nodes:
            node = self.store.get_node(name)
            if node is None:
                continue
            try:
                self.agents.signal(node.target, job_id, 0)
            except AgentUnreachable as exc:
                log.warning("cannot reach %s to end job %d there: %s", name, job_id, exc)

    # -- job ends ---------------------------------------------------------------------------


def update_report(text: str, jobs: Sequence[JobRecord], outcome: Mapping[int, str | None]) -> list[str]:
    """scontrol update's lines for ``text``'s jobs (each job's error, or None for done): ``<why> for
    job 14`` for a job; for array tasks one ``14_<tasks>: <why>`` per outcome, ``No error`` among
    them where others failed (as scontrol prints slurmctld's per-task answers), none when all went."""
    if not any(j.array_job_id is not None for j in jobs):
        return [f"{why} for job {j.display_id}" for j in jobs if (why := outcome.get(j.job_id)) is not None]
    groups: dict[str, list[JobRecord]] = {}
    for job in sorted(jobs, key=lambda j: (j.array_job_id or j.job_id, j.array_task_id or 0)):
        groups.setdefault(outcome.get(job.job_id) or "No error", []).append(job)
    if list(groups) == ["No error"]:
        return []
    return [f"{tasks[0].array_job_id}_{format_ranges(t.array_task_id or 0 for t in tasks)}: {why}"
            for why, tasks in groups.items()]
