"""``--json`` in Slurm's own shape: what Slurm 22.05's commands print with ``--json``.

Slurm 22.05's ``squeue --json`` and ``sinfo --json`` print what its slurmrestd answers ``GET
/slurm/v0.0.38/jobs`` and ``/nodes`` (``src/plugins/openapi/v0.0.38``), and ``sacct --json`` what it
answers ``GET /slurmdb/v0.0.38/jobs`` (``openapi/dbv0.0.38``): ``{"meta": {...}, "errors": [], "jobs":
[...]}``, every field of Slurm's there, numbers as plain numbers (times in epoch seconds, 0 when unset;
``time_limit`` in minutes), ``null`` where Slurm's value is unset or infinite. This module writes those
shapes, field by field in Slurm's order, from what the commands hold: the API's JSON read through
:mod:`pslurm.core.jobinfo` / :mod:`pslurm.core.clusterinfo` (the client's views). The API's own replies
are slurmrestd v0.0.40's (``no_val`` structs, ``job_state`` a list), a later shape than the commands':
field names are shared, the values' forms are not, so they are read here rather than printed as they are.

Where pslurm has no value for a field (burst buffers, federation, core layout), it holds what Slurm
holds for a job or node without one. Deliberate differences, each where 22.05's writer drops a value
that later Slurm writes: ``cpus_per_task`` is the job's (22.05 prints null unless ``--cpu-freq`` was
given), and sacct's ``exit_code`` says ``ERROR`` with the job's return code (22.05 says ``SUCCESS``, 0
for every exit that was not a signal; Slurm 23.11 fixed it so). ``meta`` names Slurm 22.05.8's plugin and
version, whose shape this is, and pslurm's own version under ``meta.pslurm``; ``warnings`` is there
(empty), as Slurm 23.02 on prints it. Filters (``-j``, ``-u``, ``-t``, ``-p``) apply, as they do from
Slurm 23.02 on (22.05's ``squeue --json`` lists every job whatever it was asked).

Standard library only, and little of it: the commands import this on their path.
"""

from __future__ import annotations

import math

from pslurm.cli.jobview import job_tres, tres_text

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any

    from pslurm.core.clusterinfo import NodeInfo as Node
    from pslurm.core.clusterinfo import PartitionInfo as Part
    from pslurm.core.jobinfo import JobInfo as Job
    Json = dict[str, Any]

SLURM_VERSION = {"major": 22, "micro": 8, "minor": 5}  # the Slurm whose --json shape this is (key order: Slurm's)
SLURM_RELEASE = "22.05.8"
OPENAPI = ("openapi/v0.0.38", "Slurm OpenAPI v0.0.38")  # squeue, sinfo, scontrol (slurmrestd's /slurm/v0.0.38)
OPENAPI_DB = ("openapi/dbv0.0.38", "Slurm OpenAPI DB v0.0.38")  # sacct (slurmrestd's /slurmdb/v0.0.38)
NO_LIMIT_END = 365 * 86400  # a running job without a time limit: slurmctld's end_time is its start + a year
SHOW_FLAGS = ["SHOW_ALL", "SHOW_DETAIL", "SHOW_LOCAL"]  # what squeue's load of the jobs asked
# Slurm's fixed TRES ids (src/common/slurmdb_defs.h TRES_CPU ...); a GRES TRES gets its id from the
# database (from 1001), here a fixed one per name pslurm knows
TRES_IDS = {"cpu": 1, "mem": 2, "energy": 3, "node": 4, "billing": 5, "gres/gpu": 1001, "gres/shard": 1002,
            "gres/mps": 1003, "gres/gpumem": 1004}


def reply(key: str, items: list[Json], plugin: tuple[str, str] = OPENAPI) -> Json:
    """The whole document: ``{"meta", "errors", "warnings", key: items}``."""
    from pslurm import __version__

    meta = {"plugin": {"type": plugin[0], "name": plugin[1]},
            "Slurm": {"version": dict(SLURM_VERSION), "release": SLURM_RELEASE},
            "pslurm": {"version": __version__}}
    return {"meta": meta, "errors": [], "warnings": [], key: items}


