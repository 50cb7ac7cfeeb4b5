"""Slurm filename patterns for ``--output``/``--error`` (``slurm-%j.out``, ``%x_%A_%a.log``)."""

from __future__ import annotations

TYPE_CHECKING = False  # mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# Slurm's NO_VAL: what %a expands to for a job that is not part of an array.
NO_ARRAY_TASK = 4294967294

_MAX_WIDTH = 10  # Slurm caps the padding width at 10
_DIGITS = frozenset("0123456789")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def expand_output_pattern(
    pattern: str,
    *,
    job_id: int,
    job_name: str,
    user: str,
    node: str,
    array_job_id: int | None = None,
    array_task_id: int | None = None,
    step_id: int | None = None,
    task_id: int = 0,
    node_id: int = 0,
) -> str:
    """Expand ``%j %x %u %N %A %a %J %s %t %n %%`` in ``pattern`` as slurmd does.

    A width such as ``%4j`` zero-pads numbers (``0042``; at most 10). ``%A`` is the array's job id, or the
    job id for a plain job; ``%a`` is the task id, or 4294967294 for a plain job (Slurm's NO_VAL).
    ``step_id`` None is the batch step: ``%s`` is ``batch`` and ``%J`` the job id alone (slurmd's
    ``_batch_path_check``); for a numbered step ``%s`` is its number and ``%J`` ``jobid.stepid``.
    ``%t`` is the task's rank and ``%n`` the node's index in the job (0 for the batch script).
    Unknown letters are left as written.
    """
    numbers = {
        "j": job_id,
        "A": array_job_id if array_job_id is not None else job_id,
        "a": array_task_id if array_task_id is not None else NO_ARRAY_TASK,
        "t": task_id,
        "n": node_id,
    }
    texts = {"x": job_name, "u": user, "N": node}

    def expand(width: str, letter: str, written: str) -> str:
        if letter in numbers:
            return str(numbers[letter]).zfill(min(int(width), _MAX_WIDTH) if width else 0)
        if letter in texts:
            return texts[letter]
        if letter == "J":
            padded = str(job_id).zfill(min(int(width), _MAX_WIDTH) if width else 0)
            return padded if step_id is None else f"{padded}.{step_id}"
        if letter == "s":
            return "batch" if step_id is None else str(step_id).zfill(min(int(width), _MAX_WIDTH) if width else 0)
        return written

    return "".join(_expanded(pattern, expand))


def _expanded(pattern: str, expand: Callable[[str, str, str], str]) -> Iterator[str]:
    """``pattern``'s pieces: ``%%`` as ``%``, each ``%[WIDTH]LETTER`` as ``expand(width, letter, as written)``,
    the rest as it is. (By hand, not with :mod:`re`: that import is milliseconds of a command's start.)"""
    pos, n = 0, len(pattern)
    at = pattern.find("%")
    while at >= 0:
        end = at + 1
        if pattern[end:end + 1] == "%":
            yield pattern[pos:at] + "%"
            pos = end + 1
        else:
            while end < n and pattern[end] in _DIGITS:
                end += 1
            if end < n and pattern[end] in _LETTERS:
                yield pattern[pos:at] + expand(pattern[at + 1:end], pattern[end], pattern[at:end + 1])
                pos = end + 1
            else:
                at = pattern.find("%", at + 1)
                continue
        at = pattern.find("%", pos)
    yield pattern[pos:]


def default_output_pattern(is_array: bool) -> str:
    """sbatch's default output file name: ``slurm-%j.out``, or ``slurm-%A_%a.out`` for arrays."""
    return "slurm-%A_%a.out" if is_array else "slurm-%j.out"
