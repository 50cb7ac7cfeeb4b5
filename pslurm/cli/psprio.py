"""psprio: each pending job's priority and its weighted factors (sprio), as Slurm 22.05's sprio prints
them (src/sprio/sprio.c, print.c): a factor's column only where its weight is not 0; the jobs that wait
for their priority (not those held or waiting on a dependency or a begin time)."""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, print_listing, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.client import PriorityWeights

PROG = prog_name("psprio")
LONG_FORMAT = "%.15i %9r %.8u %.10Y %.10S %.10A %.10B %.10F %.10J %.10P %.10Q %.11N %.20T"
NORM_LONG_FORMAT = "%.15i %9r %.8u %10y %10a %10b %10f %10j %10p %10q %20t"
NOT_WAITING_ON_PRIORITY = ("JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime")
USAGE_TEXT = ("Usage: sprio [-j jid[s]] [-u user_name[s]] [-o format] [-p partitions]\n"
              "   [--federation] [--local] [--sibling] [--usage] [-hlnvVw]")


def prio_fields(weights: PriorityWeights, cluster: str = "") -> dict[str, tuple[str, Any]]:
    """sprio's fields by -o letter: the weighted factors in capitals, the normalised (0..1) in lower case;
    each getter also answers for the Weights row (``None``)."""
    def weighted(weight: int, attr: str) -> Any:
        return lambda j: str(weight) if j is None else str(int(round(weight * getattr(j, attr))))

    def norm(weight: int, attr: str) -> Any:
        return lambda j: str(weight) if j is None else f"{getattr(j, attr) if weight else 0.0:.7f}"

    def of_job(get: Any, weights_row: str = "") -> Any:
        return lambda j: weights_row if j is None else get(j)

    return {
        "i": ("JOBID", lambda j: "Weights" if j is None else j.display_id),
        "r": ("PARTITION", of_job(lambda j: j.partition)),
        "u": ("USER", of_job(lambda j: j.user)),
        "c": ("CLUSTER", of_job(lambda j: cluster)),
        "o": ("ACCOUNT", of_job(lambda j: j.account or "(null)")),
        # a job that waits has a priority of at least 1 (Slurm's 0 is a held job's)
        "Y": ("PRIORITY", of_job(lambda j: str(max(j.priority, 1)) + ("*" if j.admin_set else ""))),
        "y": ("PRIORITY", of_job(lambda j: f"{max(j.priority, 1) / 0xFFFFFFFF:16.14f}")),
        "S": ("SITE", lambda j: "1" if j is None else "0"),
        "A": ("AGE", weighted(weights.age, "age")), "a": ("AGE", norm(weights.age, "age")),
        "B": ("ASSOC", lambda j: "0"), "b": ("ASSOC", lambda j: "0" if j is None else "0.0000000"),
        "F": ("FAIRSHARE", weighted(weights.fairshare, "fairshare")),
        "f": ("FAIRSHARE", norm(weights.fairshare, "fairshare")),
        "J": ("JOBSIZE", weighted(weights.jobsize, "jobsize")), "j": ("JOBSIZE", norm(weights.jobsize, "jobsize")),
        "P": ("PARTITION", weighted(weights.partition, "partition_factor")),
        "p": ("PARTITION", norm(weights.partition, "partition_factor")),
        "Q": ("QOS", weighted(weights.qos, "qos")), "q": ("QOS", norm(weights.qos, "qos")),
        "N": ("NICE", of_job(lambda j: str(j.nice))),
        "T": ("TRES", of_job(lambda j: "")), "t": ("TRES", of_job(lambda j: "")),
    }


def default_format(weights: PriorityWeights, normalized: bool, long: bool, users: bool, sibling: bool) -> str:
    """sprio's format: every factor with -l, else those whose weight is not 0 (sprio.c)."""
    if long:
        return NORM_LONG_FORMAT if normalized else LONG_FORMAT
    fmt = "%.15i %9r" + (" %.8c" if sibling else "") + (" %.8u" if users else "")
    fmt += " %10y" if normalized else " %.10Y %.10S"
    for weight, letter in ((weights.age, "a"), (0, "b"), (weights.fairshare, "f"), (weights.jobsize, "j"),
                           (weights.partition, "p"), (weights.qos, "q")):
        if weight:
            fmt += f" %10{letter}" if normalized else f" %.10{letter.upper()}"
    return fmt