def dumps(data: Json) -> str:
    """As the commands print JSON (two-space indents, as Slurm's)."""
    import json

    return json.dumps(data, indent=2)


# -- values --------------------------------------------------------------------------------------


def _epoch(value: float | None) -> int:
    """A time as Slurm's job_info has it: whole epoch seconds, 0 for none."""
    return int(value) if value else 0


def _minutes(seconds: float | None) -> int | None:
    """A time limit in minutes (Slurm's unit); None (null) for none: INFINITE."""
    return None if seconds is None else math.ceil(seconds / 60)


def group_name(gid: int) -> str | None:
    """The group's name (Slurm's gid_to_string_or_null): None when the gid has none."""
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except (KeyError, OverflowError):
        return None


def _throttle(job: Job) -> str:
    """An array's ``%N`` (at most N tasks at once), "" for none."""
    return job.spec.array.partition("%")[2]


def _tres_list(items: Iterable[tuple[str, str | None, int]]) -> list[Json]:
    """sacct's TRES: ``[{"type", "name", "id", "count"}]`` (``id`` null for a GPU type: pslurm has no
    TRES table to number it from)."""
    return [{"type": kind, "name": name, "id": TRES_IDS.get(kind if name is None else f"{kind}/{name}"),
             "count": count} for kind, name, count in items]


def _tres_per(job: Job) -> Json:
    """The job's TRES per job, node, socket and task as 22.05's job_info has them (--gpus is per job)."""
    from pslurm.cli.jobview import tres_per_job

    return {"tres_per_job": tres_per_job(job.spec), "tres_per_node": _tres_per_node(job), "tres_per_socket": "",
            "tres_per_task": ""}


def _tres_per_node(job: Job) -> str:
    """``gres:gpu:1``: the GRES asked per node as 22.05's job_info has them; "" for none."""
    from pslurm.cli.jobview import tres_per_node_text

    text = tres_per_node_text(job)
    return "" if text == "N/A" else text


def _gres_detail(job: Job) -> list[str]:
    """``["gpu:2(IDX:0-1)"]``: the GPUs a running job holds on its node, by index."""
    from pslurm.core.hostlists import int_ranges

    if not job.gpu_indices or not job.state.holds_resources:
        return []
    types = {g.type for g in job.spec.gres if g.name == "gpu"}
    kind = f"gpu:{types.pop()}" if len(types) == 1 and None not in types else "gpu"
    return [f"{kind}:{len(job.gpu_indices)}(IDX:{int_ranges(job.gpu_indices)})"]


# -- a job, as squeue --json and scontrol show job --json --------------------------------------


