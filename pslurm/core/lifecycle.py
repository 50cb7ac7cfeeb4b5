"""The job lifecycle: every way a job's state may change, as named operations.

An operation is a guarded transition: the states it may start from, the states it may lead to,
and a guard on the job's flags (held, cancel or requeue asked, which run, which node). Each
function below takes what the store read of the job (:class:`JobFlags`) and returns the
:class:`Change` to write, or raises :class:`InvalidTransition` when the guard refuses. The store
applies a change as one compare-and-set (``UPDATE ... WHERE state = :read``) plus an event row
named after the operation; nothing else writes a job's state.

    submit ──> PENDING ──start──> RUNNING ──finish──> COMPLETED | FAILED | TIMEOUT | CANCELLED
                 │  ^           suspend │ ^ resume
                 │  │                 SUSPENDED (ends, is cancelled or lost as a RUNNING job is)
                 │  │                │  launch_failed ──> FAILED (JobLaunchFailure)
     hold/release│  │requeue         │  node_lost ──────> NODE_FAIL, or PENDING when it may requeue
                 v  │                │  cancel, request_requeue
    CANCELLED, DEADLINE         COMPLETING ──finish──> final, or PENDING when a requeue was asked
      (cancel)  (deadline)

A final state is left only by ``requeue`` (pscontrol requeue of a finished batch job).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pslurm.core.states import FINAL_STATES, InvalidTransition, JobReason, JobState

_ACTIVE = frozenset({JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING})
_RUNNING = frozenset({JobState.RUNNING})
_SUSPENDED = frozenset({JobState.SUSPENDED})
_AGENT_ENDS = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.TIMEOUT, JobState.CANCELLED,
                         JobState.OUT_OF_MEMORY})


@dataclass(frozen=True)
class Operation:
    """One named operation: the (from, to) state pairs it may take."""

    name: str
    edges: frozenset[tuple[JobState, JobState]]

    @property
    def sources(self) -> frozenset[JobState]:
        return frozenset(f for f, _ in self.edges)


def _op(name: str, *paths: tuple[frozenset[JobState], JobState]) -> Operation:
    return Operation(name, frozenset((f, to) for sources, to in paths for f in sources))


_PENDING = frozenset({JobState.PENDING})

# The lifecycle's table. ``submit`` has no source state: it creates the job.
OPERATIONS: Mapping[str, Operation] = MappingProxyType({op.name: op for op in (
    _op("submit"),
    _op("start", (_PENDING, JobState.RUNNING)),
    _op("launch_failed", (_ACTIVE, JobState.FAILED)),
    _op("finish", *((_ACTIVE, s) for s in _AGENT_ENDS), (_ACTIVE, JobState.PENDING)),  # PENDING: requeue asked
    _op("cancel", (_PENDING, JobState.CANCELLED), (_RUNNING | _SUSPENDED, JobState.COMPLETING)),
    _op("relinquish", (_RUNNING, JobState.COMPLETING)),  # psalloc's end: finish -> COMPLETED
    _op("request_requeue", (_ACTIVE, JobState.COMPLETING)),
    _op("requeue", (_ACTIVE | FINAL_STATES, JobState.PENDING)),
    _op("hold", (_PENDING, JobState.PENDING)),
    _op("release", (_PENDING, JobState.PENDING)),
    _op("node_lost", (_ACTIVE, JobState.NODE_FAIL), (_ACTIVE, JobState.PENDING)),  # PENDING: it may requeue
    _op("deadline", (_PENDING, JobState.DEADLINE)),
    _op("suspend", (_RUNNING, JobState.SUSPENDED), (_SUSPENDED, JobState.SUSPENDED)),  # again: nothing changes
    _op("resume", (_SUSPENDED, JobState.RUNNING)),
)})


def _transitions() -> dict[JobState, frozenset[JobState]]:
    table: dict[JobState, set[JobState]] = {s: set() for s in JobState}
    for op in OPERATIONS.values():
        for f, to in op.edges:
            if f is not to:
                table[to].add(f)
    return {k: frozenset(v) for k, v in table.items()}


# to_state -> the states it may be entered from, over every operation: the lifecycle's state diagram.
JOB_TRANSITIONS: Mapping[JobState, frozenset[JobState]] = MappingProxyType(_transitions())


def can_transition(from_state: JobState, to_state: JobState) -> bool:
    """True when some operation takes a job from ``from_state`` to ``to_state``."""
    return from_state in JOB_TRANSITIONS[to_state]


class NotPermitted(InvalidTransition):
    """The guard refuses this caller (a user releasing an operator's hold)."""


@dataclass(frozen=True)
class JobFlags:
    """What the lifecycle reads of a job besides its state: the store reads these in the same
    transaction as it writes the change."""

    job_id: int
    state: JobState
    hold: str = ""  # "", "user", "admin"
    cancel_requested: bool = False
    requeue_requested: bool = False
    requeue: bool = False  # may be requeued when its node is lost
    restarts: int = 0  # the run: a requeued job runs again with one more
    node: str | None = None
    relinquish_code: int | None = None  # psalloc's end asked, with the command's exit code; None: not asked
    nodes: str = ""  # the allocation's hostlist (a multi-node job's; ``node`` is its first)
    suspend_time: float | None = None  # its last suspend or resume (Slurm's suspend_time); None: never
    suspended_seconds: float = 0.0  # the time this run spent suspended before its last resume (tot_sus_time)


@dataclass(frozen=True)
class Change:
    """What an operation writes: the new state, the fields it sets and the event's detail."""

    op: str
    job_id: int
    from_state: JobState
    to: JobState
    detail: str
    values: Mapping[str, Any] = field(default_factory=dict)
    nodes: str = ""  # the store's note: the hostlist of the multi-node allocation it changed ("" one node)


def _change(op: str, job: JobFlags, to: JobState, detail: str, **values: Any) -> Change:
    if (job.state, to) not in OPERATIONS[op].edges:
        _require(op, job)
        raise InvalidTransition(f"job {job.job_id} is {job.state}: it cannot {op.replace('_', ' ')} to {to}")
    reason = values.get("reason")
    if reason is not None:
        # a new reason ends the words of the last one (slurmctld frees state_desc as it sets a reason), and a
        # pending job's is kept as the reason it waited for (accounting's state_reason_prev)
        values.setdefault("state_desc", "")
        if to is JobState.PENDING and reason.is_kept_wait:
            values["reason_prev"] = reason
    return Change(op, job.job_id, job.state, to, detail[:256], values)


def _require(op: str, job: JobFlags) -> None:
    """InvalidTransition unless ``op`` may start from the job's state."""
    if job.state not in OPERATIONS[op].sources:
        raise InvalidTransition(f"job {job.job_id} is {job.state}: it cannot {op.replace('_', ' ')}")


# slurmctld's state_desc for a job requeuehold requeued: squeue's %r shows it until the job is released
REQUEUED_HELD = "job requeued in held state"

# Fields a new run starts without: what the last run left (node, times, status, usage, flags).
_FRESH_RUN = MappingProxyType(dict(
    node=None, nodes="", gpu_indices=(), start_time=None, end_time=None, exit_code=0, exit_signal=0,
    cancel_requested=False, requeue_requested=False, start_estimate=None, eligible_time=None,
    gpu_seconds=None, peak_gpu_memory_mb=None, mean_gpu_util=None, max_rss_kb=None, total_cpu_seconds=None,
    user_cpu_seconds=None, system_cpu_seconds=None,
    reason=JobReason.NONE,
    relinquish_code=None, suspend_time=None, suspended_seconds=0.0,
))


def start(job: JobFlags, node: str, gpu_indices: tuple[int, ...], now: float, time_limit: int | None = None,
          more: tuple[str, ...] = ()) -> Change:
    """The scheduler placed it: PENDING -> RUNNING on ``node`` with those GPUs (and on the nodes
    ``more`` too: a multi-node job, ``node`` its first, the batch host). Not a held job
    (one held after the snapshot was taken loses the race here). ``time_limit``: the limit it runs
    under instead of its own (a job with a deadline and no limit runs until its deadline, as Slurm's)."""
    _require("start", job)
    if job.hold:
        raise InvalidTransition(f"job {job.job_id} is held")
    limit = {} if time_limit is None else {"time_limit": time_limit}
    nodes = node
    if more:
        from pslurm.core.hostlists import collect

        nodes = collect((node, *more))
    return _change("start", job, JobState.RUNNING, f"start on {nodes}", node=node, nodes=nodes,
                   gpu_indices=gpu_indices, start_time=now, reason=JobReason.NONE, **limit)


def launch_failed(job: JobFlags, node: str, restarts: int, why: str, now: float) -> Change:
    """The agent could not start this run (bad working directory, a device cgroup it cannot make...):
    FAILED, Reason=JobLaunchFailure, the agent's words kept as the SystemComment."""
    _require("launch_failed", job)
    _same_run(job, node, restarts)
    return _change("launch_failed", job, JobState.FAILED, f"launch failed on {node}: {why}",
                   end_time=now, exit_code=2, exit_signal=0, reason=JobReason.JOB_LAUNCH_FAILURE,
                   system_comment=f"launch failed on {node}: {why}"[:1024])


def finish(job: JobFlags, node: str, restarts: int, reported: JobState, exit_code: int, exit_signal: int,
           now: float, usage: Mapping[str, Any] | None = None, comment: str = "") -> Change:
    """The agent saw this run's processes end. A requeue asked meanwhile sends it back to PENDING;
    a cancel asked meanwhile ends it CANCELLED (unless its time ran out first). ``comment``: why the
    agent ended it (a GPU memory slice overrun), kept as the job's SystemComment."""
    if reported not in _AGENT_ENDS:
        raise InvalidTransition(f"job {job.job_id}: an agent cannot end a job {reported}")
    _require("finish", job)
    _same_run(job, node, restarts)
    if job.requeue_requested:
        return requeue(job, now, f"requeued (pscontrol requeue), ended on {node}", op="finish")
    if job.relinquish_code is not None and reported not in (JobState.TIMEOUT, JobState.OUT_OF_MEMORY):
        # psalloc relinquished it: its command's exit code is the job's, as salloc's slurm_complete_job
        reported, exit_code, exit_signal = (JobState.FAILED if job.relinquish_code else JobState.COMPLETED,
                                            job.relinquish_code, 0)
    elif job.cancel_requested and reported not in (JobState.TIMEOUT, JobState.OUT_OF_MEMORY):
        reported = JobState.CANCELLED
    return _change("finish", job, reported, f"ended on {node}", end_time=now, exit_code=exit_code,
                   exit_signal=exit_signal, reason=end_reason(reported, exit_signal), **(usage or {}),
                   **({"system_comment": comment[:1024]} if comment else {}))


def cancel(job: JobFlags, now: float, detail: str = "cancelled", reason: JobReason | None = None) -> Change:
    """scancel: a pending job ends CANCELLED at once; a running one is COMPLETING until its
    agent reports the end (then CANCELLED). A pending job keeps the reason it waited for, as
    slurmctld's (a held one its hold's, whether or not a scheduling pass wrote it yet), unless
    ``reason`` says why the system cancelled it (DependencyNeverSatisfied)."""
    if job.state is JobState.PENDING:
        if reason is None and job.hold:
            reason = JobReason.JOB_HELD_ADMIN if job.hold == "admin" else JobReason.JOB_HELD_USER
        return _change("cancel", job, JobState.CANCELLED, f"{detail} while pending", end_time=now,
                       exit_signal=15, **({} if reason is None else {"reason": reason}))
    return _change("cancel", job, JobState.COMPLETING, detail, cancel_requested=True)


def relinquish(job: JobFlags, exit_code: int, now: float) -> Change:
    """psalloc's end: the owner gives the allocation back (salloc's slurm_complete_job). It is
    COMPLETING until its agent reports the run's end; ``finish`` then ends it COMPLETED, or FAILED
    with ``exit_code`` (the command's) when that is not 0, as slurmctld's job_complete."""
    return _change("relinquish", job, JobState.COMPLETING, f"relinquished (exit code {exit_code})",
                   relinquish_code=exit_code)


def request_requeue(job: JobFlags, now: float, hold: str = "") -> Change:
    """pscontrol requeue of a running job: it ends first (COMPLETING); ``finish`` then requeues it,
    so its next run never starts while a process of this one is alive. ``hold`` ("user"):
    pscontrol requeuehold, the hold set now so that the job comes back PENDING held, never
    startable between the two."""
    return _change("request_requeue", job, JobState.COMPLETING, "requeue requested" + (" (held)" if hold else ""),
                   requeue_requested=True, **({"hold": hold} if hold else {}))


def requeue(job: JobFlags, now: float, detail: str, op: str = "requeue", hold: str = "") -> Change:
    """Back to PENDING with the same id and one more restart; the run's node, times, status and
    usage are cleared (its events keep every run). Held (``hold``, or the hold its requeuehold set)
    with Reason=JobHeldUser and slurmctld's words for it, "job requeued in held state"."""
    held = hold or job.hold
    return _change(op, job, JobState.PENDING, detail, **{**_FRESH_RUN, **(
        {"hold": held, "reason": JobReason.JOB_HELD_USER, "state_desc": REQUEUED_HELD} if held else {})},
        restarts=job.restarts + 1)


def hold(job: JobFlags, by_operator: bool) -> Change:
    """pscontrol hold (JobHeldAdmin) or uhold / a user's hold (JobHeldUser)."""
    kind = "admin" if by_operator else "user"
    return _change("hold", job, JobState.PENDING, f"held ({kind})", hold=kind)


def release(job: JobFlags, by_operator: bool) -> Change:
    """pscontrol release: only an operator releases an operator's hold."""
    _require("release", job)
    if not job.hold:
        raise InvalidTransition(f"job {job.job_id} is not held")
    if job.hold == "admin" and not by_operator:
        raise NotPermitted("held by an operator")
    return _change("release", job, JobState.PENDING, "released", hold="", eligible_time=None, state_desc="")


def node_lost(job: JobFlags, node: str, now: float, why: str) -> Change:
    """Its node went down, or its agent no longer runs it: requeued when it may be, else NODE_FAIL."""
    _require("node_lost", job)
    if job.node != node and not _holds(job, node):
        raise InvalidTransition(f"job {job.job_id} does not run on {node}")
    if job.requeue_requested or (job.requeue and not job.cancel_requested):
        return requeue(job, now, f"requeued after node failure: {why}", op="node_lost")
    return _change("node_lost", job, JobState.NODE_FAIL, why, end_time=now, reason=JobReason.NODE_DOWN,
                   system_comment=why[:1024])


def deadline(job: JobFlags, now: float, why: str) -> Change:
    """--deadline: a pending job that can no longer end before its deadline (Slurm's deadline_ok):
    DEADLINE, Reason=DeadLine, exit code 1, its start and end now (as Slurm records it). A held job
    too: its deadline passes all the same."""
    return _change("deadline", job, JobState.DEADLINE, why, start_time=now, end_time=now, exit_code=1,
                   exit_signal=0, reason=JobReason.DEADLINE)


# scontrol suspend / resume's refusals, Slurm's words (slurm_strerror of slurmctld's answer)
SUSPEND_PENDING = "Job is pending execution"  # ESLURM_JOB_PENDING
SUSPEND_NOT_RUNNING = "Job is not running"  # ESLURM_JOB_NOT_RUNNING: completing
NOT_SUSPENDED = "Job is not suspended"  # ESLURM_JOB_NOT_SUSPENDED: resume of a job that is not


def suspend(job: JobFlags, now: float) -> Change:
    """pscontrol suspend: RUNNING -> SUSPENDED, its processes to be stopped on every node; the time it
    stays suspended does not count against its time limit (see :func:`resume`). A job suspended
    already stays so, untouched (slurmctld's re-suspend). InvalidTransition, in Slurm's words, from any
    other state (:func:`suspend_refusal`)."""
    refusal = suspend_refusal(job.state, resume=False)
    if refusal:
        raise InvalidTransition(refusal)
    if job.state is JobState.SUSPENDED:
        return _change("suspend", job, JobState.SUSPENDED, "suspended again")
    return _change("suspend", job, JobState.SUSPENDED, "suspended", suspend_time=now)


def resume(job: JobFlags, now: float) -> Change:
    """pscontrol resume: SUSPENDED -> RUNNING; the time since its suspend is added to
    ``suspended_seconds``, by which its end moves later (its limit counts running time only)."""
    refusal = suspend_refusal(job.state, resume=True)
    if refusal:
        raise InvalidTransition(refusal)
    since = job.suspend_time if job.suspend_time is not None else now
    return _change("resume", job, JobState.RUNNING, "resumed", suspend_time=now,
                   suspended_seconds=job.suspended_seconds + max(0.0, now - since))


def suspend_refusal(state: JobState, resume: bool) -> str:
    """Why scontrol suspend (``resume`` False) or resume of a job in ``state`` is refused, in
    slurmctld's order (pending, finished, then not running / not suspended); "" when it may be."""
    if state is JobState.PENDING:
        return SUSPEND_PENDING
    if state.is_final:
        return JOB_ENDED
    if resume:
        return "" if state is JobState.SUSPENDED else NOT_SUSPENDED
    return "" if state in (JobState.RUNNING, JobState.SUSPENDED) else SUSPEND_NOT_RUNNING


def end_reason(state: JobState, exit_signal: int = 0) -> JobReason:
    """The Reason= a job ends with, as Slurm's: NonZeroExitCode, TimeLimit, NodeDown, OutOfMemory,
    else None; a batch script that a signal ended (``exit_signal``: it killed itself, or something on
    its node did) FAILED with JobLaunchFailure, as slurmctld's _job_complete words a WIFSIGNALED end."""
    if state is JobState.FAILED and exit_signal:
        return JobReason.JOB_LAUNCH_FAILURE
    return {JobState.FAILED: JobReason.NON_ZERO_EXIT_CODE, JobState.TIMEOUT: JobReason.TIME_LIMIT,
            JobState.NODE_FAIL: JobReason.NODE_DOWN, JobState.OUT_OF_MEMORY: JobReason.OUT_OF_MEMORY,
            }.get(state, JobReason.NONE)


def _holds(job: JobFlags, node: str) -> bool:
    """Whether ``node`` is one of a multi-node job's nodes."""
    if not job.nodes or job.nodes == job.node:
        return False
    from pslurm.core.hostlists import expand

    return node in expand(job.nodes)


def _same_run(job: JobFlags, node: str, restarts: int) -> None:
    """A report is about the job's current run on its node, not an earlier one that ended late."""
    if job.node != node or job.restarts != restarts:
        raise InvalidTransition(f"job {job.job_id}: a report from {node} of run {restarts} "
                                f"(the job is run {job.restarts} on {job.node})")


# -- steps -----------------------------------------------------------------------------------
#
#     create_step ──> RUNNING ──end_step──> COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL
#
# A step is never queued: it is created RUNNING inside its job's running allocation, or refused
# (the job not running: InvalidTransition; the allocation busy: StepBusy, and psrun retries). It ends
# once: its agent's report, its job's end (in the job's own transaction: run_ended_steps), or its
# node's loss.

STEP_ENDS = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT,
                       JobState.OUT_OF_MEMORY, JobState.NODE_FAIL})
