"""What the commands show of a job, in one place for psqueue, pscontrol and psacct.

A job here is a :class:`~pslurm.core.jobinfo.JobInfo` (the API's JSON, as the commands read it)
or a :class:`~pslurm.core.jobspec.JobRecord` (what :class:`pslurm.client.Client` returns): they have
the same attributes. Standard library only, and what a job needs only when it has it (a
dependency, GRES)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from pslurm.core.jobinfo import JobDesc, JobInfo
    from pslurm.core.jobspec import JobRecord, JobSpec

    Job = JobRecord | JobInfo
    Spec = JobSpec | JobDesc


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
