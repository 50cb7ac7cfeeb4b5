"""pscontrol: show jobs and nodes, update nodes (scontrol)."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from pslurm.cli import options as o
from pslurm.cli.common import Client, fail, run, typer_app

PROG = "pscontrol"


def show_job(job: Any) -> str:
    """scontrol show job's Key=Value block."""
    from pslurm.core.convert import gres_from_pb
    from pslurm.core.gres import format_gres
    from pslurm.core.timefmt import format_duration, format_timestamp

    spec = job.spec
    start = job.start_time if job.HasField("start_time") else None
    end = job.end_time if job.HasField("end_time") else None
    expected = start if start is not None else (job.start_estimate if job.HasField("start_estimate") else None)
    run_time = 0.0 if start is None else (end or time.time()) - start
    cpus = (spec.ntasks or 1) * (spec.cpus_per_task or 1)
    gres = format_gres(gres_from_pb(spec.gres))
    tres = f"cpu={cpus},mem={spec.mem_mb}M,node=1" + (f",gres/gpu={sum(g.count for g in spec.gres)}" if gres else "")
    stdout = spec.stdout if spec.HasField("stdout") else "slurm-%j.out"
    from pslurm.core.dependency import DepStatus, describe

    dep_status = {"Dependency": DepStatus.WAITING, "DependencyNeverSatisfied": DepStatus.NEVER}.get(job.reason)
    dependency = describe(spec.dependency, dep_status if job.state == "PENDING" else DepStatus.SATISFIED)
    array = (f" ArrayJobId={job.array_job_id} ArrayTaskId={job.array_task_id}"
             if job.HasField("array_job_id") else "")
    held = {"user": " (held by user)", "admin": " (held by an operator)"}.get(job.hold, "")
    lines = [
        f"JobId={job.job_id}{array} JobName={spec.name}",
        f"UserId={spec.user}({spec.uid}) GroupId={spec.gid}",
        f"Priority={job.priority}{held} Nice={spec.nice} Account={spec.account or '(null)'}",
        f"JobState={job.state} Reason={job.reason or 'None'} Dependency={dependency}",
        f"Requeue={1 if spec.requeue else 0} Restarts={job.restarts}",
        f"ExitCode={job.exit_code}:{job.exit_signal}",
        f"RunTime={format_duration(run_time)} TimeLimit="
        f"{format_duration(job.time_limit if job.HasField('time_limit') else None)}",
        f"SubmitTime={format_timestamp(job.submit_time)} "
        f"EligibleTime={format_timestamp(job.eligible_time if job.HasField('eligible_time') else None)}",
        f"StartTime={format_timestamp(expected)} EndTime={format_timestamp(end)}",
        f"Partition={spec.partition} NodeList={job.node or '(null)'}",
        f"ReqNodeList={spec.nodelist or '(null)'} ExcNodeList={spec.exclude or '(null)'}",
        f"NumNodes={spec.num_nodes or 1} NumCPUs={cpus} NumTasks={spec.ntasks or 1} "
        f"CPUs/Task={spec.cpus_per_task or 1}",
        f"TRES={tres}",
        f"TresPerNode={'gres/' + gres if gres else '(null)'} "
        f"GpuIndices={','.join(map(str, job.gpu_indices)) or '(null)'}",
        f"Command={' '.join(spec.argv) if spec.argv else '(batch script)'}",
        f"WorkDir={spec.workdir}",
    ]
    if not spec.interactive:
        lines.append(f"StdOut={stdout}")
        lines.append(f"StdErr={spec.stderr if spec.HasField('stderr') else stdout}")
    return lines[0] + "\n" + "".join(f"   {line}\n" for line in lines[1:])


def show_node(node: Any) -> str:
    from pslurm.core.convert import gres_from_pb
    from pslurm.core.gres import format_gres
    from pslurm.core.timefmt import format_timestamp

    drained = node.drain and node.display_state not in ("drain", "drng")
    state = node.display_state.upper() + ("+DRAIN" if drained else "")
    gpus = ", ".join(f"{g.index}:{g.type or g.name}{'@' + g.file if g.file else ''}" for g in node.gpus) or "(null)"
    lines = [
        f"NodeName={node.name} NodeAddr={node.addr} Port={node.port}",
        f"CPUAlloc={node.alloc_cpus} CPUTot={node.cpus}",
        f"RealMemory={node.real_memory} AllocMem={node.alloc_mem}",
        f"Gres={format_gres(gres_from_pb(node.gres)) or '(null)'} GresUsed=gpu:{len(node.alloc_gpus)}"
        f"(IDX:{','.join(map(str, node.alloc_gpus)) or 'N/A'})",
        f"Gpus={gpus}",
        f"State={state} Partitions={','.join(node.partitions)}",
        f"LastHeartbeat={format_timestamp(node.last_heartbeat)}",
        f"DeviceIsolation={node.isolation or 'unknown'}",
        f"Reason={node.reason or '(null)'}" if node.reason else "",
    ]
    return lines[0] + "\n" + "".join(f"   {line}\n" for line in lines[1:] if line)


