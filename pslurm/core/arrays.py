"""Job array specifications (``--array=0-99%5``, ``1,3,5-7``, ``0-15:4``) and their compact display."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from pslurm.core.errors import SpecError, shown

_ITEM = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


def parse_array(text: str, max_array_size: int = 1001) -> tuple[tuple[int, ...], int | None]:
    """The task ids (sorted, distinct) and the ``%N`` throttle (None: unthrottled). Task ids must be
    below ``max_array_size`` (Slurm's MaxArraySize). Raises SpecError."""
    body, pct, throttle_text = text.strip().partition("%")
    if not body or (pct and not throttle_text.isdigit()):
        raise SpecError(f"Invalid job array specification: {text}")
    throttle = int(throttle_text) if pct else None
    if throttle == 0:
        throttle = None  # %0 means no limit, as in Slurm
    ids: set[int] = set()
    for item in body.split(","):
        m = _ITEM.match(item)
        if not m:
            raise SpecError(f"Invalid job array specification: {text}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        step = int(m.group(3)) if m.group(3) is not None else 1
        if hi < lo or step < 1:
            raise SpecError(f"Invalid job array specification: {text}")
        if hi >= max_array_size:
            raise SpecError(f"Invalid job array specification: task id {hi} is not below MaxArraySize="
                            f"{max_array_size}")
        ids.update(range(lo, hi + 1, step))
    return tuple(sorted(ids)), throttle


def format_ranges(ids: Iterable[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``0-2,5,7-8``."""
    out: list[str] = []
    items = sorted(set(ids))
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(out)


MAX_ID = 2**31 - 1  # the largest job or task id a selector may name (10 digits at most): past it, no job
MAX_SELECTOR_ITEMS = 1000  # comma-separated items in one selector's brackets
MAX_ARRAY_TASKS = 4_000_001  # Slurm's largest MaxArraySize: no selector of more tasks is expanded


class TaskRanges:
    """The task ids a selector names (``5-9,12``, ``0-15:4``), kept as ranges and never expanded by
    itself: ``1_[0-10000000]`` costs a few integers, whatever it spans. Supports ``in``, iteration
    (in order), ``len`` and equality with a sequence of ids."""

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

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TaskRanges):
            other = tuple(other)
        return isinstance(other, (tuple, list)) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __repr__(self) -> str:
        return f"TaskRanges({self.ranges!r})"

    def clipped(self, first: int, last: int) -> TaskRanges:
        """Only the ids from ``first`` to ``last``: a selector bounded by an array's real range."""
        out = []
        for lo, hi, step in self.ranges:
            start = lo if lo >= first else lo + -(-(first - lo) // step) * step  # the first member >= first
            if start <= min(hi, last):
                out.append((start, min(hi, last), step))
        return TaskRanges(out)


def parse_task_selector(text: str) -> tuple[int, tuple[int, ...] | None]:
    """A job id as pscancel/psqueue take it: ``14`` -> (14, None), ``14_3`` -> (14, (3,)),
    ``14_[5-9,12]`` -> (14, (5, ..., 9, 12)). A selector of more tasks than any array can have
    (Slurm's largest MaxArraySize, MAX_ARRAY_TASKS) is refused rather than expanded. Raises
    SpecError. The controller reads selectors as ranges instead (:func:`parse_job_selector`)."""
    job_id, tasks = parse_job_selector(text)
    if tasks is None:
        return job_id, None
    if sum((hi - lo) // step + 1 for lo, hi, step in tasks.ranges) > MAX_ARRAY_TASKS:
        raise SpecError(f"Invalid job id specified: {shown(text)}")
    return job_id, tuple(tasks)


def parse_job_selector(text: str) -> tuple[int, TaskRanges | None]:
    """A job id as pscancel/psqueue take it: ``14`` -> (14, None), ``14_3`` -> (14, the task 3),
    ``14_[5-9,12]`` -> (14, tasks 5 to 9 and 12), as ranges (:class:`TaskRanges`: nothing expanded).
    Every number has at most 10 digits and is at most MAX_ID; at most MAX_SELECTOR_ITEMS items.
    Raises SpecError (the text shown cut to 40 characters)."""
    head, us, tail = text.strip().partition("_")
    invalid = f"Invalid job id specified: {shown(text)}"
    if not _small(head):
        raise SpecError(invalid)
    if not us:
        return int(head), None
    if tail.startswith("[") and tail.endswith("]"):
        tail = tail[1:-1]
    items = tail.split(",")
    if len(items) > MAX_SELECTOR_ITEMS:
        raise SpecError(invalid)
    ranges = []
    for item in items:
        m = _ITEM.match(item)
        lo = int(m.group(1)) if m and all(_small(g) for g in m.groups() if g is not None) else -1
        hi = int(m.group(2)) if m and m.group(2) is not None else lo
        step = int(m.group(3)) if m and m.group(3) is not None else 1
        if lo < 0 or hi < lo or step < 1:
            raise SpecError(invalid)
        ranges.append((lo, hi, step))
    return int(head), TaskRanges(ranges)


def _small(digits: str) -> bool:
    """A whole number a job or task id can be: digits only, at most 10 of them, at most MAX_ID."""
    return digits.isascii() and digits.isdigit() and len(digits) <= 10 and int(digits) <= MAX_ID


def split_job_list(text: str) -> list[str]:
    """``1,14_[3-5,7],9`` -> ["1", "14_[3-5,7]", "9"]: commas inside brackets stay."""
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
