"""psqueue: the job queue (squeue)."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any, Optional

import typer

from pslurm.cli import options as o
from pslurm.cli.common import Client, fail, run, typer_app

PROG = "psqueue"
DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"


def _elapsed(job: Any) -> float:
    if not job.HasField("start_time"):
        return 0
    end = job.end_time if job.HasField("end_time") else time.time()
    return max(0.0, end - job.start_time)


def _reason_or_nodes(job: Any) -> str:
    return job.node if job.state in ("RUNNING", "COMPLETING") or job.node else f"({job.reason or 'None'})"


def job_fields() -> dict[str, tuple[str, Any]]:
    from pslurm.core.convert import gres_from_pb
    from pslurm.core.gres import format_gres
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import format_duration, format_timestamp

    def limit(j: Any) -> str:
        return format_duration(j.time_limit if j.HasField("time_limit") else None)

    return {
        "i": ("JOBID", lambda j: str(j.job_id)),
        "A": ("JOBID", lambda j: str(j.job_id)),
        "F": ("ARRAY_JOB_ID", lambda j: str(j.job_id)),
        "K": ("ARRAY_TASK_ID", lambda j: "N/A"),
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
        "E": ("DEPENDENCY", lambda j: "(null)"),
        "V": ("SUBMIT_TIME", lambda j: format_timestamp(j.submit_time)),
        "S": ("START_TIME", lambda j: format_timestamp(j.start_time if j.HasField("start_time") else None)),
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
        jobs: Annotated[Optional[str], typer.Option("-j", "--jobs", help="comma-separated job ids")] = None,
        users: Annotated[Optional[str], typer.Option("-u", "--user", help="comma-separated user names")] = None,
        states: Annotated[Optional[str], typer.Option("-t", "--states", help="states (PD,R,...) or all")] = None,
        partition: Annotated[Optional[str], typer.Option("-p", "--partition", help="partitions")] = None,
        noheader: Annotated[bool, typer.Option("-h", "--noheader", help="no header line")] = False,
        fmt: Annotated[Optional[str], typer.Option("-o", "--format", help="output format (%i %j %T ...)")] = None,
        as_json: o.Json = False,
    ) -> None:
        """Show pending and running jobs (finished ones with -t all or -j)."""
        from pslurm.proto import pslurm_pb2 as pb

        query = pb.JobQuery()
        if jobs:
            try:
                query.job_ids.extend(int(j) for j in jobs.split(",") if j)
            except ValueError:
                fail(PROG, f"Invalid job id specified: {jobs}")
        if users:
            query.users.extend(u for u in users.split(",") if u)
        if states:
            if states.lower() == "all":
                query.include_finished = True
            else:
                query.states.extend(s for s in states.split(",") if s)
        client = Client(PROG)
        found = list(client.call("GetJobs", query).jobs)
        if partition:
            wanted = set(partition.split(","))
            found = [j for j in found if j.spec.partition in wanted]
        if query.job_ids and not found:
            fail(PROG, "Invalid job id specified")
        if as_json:
            print(json.dumps({"jobs": [job_json(j) for j in found]}, indent=2))
            return
        try:
            lines = _render_jobs(fmt or DEFAULT_FORMAT, found, not noheader)
        except ValueError as exc:
            fail(PROG, str(exc))
        sys.stdout.write("".join(line + "\n" for line in lines))

    return app


def _render_jobs(fmt: str, found: list[Any], header: bool) -> list[str]:
    from pslurm.cli.formats import render

    return render(fmt, found, job_fields(), header, PROG)


def main() -> None:
    run(make_app(), PROG)
