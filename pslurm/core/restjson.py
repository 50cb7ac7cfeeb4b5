"""Domain <-> JSON for the user API (HTTP/JSON), in one place for the controller and the client.

Standard library only: the client (and so every command) imports it on its path.

Shapes follow slurmrestd v0.0.40 where the two overlap, with Slurm's field names: a job request
is a ``job_desc_msg`` (``current_working_directory``, ``environment`` as ``["K=V", ...]``,
``tasks``, ``minimum_nodes``, ``tres_per_node``, ...), a job is a ``job_info`` (``job_state`` a
list of flags, ``state_reason``, ``user_name``, ``nodes``, ...), a node and a partition as
slurmrestd reports them. Optional numbers use Slurm's ``{"set", "infinite", "number"}`` form
(``time_limit`` in minutes, as Slurm's). What pslurm keeps that Slurm's shapes have no field
for, or keeps more exactly (seconds rather than minutes, the GRES as a list, float times), lives
under each object's ``pslurm`` key; readers prefer it, so a round trip is exact.
"""

from __future__ import annotations

import math
from typing import Any

from pslurm.core.config import PartitionConfig
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.node import GpuInfo, NodeStatus
from pslurm.core.states import JobReason, JobState, NodeState

Json = dict[str, Any]


# -- Slurm's optional numbers ----------------------------------------------------------------


def no_val(value: float | None) -> Json:
    """Slurm's ``*_no_val`` struct: unset when ``value`` is None."""
    return {"set": value is not None, "infinite": False, "number": 0 if value is None else value}


def from_no_val(data: Any) -> Any:
    """The number of a ``*_no_val`` struct (a bare number is taken too), None when unset."""
    if isinstance(data, dict):
        return data.get("number") if data.get("set", True) and not data.get("infinite") else None
    return data


def _minutes(seconds: int | None) -> Json:
    return no_val(None if seconds is None else math.ceil(seconds / 60))


def _gres_json(gres: tuple[GresRequest, ...]) -> list[list[Any]]:
    return [[g.name, g.type, g.count] for g in gres]


def _gres_from(items: Any) -> tuple[GresRequest, ...]:
    return tuple(GresRequest(str(n), t or None, int(c)) for n, t, c in items or ())


def _tres_per_node(gres: tuple[GresRequest, ...]) -> str:
    return ",".join(f"gres/{g}" for g in gres)


# -- a job request ---------------------------------------------------------------------------


def spec_to_json(spec: JobSpec) -> Json:
    """A ``job_desc_msg`` (submit's ``job``)."""
    data: Json = {
        "name": spec.name, "user_id": str(spec.uid), "group_id": str(spec.gid),
        "current_working_directory": spec.workdir, "argv": list(spec.argv),
        "environment": [f"{k}={v}" for k, v in spec.environment.items()],
        "minimum_nodes": spec.num_nodes, "maximum_nodes": spec.num_nodes, "tasks": spec.ntasks,
        "cpus_per_task": spec.cpus_per_task, "memory_per_node": no_val(spec.mem_mb or None),
        "tres_per_node": _tres_per_node(spec.gres), "account": spec.account, "nice": spec.nice,
        "dependency": spec.dependency, "hold": spec.hold, "array": spec.array,
        "kill_on_invalid_dependency": spec.kill_on_invalid_dep, "time_limit": _minutes(spec.time_limit),
        "required_nodes": [spec.nodelist] if spec.nodelist else [],
        "excluded_nodes": [spec.exclude] if spec.exclude else [],
        "pslurm": {"user_name": spec.user, "interactive": spec.interactive, "gres": _gres_json(spec.gres),
                   "time_limit": spec.time_limit},
    }
    for key, value in (("script", spec.script), ("partition", spec.partition), ("standard_output", spec.stdout),
                       ("standard_error", spec.stderr), ("requeue", spec.requeue)):
        if value is not None:
            data[key] = value
    return data


