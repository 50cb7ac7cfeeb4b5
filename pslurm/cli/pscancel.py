"""pscancel: cancel or signal jobs (scancel)."""

from __future__ import annotations

import signal as signals
import sys
from typing import Annotated, Optional

import typer

from pslurm.cli.common import Client, fail, run, typer_app

PROG = "pscancel"


def make_app() -> typer.Typer:
    app = typer_app("Cancel jobs.")

    @app.command()
    def pscancel(
        job_ids: Annotated[list[str], typer.Argument(help="job ids")],
        signal: Annotated[Optional[str], typer.Option("-s", "--signal", help="send this signal instead")] = None,
    ) -> None:
        """Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal."""
        from pslurm.proto import pslurm_pb2 as pb

        ids = []
        for text in job_ids:
            if not text.isdigit():
                fail(PROG, f"Invalid job id {text}")
            ids.append(int(text))
        signum = _signal_number(signal) if signal else 0
        reply = Client(PROG).call("CancelJobs", pb.CancelRequest(job_ids=ids, signal=signum))
        for line in reply.errors:
            print(f"{PROG}: error: {line}", file=sys.stderr)
        if reply.errors:
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