_O = a.Opt
OPTIONS = (
    _O("jobs", "j", a.OPTIONAL, help="job ids"),
    _O(("user", "users"), "u", dest="users", help="user names"),
    _O("long", "l", a.NONE, help="every factor, with the user"),
    _O("norm", "n", a.NONE, help="normalised factors (0..1), not weighted"),
    _O("weights", "w", a.NONE, help="show the configured weights"),
    a.NOHEADER,
    _O("format", "o", dest="fmt", help="output format (%i %Y %A %F ...)"),
    _O("partition", "p", help="partitions"),
    _O("sort", "S", help="sort keys: -o letters, '-' descending"),
    _O(("clusters", "cluster"), "M", dest="clusters", help="this cluster's name, or all"),
    _O("federation", arg=a.NONE), _O("local", arg=a.NONE), _O(("sibling", "sib"), arg=a.NONE),
    _O("verbose", "v", a.NONE), _O("version", "V", a.NONE), _O("usage", arg=a.NONE),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Each pending job's priority: weighted age, fair share, job size, partition and QOS factors, and nice."""
    found_opts, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage="psprio [OPTIONS]",
                                             description=main.__doc__ or "")
    v = a.values(found_opts)
    if positional and "jobs" in v and v["jobs"] is None:  # sprio -j 5 6
        v["jobs"], positional = ",".join(positional), []
    a.no_positionals(PROG, positional)
    from pslurm.cli.common import answer_usage_version, check_clusters, job_selectors, listed, user_names

    answer_usage_version(v, USAGE_TEXT.replace("sprio", PROG, 1))
    selectors = job_selectors(PROG, v.get("jobs"), "{prog}: error: Invalid job id: {id}")
    users = user_names(PROG, v.get("users"))
    client = connect(PROG)
    check_clusters(PROG, v.get("clusters"), client.config.cluster_name)
    with reporting(PROG):
        found, w = client.priorities([], users or ())
        waiting = {j.job_id for j in client.jobs(states=["PENDING"], light=True)
                   if str(j.reason) not in NOT_WAITING_ON_PRIORITY and not j.hold}
    partitions = listed(v, "partition")
    found = [j for j in found if j.job_id in waiting and (partitions is None or j.partition in partitions)
             and _selected(j, selectors)]
    if a.json_format(PROG, v):  # pslurm's shape either way: Slurm's sprio has no --json
        import json

        from pslurm.cli.jsonout import priorities_json

        print(json.dumps(priorities_json(found, w), indent=2))
        return
    if selectors and not found:
        print("Unable to find jobs matching user/id(s) specified")
        return
    fmt = str(v.get("fmt") or default_format(w, bool(v.get("norm")), bool(v.get("long")), users is not None,
                                             bool(v.get("sibling"))))
    # sprio 22.05 names the cluster only when -M asked for it (else "(null)"); -w: the weights alone
    fields = prio_fields(w, client.config.cluster_name if v.get("clusters") else "(null)")
    rows: list[Any] = [None] if v.get("weights") else _sorted(found, v.get("sort"), fields)
    if v.get("verbose"):
        print(f"{PROG}: {len(found)} jobs, weights {w}", file=sys.stderr)
    print_listing(PROG, lambda: _render(fmt, rows, fields, not v.get("noheader")))


def _selected(row: Any, selectors: list[Any]) -> bool:
    """Whether a priority row (``14``, ``14_3``) is one the ids name."""
    array, _, task = row.display_id.partition("_")
    array_id, task_id = (int(array), int(task)) if task else (None, None)
    return not selectors or any(s.selects(row.job_id, array_id, task_id) for s in selectors)


def _sorted(found: list[Any], spec: object, fields: dict[str, tuple[str, Any]]) -> list[Any]:
    """-S: -o letters, '-' before one for descending; sprio's default: by job id."""
    rows = sorted(found, key=lambda j: j.job_id)
    if not isinstance(spec, str):
        return rows
    for part in reversed([p for p in spec.split(",") if p]):
        letter, reverse = part.lstrip("+-"), part.startswith("-")
        if letter not in fields:
            fail(PROG, f"Invalid sort specification: {letter}")
        rows.sort(key=_sort_key(letter, fields[letter][1]), reverse=reverse)
    return rows


def _sort_key(letter: str, get: Any) -> Any:
    """A field's value as -S sorts it: a number for the factors and the priority, else the text."""
    if letter in "YyAaFfJjPpQqN":
        return lambda j: float(get(j).rstrip("*") or 0)
    return get


def _render(fmt: str, rows: list[Any], fields: dict[str, tuple[str, Any]], header: bool) -> list[str]:
    from pslurm.cli.formats import render

    return render(fmt, rows, fields, header, PROG)
