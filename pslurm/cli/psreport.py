"""psreport: sreport's cluster utilization, cluster AccountUtilizationByUser, user topusage and job
sizesbyaccount, from the runs the store holds (``GET /pslurm/v1/usage``).

Usage is TRES-seconds in the window, each run clipped to it; GPUs are the ``gres/gpu`` TRES
(``-T gres/gpu``). pslurm keeps no history of node states, so Down and PLND Down are 0 and Idle is
the rest of Reported; Planned (time held for pending jobs) is 0 too.
"""

from __future__ import annotations

import sys
import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, prog_name, reporting
from pslurm.cli.printfields import PARSABLE, PARSABLE2, Field, parse_command, render, split_width, write_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PROG = prog_name("psreport")
RULE = "-" * 80
OPTIONS = (
    a.Opt("all_clusters", "a", a.NONE, help="every cluster (pslurm: this one)"),
    a.Opt(("cluster", "clusters"), "M", help="clusters to report (pslurm: this one)"),
    a.Opt("noheader", "n", a.NONE, help="no header lines"),
    a.Opt("parsable", "p", a.NONE, help="'|' after every field"),
    a.Opt("parsable2", "P", a.NONE, help="'|' between fields"),
    a.Opt("quiet", "Q", a.NONE, help="no warnings"),
    a.Opt("time", "t", help="Seconds, Minutes (default), Hours, Percent, SecPer, MinPer, HourPer"),
    a.Opt("tres", "T", help="TRES to report: cpu (default), gres/gpu, mem, node, or ALL"),
    a.Opt("verbose", "v", a.NONE, help="no effect"),
    a.Opt("version", "V", a.NONE, help="print pslurm's version and exit"),
    a.Opt(("local", "federation"), arg=a.NONE, help="no effect (one cluster)"),
    a.Opt("help", "h", a.NONE, help=""),
    a.Opt("usage", arg=a.NONE, dest="help", help=""),
)
TIME_FORMATS = {"seconds": ("s", "Seconds"), "minutes": ("m", "Minutes"), "hours": ("h", "Hours"),
                "percent": ("%", "Percentage of Total"), "secper": ("s%", "Seconds/Percentage of Total"),
                "minper": ("m%", "Minutes/Percentage of Total"), "hourper": ("h%", "Hours/Percentage of Total")}
TRES = {"cpu": "cpu_seconds", "gres/gpu": "gpu_seconds", "mem": "mem_mb_seconds"}
# the cluster's size of each TRES, for Reported (usage's "cluster": cpus, gpus, mem_mb)
CLUSTER_SIZE = {"cpu": "cpus", "gres/gpu": "gpus", "mem": "mem_mb"}


def time_value(value: float, total: float, fmt: str) -> str:
    """slurmdb_report_print_time: a TRES-seconds figure in the chosen unit, or its part of ``total``."""
    unit, per = fmt[0], fmt.endswith("%")
    percent = value / (total or 1) * 100
    if unit == "%":
        return f"{percent:.2f}%"
    shown = f"{value:.0f}" if unit == "s" else f"{value / (60 if unit == 'm' else 3600):.0f}"
    return f"{shown}({percent:.2f}%)" if per else shown


def time_format(text: str) -> tuple[str, str]:
    """``-t`` as sreport reads it (a case-insensitive prefix); ValueError for another word."""
    low = text.lower()
    for name, found in TIME_FORMATS.items():
        if low and (name.startswith(low) or low == found[0]):
            return found
    raise ValueError(f"unknown time format {text}: Seconds, Minutes, Hours, Percent, SecPer, MinPer or HourPer")


def to_hour(when: float, round_up: bool = True) -> float:
    """slurmdb_report_set_start_end_time's rounding: to the nearest hour (30 s up a minute, 30 min up
    an hour), or down to the hour."""
    t = list(time.localtime(when))
    if round_up:
        t[4] += t[5] >= 30
        t[3] += t[4] >= 30
    t[4] = t[5] = 0
    t[8] = -1  # let mktime find daylight saving
    return time.mktime(tuple(t))  # type: ignore[arg-type]


