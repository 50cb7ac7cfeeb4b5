"""The most characters each text field of a job request may hold, checked in one place
(:func:`text_problem`) at submit (controller/admission.py) and at ``pscontrol update`` (core/jobupdate.py).

The bounds are the job-field table's (``max_len`` in core/jobfields.py): Slurm's where slurmctld has
them (job_mgr.c's ``_test_job_desc_fields``: 1024 for a comment or a mail user, ``MAXPATHLEN`` for a
path, 4 KiB for an array's indices), tighter where a store column is narrower (a job's name, its
account), a few KiB for fields Slurm does not bound. ``MaxSubmitLineSize`` in pslurm.conf
changes the submit line's bound (a long ``--wrap`` is in it); the script's own bound is
``script_problem``'s (4 MiB, as Slurm's max_script_size).
"""

from __future__ import annotations

from collections.abc import Mapping

from pslurm.core.clientconf import ConfigError
from pslurm.core.jobfields import FIELDS

SUBMIT_LINE_KEY = "MaxSubmitLineSize"  # pslurm.conf: characters of the submit line (sacct's SubmitLine)

# job field (JobSpec's name) -> (what a refusal calls it, the most characters it may hold): the job-field
# table's ``noun`` and ``max_len`` (core/jobfields.py), where the bounds are declared
JOB_TEXT_LIMITS: dict[str, tuple[str, int]] = {f.name: (f.noun, f.max_len) for f in FIELDS if f.max_len}


def job_text_limits(settings: Mapping[str, str]) -> dict[str, tuple[str, int]]:
    """:data:`JOB_TEXT_LIMITS` with pslurm.conf's ``MaxSubmitLineSize`` (``settings``: its keys, any
    case); ConfigError when it is not a whole number from 1 to 2**24."""
    text = next((v for k, v in settings.items() if k.lower() == SUBMIT_LINE_KEY.lower()), "")
    if not text:
        return JOB_TEXT_LIMITS
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 2**24):
        raise ConfigError(f"{SUBMIT_LINE_KEY}={text[:20]}: expected a whole number of characters from 1 to 16777216")
    return {**JOB_TEXT_LIMITS, "submit_line": (JOB_TEXT_LIMITS["submit_line"][0], int(text))}


def text_problem(values: object, limits: Mapping[str, tuple[str, int]] = JOB_TEXT_LIMITS) -> str | None:
    """Why a request (any object with the fields' attributes: a JobSpec) may not be taken: its first
    text field past its bound, in one line; None when every one fits."""
    for field, (what, most) in limits.items():
        value = getattr(values, field, None)
        if isinstance(value, str) and len(value) > most:
            return f"Invalid job request: {what} is longer than {most} characters"
    return None
