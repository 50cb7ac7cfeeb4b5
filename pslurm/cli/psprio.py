"""psprio: each pending job's priority and its weighted factors (sprio)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from pslurm.cli import options as o
from pslurm.cli.common import connect, fail, print_listing, reporting, run, typer_app

if TYPE_CHECKING:
    from pslurm.client import PriorityWeights

PROG = "psprio"
DEFAULT_FORMAT = "%.15i %9r %.10Y %.10A %.10F %.10J %.10P %.10Q %.6N"
LONG_FORMAT = "%.15i %9r %.8u %.10o %.10Y %.10A %.10F %.10J %.10P %.10Q %.6N"


def prio_fields(weights: PriorityWeights) -> dict[str, tuple[str, Any]]:
    def weighted(weight: int, attr: str) -> Any:
        return lambda j: str(int(round(weight * getattr(j, attr))))

    return {
        "i": ("JOBID", lambda j: j.display_id),
        "r": ("PARTITION", lambda j: j.partition),
        "u": ("USER", lambda j: j.user),
        "o": ("ACCOUNT", lambda j: j.account or "(null)"),
        "Y": ("PRIORITY", lambda j: str(j.priority) + ("*" if j.admin_set else "")),
        "A": ("AGE", weighted(weights.age, "age")),
        "F": ("FAIRSHARE", weighted(weights.fairshare, "fairshare")),
        "J": ("JOBSIZE", weighted(weights.jobsize, "jobsize")),
        "P": ("PARTITION", weighted(weights.partition, "partition_factor")),
        "Q": ("QOS", weighted(weights.qos, "qos")),
        "N": ("NICE", lambda j: str(j.nice)),
        "a": ("AGE", lambda j: f"{j.age:.7f}"),
        "f": ("FAIRSHARE", lambda j: f"{j.fairshare:.7f}"),
        "j": ("JOBSIZE", lambda j: f"{j.jobsize:.7f}"),
        "p": ("PARTITION", lambda j: f"{j.partition_factor:.7f}"),
    }


def make_app() -> typer.Typer:
    app = typer_app("Show the priority factors of pending jobs.")

    @app.command()
    def psprio(
        jobs: o.Jobs = None,
        users: o.Users = None,
        long: Annotated[bool, typer.Option("-l", "--long", help="with user and account")] = False,
        norm: Annotated[bool, typer.Option("-n", "--norm", help="normalised factors (0..1), not weighted")] = False,
        weights: Annotated[bool, typer.Option("-w", "--weights", help="show the configured weights")] = False,
        noheader: o.NoHeader = False,
        fmt: Annotated[Optional[str], typer.Option("-o", "--format", help="output format (%i %Y %A %F ...)")] = None,
        as_json: o.Json = False,
    ) -> None:
        """Each pending job's priority: weighted age, fair share, job size, partition and QOS factors, and nice."""
        from pslurm.cli.formats import render

        job_ids: list[int] = []
        if jobs:
            try:
                job_ids = [int(j) for j in jobs.split(",") if j]
            except ValueError:
                fail(PROG, f"Invalid job id specified: {jobs}")
        client = connect(PROG)
        with reporting(PROG):
            found, w = client.priorities(job_ids, [u for u in users.split(",") if u] if users else ())
        if as_json:
            from pslurm.cli.jsonout import priorities_json

            print(json.dumps(priorities_json(found, w), indent=2))
            return
        if weights:
            header = "" if noheader else f"{'JOBID':>15} {'PARTITION':9} {'PRIORITY':>10} {'AGE':>10} " \
                                         f"{'FAIRSHARE':>10} {'JOBSIZE':>10} {'PARTITION':>10} {'QOS':>10}\n"
            sys.stdout.write(f"{header}{'Weights':>15} {'':9} {'':>10} {w.age:>10} {w.fairshare:>10} "
                             f"{w.jobsize:>10} {w.partition:>10} {w.qos:>10}\n")
            return
        chosen = fmt or (LONG_FORMAT if long else DEFAULT_FORMAT)
        if norm and not fmt:
            chosen = "%.15i %9r %.10Y %.10a %.10f %.10j %.10p %.6N"
        print_listing(PROG, lambda: render(chosen, found, prio_fields(w), not noheader, PROG))

    return app


def main() -> None:
    run(make_app(), PROG)
