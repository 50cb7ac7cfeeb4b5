"""pscancel: cancel or signal jobs (scancel)."""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

PROG = prog_name("pscancel")


OPTIONS = (a.Opt("signal", "s", help="send this signal instead"), a.HELP)


def main(argv: Sequence[str] | None = None) -> None:
    """Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal."""
    found, job_ids = a.parse_or_fail(
        PROG, argv, OPTIONS, stop_at_positional=False, usage="pscancel [OPTIONS] job_ids...",
        description="Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal.",
        arguments=(("job_ids...", "job ids: 14, 14_3, 14_[5-9] (an array's id: all tasks)"),))
    if not job_ids:
        fail(PROG, "Missing argument 'job_ids'.")
    signal = a.values(found).get("signal")
    from pslurm.core.arrays import parse_task_selector
    from pslurm.core.errors import SpecError

    ids, specs = [], []
    for text in job_ids:
        try:
            parse_task_selector(text)
        except SpecError:
            fail(PROG, f"Invalid job id {text}")
        if text.isdigit():
            ids.append(int(text))
        else:
            specs.append(text)
    signum = _signal_number(signal) if isinstance(signal, str) and signal else 0
    api = connect_api(PROG)
    with reporting(PROG):
        errors = api.cancel(ids, signum, specs)
    for line in errors:
        print(f"{PROG}: error: {line}", file=sys.stderr)
    if errors:
        raise SystemExit(1)


def _signal_number(text: str) -> int:
    import signal as signals

    name = text.upper()
    if name.isdigit():
        return int(name)
    try:
        return int(signals.Signals[name if name.startswith("SIG") else "SIG" + name])
    except KeyError:
        fail(PROG, f"Unknown job signal: {text}")

