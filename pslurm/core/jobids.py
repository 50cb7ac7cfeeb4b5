"""How Slurm names jobs: one place that writes a job's id and reads the ids the commands take.

Standard library only, and none of it: every command names jobs on its path.
"""

from __future__ import annotations


def display_id(job_id: int, array_job_id: int | None = None, array_task_id: int | None = None) -> str:
    """How Slurm names a job: ``A_i`` for task i of array A, the job id otherwise. The one place
    this is computed (records, listings, priorities)."""
    return str(job_id) if array_job_id is None else f"{array_job_id}_{array_task_id}"
