"""slurmrestd's objects of Slurm 25.11 (REST v0.0.41 to v0.0.44), built once from pslurm's records.

One representation for the four versions: the newest one's (v0.0.44) shapes, every field typed as
its OpenAPI spec types it (integers where the spec says integer: times are whole epoch seconds;
optional numbers as ``{"set", "infinite", "number"}``). What an older version has not, or has in
another form, its encoder (``rest/slurmv/``) takes out or reshapes. Nothing here knows a version.
"""

from __future__ import annotations

import grp
import math
import pwd
from typing import Any

from pslurm.core.assoc import Assoc, Associations
from pslurm.core.config import PartitionConfig
from pslurm.core.jobspec import JobRecord
from pslurm.core.node import NodeStatus
from pslurm.core.restjson import NODE_STATE_FLAGS
from pslurm.core.signals import signal_name

Json = dict[str, Any]
SLURM_RELEASE = ("25", "11", "0")  # the slurmrestd whose API this serves (meta.slurm)
INFINITE = {"set": True, "infinite": True, "number": 0}


def no_val(value: float | None) -> Json:
    """Slurm's ``*_no_val_struct`` of a whole number: unset when ``value`` is None."""
    return {"set": value is not None, "infinite": False, "number": 0 if value is None else int(value)}


def _minutes(seconds: int | None) -> Json:
    """A time limit in minutes; None is INFINITE (UNLIMITED), as slurmrestd says it."""
    return INFINITE if seconds is None else no_val(math.ceil(seconds / 60))


def _epoch(value: float | None) -> int:
    return int(value or 0)


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def meta(version: str, cluster: str, plugin: str = "slurmctld") -> Json:
    """slurmrestd's ``meta``: the plugin and data parser of ``version`` and the Slurm release."""
    major, minor, micro = SLURM_RELEASE
    return {"plugin": {"type": f"openapi/{plugin}", "name": f"Slurm OpenAPI {plugin}",
                       "data_parser": f"data_parser/{version}", "accounting_storage": "accounting_storage/pslurm"},
            "client": {"source": "", "user": "", "group": ""}, "command": [],
            "slurm": {"version": {"major": major, "micro": micro, "minor": minor},
                      "release": ".".join(SLURM_RELEASE), "cluster": cluster}}


def _exit_code(job: JobRecord) -> Json:
    """``process_exit_code_verbose``: how the job ended (PENDING while it has not)."""
    if not job.state.is_final:
        status = ["PENDING"]
    elif job.exit_signal:
        status = ["SIGNALED"]
    else:
        status = ["ERROR"] if job.exit_code else ["SUCCESS"]
    signal = {"id": no_val(job.exit_signal or None),
              "name": signal_name(job.exit_signal) if job.exit_signal else ""}
    return {"status": status, "return_code": no_val(job.exit_code), "signal": signal}


def _nodes(job: JobRecord) -> str:
    if len(job.nodes) > 1:
        from pslurm.core.hostlists import collect

        return collect(job.nodes)
    return job.node or ""