JOB_ENDED = "Job/step already completing or completed"  # ESLURM_ALREADY_DONE, srun's and scancel's words
NODES_BUSY = "Requested nodes are busy"  # ESLURM_NODES_BUSY: a step waits for the allocation (psrun retries)


class StepBusy(InvalidTransition):
    """The allocation is busy with a step that does not overlap: the new step must wait."""


def create_step(job: JobFlags, overlap: bool, running_overlaps: Collection[bool]) -> None:
    """May a step start in ``job`` now? Only in a RUNNING job (not one completing: cancelled,
    relinquished); a step without ``--overlap`` only while no other such step runs
    (``running_overlaps``: the --overlap flag of each step running in the job). Raises
    InvalidTransition (JOB_ENDED) or StepBusy (NODES_BUSY)."""
    if job.state is not JobState.RUNNING:
        raise InvalidTransition(JOB_ENDED)
    if not overlap and not all(running_overlaps):
        raise StepBusy(NODES_BUSY)


@dataclass(frozen=True)
class StepHold:
    """What a step holds of its job's allocation, node by node (its ``nodes`` in order): CPUs and
    GPU indices. A default step (not ``exact``) holds the whole allocation on its nodes; an
    ``--overlap`` step holds nothing from the others."""

    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    gpus: tuple[tuple[int, ...], ...]
    overlap: bool = False
    exact: bool = False


