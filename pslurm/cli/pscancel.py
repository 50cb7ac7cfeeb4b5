"""pscancel: cancel or signal jobs (scancel)."""

from __future__ import annotations

import signal as signals
import sys
from typing import Annotated, Optional

import typer

from pslurm.cli.common import connect, fail, reporting, run, typer_app

PROG = "pscancel"


def make_app() -> typer.Typer:
    app = typer_app("Cancel jobs.")

    @app.command()
    def pscancel(
        job_ids: Annotated[list[str], typer.Argument(help="job ids: 14, 14_3, 14_[5-9] (an array's id: all tasks)")],
        signal: Annotated[Optional[str], typer.Option("-s", "--signal", help="send this signal instead")] = None,
    ) -> None:
        """Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal."""
        from pslurm.core.arrays import parse_task_selector
        from pslurm.core.jobspec import SpecError

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
        signum = _signal_number(signal) if signal else 0
        client = connect(PROG)
        with reporting(PROG):
            errors = client.cancel(ids, signum, specs)
        for line in errors:
            print(f"{PROG}: error: {line}", file=sys.stderr)
        if errors:
            raise SystemExit(1)

    return app


def _signal_number(text: str) -> int:
    name = text.upper()
    if name.isdigit():
        return int(name)
    try:
        return int(signals.Signals[name if name.startswith("SIG") else "SIG" + name])
    except KeyError:
        fail(PROG, f"Unknown job signal: {text}")


def main() -> None:
    run(make_app(), PROG)
