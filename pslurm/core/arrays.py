"""Job array specifications (``--array=0-99%5``, ``1,3,5-7``, ``0-15:4``) and their compact display."""

from __future__ import annotations

import re
from collections.abc import Iterable

from pslurm.core.errors import SpecError, shown
from pslurm.core.jobids import TaskRanges, is_id, parse_task_ranges

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


def parse_job_selector(text: str) -> tuple[int, TaskRanges | None]:
    """A job id as pscancel/psqueue take it: ``14`` -> (14, None), ``14_3`` -> (14, the task 3),
    ``14_[5-9,12]`` -> (14, tasks 5 to 9 and 12), as ranges (:class:`TaskRanges`: nothing expanded;
    :func:`pslurm.core.jobids.parse_task_ranges`'s bounds). Raises SpecError (the text shown cut to 40
    characters)."""
    head, us, tail = text.strip().partition("_")
    try:
        if not is_id(head):
            raise ValueError(text)
        return int(head), parse_task_ranges(tail) if us else None
    except ValueError:
        raise SpecError(f"Invalid job id specified: {shown(text)}") from None