def spec_from_json(data: Any) -> JobSpec:
    """The JobSpec of a ``job_desc_msg``; SpecError (one line) for one that is not one."""
    if not isinstance(data, dict):
        raise SpecError("Invalid job request: 'job' must be an object")
    own = data.get("pslurm") or {}
    try:
        environment = {}
        for item in data.get("environment") or ():
            key, sep, value = str(item).partition("=")
            if not sep:
                raise SpecError(f"Invalid job request: environment entry without '=': {key}")
            environment[key] = value
        minutes = from_no_val(data.get("time_limit"))
        time_limit = own.get("time_limit", None if minutes is None else int(minutes) * 60)
        gres = _gres_from(own["gres"]) if "gres" in own else _tres_from(str(data.get("tres_per_node") or ""))
        return JobSpec(
            name=str(data.get("name") or ""), user=str(own.get("user_name") or ""),
            uid=int(data.get("user_id", 0)), gid=int(data.get("group_id", 0)),
            workdir=str(data.get("current_working_directory") or ""), script=_opt_str(data.get("script")),
            argv=tuple(str(a) for a in data.get("argv") or ()), environment=environment,
            partition=_opt_str(data.get("partition")) or None, stdout=_opt_str(data.get("standard_output")),
            stderr=_opt_str(data.get("standard_error")), time_limit=None if time_limit is None else int(time_limit),
            num_nodes=int(data.get("minimum_nodes") or 1), ntasks=int(data.get("tasks") or 1),
            cpus_per_task=int(data.get("cpus_per_task") or 1),
            mem_mb=int(from_no_val(data.get("memory_per_node")) or 0),
            gres=gres, interactive=bool(own.get("interactive", False)), account=str(data.get("account") or ""),
            nice=int(data.get("nice") or 0), dependency=str(data.get("dependency") or ""),
            requeue=None if data.get("requeue") is None else bool(data["requeue"]), hold=bool(data.get("hold")),
            array=str(data.get("array") or ""), kill_on_invalid_dep=bool(data.get("kill_on_invalid_dependency")),
            nodelist=",".join(map(str, data.get("required_nodes") or ())),
            exclude=",".join(map(str, data.get("excluded_nodes") or ())),
        )
    except SpecError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise SpecError(f"Invalid job request: {exc}") from None


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _tres_from(text: str) -> tuple[GresRequest, ...]:
    from pslurm.core.gres import parse_gres

    return parse_gres(text) if text else ()


# -- a job -----------------------------------------------------------------------------------


def job_to_json(job: JobRecord, node_target: str = "", specs: dict[int, Json] | None = None) -> Json:
    """A ``job_info``; ``specs``: converted specs by ``id(job.spec)`` (an array's tasks share one)."""
    spec = specs.get(id(job.spec)) if specs is not None else None
    if spec is None:
        spec = spec_to_json(job.spec)
        if job.partition:  # the partition it was accepted into (the gRPC wire said so too)
            spec["partition"] = job.partition
        if specs is not None:
            specs[id(job.spec)] = spec
            spec["pslurm"]["spec_ref"] = len(specs)  # a listing's records that share this spec say so
    s = job.spec
    return {
        "job_id": job.job_id, "name": s.name, "user_name": s.user, "user_id": s.uid, "group_id": s.gid,
        "account": s.account, "partition": job.partition, "job_state": [job.state.value],
        "state_reason": job.reason.value, "nodes": job.node or "", "submit_time": no_val(job.submit_time),
        "start_time": no_val(job.start_time), "end_time": no_val(job.end_time),
        "eligible_time": no_val(job.eligible_time), "time_limit": _minutes(job.time_limit),
        "priority": no_val(job.priority),
        "array_job_id": no_val(job.array_job_id), "array_task_id": no_val(job.array_task_id),
        "exit_code": {"return_code": no_val(job.exit_code), "signal": {"id": no_val(job.exit_signal)}},
        "restart_cnt": job.restarts, "requeue": job.requeue, "hold": bool(job.hold),
        "system_comment": job.system_comment,
        "pslurm": {
            "job": spec, "hold": job.hold, "gpu_indices": list(job.gpu_indices), "time_limit": job.time_limit,
            "start_estimate": job.start_estimate, "gpu_seconds": job.gpu_seconds,
            "peak_gpu_memory_mb": job.peak_gpu_memory_mb, "mean_gpu_util": job.mean_gpu_util,
            "collapsed_tasks": job.collapsed_tasks, "node_target": node_target,
        },
    }