class Window:
    """A report's window as sreport takes it: ``start=``/``end=`` to the hour, the end at most now
    (default: yesterday, midnight to midnight), an hour at least."""

    def __init__(self, words: Sequence[str], now: float) -> None:
        from pslurm.core.timefmt import parse_time

        midnight = to_hour(parse_time("midnight", now, past=True), False)
        start, end = midnight - 86400, midnight
        self.rest: list[tuple[str, str]] = []
        for word in words:
            key, _, value = word.partition("=")
            if key.lower() in ("start", "starttime"):
                start = to_hour(parse_time(value, now, past=True))
            elif key.lower() in ("end", "endtime"):
                end = to_hour(min(parse_time(value, now, past=True), now))
            else:
                self.rest.append((key.lower(), value))
        self.start, self.end = start, max(end, start + 3600)

    def title(self, name: str, seconds: bool = True) -> str:
        from pslurm.core.timefmt import format_timestamp

        span = f" ({int(self.end - self.start)} secs)" if seconds else ""
        return f"{name} {format_timestamp(self.start)} - {format_timestamp(self.end - 1)}{span}"


def header(title: str, unit_line: str) -> list[str]:
    return [RULE, title, unit_line, RULE]


def usage_line(fmt: tuple[str, str], tres_given: bool) -> str:
    return f"Usage reported in {fmt[1]}" if fmt[0] == "%" else \
        f"Usage reported in {'TRES' if tres_given else 'CPU'} {fmt[1]}"


def usage_width(seconds: float, fmt: str) -> int:
    """sreport_set_usage_col_width: 8, a column more for each digit of ``seconds`` past 8, 9 more
    under a *Per format."""
    width, order = 8, 100_000_000
    while seconds >= order and width < 26:
        width, order = width + 1, order * 10
    return width + (9 if len(fmt) == 2 else 0)


def size_usage(fields: Sequence[Field], spec: str, seconds: dict[str, float], fmt: str) -> None:
    """Usage columns as wide as sreport makes them for these figures (``seconds``: by field key),
    unless the format gave a width."""
    given = {split_width(item)[0].lower() for item in spec.split(",") if "%" in item}
    for f in fields:
        if f.key in seconds and not any(f.key.startswith(g) for g in given):
            f.width = usage_width(seconds[f.key], fmt)


def _fields(spec: str, table: Sequence[tuple[str, int, str, int, int]], per: bool) -> list[Field]:
    """A format list over a report's table of (name, shortest, header, width, width under a *Per format)."""
    out = []
    for item in filter(None, spec.split(",")):
        name, width = split_width(item)
        low = name.lower()
        found = next((r for r in table if r[1] <= len(low) <= len(r[0]) and r[0].lower().startswith(low)), None)
        if found is None:
            raise ValueError(f" Unknown field '{name}'")
        out.append(Field(found[2], width or (found[4] if per else found[3]), key=found[0].lower()))
    return out


CLUSTER_FIELDS = (("Accounts", 2, "Account", 15, 15), ("allocated", 2, "Allocated", 12, 20),
                  ("Cluster", 2, "Cluster", 9, 9), ("down", 1, "Down", 10, 18), ("idle", 1, "Idle", 12, 20),
                  ("Login", 1, "Login", 9, 9), ("overcommitted", 1, "Over Comm", 9, 18),
                  ("PlannedDown", 2, "PLND Down", 10, 18), ("Proper", 2, "Proper Name", 15, 15),
                  ("reported", 3, "Reported", 12, 20), ("reserved", 3, "Planned", 9, 18),
                  ("planned", 4, "Planned", 9, 18), ("TresCount", 5, "TRES Count", 10, 10),
                  ("TresName", 5, "TRES Name", 14, 14), ("Used", 1, "Used", 10, 18), ("Energy", 1, "Energy", 10, 18))
USER_FIELDS = (("Accounts", 1, "Account", 15, 15), ("Cluster", 1, "Cluster", 9, 9), ("Energy", 1, "Energy", 10, 18),
               ("Login", 1, "Login", 9, 9), ("Proper", 1, "Proper Name", 15, 15), ("TresName", 1, "TRES Name", 14, 14),
               ("Used", 1, "Used", 10, 18))
JOB_FIELDS = (("Accounts", 1, "Account", 9, 9), ("Cluster", 1, "Cluster", 9, 9))


def _proper(user: str) -> str:
    import pwd

    try:
        return pwd.getpwnam(user).pw_gecos.split(",")[0]
    except KeyError:
        return ""


