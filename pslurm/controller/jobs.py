"""The job service: users' and agents' requests about jobs, turned into the lifecycle's operations.

Submit (checked against the configuration and the limits, committed PENDING before it answers),
cancel and signal, hold, release, requeue, priority and nice, and the ends the agents report.
Every state change is one of the store's lifecycle operations; this service decides which one a
request is, checks who may ask it, signals agents where a running job must end, and rings the
scheduler's doorbell.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from pslurm.auth.credential import Identity
from pslurm.controller.admission import admit
from pslurm.controller.agents import AgentUnreachable
from pslurm.controller.errors import PermissionDenied
from pslurm.controller.ports import Agents, Reschedule
from pslurm.controller.store import Store
from pslurm.core.arrays import parse_array, parse_task_selector
from pslurm.core.config import ClusterConfig, scheduler_config
from pslurm.core.dependency import parse_dependency
from pslurm.core.gres import GresRequest
from pslurm.core.jobdesc import parse_mem
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.lifecycle import Change, NotPermitted
from pslurm.core.states import InvalidTransition, JobState

log = logging.getLogger("psctld")

SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


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

    def submit(self, spec: JobSpec, requester: Identity) -> int:
        """Check the request and the limits, store it PENDING (every task of an array; committed before
        we answer), wake the scheduler. Returns the job id (the array's id). A job runs as the user it
        names: only an operator may submit one for somebody else."""
        if requester.uid not in self.operators:
            _check_own(spec, requester)
        sched = self.sched
        gpu_memory = None
        if spec.gpu_mem or any(g.name == "gpumem" for g in spec.gres):
            gpu_memory = self._gpu_memory()
            spec = self._with_gpu_slice(spec, gpu_memory)
        admitted = admit(spec, self.config, enforce_part_limits=sched.enforce_part_limits,
                         groups=_group_names(spec.user, spec.gid), gpu_memory=gpu_memory)
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
        self.reschedule()
        return job_id

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
                   nice: int | None = None) -> list[str]:
        """pscontrol hold|release|requeue ID, update JobId=ID Priority=N Nice=N. One error line per job
        that could not be changed."""
        ids = self.resolve(text)
        if not ids:
            return [f"Invalid job id specified: {text}"]
        admin = requester_uid in self.operators
        if action not in ("", "hold", "uhold", "release", "requeue"):
            raise SpecError(f"Invalid job action: {action}")
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
            error = self._act(job, action, admin) if action else None
            if error is None and priority is not None:
                if not admin:
                    error = "Access/permission denied (setting a priority needs an operator)"
                else:
                    self.store.set_pending_fields([job.job_id], admin_priority=priority, priority=priority)
            if error is None and nice is not None:
                if nice < 0 and not admin:
                    error = "Access/permission denied (a negative nice needs an operator)"
                else:
                    self.store.set_pending_fields([job.job_id], nice=nice)
            if error is not None:
                errors.append(f"Job {name}: {error}")
        self.reschedule()
        return errors

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

    def _end_on_node(self, job: JobRecord, change: Change) -> None:
        """After a cancel or requeue request: a job now COMPLETING is ended by its agent."""
        if change.to is JobState.COMPLETING:
            self._signal(job, 0)
        self.reschedule()

    def _signal(self, job: JobRecord, signal: int) -> None:
        node = self.store.get_node(job.node or "")
        if node is None:
            return
        try:
            self.agents.signal(node.target, job.job_id, signal)
        except AgentUnreachable as exc:  # the node monitor will take it as lost when it stays silent
            log.warning("cannot reach %s to signal job %d: %s", node.name, job.job_id, exc)

    # -- job ends ---------------------------------------------------------------------------


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
