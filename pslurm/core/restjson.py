"""Domain <-> JSON for the user API (HTTP/JSON), in one place for the controller and the client.

Standard library only, and the domain's dataclasses only where a reader builds them: the
commands import this on their path and read the JSON as it is (:mod:`pslurm.cli.jobview`).

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

from pslurm.core.clusterinfo import NODE_FIELDS, PARTITION_FIELDS, NodeInfo, PartitionInfo
from pslurm.core.errors import SpecError
from pslurm.core.jobfields import FIELDS
from pslurm.core.jobinfo import JobDesc
from pslurm.core.jobinfo import share_specs as share_specs  # the client's, beside the views
from pslurm.core.states import JobReason, JobState

TYPE_CHECKING = False  # typing and the domain's dataclasses cost a command ~20 ms: the readers import them
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from pslurm.core.config import PartitionConfig
    from pslurm.core.gres import GresRequest
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.node import GpuInfo, NodeStatus
    from pslurm.core.steps import StepResult

    Json = dict[str, Any]
else:
    Json = dict


# -- Slurm's optional numbers ----------------------------------------------------------------


def no_val(value: float | None) -> Json:
    """Slurm's ``*_no_val`` struct: unset when ``value`` is None."""
    return {"set": value is not None, "infinite": False, "number": 0 if value is None else value}


def _minutes(seconds: int | None) -> Json:
    return no_val(None if seconds is None else math.ceil(seconds / 60))


def _gres_json(gres: tuple[GresRequest, ...]) -> list[list[Any]]:
    return [[g.name, g.type, g.count] for g in gres]


def _tres_per_node(gres: tuple[GresRequest, ...]) -> str:
    return ",".join(f"gres/{g}" for g in gres)


# -- a job request ---------------------------------------------------------------------------


def spec_to_json(spec: JobSpec) -> Json:
    """A ``job_desc_msg`` (submit's ``job``)."""
    return desc_to_json(vars(spec))


def desc_to_json(spec: Mapping[str, Any]) -> Json:
    """A ``job_desc_msg`` of a JobSpec's field values (every field, by its JobSpec name; the
    ``gres`` as GresRequests): what :func:`spec_to_json` sends, and what psbatch and psrun send
    from :func:`pslurm.core.jobdesc.spec_values` without making the JobSpec. Slurm's own fields
    (core/jobfields.py's ``always``) are there at their defaults too, the others only when asked."""
    return _request_json(spec, brief=False)


def _request_json(spec: Mapping[str, Any], brief: bool) -> Json:
    """A ``job_desc_msg``; ``brief``: without the fields at their defaults (a reader takes an absent one
    as its default, as :class:`JobDesc` does). The table's rows go as they are, the rest by hand."""
    own: Json = {}
    data: Json = {"pslurm": own}
    spec = {f.name: spec.get(f.name, f.default) for f in FIELDS}  # a field not given is at its default
    for f in FIELDS:
        if f.json_by_hand:
            continue
        value = spec[f.name]
        at_default = value == f.default or (brief and value == "")
        if value is None or (at_default and (brief or not f.always)):
            continue
        (own if f.own else data)[f.key] = value
    _hand_json(data, own, spec, brief)
    return data


def _hand_json(data: Json, own: Json, spec: Mapping[str, Any], brief: bool) -> None:  # long: one line a field
    """The fields whose JSON is not their value as it is (core/jobfields.py's ``json_by_hand``): ids as
    text, lists, Slurm's ``*_no_val`` numbers and minutes, the GRES twice, --signal's three keys."""
    gres, limit, num_nodes = spec["gres"], spec["time_limit"], spec["num_nodes"]
    data["user_id"] = str(spec["uid"])
    if spec["gid"] or not brief:
        data["group_id"] = str(spec["gid"])
    if spec["argv"] or not brief:
        data["argv"] = list(spec["argv"])
    if spec["environment"] or not brief:
        data["environment"] = [f"{k}={v}" for k, v in spec["environment"].items()]
    if spec["max_nodes"] or not brief:
        data["maximum_nodes"] = spec["max_nodes"] or num_nodes
    if spec["max_nodes"]:
        own["max_nodes"] = spec["max_nodes"]
    if spec["mem_mb"] or not brief:
        data["memory_per_node"] = no_val(spec["mem_mb"] or None)
    if gres or not brief:
        data["tres_per_node"], own["gres"] = _tres_per_node(gres), _gres_json(gres)
    if limit is not None or not brief:
        data["time_limit"], own["time_limit"] = _minutes(limit), limit
    for key, name in (("required_nodes", "nodelist"), ("excluded_nodes", "exclude")):
        if spec[name] or not brief:
            data[key] = [spec[name]] if spec[name] else []
    if spec["mem_per_cpu_mb"]:
        data["memory_per_cpu"] = no_val(spec["mem_per_cpu_mb"])
    if spec["begin_time"] is not None:
        data["begin_time"] = no_val(spec["begin_time"])
    if spec["warn_signal"]:
        from pslurm.core.signals import signal_name

        data["kill_warning_signal"] = signal_name(spec["warn_signal"])
        data["kill_warning_delay"] = no_val(spec["warn_time"] or 0)
        data["kill_warning_flags"] = ([*(["BATCH_JOB"] if spec["warn_batch"] else []),
                                       *(["RESERVATION_JOB"] if spec["warn_reservation"] else [])])


