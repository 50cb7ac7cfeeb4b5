"""The job service: users' and agents' requests about jobs, turned into the lifecycle's operations.

Submit (checked against the configuration and the limits, committed PENDING before it answers),
cancel and signal, hold, release, requeue, scontrol update JobId= (time limit, partition, name,
account, priority, nice, ...), and the ends the agents report. Every state change is one of the
store's lifecycle operations, every other change a guarded update of the store's; this service
decides which one a request is, checks who may ask it, signals agents where a running job must end
(or has a new time limit), and rings the scheduler's doorbell.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pslurm.auth.credential import Identity
from pslurm.controller.admission import admit
from pslurm.controller.agents import AgentUnreachable
from pslurm.controller.assocs import assoc_limits, charge
from pslurm.controller.errors import NotFound, PermissionDenied
from pslurm.controller.ports import Agents, Reschedule
from pslurm.controller.store import Store
from pslurm.core.arrays import format_ranges, parse_array, parse_task_selector
from pslurm.core.assoc import Associations, config_associations
from pslurm.core.config import ClusterConfig, scheduler_config
from pslurm.core.dependency import parse_dependency
from pslurm.core.gres import GresRequest
from pslurm.core.jobdesc import parse_mem
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.jobupdate import PENDING_ONLY, checked_changes, new_time_limit
from pslurm.core.lifecycle import Change, NotPermitted
from pslurm.core.states import InvalidTransition, JobState
from pslurm.core.timefmt import format_duration

log = logging.getLogger("psctld")

# slurm_strerror's words for what scontrol update is refused with (slurm_errno.c)
INVALID_JOB_ID = "Invalid job id specified"  # ESLURM_INVALID_JOB_ID
INVALID_USER = "Invalid user id"  # ESLURM_USER_ID_MISSING: another user's job
JOB_FINISHED = "Job has already finished"  # ESLURM_JOB_FINISHED
NOT_PENDING = "Job is no longer pending execution"  # ESLURM_JOB_NOT_PENDING
ACCESS_DENIED = "Access/permission denied"  # ESLURM_ACCESS_DENIED: a user raising a limit, setting a priority

JOB_ENDED_ALREADY = "Job/step already completing or completed"  # ESLURM_ALREADY_DONE
SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


@dataclass(frozen=True)
class Submission:
    """A request :meth:`JobService.check_submission` accepted: what the store would be given."""

    spec: JobSpec  # with the defaults the controller fills in (account, qos, a GPU memory slice)
    partition: str
    time_limit: int | None  # seconds in force; None is unlimited
    requeue: bool
    array_ids: tuple[int, ...] = ()
    throttle: int | None = None


class JobService:
    def __init__(self, config: ClusterConfig, store: Store, agents: Agents, reschedule: Reschedule,
                 clock: Callable[[], float] = time.time, operators: frozenset[int] = frozenset({0})) -> None:
        self.config = config
        self.store = store
        self.agents = agents
        self.reschedule = reschedule
        self.clock = clock
        self.operators = operators  # uids with operator rights: root and the user psctld runs as (SlurmUser)
        self.sched = scheduler_config(config)
        fixed = config_associations(config)
        # accounts and QOS: the association service's (controller/assocs.py) once assembled
        self.associations: Callable[[], Associations] = lambda: fixed

    def submit(self, spec: JobSpec, requester: Identity) -> int:
        """Check the request and the limits, store it PENDING (every task of an array; committed before
        we answer), wake the scheduler. Returns the job id (the array's id). A job runs as the user it
        names: only an operator may submit one for somebody else."""
        checked = self.check_submission(spec, requester)
        job_id = self.store.submit(checked.spec, checked.partition, checked.time_limit, self.clock(),
                                   requeue=checked.requeue, array_ids=checked.array_ids, throttle=checked.throttle)
        self.reschedule()
        return job_id

    def check_submission(self, spec: JobSpec, requester: Identity) -> Submission:
        """What :meth:`submit` checks, nothing stored: the request as it would be stored (its
        defaults filled in), or the refusal (SpecError, PermissionDenied). psbatch --test-only asks
        the scheduler about the request so checked."""
        if requester.uid not in self.operators:
            _check_own(spec, requester)
        sched = self.sched
        gpu_memory = None
        if spec.gpu_mem or any(g.name == "gpumem" for g in spec.gres):
            gpu_memory = self._gpu_memory()
            spec = self._with_gpu_slice(spec, gpu_memory)
        spec, assoc, qos = charge(self.associations(), spec)  # -A and --qos, or the defaults (assocs.py)
        admitted = admit(spec, self.config, enforce_part_limits=sched.enforce_part_limits,
                         groups=_group_names(spec.user, spec.gid), gpu_memory=gpu_memory, now=self.clock())
        spec = replace(spec, qos=qos.name)
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
        time_limit = assoc_limits(assoc, qos, admitted.time_limit, spec.time_limit,
                                  lambda: self.store.count_active(spec.user), count)
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
        return Submission(spec, admitted.partition, time_limit, requeue, array_ids, throttle)

    def _gpu_memory(self) -> dict[str, int]:
        """The memory of each registered node's largest GPU (nodes whose agents reported none are left out)."""
        found = {}
        for node in self.store.get_nodes():
            sizes = [g.memory_mb for g in node.gpus if g.memory_mb]
            if sizes:
                found[node.name] = max(sizes)
        return found

    def _with_gpu_slice(self, spec: JobSpec, gpu_memory: Mapping[str, int]) -> JobSpec:
        """``--gpu-mem`` as the job's ``gpumem:MB`` GRES item. ``auto``: the largest peak of the last
        runs of the same job name by the same user, plus GpuMemAutoMargin percent; without history,
        GpuMemAutoDefault, else a whole GPU's memory (the smallest GPU of the job's partition), so that
        a first run is measured before it is packed."""
        if not spec.gpu_mem:
            return spec
        if any(g.name == "gpumem" for g in spec.gres):
            raise SpecError("Invalid GRES specification: --gpu-mem and --gres=gpumem both given")
        if spec.gpu_mem != "auto":
            mb = parse_mem(spec.gpu_mem)  # the commands send MB; an API client may send 8G
        else:
            peak = self.store.gpu_memory_peak(spec.user, spec.name)
            if peak is not None:
                mb = max(1, math.ceil(peak * (100 + self.sched.gpu_mem_auto_margin) / 100))
            elif self.sched.gpu_mem_auto_default:
                mb = self.sched.gpu_mem_auto_default
            else:
                part = self.config.partitions.get(spec.partition or "") or self.config.default_partition
                sizes = [gpu_memory[n] for n in (part.nodes if part else ()) if n in gpu_memory]
                if not sizes:
                    raise SpecError(f"--gpu-mem=auto: job {spec.name} has no earlier run to size it by, and no GPU "
                                    "memory is known in its partition: give --gpu-mem=SIZE")
                mb = min(sizes)
        if mb < 1:
            raise SpecError(f"Invalid --gpu-mem specification: {spec.gpu_mem}")
        return replace(spec, gres=(*spec.gres, GresRequest("gpumem", None, mb)))

    def resolve(self, text: str) -> list[int]:
        """The job ids ``14``, ``14_3`` or ``14_[5-9]`` names (an array's id: every task). SpecError
        for a malformed id; [] for an unknown one."""
        job_id, tasks = parse_task_selector(text)
        return self.store.resolve(job_id, tasks)

    def update_job(self, text: str, requester_uid: int, action: str = "", priority: int | None = None,
                   nice: int | None = None, changes: Mapping[str, object] | None = None) -> list[str]:
        """pscontrol hold|uhold|release|requeue ID (``action``), and update JobId=ID KEY=VALUE...
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
        if action not in ("hold", "uhold", "release", "requeue"):
            raise SpecError(f"Invalid job action: {action}")
        errors = []
        for job in self.store.get_jobs(job_ids=ids, include_finished=True):
            if job.job_id not in ids:
                continue
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
        found = [j for j in self.store.get_jobs(job_ids=ids, include_finished=True) if j.job_id in ids]
        for job in found:
            outcome[job.job_id] = self._update_one(job, wanted, requester_uid, admin)
        self.reschedule()
        return update_report(text, found, outcome)

    def _update_one(self, job: JobRecord, changes: Mapping[str, Any], uid: int, admin: bool) -> str | None:
        """One job's update: its error in scontrol's words, or None once written. A job that started
        (or ended) between the read and the write is read again and checked again, once."""
        for _ in range(2):
            if not admin and uid != job.spec.uid:
                return INVALID_USER  # ESLURM_USER_ID_MISSING: scontrol's answer to another user's job
            if job.state.is_final or job.state is JobState.COMPLETING:
                return JOB_FINISHED
            try:
                columns, request, detail = self._update_values(job, changes, admin)
            except SpecError as exc:
                return str(exc)
            if not columns and not request:
                return None  # every value as it was: nothing to write, as slurmctld
            if self.store.update_fields(job.job_id, job.state, job.restarts, self.clock(), detail, columns,
                                        request):
                if "time_limit" in columns and job.state is JobState.RUNNING:
                    self._send_time_limit(job, columns["time_limit"])
                return None
            fresh = self.store.get_job(job.job_id)
            if fresh is None:
                return INVALID_JOB_ID
            job = fresh
        return NOT_PENDING if changes.keys() & PENDING_ONLY else JOB_FINISHED

    def _update_values(self, job: JobRecord, changes: Mapping[str, Any], admin: bool
                       ) -> tuple[dict[str, Any], dict[str, Any], str]:
        """What ``changes`` write to ``job`` (its columns, its request's fields) and the event's detail,
        in slurmctld's order of checks (_update_job); SpecError with scontrol's words for the first
        refusal. Values already in force are left out."""
        spec, pending = job.spec, job.state is JobState.PENDING
        columns: dict[str, Any] = {}
        request: dict[str, Any] = {}
        words: list[str] = []

        def pending_only() -> None:
            if not pending:
                raise SpecError(NOT_PENDING)

        partition = job.partition
        if "partition" in changes and changes["partition"] != job.partition:
            pending_only()
            partition = str(changes["partition"])
            if partition not in self.config.partitions:
                raise SpecError("Invalid partition name specified")
        account = spec.account
        if "account" in changes:
            pending_only()  # as slurmctld: even the same account, once the job started
            account = self.associations().job_account(spec.user, str(changes["account"]), partition)
            if account and len(account) > 64:
                raise SpecError("Invalid job request: the account is longer than 64 characters")
        ntasks = spec.ntasks
        if "num_tasks" in changes:
            pending_only()
            ntasks = int(changes["num_tasks"])
            if ntasks < 1:
                raise SpecError("Task count specification invalid")
        time_limit, asked = job.time_limit, spec.time_limit
        if "time_limit" in changes:
            try:
                asked = new_time_limit(str(changes["time_limit"]), job.time_limit)
            except ValueError as exc:
                raise SpecError(str(exc)) from None
            if asked != job.time_limit:
                max_time = self.config.partitions[partition].max_time if partition in self.config.partitions \
                    else None
                # slurmctld: an operator sets any limit, a user lowers it, or raises a pending job's up
                # to its partition's MaxTime
                if not (admin or _longer(job.time_limit, asked) or (pending and _longer(max_time, asked, True))):
                    raise SpecError(ACCESS_DENIED)
            time_limit = asked
        for key in ("priority", "nice"):
            if key in changes:
                pending_only()
                if not admin and (key == "priority" or int(changes[key]) < 0):
                    raise SpecError(ACCESS_DENIED)
        mem_mb = spec.mem_mb
        if "min_memory_node" in changes:
            pending_only()
            mem_mb = int(changes["min_memory_node"])
        name = str(changes.get("name", spec.name))
        if len(name) > 256:
            raise SpecError("Invalid job request: the job name is longer than 256 characters")
        comment = changes.get("comment")
        if comment is not None and len(str(comment)) > 1024:
            raise SpecError("Invalid job request: the comment is longer than 1024 characters")

        if (partition, ntasks, mem_mb) != (job.partition, spec.ntasks, spec.mem_mb):
            # what decides where a pending job may run changed: admitted again, as at submit
            candidate = replace(spec, partition=partition, ntasks=ntasks, mem_mb=mem_mb, time_limit=asked)
            gres = spec.gres
            gpu_memory = self._gpu_memory() if any(g.name == "gpumem" for g in gres) else None
            admitted = admit(candidate, self.config, enforce_part_limits=self.sched.enforce_part_limits,
                             groups=_group_names(spec.user, spec.gid), gpu_memory=gpu_memory)
            time_limit = admitted.time_limit
        if partition != job.partition:
            columns["partition"] = request["partition"] = partition
            words.append(f"Partition={partition}")
        if account != spec.account:
            columns["account"] = request["account"] = account
            words.append(f"Account={account}")
        if ntasks != spec.ntasks:
            request["ntasks"] = ntasks
            columns["cpus"] = ntasks * spec.cpus_per_task
            words.append(f"NumTasks={ntasks}")
        if mem_mb != spec.mem_mb:
            columns["mem_mb"] = request["mem_mb"] = mem_mb
            words.append(f"MinMemoryNode={mem_mb}")
        if time_limit != job.time_limit or asked != spec.time_limit:
            columns["time_limit"], request["time_limit"] = time_limit, asked
            words.append(f"TimeLimit={format_duration(time_limit)}")
        if "priority" in changes:
            columns["admin_priority"] = columns["priority"] = int(changes["priority"])
            words.append(f"Priority={changes['priority']}")
        if "nice" in changes and changes["nice"] != spec.nice:
            columns["nice"] = request["nice"] = int(changes["nice"])
            words.append(f"Nice={changes['nice']}")
        if name != spec.name:
            columns["name"] = request["name"] = name
            words.append(f"JobName={name}")
        if comment is not None and comment != spec.comment:
            columns["comment"] = request["comment"] = str(comment)
            words.append(f"Comment={comment}")
        return columns, request, "update " + " ".join(words)

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
        """hold, uhold, release or requeue one job; the error's words, or None."""
        now = self.clock()
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
                self.store.requeue(job.job_id, now, f"requeued (pscontrol requeue) after {job.state}")
            else:  # it ends first: its next run never starts while a process of this one is alive
                self._end_on_node(job, self.store.request_requeue(job.job_id, now))
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

    def _cancel_one(self, job: JobRecord, signal: int) -> None:
        if signal == 0:
            self._end_on_node(job, self.store.cancel(job.job_id, self.clock(), "cancel requested"))
        elif job.state.holds_resources:  # a signal to a pending job has nothing to reach
            self._signal(job, signal)

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

    def _end_on_node(self, job: JobRecord, change: Change) -> None:
        """After a cancel or requeue request: a job now COMPLETING is ended by its agent."""
        if change.to is JobState.COMPLETING:
            self._signal(job, 0)
        self.reschedule()

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


def _longer(limit: int | None, than: int | None, or_equal: bool = False) -> bool:
    """Whether time limit ``limit`` is longer than ``than`` (or as long, with ``or_equal``); None is no limit."""
    if limit is None:
        return than is not None or or_equal
    if than is None:
        return False
    return limit > than or (or_equal and limit == than)


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
    except (KeyError, OSError, ValueError):  # ValueError: a NUL byte, which admission refuses
        return []
    names = []
    for g in ids:
        try:
            names.append(grp.getgrgid(g).gr_name)
        except KeyError:
            continue
    return names
