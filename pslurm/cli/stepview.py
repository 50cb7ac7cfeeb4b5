"""A job's steps as squeue -s, scontrol show step and sacct show them: the steps the API lists
(``job.steps``) and the batch step of a batch job that ran.

Standard library only: the commands import this on their path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from pslurm.core.jobinfo import JobInfo as Job

BATCH = 0xFFFFFFFB  # Slurm's SLURM_BATCH_SCRIPT: the batch step sorts after the numbered ones


class StepRow:
    """One step of a job: ``J.0``, ``J.batch``."""

    __slots__ = ("job", "step_id", "job_id", "sort_key", "name", "state", "start_time", "end_time", "nodes",
                 "ntasks", "cpus", "exit_code", "exit_signal")

    def __init__(self, job: Job, suffix: str, name: str, state: str, start: float | None, end: float | None,
                 nodes: str, ntasks: int, cpus: int, exit_code: int = 0, exit_signal: int = 0) -> None:
        self.job, self.job_id = job, job.job_id
        self.step_id = f"{job.display_id}.{suffix}"
        self.sort_key = int(suffix) if suffix.isdigit() else BATCH
        self.name, self.state, self.start_time, self.end_time = name, state, start, end
        self.nodes, self.ntasks, self.cpus = nodes, ntasks, cpus
        self.exit_code, self.exit_signal = exit_code, exit_signal


def step_rows(job: Job) -> list[StepRow]:
    """The job's steps, its batch step first when it is a batch job that started."""
    from pslurm.cli.jobview import batch_host_cpus

    rows = []
    spec = job.spec
    if job.start_time is not None and job.node and not spec.interactive and not spec.allocation:
        state = "RUNNING" if job.state.holds_resources else job.state.value
        rows.append(StepRow(job, "batch", "batch", state, job.start_time, job.end_time, job.node, 1,
                            batch_host_cpus(job), job.exit_code, job.exit_signal))
    for step in job.steps:
        nodes = str(step.get("nodes") or "")
        rows.append(StepRow(job, str(step["step_id"]), str(step.get("name") or ""), str(step["state"]),
                            step.get("start_time"), step.get("end_time"), nodes, int(step.get("ntasks") or 1),
                            int(step.get("cpus") or 1), int(step.get("exit_code") or 0),
                            int(step.get("exit_signal") or 0)))
    return rows


def step_fields(now: float) -> dict[str, tuple[str, Callable[[Any], str]]]:
    """squeue -s's fields, by -o letter (and -O name)."""
    from pslurm.cli.squeue_fields import secs, stamp

    def used(row: StepRow) -> float:
        if row.start_time is None:
            return 0.0
        return max(0.0, (row.end_time or now) - row.start_time)

    fields: dict[str, tuple[str, Callable[[Any], str]]] = {
        "i": ("STEPID", lambda r: r.step_id),
        "j": ("NAME", lambda r: r.name),
        "P": ("PARTITION", lambda r: r.job.partition),
        "u": ("USER", lambda r: r.job.spec.user),
        "U": ("UID", lambda r: str(r.job.spec.uid)),
        "M": ("TIME", lambda r: secs(used(r))),
        "l": ("TIME_LIMIT", lambda r: secs(r.job.time_limit)),
        "S": ("START_TIME", lambda r: stamp(r.start_time)),
        "N": ("NODELIST", lambda r: r.nodes),
        "A": ("TASKS", lambda r: str(r.ntasks)),
        "b": ("TRES_PER_NODE", lambda r: "N/A"),
        "T": ("STATE", lambda r: r.state),
    }
    names = {"stepid": "i", "stepname": "j", "name": "j", "partition": "P", "username": "u", "userid": "U",
             "timeused": "M", "timelimit": "l", "starttime": "S", "nodelist": "N", "numtasks": "A", "stepstate": "T",
             "state": "T", "jobid": "i"}
    return {**fields, **{name: fields[letter] for name, letter in names.items()}}