def job_info(job: JobRecord) -> Json:
    """A ``job_info`` (GET /slurm/vX/jobs): squeue's fields of one job."""
    s = job.spec
    gres = ",".join(f"gres/{g}" for g in s.gres)
    return {
        "account": s.account, "array_job_id": no_val(job.array_job_id or 0),
        "array_task_id": no_val(job.array_task_id), "batch_flag": not s.interactive, "batch_host": job.node or "",
        "comment": s.comment, "command": " ".join(s.argv), "cpus_per_task": no_val(s.cpus_per_task),
        "current_working_directory": s.workdir, "dependency": s.dependency,
        "eligible_time": no_val(_epoch(job.eligible_time)), "end_time": no_val(_epoch(job.end_time)),
        "exit_code": _exit_code(job), "group_id": s.gid, "group_name": group_name(s.gid), "hold": bool(job.hold),
        "job_id": job.job_id, "job_state": [job.state.value], "memory_per_node": no_val(s.mem_mb or None),
        "name": s.name, "nice": s.nice, "node_count": no_val(len(job.all_nodes) or s.num_nodes),
        "nodes": _nodes(job), "partition": job.partition, "priority": no_val(job.priority), "qos": s.qos or "normal",
        "requeue": job.requeue, "restart_cnt": job.restarts, "standard_error": s.stderr or "",
        "standard_output": s.stdout or "", "start_time": no_val(_epoch(job.start_time or job.start_estimate)),
        "state_description": job.state_desc, "state_reason": job.reason.value,
        "submit_time": no_val(_epoch(job.submit_time)), "suspend_time": no_val(_epoch(job.suspend_time)),
        "system_comment": job.system_comment, "tasks": no_val(s.ntasks), "time_limit": _minutes(job.time_limit),
        "tres_per_node": gres, "user_id": s.uid, "user_name": s.user,
        "submit_line": s.submit_line, "stdout_expanded": s.stdout or "", "stderr_expanded": s.stderr or "",
    }


def db_job(job: JobRecord, cluster: str) -> Json:
    """A slurmdbd ``job`` (GET /slurmdb/vX/jobs): sacct's fields of one job."""
    s = job.spec
    start, end = _epoch(job.start_time), _epoch(job.end_time)
    elapsed = max(0, (end or _epoch(job.submit_time)) - start) if start else 0
    return {
        "account": s.account, "array": {"job_id": job.array_job_id or 0, "task_id": no_val(job.array_task_id),
                                         "task": "", "limits": {"max": {"running": {"tasks": 0}}}},
        "association": {"account": s.account, "cluster": cluster, "partition": "", "user": s.user,
                        "id": job.assoc_id},
        "cluster": cluster, "comment": {"administrator": "", "job": s.comment, "system": job.system_comment},
        "derived_exit_code": _exit_code(job), "exit_code": _exit_code(job), "group": group_name(s.gid),
        "hold": bool(job.hold), "job_id": job.job_id, "name": s.name, "nodes": _nodes(job) or "None assigned",
        "partition": job.partition, "priority": no_val(job.priority), "qos": s.qos or "normal",
        "required": {"CPUs": s.ntasks * s.cpus_per_task, "memory_per_node": no_val(s.mem_mb or None)},
        "restart_cnt": job.restarts, "state": {"current": [job.state.value], "reason": job.reason.value},
        "steps": [], "stderr": s.stderr or "", "stdout": s.stdout or "", "submit_line": s.submit_line,
        "time": {"elapsed": elapsed, "eligible": _epoch(job.eligible_time), "end": end, "start": start,
                 "submission": _epoch(job.submit_time), "suspended": int(job.suspended_seconds),
                 "limit": _minutes(job.time_limit)},
        "user": s.user, "working_directory": s.workdir,
    }


def node(status: NodeStatus) -> Json:
    """A ``node`` (GET /slurm/vX/nodes): sinfo's and scontrol show node's fields."""
    gpus = sum(g.count for g in status.gres if g.name == "gpu")
    used = len(status.alloc_gpus)
    return {
        "name": status.name, "hostname": status.name, "address": status.addr, "port": status.port,
        "cpus": status.cpus, "real_memory": status.real_memory, "gres": ",".join(str(g) for g in status.gres),
        "gres_used": f"gpu:{used}" if gpus else "", "state": list(NODE_STATE_FLAGS.get(status.display_state,
                                                                                       ["UNKNOWN"])),
        "reason": status.reason, "reason_set_by_user": status.reason_user or "",
        "reason_changed_at": no_val(_epoch(status.reason_time)), "partitions": list(status.partitions),
        "alloc_cpus": status.alloc_cpus, "alloc_idle_cpus": max(0, status.cpus - status.alloc_cpus),
        "alloc_memory": status.alloc_mem, "features": list(status.features),
        "active_features": list(status.features), "last_busy": no_val(_epoch(status.last_heartbeat)),
        "tres": f"cpu={status.cpus},mem={status.real_memory}M" + (f",gres/gpu={gpus}" if gpus else ""),
    }


