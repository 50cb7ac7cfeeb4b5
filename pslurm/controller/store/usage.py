"""Accounting's reads: the runs of a time window (sreport), the job counts since a time (sdiag), and a
job's measures (seff). Reads only; the lifecycle writes what they read."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import func, or_, select

from pslurm.controller.store.queries import Store
from pslurm.controller.store.records import UsageRecord, usage_record
from pslurm.controller.store.schema import job_events, jobs
from pslurm.controller.store.specs import SpecReader
from pslurm.core.states import JobState

# sdiag's counters: the lifecycle's operations and final states that each counts
_FAILED = (JobState.FAILED, JobState.NODE_FAIL, JobState.TIMEOUT, JobState.OUT_OF_MEMORY, JobState.DEADLINE)


def runs_between(store: Store, start: float, end: float, now: float) -> list[UsageRecord]:
    """Every run that held resources in [start, end): ended ones, and running ones (to ``now``)."""
    c = jobs.c
    query = (select(c.job_id, c.user_name, c.account, c.cpus, c.mem_mb, c.gpu_indices, c.start_time, c.end_time,
                    c.num_nodes, c.node_cpus)
             .where(c.start_time.is_not(None), c.start_time < end, or_(c.end_time.is_(None), c.end_time > start)))
    with store.engine.connect() as conn:
        return [usage_record(r, now) for r in conn.execute(query)]


def job_counts(store: Store, since: float) -> dict[str, int]:
    """sdiag's job counters since ``since``: submitted, started, completed, canceled, failed."""
    e = job_events.c
    counted = {"submitted": e.op == "submit", "started": e.op == "start",
               "completed": e.to_state == JobState.COMPLETED.value, "canceled": e.to_state == JobState.CANCELLED.value,
               "failed": e.to_state.in_([s.value for s in _FAILED])}
    with store.engine.connect() as conn:
        return {name: int(conn.execute(select(func.count()).select_from(job_events)
                                       .where(e.time >= since, where)).scalar() or 0)
                for name, where in counted.items()}


def job_measures(store: Store, job_ids: Sequence[int]) -> list[dict[str, Any]]:
    """seff's inputs for these jobs (or an array's tasks, by its id): what the job held and what its
    agent measured, one dict a job."""
    c = jobs.c
    query = (select(c.job_id, c.array_job_id, c.array_task_id, c.user_name, c.uid, c.account, c.state, c.exit_code,
                    c.exit_signal, c.start_time, c.end_time, c.cpus, c.node_cpus, c.num_nodes, c.nodes, c.mem_mb,
                    c.gpu_indices, c.gpu_seconds, c.mean_gpu_util, c.peak_gpu_memory_mb, c.max_rss_kb,
                    c.total_cpu_seconds, c.spec_id, c.spec_overrides)
             .where(or_(c.job_id.in_(job_ids), c.array_job_id.in_(job_ids))).order_by(c.job_id))
    with store.engine.connect() as conn:
        rows = list(conn.execute(query))
        requests = SpecReader()  # an array's tasks share one request: read once (store/specs.py)
        requests.load(conn, (r.spec_id for r in rows))
        return [_measures(r, requests.data(r.spec_id, r.spec_overrides)) for r in rows]


def _measures(r: Any, spec: dict[str, Any]) -> dict[str, Any]:
    used = usage_record(r)
    return {"job_id": r.job_id, "array_job_id": r.array_job_id, "array_task_id": r.array_task_id,
            "user": r.user_name, "uid": r.uid, "gid": spec.get("gid"), "account": r.account, "state": r.state,
            "exit_code": r.exit_code, "exit_signal": r.exit_signal, "start_time": r.start_time,
            "end_time": r.end_time, "nodes": r.num_nodes or 1, "cpus": used.cpus, "mem_mb": used.mem_mb,
            "mem_per_cpu": bool(spec.get("mem_per_cpu")), "gpus": used.gpus, "gpu_seconds": r.gpu_seconds,
            "mean_gpu_util": r.mean_gpu_util, "peak_gpu_memory_mb": r.peak_gpu_memory_mb,
            "max_rss_kb": r.max_rss_kb, "total_cpu_seconds": r.total_cpu_seconds}


def usage_summary(store: Store, start: float, end: float, now: float) -> dict[str, list[dict[str, Any]]]:
    """sreport's input for [start, end): each (account, user)'s CPU-, GPU- and memory-seconds in the
    window, and each (account, CPUs, GPUs) job size's, with their job counts (a job counted where it
    started in the window, as sreport's job reports count)."""
    by_assoc: dict[tuple[Any, ...], dict[str, Any]] = {}
    by_size: dict[tuple[Any, ...], dict[str, Any]] = {}
    for run in runs_between(store, start, end, now):
        seconds = max(0.0, min(run.end_time, end, now) - max(run.start_time, start))
        started_here = start <= run.start_time < end
        for table, key, base in ((by_assoc, (run.account, run.user), {"account": run.account, "user": run.user}),
                                 (by_size, (run.account, run.cpus, run.gpus),
                                  {"account": run.account, "cpus": run.cpus, "gpus": run.gpus})):
            row = table.setdefault(key, {**base, "cpu_seconds": 0.0, "gpu_seconds": 0.0, "mem_mb_seconds": 0.0,
                                         "jobs": 0})
            row["cpu_seconds"] += run.cpus * seconds
            row["gpu_seconds"] += run.gpus * seconds
            row["mem_mb_seconds"] += run.mem_mb * seconds
            row["jobs"] += started_here
    return {"assocs": list(by_assoc.values()), "sizes": list(by_size.values())}
