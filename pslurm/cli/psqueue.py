"""psqueue: the job queue (squeue)."""

from __future__ import annotations

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, print_listing, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.core.jobinfo import JobInfo as Job

PROG = prog_name("psqueue")
DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"


def row_id(job: Job) -> str:
    """The JOBID column: the job's id (``14``, ``14_3``), or ``14_[3-9%2]`` for a row that stands
    for several pending tasks of an array."""
    if job.collapsed_tasks and job.array_job_id is not None:
        throttle = job.spec.array.partition("%")[2]
        return f"{job.array_job_id}_[{job.collapsed_tasks}{'%' + throttle if throttle else ''}]"
    return job.display_id


def _reason_or_nodes(job: Job) -> str:
    from pslurm.cli.jobview import nodelist_text

    return nodelist_text(job) if job.state.holds_resources or job.node else f"({job.reason})"


def job_fields() -> dict[str, tuple[str, Any]]:
    from pslurm.cli.jobview import (
        dependency_text,
        node_count,
        nodelist_text,
        time_left_text,
        time_used,
        total_cpus,
        tres_per_node_text,
    )
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import format_duration, format_timestamp

    def start(j: Job) -> str:
        if j.start_time is not None:
            return format_timestamp(j.start_time)
        if j.state == JobState.PENDING and j.start_estimate is not None:
            return format_timestamp(j.start_estimate)
        return "N/A"

    def task(j: Job) -> str:
        return row_id(j).partition("_")[2] if j.array_job_id is not None else "N/A"

    return {
        "i": ("JOBID", row_id),
        "A": ("JOBID", lambda j: str(j.job_id)),
        "F": ("ARRAY_JOB_ID", lambda j: str(j.array_job_id if j.array_job_id is not None else j.job_id)),
        "K": ("ARRAY_TASK_ID", task),
        "Q": ("PRIORITY", lambda j: str(j.priority)),
        "a": ("ACCOUNT", lambda j: j.spec.account or "(null)"),
        "y": ("NICE", lambda j: str(j.spec.nice)),
        "j": ("NAME", lambda j: j.spec.name),
        "u": ("USER", lambda j: j.spec.user),
        "U": ("UID", lambda j: str(j.spec.uid)),
        "T": ("STATE", lambda j: j.state.value),
        "t": ("ST", lambda j: j.state.short),
        "M": ("TIME", lambda j: format_duration(time_used(j))),
        "L": ("TIME_LEFT", time_left_text),
        "l": ("TIME_LIMIT", lambda j: format_duration(j.time_limit)),
        "D": ("NODES", lambda j: str(node_count(j))),
        "C": ("CPUS", lambda j: str(total_cpus(j))),
        "m": ("MIN_MEMORY", lambda j: f"{j.spec.mem_mb}M" if j.spec.mem_mb else "0"),
        "N": ("NODELIST", nodelist_text),
        "R": ("NODELIST(REASON)", _reason_or_nodes),
        "r": ("REASON", lambda j: str(j.reason)),
        "P": ("PARTITION", lambda j: j.partition),
        "b": ("TRES_PER_NODE", tres_per_node_text),
        "E": ("DEPENDENCY", dependency_text),
        "V": ("SUBMIT_TIME", lambda j: format_timestamp(j.submit_time)),
        "S": ("START_TIME", start),
        "e": ("END_TIME", lambda j: format_timestamp(j.end_time)),
        "Z": ("WORK_DIR", lambda j: j.spec.workdir),
        "o": ("COMMAND", lambda j: " ".join(j.spec.argv) if j.spec.argv else "(batch script)"),
        "X": ("EXIT_CODE", lambda j: f"{j.exit_code}:{j.exit_signal}"),
        "k": ("COMMENT", lambda j: j.spec.comment or "(null)"),
        "q": ("QOS", lambda j: j.spec.qos or "normal"),  # Slurm's default QOS, the only one pslurm has
    }


