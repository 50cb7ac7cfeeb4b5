"""The store's reads for metrics and the dashboard: tallies of jobs, one page of a listing, GPU
hours over a period. Each is one query whose cost does not grow with what is shown: a page of 50
jobs of 100,000 reads 50 rows (and counts the rest in the index), a tally reads one row per group.

A listing's row is turned into a record by the same code as :meth:`Store.get_jobs`'s light listing
(``queries.LISTED_COLUMNS``, ``queries.listed_record``), so that a page shows a job as psqueue does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, func, literal, or_, select

from pslurm.controller.store.queries import ACTIVE_STATES, LISTED_COLUMNS, Store, fill_nodes, listed_record
from pslurm.controller.store.schema import jobs
from pslurm.core.jobspec import JobRecord
from pslurm.core.states import JobState

QUEUE, RECENT = "queue", "recent"  # a page's order: running first then pending by priority; newest first


@dataclass(frozen=True)
class JobTally:
    """How many jobs share a state, hold, user, account and partition; of them, how many started."""

    state: JobState
    held: bool
    user: str
    account: str
    partition: str
    jobs: int
    started: int


@dataclass(frozen=True)
class GpuHours:
    """A user's use of an account over a period: GPU-seconds and CPU-seconds within it, and jobs."""

    user: str
    account: str
    gpu_seconds: float
    cpu_seconds: float
    jobs: int


def job_tallies(store: Store, ended_since: float) -> list[JobTally]:
    """Jobs pending, running or completing, and those that ended at or after ``ended_since`` (what
    slurmctld still holds: ended jobs stay MinJobAge), counted by state, hold, user, account, partition."""
    c = jobs.c
    held = c.hold != ""
    query = (select(c.state, held.label("held"), c.user_name, c.account, c.partition, func.count().label("n"),
                    func.count(c.start_time).label("started"))
             .where(or_(c.state.in_(["PENDING", *ACTIVE_STATES]), c.end_time >= ended_since))
             .group_by(c.state, held, c.user_name, c.account, c.partition))
    with store.engine.connect() as conn:
        return [JobTally(JobState(r.state), bool(r.held), r.user_name, r.account or "", r.partition, int(r.n),
                         int(r.started)) for r in conn.execute(query)]


def _page_filter(states: Sequence[JobState], users: Sequence[str]) -> list[Any]:
    c = jobs.c
    where: list[Any] = [c.state.in_([s.value for s in states])] if states else []
    if users:
        where.append(c.user_name.in_(list(users)))
    return where


def job_page(store: Store, states: Sequence[JobState] = (), users: Sequence[str] = (), offset: int = 0,
             limit: int = 50, order: str = QUEUE) -> tuple[list[JobRecord], int]:
    """One page of the jobs in ``states`` (all when empty) of ``users`` (all when empty), as light
    records (no stored request), and how many jobs match in all.

    ``QUEUE``: running and completing jobs first, then pending ones by priority (highest first), then
    the rest, each by id; ``RECENT``: newest first."""
    c = jobs.c
    where = _page_filter(states, users)
    if order == QUEUE:
        rank = case((c.state.in_(list(ACTIVE_STATES)), literal(0)), (c.state == "PENDING", literal(1)),
                    else_=literal(2))
        ordering: list[Any] = [rank, func.coalesce(c.admin_priority, c.priority).desc(), c.job_id]  # as shown
    else:
        ordering = [c.job_id.desc()]
    query = select(*LISTED_COLUMNS).where(*where).order_by(*ordering).offset(max(0, offset)).limit(max(1, limit))
    specs: dict[Any, Any] = {}
    with store.engine.connect() as conn:
        found = [listed_record(specs, row) for row in conn.execute(query)]
        fill_nodes(conn, found)
        total = int(conn.execute(select(func.count()).select_from(jobs).where(*where)).scalar() or 0)
    return found, total


def _smaller(a: Any, b: Any) -> Any:
    return case((a < b, a), else_=b)


def _larger(a: Any, b: Any) -> Any:
    return case((a > b, a), else_=b)


def gpu_hours(store: Store, start: float, end: float, now: float) -> list[GpuHours]:
    """Each (user, account)'s GPU- and CPU-seconds within [start, end]: every run that overlaps it,
    clipped to it (a running job up to ``now``); a multi-node job's GPUs on each of its nodes, its
    CPUs (``jobs.cpus``: its tasks' on all its nodes) once."""
    c = jobs.c
    ran_until = _smaller(func.coalesce(c.end_time, now), end)
    seconds = ran_until - _larger(c.start_time, start)
    # "0,1,3" holds one comma fewer than GPUs: counted in SQL, so that the rows are never read one by one
    gpus = case((c.gpu_indices == "", 0),
                else_=func.length(c.gpu_indices) - func.length(func.replace(c.gpu_indices, ",", "")) + 1)
    query = (select(c.user_name, c.account, func.sum(seconds * gpus * c.num_nodes).label("gpu"),
                    func.sum(seconds * c.cpus).label("cpu"), func.count().label("n"))
             .where(c.start_time.is_not(None), c.start_time < end,
                    or_(c.end_time.is_(None), c.end_time > start))
             .group_by(c.user_name, c.account).order_by(c.user_name, c.account))
    with store.engine.connect() as conn:
        return [GpuHours(r.user_name, r.account or "", float(r.gpu or 0.0), float(r.cpu or 0.0), int(r.n))
                for r in conn.execute(query)]