def job_from_json(data: Json, specs: dict[int, JobSpec] | None = None) -> JobRecord:
    """``specs``: specs already read in this listing, by their ``spec_ref``, so that records that
    shared a spec on the controller (an array's tasks) share one JobSpec here, read once."""
    own = data["pslurm"]
    raw = own["job"]
    ref = raw.get("pslurm", {}).get("spec_ref")
    if specs is not None and ref is not None:
        key = int(ref)
        spec = specs.get(key)
        if spec is None:
            spec = specs[key] = spec_from_json(raw)
    else:
        spec = spec_from_json(raw)
    exit_code = data.get("exit_code") or {}
    return JobRecord(
        job_id=int(data["job_id"]), spec=spec, state=JobState(data["job_state"][0]),
        reason=JobReason(data.get("state_reason") or "None"), submit_time=from_no_val(data["submit_time"]) or 0.0,
        start_time=from_no_val(data.get("start_time")), end_time=from_no_val(data.get("end_time")),
        node=data.get("nodes") or None, gpu_indices=tuple(own.get("gpu_indices") or ()),
        exit_code=from_no_val(exit_code.get("return_code")) or 0,
        exit_signal=from_no_val((exit_code.get("signal") or {}).get("id")) or 0,
        partition=data.get("partition") or "", time_limit=own.get("time_limit"),
        array_job_id=from_no_val(data.get("array_job_id")), array_task_id=from_no_val(data.get("array_task_id")),
        priority=from_no_val(data.get("priority")) or 0, hold=own.get("hold") or "",
        restarts=int(data.get("restart_cnt") or 0), start_estimate=own.get("start_estimate"),
        eligible_time=from_no_val(data.get("eligible_time")), gpu_seconds=own.get("gpu_seconds"),
        peak_gpu_memory_mb=own.get("peak_gpu_memory_mb"), mean_gpu_util=own.get("mean_gpu_util"),
        system_comment=data.get("system_comment") or "", requeue=bool(data.get("requeue")),
        collapsed_tasks=own.get("collapsed_tasks") or "",
    )


def node_target_of(data: Json) -> str:
    """host:port of the agent of a job's node, as the controller said (psrun's output)."""
    return str(data.get("pslurm", {}).get("node_target") or "")


# -- nodes and partitions --------------------------------------------------------------------

# sinfo's word -> slurmrestd's node state flags
_NODE_FLAGS = {"idle": ["IDLE"], "mix": ["MIXED"], "alloc": ["ALLOCATED"], "drain": ["IDLE", "DRAIN"],
               "drng": ["MIXED", "DRAIN"], "down": ["DOWN"], "unk": ["UNKNOWN"]}


def _gpu_json(gpu: GpuInfo) -> Json:
    return {"index": gpu.index, "name": gpu.name, "type": gpu.type, "file": gpu.file, "minor": gpu.minor,
            "uuid": gpu.uuid, "memory_mb": gpu.memory_mb, "cores": list(gpu.cores)}


def _gpu_from(data: Json) -> GpuInfo:
    return GpuInfo(index=int(data["index"]), name=data.get("name") or "gpu", type=data.get("type"),
                   file=data.get("file"), minor=data.get("minor"), uuid=data.get("uuid"),
                   memory_mb=data.get("memory_mb"), cores=tuple(data.get("cores") or ()))


def node_to_json(node: NodeStatus) -> Json:
    """A slurmrestd ``node``."""
    return {
        "name": node.name, "hostname": node.name, "address": node.addr, "port": node.port, "cpus": node.cpus,
        "real_memory": node.real_memory, "gres": ",".join(str(g) for g in node.gres),
        "state": list(_NODE_FLAGS.get(node.display_state, ["UNKNOWN"])), "reason": node.reason,
        "partitions": list(node.partitions), "alloc_cpus": node.alloc_cpus, "alloc_memory": node.alloc_mem,
        "last_busy": no_val(node.last_heartbeat or None),
        "pslurm": {"state": node.state.value, "drain": node.drain, "gres": _gres_json(node.gres),
                   "alloc_gpus": list(node.alloc_gpus), "display_state": node.display_state,
                   "running_jobs": node.running_jobs, "last_heartbeat": node.last_heartbeat,
                   "gpus": [_gpu_json(g) for g in node.gpus], "isolation": node.isolation},
    }