def place_step(want: StepHold, gpus_wanted: tuple[int | None, ...], alloc_cpus: Mapping[str, int],
               alloc_gpus: Mapping[str, tuple[int, ...]], running: Collection[StepHold]) -> tuple[tuple[int, ...], ...]:
    """The GPUs a new step gets on each of its nodes, given what the job's running steps hold (Slurm's
    step_mgr): ``want`` the new step (its nodes, CPUs per node; its gpus unused), ``gpus_wanted`` per
    node (None: all of the job's GPUs there). A step without ``--overlap`` waits (StepBusy,
    NODES_BUSY) while what it needs is held: a default step needs the whole allocation (no other
    non-overlapping step running), an ``--exact`` one only its CPUs and GPUs, free of what the others
    hold. GPUs chosen: the lowest free indices of the job's on the node."""
    holders = [] if want.overlap else [r for r in running if not r.overlap]
    if holders and not want.exact:
        raise StepBusy(NODES_BUSY)
    out: list[tuple[int, ...]] = []
    for i, node in enumerate(want.nodes):
        job_gpus = alloc_gpus.get(node, ())
        count = len(job_gpus) if gpus_wanted[i] is None else gpus_wanted[i]
        used_cpus, used_gpus = 0, set[int]()
        for r in holders:
            if node not in r.nodes:
                continue
            if not r.exact:
                raise StepBusy(NODES_BUSY)
            j = r.nodes.index(node)
            used_cpus += r.cpus[j] if j < len(r.cpus) else alloc_cpus.get(node, 0)
            used_gpus.update(r.gpus[j] if j < len(r.gpus) else ())  # none recorded: none held
        free = [g for g in job_gpus if g not in used_gpus]
        if (count or 0) > len(free) or want.cpus[i] + used_cpus > alloc_cpus.get(node, 0) and holders:
            raise StepBusy(NODES_BUSY)
        out.append(tuple(free[:count]))
    return tuple(out)