def partition(part: PartitionConfig, cpus: int) -> Json:
    """A ``partition_info`` (GET /slurm/vX/partitions); ``cpus``: its nodes' (the spec has no field
    saying which partition is the default one)."""
    return {
        "name": part.name, "nodes": {"configured": ",".join(part.nodes), "total": len(part.nodes),
                                     "allowed_allocation": ""},
        "maximums": {"time": _minutes(part.max_time), "nodes": no_val(part.max_nodes)},
        "defaults": {"time": _minutes(part.default_time)},
        "partition": {"state": [part.state]}, "priority": {"job_factor": part.priority_job_factor, "tier": 1},
        "groups": {"allowed": ",".join(part.allow_groups)}, "qos": {"allowed": "", "deny": "", "assigned": ""},
        "cpus": {"total": cpus, "task_binding": 0},
    }


def ping(answer: Json, hostname: str) -> Json:
    """A ``controller_ping`` from this controller's role's ping (``failover.Role.ping``)."""
    return {"hostname": answer.get("name") or hostname, "pinged": "UP", "latency": 0,
            "mode": "primary" if answer.get("role", "primary") == "primary" else "backup",
            "responding": True, "primary": answer.get("role", "primary") == "primary"}


def _assoc_short(a: Assoc, cluster: str) -> Json:
    return {"account": a.account, "cluster": cluster, "partition": a.partition, "user": a.user, "id": a.id}


def accounts(snap: Associations, cluster: str) -> list[Json]:
    """``account`` records (GET /slurmdb/vX/accounts): sacctmgr show account."""
    return [{"name": name, "description": account.description or name,
             "organization": account.organization or name,
             "associations": [_assoc_short(a, cluster) for a in snap.assocs if a.account == name and not a.user],
             "coordinators": [], "flags": []}
            for name, account in snap.accounts.items()]


def associations(snap: Associations, cluster: str) -> list[Json]:
    """``assoc`` records (GET /slurmdb/vX/associations): sacctmgr show assoc."""
    out = []
    for a in snap.assocs:
        user = snap.users.get(a.user)
        parent = a.parent if not a.user else a.account
        out.append({**_assoc_short(a, cluster), "parent_account": parent, "shares_raw": a.fairshare,
                    "is_default": bool(user and user.default_account == a.account), "qos": list(a.qos),
                    "default": {"qos": a.default_qos}, "comment": "", "lineage": "", "flags": [],
                    "priority": no_val(None)})
    return out


def users(snap: Associations, cluster: str) -> list[Json]:
    """``user`` records (GET /slurmdb/vX/users): sacctmgr show user."""
    return [{"name": u.name, "administrator_level": [u.admin_level], "default": {"account": u.default_account,
                                                                                 "wckey": ""},
             "associations": [_assoc_short(a, cluster) for a in snap.assocs if a.user == u.name],
             "coordinators": [], "flags": []}
            for u in snap.users.values()]


def diag(statistics: Json) -> Json:
    """sdiag's ``statistics`` (``controller.diag``'s, v0.0.40's) as v0.0.41+ have them: each message
    type's average time a ``*_no_val`` number, and its queue figures (pslurm queues no RPC: 0)."""
    rpcs = [{**r, "average_time": no_val(r["average_time"]), "queued": 0, "dropped": 0, "cycle_last": 0,
             "cycle_max": 0} for r in statistics.get("rpcs_by_message_type", [])]
    users = [{**r, "average_time": no_val(r["average_time"])} for r in statistics.get("rpcs_by_user", [])]
    return {**statistics, "rpcs_by_message_type": rpcs, "rpcs_by_user": users}