def job_desc(values: Mapping[str, Any]) -> JobDesc:
    """The request a command submits (:meth:`pslurm.client.Client.submit`) from a JobSpec's field
    values (:func:`pslurm.core.jobdesc.spec_values`), without making the JobSpec."""
    return JobDesc(desc_to_json(values))


def spec_from_json(data: Any) -> JobSpec:
    """The JobSpec of a ``job_desc_msg``, read through :class:`JobDesc` field by field; SpecError (one
    line) for one that is not one."""
    from dataclasses import fields

    from pslurm.core.jobspec import JobSpec

    if not isinstance(data, dict):
        raise SpecError("Invalid job request: 'job' must be an object")
    desc = JobDesc(data)
    try:
        spec = JobSpec(**{f.name: getattr(desc, f.name) for f in fields(JobSpec)})
    except SpecError:
        raise
    except (TypeError, ValueError, AttributeError) as exc:
        raise SpecError(f"Invalid job request: {exc}") from None
    return with_node_memory(spec)


def with_node_memory(spec: JobSpec) -> JobSpec:
    """A request that asks memory per CPU or per GPU with its memory per node (``mem_mb``) set from them
    (core/layout.py), which is what the store, the scheduler and the agent read."""
    if spec.mem_mb or not (spec.mem_per_cpu_mb or spec.mem_per_gpu_mb):
        return spec
    from dataclasses import replace

    from pslurm.core.layout import node_layout

    return replace(spec, mem_mb=max(n.mem_mb for n in node_layout(spec)))


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
        "state_reason": job.reason.value, "nodes": _hostlist(job), "batch_host": job.node or "",
        "node_count": no_val(len(job.all_nodes) or job.spec.num_nodes), "submit_time": no_val(job.submit_time),
        "start_time": no_val(job.start_time), "end_time": no_val(job.end_time),
        "eligible_time": no_val(job.eligible_time), "time_limit": _minutes(job.time_limit),
        "suspend_time": no_val(job.suspend_time), "priority": no_val(job.priority),
        "array_job_id": no_val(job.array_job_id), "array_task_id": no_val(job.array_task_id),
        "exit_code": {"return_code": no_val(job.exit_code), "signal": {"id": no_val(job.exit_signal)}},
        "restart_cnt": job.restarts, "requeue": job.requeue, "hold": bool(job.hold),
        "system_comment": job.system_comment, "association_id": job.assoc_id,
        "state_description": job.state_desc,
        "pslurm": {
            "job": spec, "hold": job.hold, "gpu_indices": list(job.gpu_indices), "time_limit": job.time_limit,
            "start_estimate": job.start_estimate, "gpu_seconds": job.gpu_seconds,
            "peak_gpu_memory_mb": job.peak_gpu_memory_mb, "mean_gpu_util": job.mean_gpu_util,
            "max_rss_kb": job.max_rss_kb, "total_cpu_seconds": job.total_cpu_seconds,
            "user_cpu_seconds": job.user_cpu_seconds, "system_cpu_seconds": job.system_cpu_seconds,
            "suspended_seconds": job.suspended_seconds,
            "collapsed_tasks": job.collapsed_tasks, "node_target": node_target, "nodes": list(job.nodes),
            "node_gpus": [list(g) for g in job.node_gpus], "reason_prev": job.reason_prev.value,
        },
    }