def job_json(job: Job, cluster: str) -> Json:
    """One job of ``squeue --json`` (openapi/v0.0.38's ``job_info``, ``dump_job_info``'s order)."""
    from pslurm.cli.jobview import job_nodes, node_count, nodelist_text, total_cpus, total_tasks, wait_status

    spec = job.spec
    state = job.state
    running = state.holds_resources
    started = job.start_time is not None
    collapsed = bool(job.collapsed_tasks)
    throttle = _throttle(job)
    limit = job.time_limit
    if started:
        start = _epoch(job.start_time)
        end = _epoch(job.end_time) if job.end_time is not None else start + (
            NO_LIMIT_END if limit is None else int(limit))
    else:  # a pending job: its expected start, as the backfill pass put it in start_time
        start = _epoch(job.start_estimate) if state.value == "PENDING" else 0
        end = start + (NO_LIMIT_END if limit is None else int(limit)) if start else 0
    # pslurm notes when a pending job became eligible; one that started was eligible by then
    eligible = _epoch(job.eligible_time or (job.submit_time if started else None))
    tres = job_tres(job)
    cpus, nodelist = total_cpus(job), nodelist_text(job)
    gid = spec.gid
    data: Json = {
        "account": spec.account, "accrue_time": eligible, "admin_comment": "",
        "array_job_id": job.array_job_id or 0,
        "array_task_id": None if collapsed or job.array_job_id is None else job.array_task_id,
        "array_max_tasks": int(throttle) if throttle.isdigit() else 0,
        "array_task_string": f"{job.collapsed_tasks}{'%' + throttle if throttle else ''}" if collapsed else "",
        "association_id": 0, "batch_features": "", "batch_flag": not spec.interactive,
        "batch_host": job_nodes(job)[0] if started and job_nodes(job) else "",
        "flags": ["KILL_INV_DEP"] if spec.kill_on_invalid_dep else [],
        "burst_buffer": "", "burst_buffer_state": "", "cluster": cluster, "cluster_features": "",
        "command": " ".join(spec.argv) if spec.interactive else "", "comment": getattr(spec, "comment", ""),
        "container": "", "contiguous": False, "core_spec": None, "thread_spec": None, "cores_per_socket": None,
        "billable_tres": float(cpus) if started else None, "cpus_per_task": spec.cpus_per_task,
        "cpu_frequency_minimum": None, "cpu_frequency_maximum": None, "cpu_frequency_governor": None,
        "cpus_per_tres": "", "deadline": _epoch(getattr(spec, "deadline", None)), "delay_boot": 0,
        "dependency": spec.dependency, "derived_exit_code": wait_status(job),
        "eligible_time": eligible, "end_time": end, "excluded_nodes": spec.exclude,
        "exit_code": wait_status(job), "features": spec.constraint, "federation_origin": "",
        "federation_siblings_active": "",
        "federation_siblings_viable": "", "gres_detail": _gres_detail(job), "group_id": gid,
        "group_name": group_name(gid), "job_id": job.job_id,
    }
    if running and job.node:  # the allocation (22.05 lists each core; pslurm keeps no core map)
        data["job_resources"] = {
            "nodes": nodelist, "allocated_cores": cpus, "allocated_hosts": len(job_nodes(job)),
            "allocated_nodes": [{"sockets": {}, "nodename": name, "cpus_used": 0, "memory_used": 0,
                                 "memory_allocated": spec.mem_mb} for name in job_nodes(job)]}
    data.update({
        "job_state": state.value, "last_sched_evaluation": _epoch(job.start_time or job.submit_time),
        "licenses": "", "max_cpus": 0, "max_nodes": spec.max_nodes or 0, "mcs_label": "", "memory_per_tres": "",
        "name": spec.name,
        "nodes": nodelist, "nice": spec.nice or None, "tasks_per_core": None,
        "tasks_per_node": spec.ntasks_per_node or 0, "tasks_per_socket": None, "tasks_per_board": 0, "cpus": cpus,
        "node_count": node_count(job), "tasks": total_tasks(job), "het_job_id": 0, "het_job_id_set": "",
        "het_job_offset": 0,
        "partition": job.partition, "prefer": "", "memory_per_node": spec.mem_mb or None, "memory_per_cpu": None,
        "minimum_cpus_per_node": spec.cpus_per_task, "minimum_tmp_disk_per_node": 0, "preempt_time": 0,
        "pre_sus_time": 0, "priority": 0 if job.hold else job.priority,  # a held job's priority is 0 in Slurm
        "profile": None, "qos": getattr(spec, "qos", "") or "normal", "reboot": False,
        "required_nodes": spec.nodelist, "requeue": bool(job.requeue), "resize_time": 0,
        "restart_cnt": job.restarts, "resv_name": "", "shared": None, "show_flags": list(SHOW_FLAGS),
        "sockets_per_board": 0, "sockets_per_node": None, "start_time": start,
        "state_description": job.state_desc,
        "state_reason": str(job.reason), "standard_error": spec.stderr or "",
        "standard_input": "" if spec.interactive else "/dev/null", "standard_output": spec.stdout or "",
        "submit_time": _epoch(job.submit_time), "suspend_time": 0, "system_comment": job.system_comment,
        "time_limit": _minutes(limit), "time_minimum": 0, "threads_per_core": None, "tres_bind": "",
        "tres_freq": "", **_tres_per(job), "tres_req_str": tres_text(tres),
        "tres_alloc_str": tres_text(tres) if started else "",
        "user_id": spec.uid, "user_name": spec.user, "wckey": "", "current_working_directory": spec.workdir,
    })
    return data


