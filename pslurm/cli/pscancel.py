"""pscancel: cancel or signal jobs (scancel)."""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pslurm.client.api import Api

PROG = prog_name("pscancel")


OPTIONS = (a.Opt("signal", "s", help="send this signal instead"), a.HELP)


def main(argv: Sequence[str] | None = None) -> None:
    """Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal."""
    found, job_ids = a.parse_or_fail(
        PROG, argv, OPTIONS, stop_at_positional=False, usage="pscancel [OPTIONS] job_ids...",
        description="Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal.",
        arguments=(("job_ids...", "job ids: 14, 14_3, 14_[5-9] (an array's id: all tasks), 14.2 (a step)"),))
    if not job_ids:
        fail(PROG, "Missing argument 'job_ids'.")
    signal = a.values(found).get("signal")
    from pslurm.core.arrays import parse_job_selector
    from pslurm.core.errors import SpecError

    ids, specs, steps = [], [], []
    for text in job_ids:
        step = parse_step_id(text)
        if step is not None:
            steps.append(step)
            continue
        try:
            parse_job_selector(text)  # checked, not expanded: the controller bounds it by the array
        except SpecError:
            fail(PROG, f"Invalid job id {text}")
        if text.isdigit():
            ids.append(int(text))
        else:
            specs.append(text)
    signum = _signal_number(signal) if isinstance(signal, str) and signal else 0
    api = connect_api(PROG)
    errors = []
    with reporting(PROG):
        if ids or specs:
            errors = api.cancel(ids, signum, specs)
        for job_id, step_id in steps:
            errors += _cancel_step(api, job_id, step_id, signum)
    for line in errors:
        print(f"{PROG}: error: {line}", file=sys.stderr)
    if errors:
        raise SystemExit(1)


def parse_step_id(text: str) -> tuple[int, int] | None:
    """``14.2`` -> (14, 2): a step of job 14; None for anything else (a job id, an array's tasks).
    ``14.batch`` and the like are refused as scancel refuses them (Invalid job id)."""
    job, dot, step = text.partition(".")
    if not dot:
        return None
    if not job.isdigit() or not step.isdigit():
        fail(PROG, f"Invalid job id {text}")
    return int(job), int(step)


def _cancel_step(api: Api, job_id: int, step_id: int, signum: int) -> list[str]:
    """Cancel (or signal) step J.S; scancel's error line when it could not be."""
    from pslurm.client.errors import ClientError

    try:
        api.cancel_step(job_id, step_id, signum)
    except ClientError as exc:
        if not exc.remote:
            raise
        return [f"Kill job error on job id {job_id}.{step_id}: {exc}"]
    return []


def _signal_number(text: str) -> int:
    import signal as signals

    name = text.upper()
    if name.isdigit():
        return int(name)
    try:
        return int(signals.Signals[name if name.startswith("SIG") else "SIG" + name])
    except KeyError:
        fail(PROG, f"Unknown job signal: {text}")

