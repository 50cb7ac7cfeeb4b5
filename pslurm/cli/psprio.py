"""psprio: each pending job's priority and its weighted factors (sprio)."""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect, job_id_list, print_listing, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.client import PriorityWeights

PROG = prog_name("psprio")
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


OPTIONS = (
    a.JOBS, a.USERS,
    a.Opt("long", "l", a.NONE, help="with user and account"),
    a.Opt("norm", "n", a.NONE, help="normalised factors (0..1), not weighted"),
    a.Opt("weights", "w", a.NONE, help="show the configured weights"),
    a.NOHEADER,
    a.Opt("format", "o", dest="fmt", help="output format (%i %Y %A %F ...)"),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Each pending job's priority: weighted age, fair share, job size, partition and QOS factors, and nice."""
    found_opts, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage="psprio [OPTIONS]",
                                             description=main.__doc__ or "")
    a.no_positionals(PROG, positional)
    v = a.values(found_opts)
    jobs, users, fmt, noheader = v.get("jobs"), v.get("users"), v.get("fmt"), bool(v.get("noheader"))
    from pslurm.cli.formats import render

    job_ids = job_id_list(PROG, jobs)
    client = connect(PROG)
    with reporting(PROG):
        found, w = client.priorities(job_ids, [u for u in users.split(",") if u] if isinstance(users, str) else ())
    if a.json_format(PROG, v):  # pslurm's shape either way: Slurm's sprio has no --json
        import json

        from pslurm.cli.jsonout import priorities_json

        print(json.dumps(priorities_json(found, w), indent=2))
        return
    if v.get("weights"):
        header = "" if noheader else f"{'JOBID':>15} {'PARTITION':9} {'PRIORITY':>10} {'AGE':>10} " \
                                     f"{'FAIRSHARE':>10} {'JOBSIZE':>10} {'PARTITION':>10} {'QOS':>10}\n"
        sys.stdout.write(f"{header}{'Weights':>15} {'':9} {'':>10} {w.age:>10} {w.fairshare:>10} "
                         f"{w.jobsize:>10} {w.partition:>10} {w.qos:>10}\n")
        return
    chosen = str(fmt or (LONG_FORMAT if v.get("long") else DEFAULT_FORMAT))
    if v.get("norm") and not fmt:
        chosen = "%.15i %9r %.10Y %.10a %.10f %.10j %.10p %.6N"
    print_listing(PROG, lambda: render(chosen, found, prio_fields(w), not noheader, PROG))
