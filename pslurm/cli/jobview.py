"""What the commands show of a job, in one place for psqueue, pscontrol and psacct.

A job here is a :class:`~pslurm.core.jobinfo.JobInfo` (what :class:`pslurm.client.Client` returns:
the API's JSON, read on access), its request a :class:`~pslurm.core.jobinfo.JobDesc`. Standard
library only, and what a job needs only when it has it (a dependency, GRES)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from pslurm.core.jobinfo import JobDesc as Spec
    from pslurm.core.jobinfo import JobInfo as Job


def dependency_text(job: Job) -> str:
    """squeue's %E and scontrol's Dependency=: ``afterok:15(unfulfilled)``, ``...(failed)``, ``(null)``."""
    text = job.spec.dependency
    if not text:
        return "(null)"  # as describe() says, without importing it
    from pslurm.core.dependency import DepStatus, describe
    from pslurm.core.states import JobReason, JobState

    status = {JobReason.DEPENDENCY: DepStatus.WAITING,
              JobReason.DEPENDENCY_NEVER_SATISFIED: DepStatus.NEVER}.get(job.reason)
    return describe(text, status if job.state == JobState.PENDING else DepStatus.SATISFIED)


def gres_text(spec: Spec) -> str:
    """The GRES asked per node as Slurm prints them (``gpu:a100:2,gpu:1``); "" for none."""
    gres = spec.gres
    if not gres:
        return ""
    from pslurm.core.gres import format_gres

    return format_gres(gres)


def tres_per_node_text(job: Job) -> str:
    """squeue's %b and ``-O tres-per-node`` (TRES_PER_NODE) as Slurm 22.05 prints them: ``gres:gpu:1``,
    ``gres:gpu:a100:2,gres:gpu:1``; ``N/A`` for a job without GRES. (slurmrestd's JSON and Slurm 23.02
    on write ``gres/gpu:1``; squeue of 22.05 shows the ``gres:`` form.)"""
    if not job.spec.gres:
        return "N/A"
    return ",".join("gres:" + item for item in gres_text(job.spec).split(","))


def time_used(job: Job, now: float | None = None) -> float:
    """Seconds the job has run (squeue's job_time_used): 0 before it starts, up to its end after."""
    if job.start_time is None:
        return 0.0
    import time

    end = job.end_time if job.end_time is not None else (time.time() if now is None else now)
    return max(0.0, end - job.start_time)


def time_left_text(job: Job, now: float | None = None) -> str:
    """squeue's %L (TIME_LEFT): the time limit less the time used, as ``[D-]H:MM:SS`` or ``M:SS``;
    ``UNLIMITED`` for a job without a limit; ``INVALID`` when the job has run past its limit (squeue
    prints a negative duration so)."""
    if job.time_limit is None:
        return "UNLIMITED"
    left = int(job.time_limit - time_used(job, now))
    if left < 0 or left > 365 * 86400:
        return "INVALID"
    from pslurm.core.timefmt import format_duration

    return format_duration(left)


def job_nodes(job: Job) -> tuple[str, ...]:
    """The nodes of the job's allocation, in order (the first is its batch host); () before it started."""
    return tuple(job.nodes) or ((job.node,) if job.node else ())


def nodelist_text(job: Job) -> str:
    """squeue's %N, scontrol's NodeList=, sacct's NodeList: the allocation as a hostlist ("" before it)."""
    nodes = job_nodes(job)
    if len(nodes) <= 1:
        return nodes[0] if nodes else ""
    from pslurm.core.hostlists import collect

    return collect(nodes)


def node_count(job: Job) -> int:
    """squeue's %D, scontrol's NumNodes=: the nodes it has, or (before it starts) the nodes it asks for."""
    return len(job_nodes(job)) or job.spec.num_nodes


def total_cpus(job: Job) -> int:
    """The job's CPUs on all of its nodes (squeue's %C, sacct's AllocCPUS): each node's tasks times
    --cpus-per-task (core/layout.py's node_layout)."""
    spec = job.spec
    nodes = node_count(job)
    if nodes <= 1 and not spec.ntasks_per_node:
        return spec.cpus
    from pslurm.core.layout import tasks_per_node

    return sum(tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node)) * max(1, spec.cpus_per_task)


def total_tasks(job: Job) -> int:
    """NumTasks=: -n, or (for -N without -n) a task on each node."""
    spec = job.spec
    nodes = node_count(job)
    if spec.ntasks >= nodes:
        return spec.ntasks
    from pslurm.core.layout import tasks_per_node

    return sum(tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node))