def _as_dict(msg: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


def make_app() -> typer.Typer:
    app = typer_app("Show and update pslurm's state.")

    @app.command()
    def pscontrol(
        words: Annotated[list[str], typer.Argument(
            help="show job ID | show node [NAME] | update NodeName=.. | update JobId=.. | hold|release|requeue ID")],
        as_json: o.Json = False,
    ) -> None:
        """show job ID | show node [NAME] | show partition | update NodeName=X State=DRAIN|RESUME Reason=.. |
        update JobId=N Priority=P Nice=N | hold ID.. | uhold ID.. | release ID.. | requeue ID.."""
        client = Client(PROG)
        verb = words[0].lower()
        if verb == "show" and len(words) >= 2:
            _show(client, words[1].lower(), words[2:], as_json)
        elif verb == "update":
            _update(client, words[1:])
        elif verb in ("hold", "uhold", "release", "requeue") and len(words) >= 2:
            _job_action(client, verb, words[1:])
        else:
            fail(PROG, f"Invalid command: {' '.join(words)}")

    return app


def _show(client: Client, what: str, names: list[str], as_json: bool) -> None:
    from pslurm.proto import pslurm_pb2 as pb

    if what in ("job", "jobs"):
        query = pb.JobQuery(include_finished=bool(names))
        try:
            query.job_ids.extend(int(n) for n in names)
        except ValueError:
            fail(PROG, f"Invalid job id specified: {' '.join(names)}")
        jobs = client.call("GetJobs", query).jobs
        if names and not jobs:
            fail(PROG, "Invalid job id specified")
        if as_json:
            print(json.dumps({"jobs": [_as_dict(j) for j in jobs]}, indent=2))
        else:
            print("\n".join(show_job(j) for j in jobs) if jobs else "No jobs in the system")
    elif what in ("node", "nodes"):
        nodes = [n for n in client.call("GetCluster", pb.Empty()).nodes if not names or n.name in names]
        if names and not nodes:
            fail(PROG, f"Node {names[0]} not found")
        if as_json:
            print(json.dumps({"nodes": [_as_dict(n) for n in nodes]}, indent=2))
        else:
            print("\n".join(show_node(n) for n in nodes))
    elif what in ("partition", "partitions"):
        parts = [p for p in client.call("GetCluster", pb.Empty()).partitions if not names or p.name in names]
        if as_json:
            print(json.dumps({"partitions": [_as_dict(p) for p in parts]}, indent=2))
        else:
            for p in parts:
                from pslurm.core.timefmt import format_duration

                max_time = format_duration(p.max_time) if p.HasField("max_time") else "UNLIMITED"
                default_time = format_duration(p.default_time) if p.HasField("default_time") else "NONE"
                print(f"PartitionName={p.name}\n   AllowGroups={','.join(p.allow_groups) or 'ALL'} "
                      f"Default={'YES' if p.default else 'NO'}\n"
                      f"   MaxNodes={p.max_nodes if p.HasField('max_nodes') else 'UNLIMITED'} MaxTime={max_time} "
                      f"DefaultTime={default_time}\n"
                      f"   PriorityJobFactor={p.priority_job_factor} State={p.state}\n"
                      f"   Nodes={','.join(p.nodes)}\n")
    else:
        fail(PROG, f"Invalid entity: {what} (job, node or partition)")


def _update(client: Client, pairs: list[str]) -> None:
    from pslurm.proto import pslurm_pb2 as pb

    values: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            fail(PROG, f"Invalid input: {pair} (expected Key=Value)")
        values[key.lower()] = value
    job = values.get("jobid")
    if job:
        request = pb.UpdateJobRequest(job=job)
        for key in values:
            if key not in ("jobid", "priority", "nice"):
                fail(PROG, f"Update of {key} is not supported (JobId= takes Priority= and Nice=)")
        try:
            if "priority" in values:
                request.priority = int(values["priority"])
            if "nice" in values:
                request.nice = int(values["nice"])
        except ValueError:
            fail(PROG, f"Invalid value: {' '.join(pairs)}")
        _report(client.call("UpdateJob", request))
        return
    name = values.get("nodename")
    if not name:
        fail(PROG, "update needs NodeName=... or JobId=...")
    from pslurm.core.hostlists import expand

    for node in expand(name):
        client.call("UpdateNode", pb.UpdateNodeRequest(name=node, state=values.get("state", ""),
                                                       reason=values.get("reason", "")))


def _job_action(client: Client, verb: str, ids: list[str]) -> None:
    """hold / uhold / release / requeue, for each id (14, 14_3, 14_[5-9]; commas allowed)."""
    from pslurm.core.arrays import split_job_list
    from pslurm.proto import pslurm_pb2 as pb

    errors = []
    for item in ids:
        for text in split_job_list(item):
            errors.extend(client.call("UpdateJob", pb.UpdateJobRequest(job=text, action=verb)).errors)
    _report(pb.UpdateJobReply(errors=errors))


def _report(reply: Any) -> None:
    import sys

    for line in reply.errors:
        print(f"{PROG}: error: {line}", file=sys.stderr)
    if reply.errors:
        raise SystemExit(1)


def main() -> None:
    run(make_app(), PROG)
