"""psacct: accounting of finished and running jobs (sacct), GPU usage included."""

from __future__ import annotations

import sys
import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, job_id_list, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from pslurm.core.jobinfo import JobInfo
    from pslurm.core.jobspec import JobRecord

    Job = JobRecord | JobInfo  # a record of pslurm.client, or the API's JSON as it is

PROG = "psacct"
DEFAULT_FIELDS = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
LEFT = frozenset({"jobid", "jobidraw"})  # sacct left-aligns ids and right-aligns everything else
WIDTHS = {"jobid": 12, "jobidraw": 12, "exitcode": 8, "submit": 19, "start": 19, "end": 19}  # else 10


def _elapsed(job: Job, now: float) -> float:
    if job.start_time is None:
        return 0.0
    end = job.end_time if job.end_time is not None else now
    return max(0.0, end - job.start_time)


def format_elapsed(seconds: float) -> str:
    """sacct's Elapsed: ``HH:MM:SS``, with ``D-`` in front past a day."""
    total = int(seconds)
    days, rem = divmod(total, 86400)
    text = f"{rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}"
    return f"{days}-{text}" if days else text


def _allocated(job: Job) -> bool:
    return job.start_time is not None


def _gpus(job: Job) -> int:
    return job.spec.gpus()


def _cpus(job: Job) -> int:
    return job.spec.cpus


def alloc_tres(job: Job) -> str:
    """``cpu=1,gres/gpu=2,gres/gpu:a100=2,mem=1000M,node=1``; empty before the job was allocated."""
    if not _allocated(job):
        return ""
    parts = [f"cpu={_cpus(job)}"]
    gpus = _gpus(job)
    if gpus:
        parts.append(f"gres/gpu={gpus}")
        parts += [f"gres/gpu:{g.type}={g.count}" for g in job.spec.gres if g.name == "gpu" and g.type]
    if job.spec.mem_mb:
        parts.append(f"mem={job.spec.mem_mb}M")
    parts.append("node=1")
    return ",".join(parts)


def gpu_seconds(job: Job, now: float) -> float | None:
    """Recorded GPU-seconds, or allocated GPUs x elapsed so far for a job still running."""
    if job.gpu_seconds is not None:
        return job.gpu_seconds
    gpus = _gpus(job)
    return gpus * _elapsed(job, now) if gpus and _allocated(job) else None


def account_fields(now: float) -> dict[str, Callable[[Job], str]]:
    """Field name (lower case) -> getter; the header is the name as the user wrote it."""
    from pslurm.core.timefmt import format_duration, format_timestamp

    def ts(job: Job, name: str) -> str:
        return format_timestamp(getattr(job, name))

    def gpu_secs(job: Job) -> str:
        value = gpu_seconds(job, now)
        return "" if value is None else str(round(value))

    return {
        "jobid": lambda j: str(j.job_id),
        "jobidraw": lambda j: str(j.job_id),
        "jobname": lambda j: j.spec.name,
        "partition": lambda j: j.partition,
        "account": lambda j: "",  # pslurm has no accounts (yet)
        "user": lambda j: j.spec.user,
        "uid": lambda j: str(j.spec.uid),
        "group": lambda j: str(j.spec.gid),
        "state": lambda j: j.state.value,
        "exitcode": lambda j: f"{j.exit_code}:{j.exit_signal}",
        "elapsed": lambda j: format_elapsed(_elapsed(j, now)),
        "elapsedraw": lambda j: str(int(_elapsed(j, now))),
        "submit": lambda j: format_timestamp(j.submit_time),
        "start": lambda j: ts(j, "start_time"),
        "end": lambda j: ts(j, "end_time"),
        "timelimit": lambda j: format_duration(j.time_limit),
        "nodelist": lambda j: j.node or "None assigned",
        "nnodes": lambda j: str(j.spec.num_nodes),
        "alloccpus": lambda j: str(_cpus(j) if _allocated(j) else 0),
        "alloctres": alloc_tres,
        "reqtres": lambda j: alloc_tres(j) if _allocated(j) else f"cpu={_cpus(j)},node=1",
        "allocgres": lambda j: f"gpu:{_gpus(j)}" if _gpus(j) and _allocated(j) else "",
        "gpuindices": lambda j: ",".join(map(str, j.gpu_indices)),
        "workdir": lambda j: j.spec.workdir,
        "reason": lambda j: str(j.reason),
        "gpuseconds": gpu_secs,
        "gpumempeak": lambda j: f"{j.peak_gpu_memory_mb}M" if j.peak_gpu_memory_mb is not None else "",
        "gpuutil": lambda j: f"{j.mean_gpu_util:.1f}%" if j.mean_gpu_util is not None else "",
    }


