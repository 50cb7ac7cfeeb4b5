"""``--json=pslurm`` output of the commands (pslurm's own shape; bare ``--json`` prints Slurm's,
:mod:`pslurm.cli.slurmjson`), from the client's views of the API's JSON.

The shape is the one the commands have always printed (protobuf's JSON mapping of the wire
messages, field names as in pslurm.proto): every field, optional ones only when set, states and
reasons by name (``"RUNNING"``, ``"Priority"``), and 64-bit integers as strings, except where a
command has always printed a number (``job_id``, psacct's ``peak_gpu_memory_mb``)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from typing import Any

    from pslurm.client import JobPriority, PriorityWeights
    from pslurm.core.clusterinfo import ClusterInfo, NodeInfo, PartitionInfo
    from pslurm.core.config import PartitionConfig
    from pslurm.core.gres import GresRequest
    from pslurm.core.jobinfo import JobDesc, JobInfo
    from pslurm.core.node import GpuInfo, NodeStatus


def _i64(value: int) -> str:
    return str(int(value))


def _present(data: dict[str, Any], **values: Any) -> None:
    """Add the values that are set (an optional field that is not is left out)."""
    data.update((k, v) for k, v in values.items() if v is not None)


def gres_json(gres: tuple[GresRequest, ...]) -> list[dict[str, Any]]:
    return [{"name": g.name, "type": g.type or "", "count": g.count} for g in gres]


def spec_json(spec: JobDesc, partition: str, full: bool) -> dict[str, Any]:
    """``full``: with the submitter's environment and the script (pscontrol); a listing leaves them out."""
    data: dict[str, Any] = {"name": spec.name, "user": spec.user, "uid": spec.uid, "gid": spec.gid,
                            "workdir": spec.workdir}
    if full:
        _present(data, script=spec.script)
    data["argv"] = list(spec.argv)
    if full:
        data["environment"] = dict(spec.environment)
    data["partition"] = partition
    _present(data, stdout=spec.stdout, stderr=spec.stderr,
             time_limit=None if spec.time_limit is None else _i64(spec.time_limit))
    data.update(num_nodes=spec.num_nodes, max_nodes=spec.max_nodes, ntasks=spec.ntasks,
                ntasks_per_node=spec.ntasks_per_node, cpus_per_task=spec.cpus_per_task,
                mem_mb=_i64(spec.mem_mb), gres=gres_json(spec.gres), interactive=spec.interactive,
                account=spec.account, nice=spec.nice, dependency=spec.dependency)
    _present(data, requeue=spec.requeue)
    data.update(hold=spec.hold, array=spec.array, kill_on_invalid_dep=spec.kill_on_invalid_dep,
                nodelist=spec.nodelist, exclude=spec.exclude, open_mode=spec.open_mode, gpu_mem=spec.gpu_mem,
                allocation=spec.allocation, constraint=spec.constraint, exclusive=spec.exclusive)
    return data


def job_json(job: JobInfo, full: bool = False) -> dict[str, Any]:
    """A job as psqueue, psacct (``full`` False) and pscontrol (``full``) print it."""
    data: dict[str, Any] = {
        "job_id": job.job_id,
        "spec": spec_json(job.spec, job.partition or job.spec.partition or "", full),
        "state": job.state.value, "reason": str(job.reason), "submit_time": float(job.submit_time),
    }
    _present(data, start_time=job.start_time, end_time=job.end_time)
    data.update(node=job.node or "", nodes=list(job.nodes), gpu_indices=list(job.gpu_indices),
                exit_code=job.exit_code, exit_signal=job.exit_signal, node_target="",
                node_gpus=[{"indices": list(g)} for g in job.node_gpus], node_index=0)  # the wire's (launches')
    _present(data, time_limit=None if job.time_limit is None else _i64(job.time_limit), gpu_seconds=job.gpu_seconds,
             peak_gpu_memory_mb=None if job.peak_gpu_memory_mb is None else _i64(job.peak_gpu_memory_mb),
             mean_gpu_util=job.mean_gpu_util)
    if job.array_job_id is not None:
        data["array_job_id"] = _i64(job.array_job_id)
        data["array_task_id"] = _i64(job.array_task_id or 0)
    data.update(priority=_i64(job.priority), hold=job.hold, restarts=job.restarts)
    _present(data, start_estimate=job.start_estimate)
    data["collapsed_tasks"] = job.collapsed_tasks
    _present(data, eligible_time=job.eligible_time)
    data.update(system_comment=job.system_comment, requeue=job.requeue)
    _present(data, max_rss_kb=None if job.max_rss_kb is None else _i64(job.max_rss_kb))
    return data


def gpu_json(gpu: GpuInfo) -> dict[str, Any]:
    return {"index": gpu.index, "name": gpu.name, "type": gpu.type or "", "file": gpu.file or "",
            "minor": -1 if gpu.minor is None else gpu.minor, "uuid": gpu.uuid or "",
            "memory_mb": _i64(gpu.memory_mb or 0), "cores": list(gpu.cores)}


def node_json(node: NodeInfo | NodeStatus) -> dict[str, Any]:
    return {
        "name": node.name, "addr": node.addr, "port": node.port, "cpus": node.cpus,
        "real_memory": _i64(node.real_memory), "gres": gres_json(node.gres), "state": node.state.value,
        "drain": node.drain, "reason": node.reason, "partitions": list(node.partitions),
        "alloc_cpus": node.alloc_cpus, "alloc_mem": _i64(node.alloc_mem), "alloc_gpus": list(node.alloc_gpus),
        "display_state": node.display_state, "running_jobs": node.running_jobs,
        "last_heartbeat": float(node.last_heartbeat), "gpus": [gpu_json(g) for g in node.gpus],
        "isolation": node.isolation,
    }


def partition_json(part: PartitionInfo | PartitionConfig) -> dict[str, Any]:
    data: dict[str, Any] = {"name": part.name, "nodes": list(part.nodes), "default": part.default}
    _present(data, max_time=None if part.max_time is None else _i64(part.max_time),
             default_time=None if part.default_time is None else _i64(part.default_time))
    data["state"] = part.state
    _present(data, max_nodes=part.max_nodes)
    data.update(priority_job_factor=part.priority_job_factor, allow_groups=list(part.allow_groups))
    return data


def cluster_json(info: ClusterInfo) -> dict[str, Any]:
    return {"cluster_name": info.name, "partitions": [partition_json(p) for p in info.partitions],
            "nodes": [node_json(n) for n in info.nodes]}


def priorities_json(jobs: list[JobPriority], weights: PriorityWeights) -> dict[str, Any]:
    return {
        "jobs": [{"job_id": _i64(j.job_id), "display_id": j.display_id, "user": j.user, "account": j.account,
                  "partition": j.partition, "priority": _i64(j.priority), "age": j.age, "fairshare": j.fairshare,
                  "jobsize": j.jobsize, "partition_factor": j.partition_factor, "qos": j.qos, "nice": j.nice,
                  "admin_set": j.admin_set} for j in jobs],
        "weights": {"age": _i64(weights.age), "fairshare": _i64(weights.fairshare), "jobsize": _i64(weights.jobsize),
                    "partition": _i64(weights.partition), "qos": _i64(weights.qos)},
    }