def cluster_utilization(data: dict[str, Any], fmt: tuple[str, str], tres: list[str], spec: str) -> tuple[
        list[Field], list[list[str | None]]]:
    per = fmt[0].endswith("%") and len(fmt[0]) == 2
    fields = _fields(spec, CLUSTER_FIELDS, per)
    seconds = data["window"]
    rows = []
    widest: dict[str, float] = {}
    for name in tres:
        used = sum(r[TRES[name]] for r in data["assocs"])
        reported = data["cluster"][CLUSTER_SIZE[name]] * seconds
        values = {"cluster": data["cluster"]["name"], "allocated": used, "down": 0, "planneddown": 0,
                  "idle": max(0.0, reported - used), "reserved": 0, "planned": 0, "overcommitted": 0,
                  "reported": reported}
        for key, value in values.items():
            if key != "cluster":
                widest[key] = max(widest.get(key, 0.0), float(value))
        row: list[str | None] = []
        for f in fields:
            if f.key in ("cluster", "tresname", "trescount"):
                row.append({"cluster": values["cluster"], "tresname": name,
                            "trescount": str(data["cluster"][CLUSTER_SIZE[name]])}[f.key])
            elif f.key in values:
                row.append(time_value(float(values[f.key]), reported, fmt[0]))
            else:
                row.append(None)
        rows.append(row)
    size_usage(fields, spec, widest, fmt[0])
    return fields, rows


def account_by_user(data: dict[str, Any], fmt: tuple[str, str], tres: list[str], spec: str) -> tuple[
        list[Field], list[list[str | None]]]:
    """Cluster/Account/User: the root's total, then each account's, each followed by its users'."""
    fields = _fields(spec, CLUSTER_FIELDS, len(fmt[0]) == 2)
    rows = []
    for name in tres:
        key = TRES[name]
        total = sum(r[key] for r in data["assocs"])
        size_usage(fields, spec, {"used": total, "energy": total}, fmt[0])  # the root's is the largest
        accounts: dict[str, float] = {}
        for r in data["assocs"]:
            accounts[r["account"]] = accounts.get(r["account"], 0.0) + r[key]
        lines = [("root", "", total)]
        for account in sorted(accounts, key=lambda x: (-accounts[x], x)):
            lines.append((account, "", accounts[account]))
            lines += sorted(((account, r["user"], r[key]) for r in data["assocs"] if r["account"] == account),
                            key=lambda x: (-x[2], x[1]))
        for account, user, used in lines:
            values = {"cluster": data["cluster"]["name"], "accounts": account, "login": user or None,
                      "proper": _proper(user) if user else None, "tresname": name,
                      "used": time_value(used, total, fmt[0])}
            rows.append([values.get(f.key) for f in fields])
    return fields, rows


def top_usage(data: dict[str, Any], fmt: tuple[str, str], tres: list[str], spec: str, top: int) -> tuple[
        list[Field], list[list[str | None]]]:
    fields = _fields(spec, USER_FIELDS, len(fmt[0]) == 2)
    rows = []
    for name in tres:
        key = TRES[name]
        total = sum(r[key] for r in data["assocs"])
        users: dict[str, list[Any]] = {}
        for r in data["assocs"]:
            entry = users.setdefault(r["user"], [0.0, []])
            entry[0] += r[key]
            entry[1].append(r["account"])
        ranked = sorted(users, key=lambda u: (-users[u][0], u))[:top]
        largest = users[ranked[0]][0] if ranked else 0.0
        size_usage(fields, spec, {"used": largest, "energy": largest}, fmt[0])
        for user in ranked:
            values = {"cluster": data["cluster"]["name"], "login": user, "proper": _proper(user),
                      "accounts": ",".join(sorted(set(users[user][1]))), "tresname": name,
                      "used": time_value(users[user][0], total, fmt[0])}
            rows.append([values.get(f.key) for f in fields])
    return fields, rows


def sizes_by_account(data: dict[str, Any], fmt: tuple[str, str], spec: str, grouping: list[int]) -> tuple[
        list[Field], list[list[str | None]]]:
    """Job Sizes: each account's CPU time by its jobs' CPUs, in the grouping's bins, and its part of the cluster's."""
    width = 20 if len(fmt[0]) == 2 else 13
    fields = _fields(spec, JOB_FIELDS, False)
    bounds = [0, *grouping]
    bins = [Field(f"{lo}-{hi - 1} CPUs", width) for lo, hi in zip(bounds, bounds[1:], strict=False)]
    bins.append(Field(f">= {bounds[-1]} CPUs", width))
    total = sum(r["cpu_seconds"] for r in data["sizes"])
    accounts: dict[str, list[float]] = {}
    for r in data["sizes"]:
        index = sum(1 for b in grouping if r["cpus"] >= b)
        accounts.setdefault(r["account"], [0.0] * len(bins))[index] += r["cpu_seconds"]
    rows = []
    for account in sorted(accounts):
        own = sum(accounts[account])
        head = {"cluster": data["cluster"]["name"], "accounts": account}
        rows.append([head.get(f.key) for f in fields] + [time_value(v, own, fmt[0]) for v in accounts[account]]
                    + [f"{own / (total or 1) * 100:.2f}%"])
    return [*fields, *bins, Field("% of cluster", 12)], rows


