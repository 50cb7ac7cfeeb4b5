"""How Slurm names jobs: one place that writes a job's id and reads the ids the commands take.

Standard library only, and none of it: every command names jobs on its path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


def display_id(job_id: int, array_job_id: int | None = None, array_task_id: int | None = None) -> str:
    """How Slurm names a job: ``A_i`` for task i of array A, the job id otherwise. The one place
    this is computed (records, listings, priorities)."""
    return str(job_id) if array_job_id is None else f"{array_job_id}_{array_task_id}"


class JobSelector:
    """One job id as Slurm's commands read it: ``5`` (the job, or every task of array 5), ``5_1`` (task 1 of
    array 5), ``5_[1-3,7]`` (tasks), ``5.0`` / ``5.batch`` / ``5.extern`` (a step), ``5+0`` (component 0 of a
    heterogeneous job), ``5_1.0`` (a step of a task)."""

    __slots__ = ("job_id", "tasks", "step", "het")

    def __init__(self, job_id: int, tasks: TaskRanges | None = None, step: str | None = None,
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
    if not is_id(job) or int(job) == 0:
        raise ValueError(text)
    tasks = None
    if us:
        if plus:
            raise ValueError(text)
        tasks = parse_task_ranges(tail)
    return JobSelector(int(job), tasks, step if dot else None, int(het) if plus else None)


MAX_ID = 2**31 - 1  # the largest job or task id a selector may name (10 digits at most): past it, no job
MAX_SELECTOR_ITEMS = 1000  # comma-separated items in one selector's brackets


class TaskRanges:
    """The task ids a selector names (``5-9,12``, ``0-15:4``), kept as ranges and never expanded by
    itself: ``1_[0-10000000]`` costs a few integers, whatever it spans. Supports ``in``, iteration
    (in order), ``len``, truth (any range) and equality with a sequence of ids."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: Iterable[tuple[int, int, int]]) -> None:
        self.ranges = tuple(sorted(ranges))  # (first, last, step): first, first + step, ... up to last

    def __contains__(self, task: object) -> bool:
        return isinstance(task, int) and any(lo <= task <= hi and (task - lo) % step == 0
                                             for lo, hi, step in self.ranges)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted({t for lo, hi, step in self.ranges for t in range(lo, hi + 1, step)}))

    def __len__(self) -> int:
        return len(set(self))

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TaskRanges):
            other = tuple(other)
        return isinstance(other, (tuple, list)) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __repr__(self) -> str:
        return f"TaskRanges({self.ranges!r})"

    def text(self) -> str:
        """The ranges as a selector writes them (``0-15:4,20``), whatever they span."""
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" + (f":{step}" if step > 1 else "")
                        for lo, hi, step in self.ranges)

    def clipped(self, first: int, last: int) -> TaskRanges:
        """Only the ids from ``first`` to ``last``: a selector bounded by an array's real range."""
        out = []
        for lo, hi, step in self.ranges:
            start = lo if lo >= first else lo + -(-(first - lo) // step) * step  # the first member >= first
            if start <= min(hi, last):
                out.append((start, min(hi, last), step))
        return TaskRanges(out)


def parse_task_ranges(text: str) -> TaskRanges:
    """The task part of a job id (``3``, ``[5-9,12]``, ``0-15:4``) as ranges, nothing expanded. Every number
    has at most 10 digits and is at most MAX_ID; at most MAX_SELECTOR_ITEMS items. ValueError otherwise."""
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    items = text.split(",")
    if len(items) > MAX_SELECTOR_ITEMS:
        raise ValueError(text)
    ranges = []
    for item in items:
        low, dash, high = item.partition("-")
        high, colon, step = high.partition(":")
        if not (is_id(low) and (is_id(high) if dash else not colon) and (is_id(step) if colon else True)):
            raise ValueError(text)
        lo, hi, every = int(low), int(high) if dash else int(low), int(step) if colon else 1
        if hi < lo or every < 1:
            raise ValueError(text)
        ranges.append((lo, hi, every))
    return TaskRanges(ranges)


def is_id(digits: str) -> bool:
    """A whole number a job or task id can be: digits only, at most 10 of them, at most MAX_ID."""
    return digits.isascii() and digits.isdigit() and len(digits) <= 10 and int(digits) <= MAX_ID


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