def _hostlist(job: JobRecord) -> str:
    """Slurm's ``nodes`` (NodeList): the allocation's hostlist."""
    if len(job.nodes) > 1:
        from pslurm.core.hostlists import collect

        return collect(job.nodes)
    return job.node or ""


def _set(value: float) -> Json:
    return {"set": True, "infinite": False, "number": value}


def brief_spec_json(spec: JobSpec, partition: str) -> Json:
    """A brief listing's ``job_desc_msg`` of a job: what a listing shows of its request, the fields
    at their defaults left out (a reader takes an absent field as its default, as :class:`JobDesc`
    does); ``partition``: the one it was accepted into. A light listing's specs (the store's) hold
    nothing else."""
    return _request_json({**vars(spec), "partition": partition or spec.partition}, brief=True)


def job_to_brief_json(job: JobRecord, specs: dict[int, int]) -> Json:
    """A brief listing's ``job_info`` (``GET /pslurm/v1/jobs?brief=1``): the same fields as
    :func:`job_to_json`'s, those unset, empty, zero or false left out (a reader takes an absent one
    as that), and the request (:func:`brief_spec_json`) once per reply: the first record of those that
    share it (an array's tasks) carries it as ``pslurm.job``, and each of them its number as
    ``pslurm.spec_ref``. ``specs``: the numbers given so far, by ``id(job.spec)``."""
    s = job.spec
    own: Json = {}
    ref = specs.get(id(s))
    if ref is None:
        ref = specs[id(s)] = len(specs) + 1
        own["job"] = brief_spec_json(s, job.partition)
    own["spec_ref"] = ref
    data: Json = {"job_id": job.job_id, "name": s.name, "user_name": s.user, "user_id": s.uid,
                  "partition": job.partition, "job_state": [job.state.value], "state_reason": job.reason.value,
                  "submit_time": _set(job.submit_time), "pslurm": own}
    if s.gid:
        data["group_id"] = s.gid
    if s.account:
        data["account"] = s.account
    if job.node:
        data["nodes"] = _hostlist(job)
        data["batch_host"] = job.node
    if job.nodes:
        own["nodes"] = list(job.nodes)
        own["node_gpus"] = [list(g) for g in job.node_gpus]
    for key, value in (("start_time", job.start_time), ("end_time", job.end_time),
                       ("eligible_time", job.eligible_time), ("suspend_time", job.suspend_time),
                       ("array_job_id", job.array_job_id),
                       ("array_task_id", job.array_task_id)):
        if value is not None:
            data[key] = _set(value)
    if job.time_limit is not None:
        data["time_limit"] = _set(math.ceil(job.time_limit / 60))
        own["time_limit"] = job.time_limit
    if job.priority:
        data["priority"] = _set(job.priority)
    if job.exit_code or job.exit_signal:
        data["exit_code"] = {"return_code": _set(job.exit_code), "signal": {"id": _set(job.exit_signal)}}
    if job.restarts:
        data["restart_cnt"] = job.restarts
    if job.requeue:
        data["requeue"] = True
    if job.hold:
        data["hold"] = True
        own["hold"] = job.hold
    if job.system_comment:
        data["system_comment"] = job.system_comment
    if job.state_desc:
        data["state_description"] = job.state_desc
    if job.reason_prev is not JobReason.NONE:
        own["reason_prev"] = job.reason_prev.value
    if job.assoc_id:
        data["association_id"] = job.assoc_id
    if job.gpu_indices:
        own["gpu_indices"] = list(job.gpu_indices)
    for key, value in (("start_estimate", job.start_estimate), ("gpu_seconds", job.gpu_seconds),
                       ("peak_gpu_memory_mb", job.peak_gpu_memory_mb), ("mean_gpu_util", job.mean_gpu_util),
                       ("max_rss_kb", job.max_rss_kb), ("total_cpu_seconds", job.total_cpu_seconds),
                       ("user_cpu_seconds", job.user_cpu_seconds), ("system_cpu_seconds", job.system_cpu_seconds)):
        if value is not None:
            own[key] = value
    if job.suspended_seconds:
        own["suspended_seconds"] = job.suspended_seconds
    if job.collapsed_tasks:
        own["collapsed_tasks"] = job.collapsed_tasks
    return data


def node_target_of(data: Json) -> str:
    """host:port of the agent of a job's node, as the controller said (psrun's output)."""
    return str(data.get("pslurm", {}).get("node_target") or "")