def _run(kind: str, data: dict[str, Any], window: Window, fmt: tuple[str, str], tres: list[str],
         tres_given: bool) -> tuple[list[str], list[Field], list[list[str | None]]]:
    """The title lines, fields and rows of one report."""
    options = dict(window.rest)
    spec = options.get("format", "")
    if kind == "utilization":
        fields, rows = cluster_utilization(data, fmt, tres, spec or (
            "Cl,TresName,al,d,planned,i,res,rep" if tres_given else "Cl,al,d,planned,i,res,rep"))
        return header(window.title("Cluster Utilization", False), usage_line(fmt, tres_given)), fields, rows
    if kind == "accountutilizationbyuser":
        fields, rows = account_by_user(data, fmt, tres, spec or (
            "Cluster,Ac,Login,Proper,TresName,Used" if tres_given else "Cluster,Ac,Login,Proper,Used,Energy"))
        return header(window.title("Cluster/Account/User Utilization"), usage_line(fmt, tres_given)), fields, rows
    if kind == "topusage":
        top = int(options.get("topcount", "10"))
        fields, rows = top_usage(data, fmt, tres, spec or ("Cl,L,P,A,TresName,U" if tres_given else
                                                           "Cl,L,P,A,U,Energy"), top)
        return header(window.title(f"Top {top} Users"), usage_line(fmt, tres_given)), fields, rows
    grouping = sorted(int(g) for g in options.get("grouping", "50,250,500,1000").split(",") if g.isdigit())
    fields, rows = sizes_by_account(data, fmt, spec or "Cl,a", grouping)
    return header(window.title("Job Sizes"), f"Time reported in {fmt[1]}"), fields, rows


REPORTS = {("cluster", "utilization"): "utilization", ("cluster", "accountutilizationbyuser"):
           "accountutilizationbyuser", ("user", "topusage"): "topusage", ("job", "sizesbyaccount"): "sizesbyaccount"}


def main(argv: Sequence[str] | None = None) -> None:
    """Reports of the cluster's usage over a window (sreport)."""
    v, words = parse_command(PROG, argv, OPTIONS, "psreport [OPTIONS] cluster|user|job REPORT [start=T] [end=T] "
                             "[...]", main.__doc__ or "", words=True)
    if len(words) < 2:
        fail(PROG, "expected a report: cluster utilization, cluster AccountUtilizationByUser, user topusage, "
                   "job sizesbyaccount")
    kind = next((name for (group, report), name in REPORTS.items()
                 if group.startswith(words[0].lower()) and report.startswith(words[1].lower())), None)
    if kind is None:
        fail(PROG, f"Not valid report {' '.join(words[:2])}: pslurm has cluster utilization, cluster "
                   "AccountUtilizationByUser, user topusage and job sizesbyaccount")
    now = time.time()
    try:
        fmt = time_format(str(v.get("time") or "minutes"))
        window = Window(words[2:], now)
    except ValueError as exc:
        fail(PROG, str(exc))
    tres_text = str(v.get("tres") or "")
    tres = ["cpu", "mem", "gres/gpu"] if tres_text.lower() == "all" else \
        [t.strip().lower() for t in tres_text.split(",") if t.strip()] or ["cpu"]
    unknown = [t for t in tres if t not in TRES]
    if unknown:
        fail(PROG, f"Invalid TRES specification: {unknown[0]} (cpu, mem, gres/gpu)")
    api = connect_api(PROG)
    with reporting(PROG):
        data = api.request("GET", f"/pslurm/v1/usage?start={window.start}&end={window.end}")
    data["window"] = window.end - window.start
    try:
        titles, fields, rows = _run(kind, data, window, fmt, tres, bool(tres_text))
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from None
    parsable = PARSABLE2 if v.get("parsable2") else PARSABLE if v.get("parsable") else ""
    show = not v.get("noheader")
    lines = (titles if show else []) + render(fields, rows, show, parsable)
    write_lines(lines)


if __name__ == "__main__":
    main()
