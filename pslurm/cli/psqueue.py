"""psqueue: the job queue (squeue)."""

from __future__ import annotations

import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, print_listing, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.core.jobinfo import JobInfo
    from pslurm.core.jobspec import JobRecord

    Job = JobRecord | JobInfo  # a record of pslurm.client, or the API's JSON as it is

PROG = "psqueue"
DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"


def row_id(job: Job) -> str:
    """The JOBID column: the job's id (``14``, ``14_3``), or ``14_[3-9%2]`` for a row that stands
    for several pending tasks of an array."""
    if job.collapsed_tasks and job.array_job_id is not None:
        throttle = job.spec.array.partition("%")[2]
        return f"{job.array_job_id}_[{job.collapsed_tasks}{'%' + throttle if throttle else ''}]"
    return job.display_id


def _elapsed(job: Job) -> float:
    if job.start_time is None:
        return 0
    end = job.end_time if job.end_time is not None else time.time()
    return max(0.0, end - job.start_time)


def _reason_or_nodes(job: Job) -> str:
    return job.node or "" if job.state.holds_resources or job.node else f"({job.reason})"


def job_fields() -> dict[str, tuple[str, Any]]:
    from pslurm.cli.jobview import dependency_text, gres_text
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
        "M": ("TIME", lambda j: format_duration(_elapsed(j))),
        "l": ("TIME_LIMIT", lambda j: format_duration(j.time_limit)),
        "D": ("NODES", lambda j: str(j.spec.num_nodes)),
        "C": ("CPUS", lambda j: str(j.spec.cpus)),
        "m": ("MIN_MEMORY", lambda j: f"{j.spec.mem_mb}M" if j.spec.mem_mb else "0"),
        "N": ("NODELIST", lambda j: j.node or ""),
        "R": ("NODELIST(REASON)", _reason_or_nodes),
        "r": ("REASON", lambda j: str(j.reason)),
        "P": ("PARTITION", lambda j: j.partition),
        "b": ("TRES_PER_NODE", lambda j: "gres/" + gres_text(j.spec) if j.spec.gres else "N/A"),
        "E": ("DEPENDENCY", dependency_text),
        "V": ("SUBMIT_TIME", lambda j: format_timestamp(j.submit_time)),
        "S": ("START_TIME", start),
        "e": ("END_TIME", lambda j: format_timestamp(j.end_time)),
        "Z": ("WORK_DIR", lambda j: j.spec.workdir),
        "o": ("COMMAND", lambda j: " ".join(j.spec.argv) if j.spec.argv else "(batch script)"),
        "X": ("EXIT_CODE", lambda j: f"{j.exit_code}:{j.exit_signal}"),
    }


OPTIONS = (
    a.JOBS, a.USERS,
    a.Opt("states", "t", help="states (PD,R,...) or all"),
    a.Opt("partition", "p", help="partitions"),
    a.NOHEADER,
    a.Opt("format", "o", dest="fmt", help="output format (%i %j %T ...)"),
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
    fmt, start, expand, as_json, noheader = (v.get(k) for k in ("fmt", "start", "expand", "as_json", "noheader"))
    from pslurm.core.arrays import parse_task_selector, split_job_list
    from pslurm.core.errors import SpecError
    from pslurm.core.jobinfo import JobInfo
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
    api = connect_api(PROG)
    with reporting(PROG):
        replies = api.jobs(
            job_ids=job_ids, users=[u for u in users.split(",") if u] if isinstance(users, str) else (),
            states=wanted_states, include_finished=include_finished,
            # a listing reads only the jobs' own columns, unless it shows the request itself
            light=not as_json and not _shows_request(str(fmt or "")),
            brief=not as_json,  # what is set, each request once (restjson.job_to_brief_json)
            # squeue's view: an array's pending tasks as one row, grouped by the controller (-r: one row each)
            collapse_arrays=not (expand or as_json or any(tasks is not None for _, tasks in selectors)))
    found = [JobInfo(data) for data in replies]
    if any(tasks is not None for _, tasks in selectors):
        found = [j for j in found if _selected(j, selectors)]
    if isinstance(partition, str) and partition:
        wanted = set(partition.split(","))
        found = [j for j in found if j.partition in wanted]
    if job_ids and not found:
        fail(PROG, "Invalid job id specified")
    if as_json:
        import json

        from pslurm.cli.jsonout import job_json

        print(json.dumps({"jobs": [job_json(j) for j in found]}, indent=2))
        return
    print_listing(PROG, lambda: render_queue(str(fmt or (START_FORMAT if start else DEFAULT_FORMAT)), found,
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