# squeue -O/--Format names (case-insensitive, as Slurm 22.05's src/squeue/opts.c) -> the -o letter whose
# field they print: one table of fields for both. squeue's "priority" is the normalised float of %p;
# pslurm has only the integer priority (%Q, squeue's "prioritylong"), so both print that.
LONG_FIELDS = {
    "account": "a", "arrayjobid": "F", "arraytaskid": "K", "command": "o", "comment": "k", "dependency": "E",
    "endtime": "e",
    "exit_code": "X", "gres": "b", "jobarrayid": "i", "jobid": "A", "minmemory": "m", "name": "j", "nice": "y",
    "nodelist": "N", "numcpus": "C", "numnodes": "D", "partition": "P", "priority": "Q", "prioritylong": "Q",
    "qos": "q",
    "reason": "r", "reasonlist": "R", "starttime": "S", "state": "T", "statecompact": "t", "submittime": "V",
    "timeleft": "L", "timelimit": "l", "timeused": "M", "tres-per-node": "b", "userid": "U", "username": "u",
    "workdir": "Z",
}


def long_format(spec: str) -> str:
    """An -O list (``JobID,Name:30,State:.10 ,TimeLeft``) as the -o format it prints the same as
    (see :func:`pslurm.cli.formats.long_format`). Raises ValueError naming a field squeue does not know."""
    from pslurm.cli.formats import long_format as by_names

    return by_names(spec, LONG_FIELDS, "job")


def sort_jobs(found: Sequence[Job], spec: str) -> list[Job]:
    """squeue's ``-S/--sort``: -o letters, comma separated, ``-`` before one for descending, the first
    the main key (squeue sorts by the last key first, then by each before it). Raises ValueError for
    a letter that is no field."""
    import time

    from pslurm.cli.jobview import node_count, time_used, total_cpus

    now = time.time()
    fields = job_fields()
    big = float("inf")

    def start(j: Job) -> float:  # squeue's _get_start_time: none yet sorts after now
        when = j.start_time if j.start_time is not None else j.start_estimate
        if when is None:
            return now + 100
        return max(when, now) if j.start_time is None else when

    numeric: dict[str, Any] = {
        "i": lambda j: ((j.array_job_id, j.array_task_id if j.array_task_id is not None else big)
                        if j.array_job_id is not None else (j.job_id, big)),
        "A": lambda j: j.job_id, "F": lambda j: j.array_job_id if j.array_job_id is not None else j.job_id,
        "p": lambda j: j.priority, "Q": lambda j: j.priority, "y": lambda j: j.spec.nice,
        "D": node_count, "C": total_cpus, "m": lambda j: j.spec.mem_mb or 0,
        "U": lambda j: j.spec.uid, "M": lambda j: time_used(j, now), "V": lambda j: j.submit_time or 0,
        "S": start, "e": lambda j: j.end_time or 0,
        "l": lambda j: big if j.time_limit is None else j.time_limit,
        "L": lambda j: big if j.time_limit is None else j.time_limit - time_used(j, now),
    }
    keys: list[tuple[Any, bool]] = []
    for part in (p for p in spec.split(",") if p):
        reverse = part.startswith("-")
        letters = part.lstrip("+-")
        for letter in letters:
            if letter in numeric:
                keys.append((numeric[letter], reverse))
            elif letter in fields:
                keys.append((fields[letter][1], reverse))
            else:
                raise ValueError(f"Invalid sort specification: {letter}")
            reverse = False  # squeue: a '-' applies to the letter right after it
    rows = list(found)
    for key, reverse in reversed(keys):
        rows.sort(key=key, reverse=reverse)  # stable: earlier keys win
    return rows


DEFAULT_SORT = "P,t,-p"  # squeue's default (src/squeue/sort.c): partition, state (compact code), priority down
START_SORT = "S"  # squeue --start


