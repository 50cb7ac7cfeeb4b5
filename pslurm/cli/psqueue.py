"""psqueue: the job queue (squeue)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Optional

import typer

from pslurm.cli import options as o
from pslurm.cli.common import Client, fail, print_listing, run, typer_app

PROG = "psqueue"
DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %R"


def display_id(job: Any) -> str:
    """``14``, ``14_3``, or ``14_[3-9%2]`` for a row that stands for several pending tasks."""
    if not job.HasField("array_job_id"):
        return str(job.job_id)
    if job.collapsed_tasks:
        throttle = job.spec.array.partition("%")[2]
        return f"{job.array_job_id}_[{job.collapsed_tasks}{'%' + throttle if throttle else ''}]"
    return f"{job.array_job_id}_{job.array_task_id}"


def _elapsed(job: Any) -> float:
    if not job.HasField("start_time"):
        return 0
    end = job.end_time if job.HasField("end_time") else time.time()
    return max(0.0, end - job.start_time)


def _reason_or_nodes(job: Any) -> str:
    return job.node if job.state in ("RUNNING", "COMPLETING") or job.node else f"({job.reason or 'None'})"


def job_fields() -> dict[str, tuple[str, Any]]:
    from pslurm.core.convert import gres_from_pb
    from pslurm.core.dependency import DepStatus, describe
    from pslurm.core.gres import format_gres
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import format_duration, format_timestamp

    def limit(j: Any) -> str:
        return format_duration(j.time_limit if j.HasField("time_limit") else None)

    def start(j: Any) -> str:
        if j.HasField("start_time"):
            return format_timestamp(j.start_time)
        if j.state == "PENDING" and j.HasField("start_estimate"):
            return format_timestamp(j.start_estimate)
        return "N/A"

    def dependency(j: Any) -> str:
        status = {"Dependency": DepStatus.WAITING, "DependencyNeverSatisfied": DepStatus.NEVER}.get(j.reason)
        return describe(j.spec.dependency, status if j.state == "PENDING" else DepStatus.SATISFIED)

    def task(j: Any) -> str:
        found = display_id(j)
        return found.partition("_")[2] if j.HasField("array_job_id") else "N/A"

    return {
        "i": ("JOBID", display_id),
        "A": ("JOBID", lambda j: str(j.job_id)),
        "F": ("ARRAY_JOB_ID", lambda j: str(j.array_job_id if j.HasField("array_job_id") else j.job_id)),
        "K": ("ARRAY_TASK_ID", task),
        "Q": ("PRIORITY", lambda j: str(j.priority)),
        "a": ("ACCOUNT", lambda j: j.spec.account or "(null)"),
        "y": ("NICE", lambda j: str(j.spec.nice)),
        "j": ("NAME", lambda j: j.spec.name),
        "u": ("USER", lambda j: j.spec.user),
        "U": ("UID", lambda j: str(j.spec.uid)),
        "T": ("STATE", lambda j: j.state),
        "t": ("ST", lambda j: JobState(j.state).short),
        "M": ("TIME", lambda j: format_duration(_elapsed(j))),
        "l": ("TIME_LIMIT", limit),
        "D": ("NODES", lambda j: str(j.spec.num_nodes or 1)),
        "C": ("CPUS", lambda j: str((j.spec.ntasks or 1) * (j.spec.cpus_per_task or 1))),
        "m": ("MIN_MEMORY", lambda j: f"{j.spec.mem_mb}M" if j.spec.mem_mb else "0"),
        "N": ("NODELIST", lambda j: j.node),
        "R": ("NODELIST(REASON)", _reason_or_nodes),
        "r": ("REASON", lambda j: j.reason or "None"),
        "P": ("PARTITION", lambda j: j.spec.partition),
        "b": ("TRES_PER_NODE", lambda j: "gres/" + format_gres(gres_from_pb(j.spec.gres)) if j.spec.gres else "N/A"),
        "E": ("DEPENDENCY", dependency),
        "V": ("SUBMIT_TIME", lambda j: format_timestamp(j.submit_time)),
        "S": ("START_TIME", start),
        "e": ("END_TIME", lambda j: format_timestamp(j.end_time if j.HasField("end_time") else None)),
        "Z": ("WORK_DIR", lambda j: j.spec.workdir),
        "o": ("COMMAND", lambda j: " ".join(j.spec.argv) if j.spec.argv else "(batch script)"),
        "X": ("EXIT_CODE", lambda j: f"{j.exit_code}:{j.exit_signal}"),
    }


def job_json(job: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    data = MessageToDict(job, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    data["job_id"] = int(data["job_id"])
    data["spec"].pop("environment", None)  # the submitter's environment is theirs, not the queue's
    data["spec"].pop("script", None)
    return data


def make_app() -> typer.Typer:
    app = typer_app("Show the job queue.")

    @app.command()
    def psqueue(
        jobs: o.Jobs = None,
        users: o.Users = None,
        states: Annotated[Optional[str], typer.Option("-t", "--states", help="states (PD,R,...) or all")] = None,
        partition: Annotated[Optional[str], typer.Option("-p", "--partition", help="partitions")] = None,
        noheader: o.NoHeader = False,
        fmt: Annotated[Optional[str], typer.Option("-o", "--format", help="output format (%i %j %T ...)")] = None,
        start: Annotated[bool, typer.Option("--start", help="pending jobs and their expected start times")] = False,
        expand: Annotated[bool, typer.Option("-r", "--array", help="one line per array task")] = False,
        as_json: o.Json = False,
    ) -> None:
        """Show pending and running jobs (finished ones with -t all or -j)."""
        from pslurm.core.arrays import parse_task_selector, split_job_list
        from pslurm.core.jobspec import SpecError
        from pslurm.proto import pslurm_pb2 as pb

        # A listing reads only the jobs' own columns, unless it shows the request itself.
        query = pb.JobQuery(light=not as_json and not _shows_request(fmt or ""))
        selectors = []
        if jobs:
            try:
                selectors = [parse_task_selector(j) for j in split_job_list(jobs)]
            except SpecError:
                fail(PROG, f"Invalid job id specified: {jobs}")
            query.job_ids.extend(job_id for job_id, _ in selectors)
        # squeue's view: an array's pending tasks as one row, grouped by the controller (-r: one row each).
        query.collapse_arrays = not (expand or as_json or any(tasks is not None for _, tasks in selectors))
        if start:
            query.states.append("PENDING")
        if users:
            query.users.extend(u for u in users.split(",") if u)
        if states:
            if states.lower() == "all":
                query.include_finished = True
            else:
                query.states.extend(s for s in states.split(",") if s)
        client = Client(PROG)
        found = list(client.call("GetJobs", query).jobs)
        if any(tasks is not None for _, tasks in selectors):
            found = [j for j in found if _selected(j, selectors)]
        if partition:
            wanted = set(partition.split(","))
            found = [j for j in found if j.spec.partition in wanted]
        if query.job_ids and not found:
            fail(PROG, "Invalid job id specified")
        if as_json:
            print(json.dumps({"jobs": [job_json(j) for j in found]}, indent=2))
            return
        print_listing(PROG, lambda: render_queue(fmt or (START_FORMAT if start else DEFAULT_FORMAT), found,
                                                 not noheader))

    return app


def _selected(job: Any, selectors: list[tuple[int, tuple[int, ...] | None]]) -> bool:
    for job_id, tasks in selectors:
        if tasks is None and (job.job_id == job_id or job.array_job_id == job_id):
            return True
        if tasks is not None and job.HasField("array_job_id") and job.array_job_id == job_id \
                and job.array_task_id in tasks:
            return True
    return False


def _shows_request(fmt: str) -> bool:
    """The format has the work directory (%Z) or the command (%o), which only the full request holds."""
    from pslurm.cli.formats import parse_format

    return any(col.letter in ("Z", "o") for col in parse_format(fmt)[0])


def render_queue(fmt: str, found: list[Any], header: bool) -> list[str]:
    from pslurm.cli.formats import render

    return render(fmt, found, job_fields(), header, PROG)


def main() -> None:
    run(make_app(), PROG)
