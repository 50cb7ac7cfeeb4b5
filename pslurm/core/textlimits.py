"""The most characters each text field of a job request may hold, checked in one place
(:func:`text_problem`) at submit (controller/admission.py) and at ``pscontrol update`` (core/jobupdate.py).

Slurm's limits where slurmctld has them (job_mgr.c's ``_test_job_desc_fields``: 1024 for a comment
or a mail user, ``MAXPATHLEN`` for a path, 4 KiB for an array's indices), tighter where a store
column is narrower (a job's name, its account). Fields Slurm does not bound get a few KiB, so that
what one job stores (and every listing returns for it) stays small: a listing grows with the jobs
it lists, never with what one user chose to put in a field. ``MaxSubmitLineSize`` in pslurm.conf
changes the submit line's bound (a long ``--wrap`` is in it); the script's own bound is
``script_problem``'s (4 MiB, as Slurm's max_script_size).
"""

from __future__ import annotations

from collections.abc import Mapping

from pslurm.core.clientconf import ConfigError

MAXPATHLEN = 4096  # Linux's PATH_MAX: Slurm's bound on the paths of a job (work_dir, std_out, ...)
SUBMIT_LINE_KEY = "MaxSubmitLineSize"  # pslurm.conf: characters of the submit line (sacct's SubmitLine)

# job field (JobSpec's name) -> (what a refusal calls it, the most characters it may hold)
JOB_TEXT_LIMITS: dict[str, tuple[str, int]] = {
    "name": ("the job name", 256),  # the store's column (Slurm: 1024)
    "user": ("the user name", 64),
    "workdir": ("the working directory", MAXPATHLEN),
    "partition": ("the partition name", 64),
    "stdout": ("the output file name", MAXPATHLEN),
    "stderr": ("the error file name", MAXPATHLEN),
    "account": ("the account", 64),
    "dependency": ("the dependency", 1024),
    "array": ("the array specification", 4096),
    "nodelist": ("the node list (--nodelist)", 1024),
    "exclude": ("the excluded node list (--exclude)", 1024),
    "constraint": ("the constraint (--constraint)", 1024),
    "open_mode": ("the open mode", 16),
    "gpu_mem": ("the GPU memory (--gpu-mem)", 64),
    "comment": ("the comment", 1024),
    "qos": ("the qos", 64),
    "command": ("the command", MAXPATHLEN),  # the batch script's path
    "submit_host": ("the submit host", 1024),  # Slurm's alloc_node
    "submit_line": ("the submit line", 16 * 1024),
    "mail_type": ("the mail type", 256),
    "mail_user": ("the mail user", 1024),
}


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
