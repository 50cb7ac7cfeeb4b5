"""Slurm filename patterns for ``--output``/``--error`` (``slurm-%j.out``, ``%x_%A_%a.log``)."""

from __future__ import annotations

import re

# Slurm's NO_VAL: what %a expands to for a job that is not part of an array.
NO_ARRAY_TASK = 4294967294

_MAX_WIDTH = 10  # Slurm caps the padding width at 10
_PATTERN = re.compile(r"%%|%([0-9]*)([A-Za-z])")


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

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        width, letter = m.group(1), m.group(2)
        if letter in numbers:
            return str(numbers[letter]).zfill(min(int(width), _MAX_WIDTH) if width else 0)
        if letter in texts:
            return texts[letter]
        if letter == "J":
            padded = str(job_id).zfill(min(int(width), _MAX_WIDTH) if width else 0)
            return padded if step_id is None else f"{padded}.{step_id}"
        if letter == "s":
            return "batch" if step_id is None else str(step_id).zfill(min(int(width), _MAX_WIDTH) if width else 0)
        return m.group(0)

    return _PATTERN.sub(repl, pattern)


def default_output_pattern(is_array: bool) -> str:
    """sbatch's default output file name: ``slurm-%j.out``, or ``slurm-%A_%a.out`` for arrays."""
    return "slurm-%A_%a.out" if is_array else "slurm-%j.out"