# -- nodes and partitions --------------------------------------------------------------------

# sinfo's word -> slurmrestd's node state flags (the base state first; the commands' Slurm JSON reads it too)
NODE_STATE_FLAGS = {"idle": ["IDLE"], "mix": ["MIXED"], "alloc": ["ALLOCATED"], "drain": ["IDLE", "DRAIN"],
               "drng": ["MIXED", "DRAIN"], "down": ["DOWN"], "unk": ["UNKNOWN"]}


def _gpu_json(gpu: GpuInfo) -> Json:
    return {"index": gpu.index, "name": gpu.name, "type": gpu.type, "file": gpu.file, "minor": gpu.minor,
            "uuid": gpu.uuid, "memory_mb": gpu.memory_mb, "cores": list(gpu.cores),
            "shards": gpu.shards, "mps": gpu.mps}


def node_to_json(node: NodeStatus) -> Json:
    """A slurmrestd ``node``."""
    return {
        "name": node.name, "hostname": node.name, "address": node.addr, "port": node.port, "cpus": node.cpus,
        "real_memory": node.real_memory, "gres": ",".join(str(g) for g in node.gres),
        "state": list(NODE_STATE_FLAGS.get(node.display_state, ["UNKNOWN"])), "reason": node.reason,
        "reason_set_by_user": node.reason_user or None, "reason_changed_at": int(node.reason_time or 0),
        "partitions": list(node.partitions), "alloc_cpus": node.alloc_cpus, "alloc_memory": node.alloc_mem,
        "features": list(node.features), "active_features": list(node.features),
        "last_busy": no_val(node.last_heartbeat or None),
        "pslurm": {"state": node.state.value, "drain": node.drain, "gres": _gres_json(node.gres),
                   "alloc_gpus": list(node.alloc_gpus), "display_state": node.display_state,
                   "running_jobs": node.running_jobs, "last_heartbeat": node.last_heartbeat,
                   "gpus": [_gpu_json(g) for g in node.gpus], "isolation": node.isolation,
                   "gpu_usage": [dict(vars(u)) for u in node.gpu_usage]},
    }


def node_from_json(data: Json) -> NodeStatus:
    from pslurm.core.node import NodeStatus

    view = NodeInfo(data)
    return NodeStatus(**{name: getattr(view, name) for name in NODE_FIELDS})


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
    from pslurm.core.config import PartitionConfig

    view = PartitionInfo(data)
    return PartitionConfig(**{name: getattr(view, name) for name in PARTITION_FIELDS})


# -- the wire of a job's output ----------------------------------------------------------------


def output_chunk_to_json(stdout: bytes, stderr: bytes, end: StepResult | None = None) -> Json:
    """One line of psrun's output stream of a step (bytes as base64); the last carries the step's end:
    ``done``, ``job_state``, ``exit_code``, ``exit_signal`` and each task's ``[rank, exit code, signal, node]``."""
    from binascii import b2a_base64  # base64.b64encode's own call; the base64 module imports re

    data: Json = {"stdout": b2a_base64(stdout, newline=False).decode(),
                  "stderr": b2a_base64(stderr, newline=False).decode()}
    if end is not None:
        data.update(done=True, job_state=end.state.value, exit_code=end.exit_code, exit_signal=end.exit_signal,
                    tasks=[[t.rank, t.exit_code, t.signal, t.node] for t in end.tasks])
    return data


def output_chunk_from_json(data: Json) -> tuple[bytes, bytes, StepResult | None]:
    """``(stdout, stderr, end)`` of one line of the output stream (``end`` None but on the last)."""
    from binascii import a2b_base64  # base64.b64decode's own call (not validating); base64 imports re

    out, err = a2b_base64(data.get("stdout") or ""), a2b_base64(data.get("stderr") or "")
    if not data.get("done"):
        return out, err, None
    from pslurm.core.steps import StepResult, TaskEnd

    state = data.get("job_state")
    tasks = tuple(TaskEnd(int(t[0]), int(t[1]), int(t[2]), str(t[3]) if len(t) > 3 else "")
                  for t in data.get("tasks") or ())
    return out, err, StepResult(JobState(state) if state else JobState.COMPLETED, int(data.get("exit_code") or 0),
                                int(data.get("exit_signal") or 0), tasks=tasks)