def jobs_reply(jobs: Sequence[Job], cluster: str) -> Json:
    """``squeue --json``, ``scontrol show job --json``."""
    return reply("jobs", [job_json(j, cluster) for j in jobs])


# -- a job, as sacct --json --------------------------------------------------------------------


def exit_code_json(code: int, sig: int) -> Json:
    """sacct's ``exit_code``: ``{"status", "return_code"}``, a ``signal`` when one ended it."""
    if sig:
        import signal

        try:
            name = signal.strsignal(sig) or str(sig)
        except ValueError:
            name = str(sig)
        return {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": sig, "name": name}}
    return {"status": "ERROR", "return_code": code} if code else {"status": "SUCCESS", "return_code": 0}


def step_json(job: Job, step: Any, now: float) -> Json:
    """One of a job's ``steps`` in ``sacct --json`` (openapi/dbv0.0.38's step, in its order), from one
    of psacct's step lines (``J.batch``, ``J.0``...): ``step.id`` is ``"batch"`` or the step's number,
    as dbv0.0.38 writes it. CPU times, frequencies, energy and the measured TRES are not kept: zero or
    empty, but for the batch step's MaxRSS (its memory cgroup's peak): ``tres.requested.max``'s ``mem``,
    in bytes as Slurm counts it."""
    from pslurm.core.hostlists import collect

    nodes = [n for n in str(step.node or "").split(",") if n]
    zero = {"seconds": 0, "microseconds": 0}
    suffix = str(step.job_id).rpartition(".")[2]
    desc = step.spec
    allocated: list[tuple[str, str | None, int]] = [("cpu", None, int(desc.cpus)), ("mem", None, int(desc.mem_mb or 0)),
                                                    ("node", None, len(nodes) or int(desc.num_nodes))]
    gpus = len(job.gpu_indices)
    if gpus:
        allocated.append(("gres", "gpu", gpus))
    start, end = step.start_time, step.end_time
    elapsed = max(0, int((end if end is not None else now) - start)) if start is not None else 0
    rss = getattr(step, "max_rss_kb", None)
    peak = _tres_list([("mem", None, int(rss) * 1024)]) if rss is not None else []
    return {
        "nodes": {"list": nodes, "count": len(nodes), "range": collect(nodes) if len(nodes) > 1 else "".join(nodes)},
        "tres": {"requested": {"max": peak, "min": [], "average": [], "total": []},
                 "consumed": {"max": [], "min": [], "average": [], "total": []}, "allocated": _tres_list(allocated)},
        "time": {"elapsed": elapsed, "end": _epoch(end), "start": _epoch(start), "suspended": 0,
                 "system": dict(zero), "total": dict(zero), "user": dict(zero)},
        "exit_code": exit_code_json(int(step.exit_code), int(step.exit_signal)),
        "tasks": {"count": int(desc.ntasks)}, "pid": None,
        "CPU": {"requested_frequency": {"min": 0, "max": 0}, "governor": []}, "kill_request_user": None,
        "state": getattr(step.state, "value", str(step.state)),
        "statistics": {"CPU": {"actual_frequency": 0}, "energy": {"consumed": 0}},
        "step": {"job_id": job.job_id, "het": {"component": None},
                 "id": int(suffix) if suffix.isdigit() else suffix, "name": desc.name},
        "task": {"distribution": "Unknown"},
    }


def account_json(job: Job, cluster: str, now: float, steps: Sequence[Any] = ()) -> Json:
    """One job of ``sacct --json`` (openapi/dbv0.0.38's job, in its order), with ``steps`` (psacct's
    step lines of the job, see step_json)."""
    from pslurm.cli.jobview import node_count, nodelist_text, suspended_time, time_used

    spec = job.spec
    started = job.start_time is not None
    throttle = _throttle(job)
    tres = job_tres(job)
    zero = {"seconds": 0, "microseconds": 0}  # CPU time: not measured
    code = exit_code_json(job.exit_code, job.exit_signal)
    return {
        "account": spec.account,
        "comment": {"administrator": None, "job": None, "system": job.system_comment or None},
        "allocation_nodes": node_count(job) if started else 0,
        "array": {"job_id": job.array_job_id or 0, "limits": {"max": {"running": {
            "tasks": int(throttle) if throttle.isdigit() else 0}}},
            "task": job.collapsed_tasks or None, "task_id": job.array_task_id},
        "association": {"account": spec.account, "cluster": cluster, "partition": None, "user": spec.user},
        "cluster": cluster, "constraints": "", "container": None, "derived_exit_code": dict(code),
        "time": {"elapsed": int(time_used(job, now)),
                 "eligible": _epoch(job.eligible_time or (job.submit_time if started else None)),
                 "end": _epoch(job.end_time), "start": _epoch(job.start_time), "submission": _epoch(job.submit_time),
                 "suspended": int(suspended_time(job, now)), "system": dict(zero), "limit": _minutes(job.time_limit),
                 "total": dict(zero),
                 "user": dict(zero)},
        "exit_code": code, "flags": [], "group": group_name(spec.gid),
        "het": {"job_id": 0, "job_offset": None}, "job_id": job.job_id, "name": spec.name,
        "mcs": {"label": ""}, "nodes": nodelist_text(job) or "None assigned", "partition": job.partition,
        "priority": 0 if job.hold else job.priority, "qos": getattr(spec, "qos", "") or "normal",
        "required": {"CPUs": spec.cpus, "memory": spec.mem_mb}, "kill_request_user": None,
        "reservation": {"id": 0, "name": 0},  # sic: 22.05 writes the reservation's name as a number
        # the last reason it waited for but None, Priority and Resources (the database's state_reason_prev)
        "state": {"current": job.state.value, "reason": str(job.reason_prev)},
        "steps": [step_json(job, step, now) for step in steps],
        "tres": {"allocated": _tres_list(tres) if started else [], "requested": _tres_list(tres)},
        "user": spec.user, "wckey": {"wckey": "", "flags": []}, "working_directory": spec.workdir,
    }


def accounts_reply(jobs: Sequence[Job], cluster: str, now: float,
                   steps: Callable[[Job], Sequence[Any]] | None = None) -> Json:
    """``sacct --json``; ``steps``: a job's step lines (none without)."""
    return reply("jobs", [account_json(j, cluster, now, steps(j) if steps else ()) for j in jobs], OPENAPI_DB)


# -- nodes and partitions ------------------------------------------------------------------------


def _node_tres(node: Node) -> str:
    """``cpu=8,mem=16000M,billing=8,gres/gpu=2``: the node's configured TRES."""
    parts = [f"cpu={node.cpus}", f"mem={node.real_memory}M", f"billing={node.cpus}"]
    counts: dict[str, int] = {}
    for g in node.gres:
        counts[g.name] = counts.get(g.name, 0) + g.count
    return ",".join(parts + [f"gres/{name}={count}" for name, count in counts.items()])


def _gres_used(node: Node) -> str:
    """``gpu:1``, ``gpu:a100:1``: the GPUs in use, per GRES the node has (others not listed)."""
    types = {g.index: g.type for g in node.gpus}
    used = [types.get(i) for i in node.alloc_gpus]
    out = []
    for g in node.gres:
        if g.name != "gpu":
            continue
        count = sum(1 for t in used if t == g.type) if g.type else len(used)
        out.append(f"gpu:{g.type + ':' if g.type else ''}{count}")
    return ",".join(out)


def node_json(node: Node) -> Json:
    """One node of ``sinfo --json`` and ``scontrol show node --json`` (openapi/v0.0.38's ``_dump_node``)."""
    from pslurm.core.gres import format_gres
    from pslurm.core.restjson import NODE_STATE_FLAGS

    flags = NODE_STATE_FLAGS.get(node.display_state, ["UNKNOWN"])
    gpus = len(node.alloc_gpus)
    used = [f"cpu={node.alloc_cpus}"] if node.alloc_cpus else []
    used += [f"mem={node.alloc_mem}M"] if node.alloc_mem else []
    used += [f"gres/gpu={gpus}"] if gpus else []
    return {
        "architecture": "", "burstbuffer_network_address": "", "boards": 1, "boot_time": 0, "comment": "",
        "cores": node.cpus, "cpu_binding": 0, "cpu_load": 0, "extra": "", "free_memory": 0, "cpus": node.cpus,
        "last_busy": _epoch(node.last_heartbeat), "features": ",".join(node.features),
        "active_features": ",".join(node.features),
        "gres": format_gres(node.gres), "gres_drained": "N/A", "gres_used": _gres_used(node), "mcs_label": "",
        "name": node.name, "next_state_after_reboot": "invalid", "address": node.addr, "hostname": node.name,
        "state": flags[0].lower(), "state_flags": flags[1:], "next_state_after_reboot_flags": [],
        "operating_system": "", "owner": None, "partitions": list(node.partitions), "port": node.port,
        "real_memory": node.real_memory, "reason": node.reason,
        "reason_changed_at": int(node.reason_time or 0), "reason_set_by_user": node.reason_user or None,
        "slurmd_start_time": 0, "sockets": 1, "threads": 1, "temporary_disk": 0,
        "weight": 1, "tres": _node_tres(node), "slurmd_version": "", "alloc_memory": node.alloc_mem,
        "alloc_cpus": node.alloc_cpus, "idle_cpus": node.cpus - node.alloc_cpus,
        "tres_used": ",".join(used) or None, "tres_weighted": float(node.alloc_cpus),
    }


def nodes_reply(nodes: Sequence[Node]) -> Json:
    """``sinfo --json`` (22.05: the nodes, not the partitions), ``scontrol show node --json``."""
    return reply("nodes", [node_json(n) for n in nodes])


def partition_json(part: Part, nodes: dict[str, Node]) -> Json:
    """One partition of ``scontrol show partition --json`` (openapi/v0.0.38's ``_dump_part``);
    ``nodes``: the cluster's, by name (the partition's CPU and TRES totals)."""
    from pslurm.core.hostlists import collect

    members = [nodes[name] for name in part.nodes if name in nodes]
    cpus = sum(n.cpus for n in members)
    gres: dict[str, int] = {}
    for n in members:
        for g in n.gres:
            gres[g.name] = gres.get(g.name, 0) + g.count
    tres = [f"cpu={cpus}", f"mem={sum(n.real_memory for n in members)}M", f"node={len(part.nodes)}",
            f"billing={cpus}"] + [f"gres/{name}={count}" for name, count in gres.items()]
    return {
        "flags": ["default"] if part.default else [], "preemption_mode": ["disabled"],
        "allowed_allocation_nodes": "", "allowed_accounts": "", "allowed_groups": ",".join(part.allow_groups),
        "allowed_qos": "", "alternative": "", "billing_weights": "", "default_memory_per_cpu": None,
        "default_memory_per_node": None, "default_time_limit": _minutes(part.default_time),
        "denied_accounts": "", "denied_qos": "", "preemption_grace_time": 0, "maximum_cpus_per_node": -1,
        "maximum_memory_per_cpu": None, "maximum_memory_per_node": None,
        "maximum_nodes_per_job": -1 if part.max_nodes is None else part.max_nodes,
        "max_time_limit": -1 if part.max_time is None else _minutes(part.max_time),
        "min nodes per job": 0,  # sic: 22.05's key has blanks
        "name": part.name, "nodes": collect(part.nodes), "over_time_limit": None,
        "priority_job_factor": part.priority_job_factor, "priority_tier": 1, "qos": "", "state": part.state,
        "total_cpus": cpus, "total_nodes": len(part.nodes), "tres": ",".join(tres),
    }


def partitions_reply(parts: Sequence[Part], nodes: Sequence[Node]) -> Json:
    """``scontrol show partition --json``."""
    by_name = {n.name: n for n in nodes}
    return reply("partitions", [partition_json(p, by_name) for p in parts])
