"""How Slurm names jobs: one place that writes a job's id and reads the ids the commands take.

Standard library only, and none of it: every command names jobs on its path.
"""

from __future__ import annotations


def display_id(job_id: int, array_job_id: int | None = None, array_task_id: int | None = None) -> str:
    """How Slurm names a job: ``A_i`` for task i of array A, the job id otherwise. The one place
    this is computed (records, listings, priorities)."""
    return str(job_id) if array_job_id is None else f"{array_job_id}_{array_task_id}"


class JobSelector:
    """One job id as Slurm's commands read it: ``5`` (the job, or every task of array 5), ``5_1`` (task 1 of
    array 5), ``5_[1-3,7]`` (tasks), ``5.0`` / ``5.batch`` / ``5.extern`` (a step), ``5+0`` (component 0 of a
    heterogeneous job), ``5_1.0`` (a step of a task)."""

    __slots__ = ("job_id", "tasks", "step", "het")

    def __init__(self, job_id: int, tasks: tuple[int, ...] | None = None, step: str | None = None,
                 het: int | None = None) -> None:
        self.job_id, self.tasks, self.step, self.het = job_id, tasks, step, het

    def __repr__(self) -> str:
        return f"JobSelector({self.job_id}, tasks={self.tasks}, step={self.step!r}, het={self.het})"

    def selects(self, job_id: int, array_job_id: int | None, array_task_id: int | None) -> bool:
        """Whether a job (or an array's task) is one this names."""
        if self.tasks is None:
            return job_id == self.job_id or array_job_id == self.job_id
        return array_job_id == self.job_id and array_task_id in self.tasks


STEP_NAMES = ("batch", "extern", "interactive")


def parse_job_id(text: str) -> JobSelector:
    """A job id as Slurm reads it (see :class:`JobSelector`). ValueError for anything else."""
    word = text.strip()
    head, dot, step = word.partition(".")
    if dot and not (step.isdigit() or step in STEP_NAMES):
        raise ValueError(text)
    head, plus, het = head.partition("+")
    if plus and not het.isdigit():
        raise ValueError(text)
    job, us, tail = head.partition("_")
    if not (job.isdigit() and job.isascii()) or int(job) == 0:
        raise ValueError(text)
    tasks = None
    if us:
        if plus:
            raise ValueError(text)
        tasks = _task_ids(tail.removeprefix("[").removesuffix("]") if tail.startswith("[") else tail, text)
    return JobSelector(int(job), tasks, step if dot else None, int(het) if plus else None)


def _task_ids(text: str, whole: str) -> tuple[int, ...]:
    ids: list[int] = []
    for item in text.split(","):
        low, dash, high = item.partition("-")
        step_text = ""
        if ":" in high:
            high, _, step_text = high.partition(":")
        if not low.isdigit() or (dash and not high.isdigit()) or (step_text and not step_text.isdigit()):
            raise ValueError(whole)
        stride = int(step_text) if step_text else 1
        ids.extend(range(int(low), int(high if dash else low) + 1, max(1, stride)))
    return tuple(sorted(set(ids)))


def split_ids(text: str) -> list[str]:
    """``1,14_[3-5,7],9`` -> ["1", "14_[3-5,7]", "9"]: a list of ids, commas inside brackets kept."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x for x in out if x]