OPTIONS = (
    a.JOBS, a.USERS,
    a.Opt("me", arg=a.NONE, help="only the caller's own jobs (as -u $USER)"),
    a.Opt("states", "t", help="states (PD,R,...) or all"),
    a.Opt("partition", "p", help="partitions"),
    a.NOHEADER,
    a.Opt("format", "o", dest="fmt", help="output format (%i %j %T ...)"),
    a.Opt("Format", "O", dest="long_fmt", help="output fields by name (JobID,Name:30,TimeLeft:.10 ...)"),
    a.Opt("sort", "S", help="sort keys: -o letters, '-' descending (-S -t,i)"),
    a.Opt("start", arg=a.NONE, help="pending jobs and their expected start times"),
    a.Opt("array", "r", a.NONE, dest="expand", help="one line per array task"),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Show pending and running jobs (finished ones with -t all or -j)."""
    found_opts, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False,
                                             usage="psqueue [OPTIONS]", description=main.__doc__ or "")
    a.no_positionals(PROG, positional)
    v = a.values(found_opts)
    jobs, users, states, partition = (v.get(k) for k in ("jobs", "users", "states", "partition"))
    fmt, start, expand, noheader = (v.get(k) for k in ("fmt", "start", "expand", "noheader"))
    as_json = a.json_format(PROG, v)  # None, "slurm" or "pslurm"
    long_fmt, sort = v.get("long_fmt"), v.get("sort")
    seen: set[str] = set()
    for opt, _ in found_opts:  # squeue: whichever of -o and -O comes second is refused
        if opt.dest == "long_fmt" and "fmt" in seen:
            fail(PROG, "-O (--Format) is incompatible with -o (--format)")
        if opt.dest == "fmt" and "long_fmt" in seen:
            fail(PROG, "-o (--format) is incompatible with -O (--Format)")
        seen.add(opt.dest)
    if isinstance(long_fmt, str):
        try:
            fmt = long_format(long_fmt)
        except ValueError as exc:
            fail(PROG, str(exc))
    if v.get("me"):  # squeue --me: the caller's effective uid, as -u would give it
        import os
        import pwd

        try:
            users = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:
            users = os.environ.get("USER", str(os.geteuid()))
    from pslurm.core.arrays import parse_task_selector, split_job_list
    from pslurm.core.errors import SpecError
    from pslurm.core.states import JobState

    selectors = []
    if isinstance(jobs, str) and jobs:
        try:
            selectors = [parse_task_selector(j) for j in split_job_list(jobs)]
        except SpecError:
            fail(PROG, f"Invalid job id specified: {jobs}")
    job_ids = [job_id for job_id, _ in selectors]
    wanted_states: list[str] = ["PENDING"] if start else []
    include_finished = False
    if isinstance(states, str) and states:
        if states.lower() == "all":
            include_finished = True
        else:
            try:
                wanted_states.extend(JobState.parse(s).value for s in states.split(",") if s)
            except ValueError as exc:
                fail(PROG, str(exc))
    client = connect(PROG)
    with reporting(PROG):
        found = client.jobs(
            job_ids=job_ids, users=[u for u in users.split(",") if u] if isinstance(users, str) else (),
            states=wanted_states, include_finished=include_finished,
            # a listing reads only the jobs' own columns, unless it shows the request itself
            light=not as_json and not _shows_request(str(fmt or "")),
            # squeue's view: an array's pending tasks as one row, grouped by the controller (-r: one row each)
            # (Slurm's JSON too: its pending tasks are one record; pslurm's JSON has always listed each)
            collapse_arrays=not (expand or as_json == "pslurm" or any(tasks is not None for _, tasks in selectors)))
    if any(tasks is not None for _, tasks in selectors):
        found = [j for j in found if _selected(j, selectors)]
    if isinstance(partition, str) and partition:
        wanted = set(partition.split(","))
        found = [j for j in found if j.partition in wanted]
    if job_ids and not found:
        fail(PROG, "Invalid job id specified")
    if as_json == "slurm":
        from pslurm.cli import slurmjson

        print(slurmjson.dumps(slurmjson.jobs_reply(found, client.config.cluster_name)))
        return
    if as_json:
        import json

        from pslurm.cli.jsonout import job_json

        print(json.dumps({"jobs": [job_json(j) for j in found]}, indent=2))
        return
    try:
        listed = sort_jobs(found, str(sort) if isinstance(sort, str) else (START_SORT if start else DEFAULT_SORT))
    except ValueError as exc:
        fail(PROG, str(exc))
    print_listing(PROG, lambda: render_queue(str(fmt or (START_FORMAT if start else DEFAULT_FORMAT)), listed,
                                             not noheader))


def _selected(job: Job, selectors: list[tuple[int, tuple[int, ...] | None]]) -> bool:
    for job_id, tasks in selectors:
        if tasks is None and (job.job_id == job_id or job.array_job_id == job_id):
            return True
        if tasks is not None and job.array_job_id is not None and job.array_job_id == job_id \
                and job.array_task_id in tasks:
            return True
    return False


def _shows_request(fmt: str) -> bool:
    """The format has the work directory (%Z) or the command (%o), which only the full request holds."""
    from pslurm.cli.formats import parse_format

    return any(col.letter in ("Z", "o") for col in parse_format(fmt)[0])


def render_queue(fmt: str, found: Sequence[Job], header: bool) -> list[str]:
    from pslurm.cli.formats import render

    return render(fmt, found, job_fields(), header, PROG)