def parse_fields(spec: str, known: Sequence[str]) -> list[tuple[str, str, int]]:
    """``JobID,JobName%30`` -> [(header, key, width)]; sacct's width is 10 unless ``%N`` says."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, width = item.partition("%")
        key = name.lower()
        if key not in known:
            raise ValueError(f'Invalid field requested: "{name}"')
        if width and not width.isdigit():
            raise ValueError(f"Invalid field width: {item}")
        out.append((name, key, int(width) if width else WIDTHS.get(key, 10)))
    return out


def render(rows: Sequence[Job], columns: list[tuple[str, str, int]], fields: dict[str, Callable[[Job], str]],
           header: bool, sep: str | None, trailing: bool) -> list[str]:
    """sacct's table (fixed widths, ``+`` marks a cut value) or, with ``sep``, parsable lines."""
    table = [[fields[key](row) for _, key, _ in columns] for row in rows]
    if sep is not None:
        lines = ([[name for name, _, _ in columns]] if header else []) + table
        return [sep.join(values) + (sep if trailing else "") for values in lines]

    def cell(value: str, key: str, width: int, mark: str = "+") -> str:
        if len(value) > width:
            value = value[: width - len(mark)] + mark
        return value.ljust(width) if key in LEFT else value.rjust(width)

    out = []
    if header:
        out.append(" ".join(cell(name, key, w, mark="") for name, key, w in columns))
        out.append(" ".join("-" * w for _, _, w in columns))
    out += [" ".join(cell(v, key, w) for v, (_, key, w) in zip(values, columns, strict=True)) for values in table]
    return [line.rstrip() for line in out]


def _job_json(job: Job, now: float) -> dict[str, Any]:
    from pslurm.cli.jsonout import job_json

    data = job_json(job)
    data["elapsed"] = int(_elapsed(job, now))
    data["alloc_tres"] = alloc_tres(job)
    data["gpu_seconds"] = gpu_seconds(job, now)
    data.setdefault("peak_gpu_memory_mb", None)
    data.setdefault("mean_gpu_util", None)
    if data["peak_gpu_memory_mb"] is not None:
        data["peak_gpu_memory_mb"] = int(data["peak_gpu_memory_mb"])
    return data


OPTIONS = (
    a.JOBS, a.USERS,
    a.Opt("allusers", "a", a.NONE, help="jobs of every user"),
    a.Opt("state", "s", dest="states", help="states (CD,F,R,...)"),
    a.Opt("starttime", "S", dest="start", help="jobs in any state after this time (default: midnight)"),
    a.Opt("endtime", "E", dest="end", help="jobs submitted before this"),
    a.Opt("format", "o", dest="fmt", help="fields: JobID,JobName%30,..."),
    a.Opt("parsable", "p", a.NONE, help="'|' after every field"),
    a.Opt("parsable2", "P", a.NONE, help="'|' between fields"),
    a.Opt("noheader", "n", a.NONE, help="no header lines"),
    a.Opt("allocations", "X", a.NONE, help="(jobs have no steps)"),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Show finished and running jobs from the accounting store (sacct)."""
    found_opts, positional = a.parse_or_fail(
        PROG, argv, OPTIONS, stop_at_positional=False, usage="psacct [OPTIONS]",
        description="Show finished and running jobs from the accounting store (sacct).")
    a.no_positionals(PROG, positional)
    v = a.values(found_opts)
    jobs, users, states, start, end, fmt = (v.get(k) for k in ("jobs", "users", "states", "start", "end", "fmt"))
    parsable, parsable2 = bool(v.get("parsable")), bool(v.get("parsable2"))
    import os

    from pslurm.cli.common import user_identity
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import TimeFormatError, parse_timestamp

    now = time.time()
    job_ids = job_id_list(PROG, jobs)
    wanted_users = []
    if isinstance(users, str) and users:
        wanted_users = [u for u in users.split(",") if u]
    elif not v.get("allusers") and not jobs and os.getuid() != 0:  # sacct: your own jobs unless root or -a
        wanted_users = [user_identity()[0]]
    since = None
    try:
        wanted = {JobState.parse(s) for s in states.split(",") if s} if isinstance(states, str) else set()
        if start or not jobs:  # sacct's window starts at midnight unless jobs are named
            since = parse_timestamp(str(start or "midnight"), now)
        until = parse_timestamp(end, now) if isinstance(end, str) and end else None
    except (TimeFormatError, ValueError) as exc:
        fail(PROG, str(exc))
    fields = account_fields(now)
    try:
        columns = parse_fields(str(fmt or DEFAULT_FIELDS), list(fields))
    except ValueError as exc:
        fail(PROG, str(exc))
    from pslurm.core.jobinfo import JobInfo

    api = connect_api(PROG)
    with reporting(PROG):
        found = [JobInfo(data) for data in api.jobs(job_ids=job_ids, users=wanted_users, include_finished=True,
                                                     since=since)]
    found = [j for j in found if (not wanted or j.state in wanted)
             and (until is None or j.submit_time <= until)]
    if v.get("as_json"):
        import json

        print(json.dumps({"jobs": [_job_json(j, now) for j in found]}, indent=2))
        return
    sep = "|" if parsable or parsable2 else None
    lines = render(found, columns, fields, not v.get("noheader"), sep, trailing=parsable and not parsable2)
    sys.stdout.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