def end_step(job_id: int, step_id: int, state: JobState, to: JobState) -> None:
    """A RUNNING step ends ``to`` (one of STEP_ENDS); InvalidTransition for one already ended."""
    if to not in STEP_ENDS:
        raise InvalidTransition(f"step {job_id}.{step_id}: a step cannot end {to}")
    if state is not JobState.RUNNING:
        raise InvalidTransition(f"step {job_id}.{step_id} is {state}: {JOB_ENDED}")


# a step's end over its nodes: the worst of theirs (a lost node worst of all)
_STEP_END_RANK = {JobState.COMPLETED: 0, JobState.FAILED: 1, JobState.OUT_OF_MEMORY: 2, JobState.TIMEOUT: 3,
                  JobState.CANCELLED: 4, JobState.NODE_FAIL: 5}


def combine_step_ends(a: tuple[JobState, int, int] | None, b: tuple[JobState, int, int]) -> tuple[JobState, int, int]:
    """Two nodes' ends of one step, (state, exit code, signal), as one: the worst state, the largest
    exit code, a signal over none (the later's when both were killed). ``a`` None: ``b``."""
    if a is None:
        return b
    state = max(a[0], b[0], key=lambda s: _STEP_END_RANK.get(s, 0))
    return state, max(a[1], b[1]), b[2] or a[2]


def run_ended_steps(change: Change) -> JobState | None:
    """The state a job's still RUNNING steps end in when ``change`` ends the job's run (its finish,
    launch failure, node loss, requeue): NODE_FAIL when its node was lost, else CANCELLED. None when
    the run goes on (or there was none)."""
    if change.from_state not in _ACTIVE or change.to in _ACTIVE:
        return None
    return JobState.NODE_FAIL if change.op == "node_lost" else JobState.CANCELLED