def node_from_json(data: Json) -> NodeStatus:
    own = data["pslurm"]
    return NodeStatus(
        name=data["name"], addr=data.get("address") or "", port=int(data.get("port") or 0),
        cpus=int(data.get("cpus") or 0), real_memory=int(data.get("real_memory") or 0),
        gres=_gres_from(own.get("gres")), state=NodeState(own.get("state") or "UNKNOWN"),
        drain=bool(own.get("drain")), reason=data.get("reason") or "", partitions=tuple(data.get("partitions") or ()),
        alloc_cpus=int(data.get("alloc_cpus") or 0), alloc_mem=int(data.get("alloc_memory") or 0),
        alloc_gpus=tuple(own.get("alloc_gpus") or ()), display_state=own.get("display_state") or "unk",
        running_jobs=int(own.get("running_jobs") or 0), last_heartbeat=float(own.get("last_heartbeat") or 0.0),
        gpus=tuple(_gpu_from(g) for g in own.get("gpus") or ()), isolation=own.get("isolation") or "",
    )


def partition_to_json(part: PartitionConfig, default: bool | None = None) -> Json:
    """A slurmrestd ``partition_info``; ``default``: whether it is the cluster's default (None: its own
    Default=)."""
    is_default = part.default if default is None else default
    return {
        "name": part.name, "nodes": {"configured": ",".join(part.nodes), "total": len(part.nodes)},
        "maximums": {"time": _minutes(part.max_time), "nodes": no_val(part.max_nodes)},
        "defaults": {"time": _minutes(part.default_time)}, "partition": {"state": [part.state]},
        "priority": {"job_factor": part.priority_job_factor}, "groups": {"allowed": ",".join(part.allow_groups)},
        "flags": ["DEFAULT"] if is_default else [],
        "pslurm": {"nodes": list(part.nodes), "default": is_default, "max_time": part.max_time,
                   "default_time": part.default_time},
    }


def partition_from_json(data: Json) -> PartitionConfig:
    own = data["pslurm"]
    return PartitionConfig(
        name=data["name"], nodes=tuple(own.get("nodes") or ()), default=bool(own.get("default")),
        max_time=own.get("max_time"), default_time=own.get("default_time"),
        state=(data.get("partition", {}).get("state") or ["UP"])[0],
        max_nodes=from_no_val(data.get("maximums", {}).get("nodes")),
        priority_job_factor=int(data.get("priority", {}).get("job_factor", 1)),
        allow_groups=tuple(g for g in (data.get("groups", {}).get("allowed") or "").split(",") if g),
    )


# -- the wire of a job's output ----------------------------------------------------------------


def output_chunk_to_json(stdout: bytes, stderr: bytes, done: bool, state: JobState | None, exit_code: int,
                         exit_signal: int) -> Json:
    """One line of psrun's output stream (bytes as base64)."""
    import base64

    data: Json = {"stdout": base64.b64encode(stdout).decode(), "stderr": base64.b64encode(stderr).decode()}
    if done:
        data.update(done=True, job_state=None if state is None else state.value, exit_code=exit_code,
                    exit_signal=exit_signal)
    return data


def output_chunk_from_json(data: Json) -> tuple[bytes, bytes, bool, JobState | None, int, int]:
    """``(stdout, stderr, done, state, exit_code, exit_signal)`` of one line of the output stream."""
    import base64

    state = data.get("job_state")
    return (base64.b64decode(data.get("stdout") or ""), base64.b64decode(data.get("stderr") or ""),
            bool(data.get("done")), JobState(state) if state else None, int(data.get("exit_code") or 0),
            int(data.get("exit_signal") or 0))
