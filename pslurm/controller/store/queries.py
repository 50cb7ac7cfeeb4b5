"""Every query pslurm makes. The store package (this module, its records, writer, schema and
migrations) is the only code that imports SQLAlchemy.

A job's state changes only through the lifecycle's operations (``pslurm.core.lifecycle``): the
store reads the job's flags, the lifecycle decides the change, and the store writes it as a
compare-and-set (``UPDATE jobs ... WHERE job_id=:id AND state=:read``) with a ``job_events`` row
naming the operation, in one transaction. Node states are compare-and-set on their own table.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import threading
from collections.abc import Callable, Collection, Container, Hashable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    String,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from pslurm.controller.store.assoc import AssocStore
from pslurm.controller.store.records import (
    ActiveRun,
    Allocation,
    JobEvent,
    JobPage,
    NewStep,
    NodeShare,
    QueuedJob,
    RefRow,
    RunEnd,
    StepEnd,
    StepRecord,
    UsageRecord,
    gres_from_column,
    gres_to_column,
    held_text,
    indices_from_column,
    indices_to_column,
    job_from_row,
    light_spec,
    node_from_row,
    row_nodes,
    step_from_row,
    usage_record,
)
from pslurm.controller.store.schema import job_events, job_nodes, job_steps, jobs, nodes
from pslurm.controller.store.specs import SpecReader, insert_spec, json_ready, merged_overrides, spec_columns
from pslurm.controller.store.writer import GroupCommit
from pslurm.core import lifecycle
from pslurm.core.arrays import format_ranges
from pslurm.core.gres import GresRequest
from pslurm.core.hostlists import expand
from pslurm.core.jobfields import FIELDS as JOB_FIELDS
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.lifecycle import Change, JobFlags
from pslurm.core.node import NodeRecord
from pslurm.core.states import NODE_TRANSITIONS, InvalidTransition, JobReason, JobState, NodeState

ACTIVE_STATES = (JobState.RUNNING.value, JobState.SUSPENDED.value, JobState.COMPLETING.value)  # they hold their nodes
_FINAL = tuple(s.value for s in JobState if s.is_final)


MIGRATION_LOCK = 0x70736C75  # the advisory lock key under which PostgreSQL's schema is migrated ("pslu")
_IN_CHUNK = 1000  # ids per IN list: well under SQLite's and PostgreSQL's bound-parameter limits


class Store:
    """The job queue and node table in SQL (SQLite with WAL by default, or PostgreSQL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = _make_engine(url)
        self._writer = GroupCommit(self.engine)  # every write: one writer, concurrent ones share a commit
        self._listeners: list[Callable[[Collection[int]], None]] = []
        self.assoc = AssocStore(self.engine, self._writer)  # sacctmgr's associations (store/assoc.py)
        # The node table as this Store last read or wrote it: every node write goes through this object
        # (the node monitor's), so reads need no query (a pass, a heartbeat, a listing at 1000 nodes).
        # A controller that takes control (again: another wrote meanwhile) starts with ensure_nodes,
        # which drops it.
        self._node_lock = threading.Lock()
        self._nodes: dict[str, NodeRecord] | None = None  # by name, in name order; None: read it again
        self._node_writes = 0  # a read that overlapped a write is not kept

    def subscribe(self, listener: Callable[[Collection[int]], None]) -> None:
        """Call ``listener(job_ids)`` after each committed write that may have changed those jobs
        (state, node, reason, priority, hold...): how waiters learn of their job without polling."""
        self._listeners.append(listener)

    def _jobs_changed(self, job_ids: Collection[int]) -> None:
        if job_ids:
            for listener in self._listeners:
                listener(job_ids)

    # -- schema ---------------------------------------------------------------------------

    def migrate(self) -> None:
        """Bring the schema to the newest Alembic revision (idempotent); raises StoreTooNew for a
        store a newer release migrated (:mod:`pslurm.controller.store.revisions`)."""
        from pslurm.controller.store import revisions  # Alembic: only when psctld starts

        with self.engine.begin() as conn:
            if conn.dialect.name == "postgresql":  # controllers starting together migrate one at a time
                conn.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK)))
            revisions.upgrade(conn)

    def fence(self, check: Callable[[Connection], None] | None) -> None:
        """Run ``check`` first in every write transaction (the controller lease's token check,
        :mod:`pslurm.controller.store.lease`): when it raises Fenced, nothing of that transaction is
        written. None: no fence (one controller)."""
        self._writer.fence = check

    def close(self) -> None:
        self.engine.dispose()

    # -- jobs -----------------------------------------------------------------------------

    def submit(self, spec: JobSpec, partition: str, time_limit: int | None, now: float, *,
               requeue: bool = False, array_ids: Sequence[int] = (), throttle: int | None = None,
               assoc_id: int = 0) -> int:
        """Store a new PENDING job (or one row per array task, the array's id being the first task's
        job id) and its submit events in one transaction; return its id (the array's id). ``assoc_id``:
        the association it is charged to (0: none)."""
        values = dict(
            spec_columns(spec), partition=partition,
            state=JobState.PENDING.value, reason=JobReason.JOB_HELD_USER if spec.hold else JobReason.NONE,
            reason_prev=JobReason.JOB_HELD_USER if spec.hold else JobReason.NONE,
            submit_time=now, time_limit=time_limit, gpu_indices="",
            exit_code=0, exit_signal=0, cancel_requested=False, spec="", spec_overrides="",
            hold="user" if spec.hold else "", requeue=requeue,
            requeue_requested=False, restarts=0, priority=0, array_max_running=throttle,
            array_job_id=None, array_task_id=array_ids[0] if array_ids else None, assoc_id=assoc_id or None,
        )

        def work(conn: Connection) -> list[int]:
            # the request once, whatever the number of tasks (store/specs.py)
            values["spec_id"] = insert_spec(conn, spec)
            # parameters, not .values(): the compiled statement is cached, no per-call clause building
            job_id = int(conn.execute(insert(jobs), values).inserted_primary_key[0])  # type: ignore[index]
            ids = [job_id]
            if array_ids:
                conn.execute(update(jobs).where(jobs.c.job_id == job_id).values(array_job_id=job_id))
                rest = [{**values, "array_job_id": job_id, "array_task_id": task} for task in array_ids[1:]]
                if rest:
                    rows = conn.execute(insert(jobs).returning(jobs.c.job_id, sort_by_parameter_order=True), rest)
                    ids.extend(int(r[0]) for r in rows)
            conn.execute(insert(job_events), [
                dict(job_id=i, time=now, from_state=None, to_state=JobState.PENDING.value, detail="submit", op="submit")
                for i in ids])
            return ids

        ids = self._writer.write(work)
        self._jobs_changed(ids)  # the scheduler's queue learns of them so (nobody waits for them yet)
        return ids[0]

    # -- the lifecycle's operations (pslurm.core.lifecycle): each one compare-and-set plus an
    # event row named after it. Nothing else writes a job's state, hold, or cancel/requeue flags.

    def start_jobs(self, placements: Sequence[tuple[int, str, Sequence[int]]], now: float,
                   time_limits: Mapping[int, int] | None = None,
                   shares: Mapping[int, Sequence[NodeShare]] | None = None) -> list[int]:
        """``start`` a pass's placements in one transaction; returns the ids that started (a job
        cancelled or held meanwhile is skipped). ``time_limits``: the limit some jobs start with
        instead of theirs (a job with a deadline and no limit: until its deadline). ``shares``: a
        multi-node job's nodes, all of them in order (the first is its placement's node); a job not
        in it holds its one node (one ``job_nodes`` row: the job's CPUs, memory and GPUs there)."""
        limits = time_limits or {}
        multi = shares or {}

        def work(conn: Connection) -> list[int]:
            started = []
            for job_id, node, gpu_indices in placements:
                share = multi.get(job_id, ())
                more = tuple(s.node for s in share[1:])
                try:
                    _apply(conn, job_id, now, functools.partial(lifecycle.start, node=node,
                                                                gpu_indices=tuple(gpu_indices), now=now,
                                                                time_limit=limits.get(job_id), more=more))
                except InvalidTransition:
                    continue
                conn.execute(_CLEAR_NODES, {"b_job": job_id})  # an earlier run's (a requeued job)
                if share:
                    conn.execute(insert(job_nodes), [
                        dict(job_id=job_id, idx=i, node=s.node, cpus=s.cpus, mem_mb=s.mem_mb,
                             gpu_indices=indices_to_column(s.gpu_indices)) for i, s in enumerate(share)])
                else:
                    conn.execute(_ONE_NODE, {"b_job": job_id})
                started.append(job_id)
            return started

        started = self._writer.write(work)
        self._jobs_changed(started)
        return started

    def launch_failed(self, job_id: int, node: str, restarts: int, why: str, now: float) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.launch_failed(job, node, restarts, why, now))

    def finish(self, job_id: int, node: str, restarts: int, reported: JobState, exit_code: int, exit_signal: int,
               now: float, usage: dict[str, float | None] | None = None) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.finish(job, node, restarts, reported, exit_code,
                                                                      exit_signal, now, usage))

    def end_runs(self, ends: Sequence[RunEnd]) -> list[Change | InvalidTransition]:
        """Apply an agent's batch of ends (``finish``, or ``launch_failed`` for a run that never
        started) in one transaction: one commit for the lot. Each end is its own compare-and-set;
        one the lifecycle refuses (a repeated report, an earlier run) is returned as its
        InvalidTransition, with nothing written for it, and the others go on."""
        return self._apply_each([(e.job_id, e.end_time, _end_decision(e)) for e in ends])

    def cancel(self, job_id: int, now: float, detail: str = "cancelled",
               reason: JobReason | None = None) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.cancel(job, now, detail, reason))

    def cancel_jobs(self, job_ids: Sequence[int], now: float, detail: str = "cancelled"
                    ) -> list[Change | InvalidTransition]:
        """``cancel`` each job in one transaction (pscancel of a whole array: one commit, not one per
        task). Each is its own compare-and-set; one the lifecycle refuses (ended meanwhile) comes back
        as its InvalidTransition, nothing written for it, and the others go on."""
        return self._apply_each([(job_id, now, lambda job: lifecycle.cancel(job, now, detail)) for job_id in job_ids])

    def _apply_each(self, operations: Sequence[tuple[int, float, Callable[[JobFlags], Change]]]
                    ) -> list[Change | InvalidTransition]:
        """Lifecycle operations (job id, time, decision) in one transaction: each its own compare-and-set,
        a refused one returned as its InvalidTransition (nothing written for it) while the others go on."""
        def work(conn: Connection) -> list[Change | InvalidTransition]:
            out: list[Change | InvalidTransition] = []
            for job_id, now, decide in operations:
                try:
                    out.append(_apply(conn, job_id, now, decide))
                except InvalidTransition as exc:
                    out.append(exc)
            return out

        if not operations:
            return []
        outcome = self._writer.write(work)
        self._jobs_changed([op[0] for op, o in zip(operations, outcome, strict=True) if not isinstance(o, Exception)])
        return outcome

    def relinquish(self, job_id: int, exit_code: int, now: float) -> Change:
        """psalloc's end (lifecycle.relinquish): COMPLETING until the agent reports the run's end."""
        return self._apply(job_id, now, lambda job: lifecycle.relinquish(job, exit_code, now))

    def request_requeue(self, job_id: int, now: float, hold: str = "") -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.request_requeue(job, now, hold))

    def requeue(self, job_id: int, now: float, detail: str, hold: str = "") -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.requeue(job, now, detail, hold=hold))

    def suspend(self, job_id: int, now: float) -> Change:
        """pscontrol suspend (lifecycle.suspend): RUNNING -> SUSPENDED."""
        return self._apply(job_id, now, lambda job: lifecycle.suspend(job, now))

    def resume(self, job_id: int, now: float) -> Change:
        """pscontrol resume (lifecycle.resume): SUSPENDED -> RUNNING, its suspended time counted."""
        return self._apply(job_id, now, lambda job: lifecycle.resume(job, now))

    def hold(self, job_id: int, now: float, by_operator: bool) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.hold(job, by_operator))

    def release(self, job_id: int, now: float, by_operator: bool) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.release(job, by_operator))

    def node_lost(self, job_id: int, node: str, now: float, why: str) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.node_lost(job, node, now, why))

    def deadline(self, job_id: int, now: float, why: str) -> Change:
        return self._apply(job_id, now, lambda job: lifecycle.deadline(job, now, why))

    def _apply(self, job_id: int, now: float, decide: Callable[[JobFlags], Change]) -> Change:
        """Read the job's flags, let the lifecycle decide, write the change and its event, in one
        transaction. Raises InvalidTransition (nothing written) when the lifecycle refuses."""
        change = self._writer.write(lambda conn: _apply(conn, job_id, now, decide))
        self._jobs_changed((job_id,))
        return change

    # -- steps: the lifecycle's step operations (create_step, end_step), each in one transaction;
    # a job's end ends its RUNNING steps in the job's own transaction (see _apply).

    def create_step(self, job_id: int, restarts: int, new: NewStep, now: float) -> StepRecord:
        """Create the job's next step RUNNING (ids ``new.first_id``, then up in creation order), in one transaction
        that reads the job's state and run and its running steps: only in this run of the job, while
        it is RUNNING, and (unless ``new.overlap``) while no non-overlapping step runs in it. Raises
        InvalidTransition (lifecycle.JOB_ENDED) or lifecycle.StepBusy, nothing written."""
        s = job_steps.c

        def work(conn: Connection) -> StepRecord:
            flags = _read_flags(conn, job_id)
            if flags.restarts != restarts:
                raise InvalidTransition(lifecycle.JOB_ENDED)
            running = [step_from_row(r) for r in conn.execute(
                select(job_steps).where(s.job_id == job_id, s.state == JobState.RUNNING.value))]
            lifecycle.create_step(flags, True, ())  # the job RUNNING (JOB_ENDED); what is free: place_step
            nodes = tuple(expand(new.nodes))
            want = lifecycle.StepHold(nodes, new.node_cpus or tuple(0 for _ in nodes), (), new.overlap, new.exact)
            held = [lifecycle.StepHold(tuple(expand(r.nodes)), r.node_cpus, r.node_gpus, r.overlap, r.exact)
                    for r in running]
            gpus = lifecycle.place_step(
                want, new.gpus_wanted or tuple(None for _ in nodes), dict(zip(nodes, new.alloc_cpus, strict=False)),
                dict(zip(nodes, new.alloc_gpus, strict=False)), held)
            cpus = new.node_cpus if new.exact else new.alloc_cpus
            last = conn.execute(select(func.max(s.step_id)).where(s.job_id == job_id)).scalar()
            step_id = new.first_id if last is None else int(last) + 1
            step = StepRecord(job_id, step_id, new.name, JobState.RUNNING, new.nodes,
                              new.ntasks, new.cpus, new.gres, new.overlap, tuple(new.argv), new.workdir, now,
                              exact=new.exact, node_cpus=cpus, node_gpus=gpus if new.alloc_gpus else ())
            conn.execute(insert(job_steps), dict(
                job_id=job_id, step_id=step.step_id, name=step.name, state=step.state.value, nodes=step.nodes,
                ntasks=step.ntasks, cpus=step.cpus, gres=step.gres, overlap=step.overlap,
                argv=json.dumps(list(step.argv)), workdir=step.workdir, start_time=now, end_time=None,
                exit_code=0, exit_signal=0, exact=step.exact, node_cpus=",".join(map(str, step.node_cpus)),
                node_gpus=held_text(step.node_gpus)))
            return step

        step = self._writer.write(work)
        self._jobs_changed((job_id,))  # a step's waiters wait on its job's notices
        return step

    def end_steps(self, ends: Sequence[StepEnd]) -> list[StepRecord | InvalidTransition]:
        """End RUNNING steps (an agent's batch of reports, or the controller's decision) in one
        transaction. Each end is guarded (lifecycle.end_step: the step RUNNING, ``node`` one of its
        nodes); one refused (a repeated report, an unknown step) comes back as its InvalidTransition,
        nothing written for it, and the others go on. Returns each step as ended."""
        def work(conn: Connection) -> list[StepRecord | InvalidTransition]:
            out: list[StepRecord | InvalidTransition] = []
            for e in ends:
                try:
                    out.append(_end_step(conn, e))
                except InvalidTransition as exc:
                    out.append(exc)
            return out

        if not ends:
            return []
        outcome = self._writer.write(work)
        self._jobs_changed(sorted({e.job_id for e, o in zip(ends, outcome, strict=True)
                                   if not isinstance(o, InvalidTransition)}))
        return outcome

    def get_step(self, job_id: int, step_id: int) -> StepRecord | None:
        s = job_steps.c
        with self.engine.connect() as conn:
            row = conn.execute(select(job_steps).where(s.job_id == job_id, s.step_id == step_id)).first()
        return step_from_row(row) if row is not None else None

    def steps(self, job_ids: Collection[int]) -> dict[int, list[StepRecord]]:
        """The steps of these jobs, by job id, in step order (a job without steps: absent)."""
        s = job_steps.c
        out: dict[int, list[StepRecord]] = {}
        with self.engine.connect() as conn:
            for part in _chunks(job_ids):
                query = select(job_steps).where(s.job_id.in_(part)).order_by(s.job_id, s.step_id)
                for row in conn.execute(query):
                    out.setdefault(row.job_id, []).append(step_from_row(row))
        return out

    def running_steps_on(self, node: str) -> list[StepRecord]:
        """The steps the controller holds RUNNING with tasks on ``node``: what its agent should run."""
        with self.engine.connect() as conn:
            return [step for step in map(step_from_row, conn.execute(_STEPS_ON, {"b_node": node}))
                    if node in expand(step.nodes)]

    # -- what is not the lifecycle: a pass's notes on pending jobs, operators' settings ---------

    def update_pending(self, changes: dict[int, tuple[str, int, float | None, float | None]]) -> None:
        """Record each pending job's (reason, priority, expected start, eligible time) from a scheduling
        pass; no event. A reason other than the job's ends its description (state_desc); one that accounting
        keeps (JobReason.is_kept_wait) becomes the reason it waited for (reason_prev)."""
        if not changes:
            return
        params = [{"b_id": k, "b_reason": r, "b_prio": p, "b_est": e, "b_eligible": t,
                   "b_kept": r if JobReason.parse(r).is_kept_wait else None}
                  for k, (r, p, e, t) in changes.items()]
        self._writer.write(lambda conn: conn.execute(_UPDATE_PENDING, params))
        self._jobs_changed(list(changes))

    def set_pending_fields(self, job_ids: Sequence[int], **values: Any) -> list[int]:
        """Set a pending job's nice or operator priority (not its state, hold or flags: those are
        the lifecycle's); returns the ids that changed (those still pending)."""
        if not job_ids:
            return []
        if not values.keys() <= {"nice", "admin_priority", "priority"}:
            raise ValueError(f"not a pending job's setting: {sorted(values)}")
        query = select(jobs.c.job_id).where(jobs.c.job_id.in_(list(job_ids)), jobs.c.state == "PENDING")

        def work(conn: Connection) -> list[int]:
            ids = [r.job_id for r in conn.execute(query)]
            if ids:
                conn.execute(update(jobs).where(jobs.c.job_id.in_(ids)).values(**values))
            return ids

        changed = self._writer.write(work)
        self._jobs_changed(changed)
        return changed

    def update_fields(self, job_id: int, state: JobState, restarts: int, now: float, detail: str,
                      own: Mapping[str, Any], request: Mapping[str, Any]) -> bool:
        """pscontrol update JobId=: set fields that are not the job's state (``own``: the job's own
        values, its partition, time limit in force and priority; ``request``: fields of its request,
        JobSpec's names and values, kept as the job's own overrides of the request it shares with its
        array's other tasks, store/specs.py, and its columns set from the request so changed) as one
        compare-and-set on the state and run the caller read, so that a field only a pending job may
        change is never written once it started, plus an ``update`` event row. False, with nothing
        written, when the job changed meanwhile."""
        if not own.keys() <= _UPDATABLE or not request.keys() <= _UPDATABLE_REQUEST:
            raise ValueError(f"not a job's updatable field: {sorted({*own, *request})}")
        c = jobs.c
        same = (c.job_id == job_id, c.state == state.value, c.restarts == restarts)

        def work(conn: Connection) -> bool:
            row = conn.execute(select(c.spec_id, c.spec_overrides).where(*same)).first()
            if row is None:
                return False
            values = dict(own)
            if request:
                values["spec_overrides"] = merged_overrides(row.spec_overrides, json_ready(request))
                reader = SpecReader()
                reader.load(conn, [row.spec_id])
                values.update(spec_columns(reader.spec(row.spec_id, values["spec_overrides"])))
                if "requeue" in request:  # the job's own flag follows its request's
                    values["requeue"] = bool(request["requeue"])
                if "array" in request:  # the %N throttle
                    throttle = str(request["array"]).partition("%")[2]
                    values["array_max_running"] = int(throttle) if throttle else None
            result = conn.execute(update(jobs).where(*same).values(**values))
            if result.rowcount != 1:
                return False
            conn.execute(_ADD_EVENT, dict(job_id=job_id, time=now, from_state=state.value, to_state=state.value,
                                          detail=detail[:256], op="update"))
            return True

        changed = self._writer.write(work)
        if changed:
            self._jobs_changed((job_id,))
        return bool(changed)

    def resolve(self, job_id: int, tasks: Container[int] | None) -> list[int]:
        """Job ids named by ``14`` (the job, or every task of array 14) or ``14_[tasks]``: the array's own
        tasks (read by its index: at most its size, itself at most MaxArraySize) that ``tasks`` holds, so
        that a selector costs what the array holds, whatever it spans (``1_[0-10000000]``)."""
        c = jobs.c
        with self.engine.connect() as conn:
            if tasks is None:
                query = select(c.job_id).where(or_(c.job_id == job_id, c.array_job_id == job_id))
                return sorted(r.job_id for r in conn.execute(query))
            query = select(c.job_id, c.array_task_id).where(c.array_job_id == job_id)
            return sorted(r.job_id for r in conn.execute(query) if r.array_task_id in tasks)

    def jobs_with_ids(self, job_ids: Collection[int], light: bool = False) -> list[JobRecord]:
        """The jobs with exactly these ids (an array's id is its first task here, not the array), in id
        order, read in chunks; ``light`` as in :meth:`get_jobs`."""
        found: list[JobRecord] = []
        reader = SpecReader()
        with self.engine.connect() as conn:
            for part in _chunks(job_ids):
                rows = list(conn.execute(select(*(LISTED_COLUMNS if light else _ROW)).where(jobs.c.job_id.in_(part))
                                         .order_by(jobs.c.job_id)))
                found.extend(self._records(conn, rows, light, reader))
        return found

    def count_active(self, user: str | None = None, states: Sequence[JobState] = ()) -> int:
        """Jobs pending, running or completing (or in ``states``), of one user or all."""
        wanted = [s.value for s in states] or ["PENDING", *ACTIVE_STATES]
        query = select(func.count()).select_from(jobs).where(jobs.c.state.in_(wanted))
        if user is not None:
            query = query.where(jobs.c.user_name == user)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def active_by_assoc(self) -> list[tuple[int, str, str, int]]:
        """Jobs pending, running or completing, counted per (association id, QOS, user): what the
        association and QOS submit limits count (controller/acct_policy.py)."""
        c = jobs.c
        query = (select(c.assoc_id, c.qos, c.user_name, func.count()).where(c.state.in_(["PENDING", *ACTIVE_STATES]))
                 .group_by(c.assoc_id, c.qos, c.user_name))
        with self.engine.connect() as conn:
            return [(r[0] or 0, r[1] or "", r[2], int(r[3])) for r in conn.execute(query)]

    def gpu_memory_peak(self, user: str, name: str, runs: int = 10) -> int | None:
        """The largest GPU memory peak (MB) of the last ``runs`` ended jobs named ``name`` of ``user``
        that had one measured: the profile ``--gpu-mem=auto`` packs by. None without history."""
        c = jobs.c
        recent = (select(c.peak_gpu_memory_mb.label("peak"))
                  .where(c.user_name == user, c.name == name, c.peak_gpu_memory_mb.is_not(None),
                         c.end_time.is_not(None))
                  .order_by(c.end_time.desc()).limit(runs).subquery())
        with self.engine.connect() as conn:
            found = conn.execute(select(func.max(recent.c.peak))).scalar()
        return None if found is None else int(found)

    def refs(self, job_ids: Iterable[int]) -> list[RefRow]:
        """The jobs with these ids and every task of arrays with these ids, for dependencies."""
        ids = list(set(job_ids))
        if not ids:
            return []
        cols = (jobs.c.job_id, jobs.c.state, jobs.c.start_time, jobs.c.array_job_id, jobs.c.array_task_id,
                jobs.c.user_name, jobs.c.name)
        out: list[RefRow] = []
        with self.engine.connect() as conn:
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                query = select(*cols).where(or_(jobs.c.job_id.in_(part), jobs.c.array_job_id.in_(part)))
                out.extend(RefRow(r.job_id, JobState(r.state), r.start_time is not None, r.array_job_id,
                                  r.array_task_id, r.user_name, r.name) for r in conn.execute(query))
        return out

    def active_named(self, names: Iterable[str]) -> list[RefRow]:
        """Pending, running and completing jobs with these names (singleton dependencies)."""
        names = list(set(names))
        if not names:
            return []
        query = select(jobs.c.job_id, jobs.c.state, jobs.c.start_time, jobs.c.array_job_id, jobs.c.array_task_id,
                       jobs.c.user_name, jobs.c.name).where(jobs.c.name.in_(names),
                                                            jobs.c.state.in_(["PENDING", *ACTIVE_STATES]))
        with self.engine.connect() as conn:
            return [RefRow(r.job_id, JobState(r.state), r.start_time is not None, r.array_job_id, r.array_task_id,
                           r.user_name, r.name) for r in conn.execute(query)]

    def finished_usage(self, since: float, after_event: int = 0) -> tuple[list[UsageRecord], int]:
        """Runs that ended at or after ``since`` and whose end was recorded after event
        ``after_event`` (fair share's input, read incrementally); and the last such event's id.

        Event ids grow in commit order because the controller is the store's only writer and
        writes one transaction at a time, so a reader that passes the id back never misses an end."""
        c, e = jobs.c, job_events.c
        query = (select(e.event_id, c.job_id, c.user_name, c.account, c.cpus, c.mem_mb, c.gpu_indices,
                        c.start_time, c.end_time, c.num_nodes, c.node_cpus)
                 .join_from(job_events, jobs, e.job_id == c.job_id)
                 .where(e.event_id > after_event, e.to_state.in_(_FINAL), c.end_time >= since,
                        c.start_time.is_not(None))
                 .order_by(e.event_id))
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [usage_record(r) for r in rows], rows[-1].event_id if rows else after_event

    def get_job(self, job_id: int, light: bool = False) -> JobRecord | None:
        """One job by its own id (not its array's other tasks); ``light`` as in :meth:`get_jobs`."""
        with self.engine.connect() as conn:
            row = conn.execute(select(*_ROW).where(jobs.c.job_id == job_id)).first()
            if row is None:
                return None
            if light:
                job = job_from_row(row, light_spec(row, {}))
            else:
                reader = SpecReader()
                reader.load(conn, (row.spec_id,))
                job = job_from_row(row, reader.spec(row.spec_id, row.spec_overrides))
            fill_nodes(conn, [job])
        return job

    def get_jobs(self, job_ids: Sequence[int] = (), users: Sequence[str] = (),
                 states: Sequence[JobState] = (), include_finished: bool = False,
                 since: float | None = None, light: bool = False, collapse_arrays: bool = False) -> list[JobRecord]:
        """Jobs in id order. Without ids or states, only active (pending, running, completing) ones
        unless ``include_finished``; ``since`` keeps jobs that ended after it or have not ended.

        ``light``: for listings (psqueue). The stored request (environment, script, command, work
        directory) is not read; the spec holds what the job's own columns say (name, user, partition,
        resources, account, nice, dependency). On a 100,000-job queue this is most of the read.

        ``collapse_arrays``: squeue's default view. The pending tasks of one array that share a
        reason come back as one record, their first task's, with ``collapsed_tasks`` naming them all
        (``0-999``); the grouping is done in SQL, so a queue of large pending arrays is read as a few rows.
        """
        c = jobs.c
        where = self._job_filter(job_ids, users, states, include_finished, since)
        columns = LISTED_COLUMNS if light else _ROW
        with self.engine.connect() as conn:
            if not collapse_arrays:
                rows = list(conn.execute(select(*columns).where(*where).order_by(c.job_id)))
            else:
                pending_task = (c.state == "PENDING") & c.array_job_id.is_not(None)
                groups = self._pending_task_groups(conn, where, pending_task)  # first task's job id -> its tasks
                rows = list(conn.execute(select(*columns).where(*where, ~pending_task)))
                firsts = list(groups)
                for i in range(0, len(firsts), _IN_CHUNK):
                    rows.extend(conn.execute(select(*columns).where(c.job_id.in_(firsts[i:i + _IN_CHUNK]))))
                rows.sort(key=lambda row: row.job_id)
            found = self._records(conn, rows, light)
        if collapse_arrays:
            for job in found:
                job.collapsed_tasks = groups.get(job.job_id, "")
        return found

    def job_page(self, job_ids: Sequence[int] = (), users: Sequence[str] = (), states: Sequence[JobState] = (),
                 include_finished: bool = False, since: float | None = None, light: bool = False, after: int = 0,
                 limit: int = 500) -> JobPage:
        """One page of :meth:`get_jobs` (not collapsed): the first ``limit`` jobs with an id above
        ``after``, and a key per job that records with the same request share (its ``job_specs`` row
        and overrides): a listing read page by page holds one page at a time, and says each request
        once however many pages its records span."""
        c = jobs.c
        where = self._job_filter(job_ids, users, states, include_finished, since)
        query = (select(*(LISTED_COLUMNS if light else _ROW)).where(*where, c.job_id > after)
                 .order_by(c.job_id).limit(limit))
        with self.engine.connect() as conn:
            rows = list(conn.execute(query))
            found = self._records(conn, rows, light)
        keys: list[Hashable] = ([tuple(row[_LISTED_OWN:]) for row in rows] if light
                                else [(row.spec_id, row.spec_overrides, row.nice) for row in rows])
        return JobPage(found, keys, rows[-1].job_id if rows else after, len(rows) == limit)

    @staticmethod
    def _records(conn: Connection, rows: Sequence[Any], light: bool, reader: SpecReader | None = None
                 ) -> list[JobRecord]:
        """The records of ``rows`` (of :data:`LISTED_COLUMNS` when ``light``, else of :data:`_ROW`), each request
        read once for the records that share it (an array's tasks: one JobSpec), their nodes filled in."""
        if light:
            specs: dict[Any, Any] = {}  # the tasks of an array share one spec: built once (and GRES parsed once)
            found = [listed_record(specs, row) for row in rows]
        else:
            reader = reader or SpecReader()
            reader.load(conn, (row.spec_id for row in rows))
            found = [job_from_row(row, reader.spec(row.spec_id, row.spec_overrides)) for row in rows]
        fill_nodes(conn, found)
        return found

    @staticmethod
    def _job_filter(job_ids: Sequence[int], users: Sequence[str], states: Sequence[JobState],
                    include_finished: bool, since: float | None) -> list[Any]:
        c = jobs.c
        where: list[Any] = []
        if job_ids:  # an array's id names every task of it
            where.append(or_(c.job_id.in_(list(job_ids)), c.array_job_id.in_(list(job_ids))))
        if users:
            where.append(c.user_name.in_(list(users)))
        if states:
            where.append(c.state.in_([s.value for s in states]))
        elif not include_finished and not job_ids:
            where.append(c.state.in_(["PENDING", *ACTIVE_STATES]))
        if since is not None:
            where.append(c.end_time.is_(None) | (c.end_time >= since))
        return where

    @staticmethod
    def _pending_task_groups(conn: Connection, where: list[Any], pending_task: Any) -> dict[int, str]:
        """The pending tasks of each array grouped by reason: the group's first job id -> the task ids
        it stands for (``0-999``; "" for a group of one, shown as itself). A group without gaps is a
        range from its aggregate alone; only gapped groups read their tasks' ids."""
        c = jobs.c
        query = (select(c.array_job_id, c.reason, func.min(c.job_id).label("first"), func.count().label("n"),
                        func.min(c.array_task_id).label("lo"), func.max(c.array_task_id).label("hi"))
                 .where(*where, pending_task).group_by(c.array_job_id, c.reason))
        out: dict[int, str] = {}
        gapped: dict[tuple[int, str], tuple[int, list[int]]] = {}  # (array, reason) -> (first job id, tasks)
        for g in conn.execute(query):
            if g.n == 1:
                out[g.first] = ""
            elif g.hi - g.lo + 1 == g.n:
                out[g.first] = f"{g.lo}-{g.hi}"
            else:
                out[g.first] = ""  # filled in below
                gapped[(g.array_job_id, g.reason)] = (g.first, [])
        if gapped:
            rows = conn.execute(select(c.array_job_id, c.reason, c.array_task_id).where(
                *where, pending_task, c.array_job_id.in_({aid for aid, _ in gapped})))
            for r in rows:
                if (r.array_job_id, r.reason) in gapped:
                    gapped[(r.array_job_id, r.reason)][1].append(r.array_task_id)
            for first, tasks in gapped.values():
                out[first] = format_ranges(tasks)
        return out

    def queue(self, limit: int | None = None, job_ids: Collection[int] | None = None) -> list[QueuedJob]:
        """Pending jobs (the first ``limit`` by id; of ``job_ids`` only, when given) as the scheduler
        needs them: no spec to decode."""
        if job_ids is not None:
            return [q for part in _chunks(job_ids) for q in self._queue(None, part)]
        return self._queue(limit, None)

    def _queue(self, limit: int | None, job_ids: list[int] | None) -> list[QueuedJob]:
        c = jobs.c
        query = (select(c.job_id, c.partition, c.cpus, c.mem_mb, c.gres, c.reason, c.user_name, c.name, c.account,
                        c.nice, c.submit_time, c.time_limit, c.dependency, c.kill_on_invalid_dep, c.array_job_id,
                        c.array_task_id, c.array_max_running, c.hold, c.admin_priority, c.priority,
                        c.start_estimate, c.req_nodes, c.exc_nodes, c.eligible_time, c.begin_time, c.deadline,
                        c.num_nodes, c.node_cpus, c.req_features, c.exclusive, c.assoc_id, c.qos)
                 .where(c.state == "PENDING").order_by(c.job_id))
        if job_ids is not None:
            query = query.where(c.job_id.in_(job_ids))
        if limit is not None:
            query = query.limit(limit)
        gres_cache: dict[str, tuple[GresRequest, ...]] = {}
        out = []
        with self.engine.connect() as conn:
            for r in conn.execute(query):
                gres = gres_cache.get(r.gres)
                if gres is None:
                    gres = gres_cache[r.gres] = gres_from_column(r.gres)
                out.append(QueuedJob(r.job_id, r.partition, r.cpus, r.mem_mb, gres, r.reason, r.user_name, r.name,
                                     r.account, r.nice, r.submit_time, r.time_limit, r.dependency,
                                     bool(r.kill_on_invalid_dep), r.array_job_id, r.array_task_id,
                                     r.array_max_running, r.hold, r.admin_priority, r.priority, r.start_estimate,
                                     r.req_nodes, r.exc_nodes, r.eligible_time, r.begin_time, r.deadline,
                                     r.num_nodes or 1, indices_from_column(r.node_cpus), r.req_features,
                                     bool(r.exclusive), r.assoc_id or 0, r.qos or ""))
        return out

    def allocations(self, job_ids: Collection[int] | None = None) -> list[Allocation]:
        """What RUNNING and COMPLETING jobs (of ``job_ids`` only, when given) hold, one Allocation per
        (job, node) from ``job_nodes``: the base of every free-resource figure."""
        c, n = jobs.c, job_nodes.c
        query = (select(c.job_id, n.node, n.cpus, n.mem_mb, n.gpu_indices, c.user_name, c.account, c.start_time,
                        c.time_limit, c.array_job_id, c.gres, c.assoc_id, c.qos)
                 .join_from(jobs, job_nodes, n.job_id == c.job_id).where(c.state.in_(ACTIVE_STATES))
                 .order_by(c.job_id, n.idx))
        queries = [query] if job_ids is None else [query.where(c.job_id.in_(part)) for part in _chunks(job_ids)]
        with self.engine.connect() as conn:
            return [Allocation(r.job_id, r.node, r.cpus, r.mem_mb, indices_from_column(r.gpu_indices), r.user_name,
                               r.account, r.start_time, r.time_limit, r.array_job_id, gres_from_column(r.gres),
                               r.assoc_id or 0, r.qos or "")
                    for q in queries for r in conn.execute(q)]

    def runs_on(self, node: str) -> list[ActiveRun]:
        """The runs the controller holds RUNNING or COMPLETING on ``node``: what its agent should have."""
        with self.engine.connect() as conn:
            rows = conn.execute(_RUNS_ON, {"b_node": node})
            return [ActiveRun(r.job_id, r.restarts, r.start_time or 0.0) for r in rows]

    def events(self, job_id: int) -> list[JobEvent]:
        """A job's history, oldest first."""
        query = select(job_events).where(job_events.c.job_id == job_id).order_by(job_events.c.event_id)
        with self.engine.connect() as conn:
            return [JobEvent(r.job_id, r.time, JobState(r.from_state) if r.from_state else None,
                             JobState(r.to_state), r.detail, r.op) for r in conn.execute(query)]

    def next_job_id(self) -> int:
        """The id the next job is likely to get (one more than the largest yet; not reserved): what
        psbatch --test-only names the job it asks about."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(jobs.c.job_id))).scalar() or 0) + 1

    def count_jobs(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(jobs)).scalar() or 0)

    # -- nodes ----------------------------------------------------------------------------

    def ensure_nodes(self, configured: Sequence[NodeRecord]) -> None:
        """Insert configured nodes not yet in the table (UNKNOWN) and refresh the configured
        figures of the others; runtime state (UP/DOWN, drain) is kept across restarts."""
        def work(conn: Connection) -> None:
            known = {r.name for r in conn.execute(select(nodes.c.name))}
            for node in configured:
                values = dict(addr=node.addr, port=node.port, cpus=node.cpus, real_memory=node.real_memory,
                              gres=gres_to_column(node.gres))
                if node.name in known:
                    conn.execute(update(nodes).where(nodes.c.name == node.name).values(**values))
                else:
                    conn.execute(insert(nodes).values(
                        name=node.name, state=NodeState.UNKNOWN.value, drain=False, reason="",
                        last_heartbeat=0.0, gpus="[]", isolation="", **values))

        try:
            self._writer.write(work)
        finally:
            self._nodes_written()

    def get_nodes(self) -> list[NodeRecord]:
        """Every node in name order. The records are shared: read them, never change them."""
        return list(self._node_table().values())

    def get_node(self, name: str) -> NodeRecord | None:
        return self._node_table().get(name)

    def _node_table(self) -> dict[str, NodeRecord]:
        with self._node_lock:
            table, writes = self._nodes, self._node_writes
        if table is not None:
            return table
        with self.engine.connect() as conn:
            table = {r.name: node_from_row(r) for r in conn.execute(select(nodes).order_by(nodes.c.name))}
        with self._node_lock:
            if self._node_writes == writes:
                self._nodes = table
        return table

    def _nodes_written(self, name: str | None = None) -> None:
        """After a node write: that node's row read again into the table (a registration storm of
        1000 agents must not read 1000 rows per write), or with ``name`` None every row, when next read."""
        with self._node_lock:  # held while the row is read: two writes of one node patch in their order
            self._node_writes += 1
            if self._nodes is None:
                return
            if name is None:
                self._nodes = None
                return
            with self.engine.connect() as conn:
                row = conn.execute(select(nodes).where(nodes.c.name == name)).first()
            table = dict(self._nodes)
            if row is not None:
                table[name] = node_from_row(row)
            self._nodes = table

    def set_node_state(self, name: str, to: NodeState, now: float, **values: Any) -> NodeState:
        """Compare-and-set a node's base state; returns the old one. Raises InvalidTransition."""
        allowed = [s.value for s in NODE_TRANSITIONS[to]]
        try:
            return self._writer.write(lambda conn: _set_node_state(conn, name, to, allowed, values))
        finally:
            self._nodes_written(name)

    def update_node(self, name: str, **values: Any) -> None:
        """Set fields that are not the base state (drain, reason, heartbeat, inventory)."""
        if "gpus" in values:
            values["gpus"] = json.dumps([vars(g) for g in values["gpus"]])
        try:
            self._writer.write(lambda conn: conn.execute(update(nodes).where(nodes.c.name == name).values(**values)))
        finally:
            self._nodes_written(name)

    def heard(self, times: Mapping[str, float]) -> None:
        """Record when each node's agent was last heard (``last_heartbeat``), all in one transaction:
        the node monitor keeps heartbeats in memory and writes them so, once a second."""
        if not times:
            return
        rows = [{"b_name": name, "b_time": at} for name, at in times.items()]
        try:
            self._writer.write(lambda conn: conn.execute(_HEARD, rows))
        finally:
            with self._node_lock:
                table = self._nodes
                if table is not None:  # patched in place: a heartbeat is not worth reading 1000 nodes again
                    self._nodes = {name: dataclasses.replace(node, last_heartbeat=times[name]) if name in times
                                   else node for name, node in table.items()}
                self._node_writes += 1


# A job's row as the records read it: every column but the emptied ``spec`` (the request is in job_specs)
_ROW = tuple(c for c in jobs.c if c.name != "spec")
# A light listing's columns (Store.get_jobs(light=True)), in the order listed_record unpacks them:
# the job's own columns and the request's that a listing shows; not the stored request itself.
LISTED_COLUMNS = tuple(jobs.c[name] for name in (
    "job_id", "state", "reason", "submit_time", "start_time", "end_time", "node", "gpu_indices", "exit_code",
    "exit_signal", "cancel_requested", "partition", "time_limit", "gpu_seconds", "peak_gpu_memory_mb",
    "mean_gpu_util", "array_job_id", "array_task_id", "priority", "admin_priority", "hold", "restarts",
    "start_estimate", "eligible_time", "requeue", "requeue_requested", "system_comment", "nodes",
    "max_rss_kb", "assoc_id", "suspend_time", "suspended_seconds", "state_desc", "reason_prev",
    "name", "user_name", "uid", "cpus", "mem_mb", "gres", "account", "nice", "dependency",
    "array_max_running", "comment", "qos", "num_nodes"))
_LISTED_OWN = 34  # where the request's own columns start in a LISTED_COLUMNS row (name, user_name, ...): its spec's key
_STATES = {s.value: s for s in JobState}
_REASONS = {r.value: r for r in JobReason}


def listed_record(specs: dict[Any, Any], row: Any) -> JobRecord:
    """The JobRecord of a row of :data:`LISTED_COLUMNS`: what records.light_spec and job_from_row make, read
    as a plain tuple (a listing of 100,000 jobs reads each row's 47 columns once: attribute access
    on SQLAlchemy's rows was most of its time)."""
    (job_id, state, reason, submit_time, start_time, end_time, node, gpu_indices, exit_code, exit_signal,
     cancel_requested, partition, time_limit, gpu_seconds, peak_gpu_memory_mb, mean_gpu_util, array_job_id,
     array_task_id, priority, admin_priority, hold, restarts, start_estimate, eligible_time, requeue,
     requeue_requested, system_comment, hostlist, max_rss_kb, assoc_id, suspend_time, suspended_seconds, state_desc,
     reason_prev, *own) = row
    key = tuple(own)  # row[_LISTED_OWN:]
    spec = specs.get(key)
    if spec is None:  # as records.light_spec: of an array's expression only the throttle (%2)
        name, user, uid, cpus, mem_mb, gres, account, nice, dependency, throttle, comment, qos, num_nodes = own
        parsed = specs.get(gres)
        if parsed is None:
            parsed = specs[gres] = gres_from_column(gres)
        spec = specs[key] = JobSpec(name, user, uid, 0, "", partition=partition, time_limit=time_limit,
                                    cpus_per_task=cpus, mem_mb=mem_mb, gres=parsed, account=account or "",
                                    nice=nice or 0, dependency=dependency or "",
                                    array=f"%{throttle}" if throttle else "", comment=comment or "", qos=qos or "",
                                    num_nodes=num_nodes or 1)
    return JobRecord(
        job_id, spec, _STATES[state], _REASONS.get(reason or "None", JobReason.NONE), submit_time, start_time,
        end_time, node, tuple(int(i) for i in gpu_indices.split(",")) if gpu_indices else (), exit_code,
        exit_signal, bool(cancel_requested), partition, time_limit, gpu_seconds, peak_gpu_memory_mb,
        mean_gpu_util, array_job_id, array_task_id, admin_priority if admin_priority is not None else priority,
        hold, restarts, start_estimate, eligible_time, bool(requeue), bool(requeue_requested), "",
        system_comment or "", row_nodes(node, hostlist),
        (tuple(int(i) for i in gpu_indices.split(",")) if gpu_indices else (),) if node else (), max_rss_kb,
        assoc_id or 0, suspend_time, suspended_seconds or 0.0, state_desc or "",
        _REASONS.get(reason_prev or "None", JobReason.NONE))


def fill_nodes(conn: Connection, records: Sequence[JobRecord]) -> None:
    """The nodes of the multi-node jobs among ``records``, in their allocation's order, and each
    node's GPUs, from ``job_nodes`` (a single-node job's row says all there is)."""
    multi = {job.job_id: job for job in records if len(job.nodes) > 1}
    if not multi:
        return
    n = job_nodes.c
    found: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    for part in _chunks(multi):
        query = select(n.job_id, n.node, n.gpu_indices).where(n.job_id.in_(part)).order_by(n.job_id, n.idx)
        for r in conn.execute(query):
            found.setdefault(r.job_id, []).append((r.node, indices_from_column(r.gpu_indices)))
    for job_id, rows in found.items():
        job = multi[job_id]
        job.nodes = tuple(node for node, _ in rows)
        job.node_gpus = tuple(gpus for _, gpus in rows)


def _chunks(ids: Collection[int]) -> list[list[int]]:
    """``ids`` in sorted lists of at most _IN_CHUNK, for IN clauses."""
    ordered = sorted(ids)
    return [ordered[i:i + _IN_CHUNK] for i in range(0, len(ordered), _IN_CHUNK)]


def _end_decision(e: RunEnd) -> Callable[[JobFlags], Change]:
    if e.launch_failure:
        return lambda job: lifecycle.launch_failed(job, e.node, e.restarts, e.launch_failure, e.end_time)
    return lambda job: lifecycle.finish(job, e.node, e.restarts, e.state, e.exit_code, e.exit_signal, e.end_time,
                                        e.usage, e.comment)


# What pscontrol update JobId= may set (Store.update_fields): the job's own values, and its request's
# fields (the columns that hold them follow); never the state, hold or flags, which are the lifecycle's,
# nor who it is and what it runs.
_UPDATABLE = frozenset({"partition", "time_limit", "admin_priority", "priority"})
_UPDATABLE_REQUEST = frozenset(f.name for f in JOB_FIELDS) - {"user", "uid", "gid", "script", "argv", "environment",
                                                              "interactive", "allocation"}

_FLAG_COLUMNS = (jobs.c.state, jobs.c.hold, jobs.c.cancel_requested, jobs.c.requeue_requested, jobs.c.requeue,
                 jobs.c.restarts, jobs.c.node, jobs.c.relinquish_code, jobs.c.nodes, jobs.c.suspend_time,
                 jobs.c.suspended_seconds)


# Built once: a statement built per call costs more CPU than its execution (clause building and
# cache keys), and a lifecycle operation runs several per job.
_READ_FLAGS = select(*_FLAG_COLUMNS).where(jobs.c.job_id == bindparam("b_job"))
_ADD_EVENT = insert(job_events)
_CLEAR_NODES = delete(job_nodes).where(job_nodes.c.job_id == bindparam("b_job"))
# a single-node job's one row: its node, CPUs, memory and GPUs as ``start`` just wrote them
_ONE_NODE = insert(job_nodes).from_select(
    ["job_id", "idx", "node", "cpus", "mem_mb", "gpu_indices"],
    select(jobs.c.job_id, literal(0), jobs.c.node, jobs.c.cpus, jobs.c.mem_mb, jobs.c.gpu_indices)
    .where(jobs.c.job_id == bindparam("b_job")))
# a job's run ended: its steps still RUNNING end with it (lifecycle.run_ended_steps)
_END_RUN_STEPS = (update(job_steps).where(job_steps.c.job_id == bindparam("b_job"), job_steps.c.state == "RUNNING")
                  .values(state=bindparam("v_state"), end_time=bindparam("v_end"), exit_signal=bindparam("v_sig")))
_READ_STEP = select(job_steps.c.state, job_steps.c.nodes, job_steps.c.reported, job_steps.c.ended_state,
                    job_steps.c.exit_code, job_steps.c.exit_signal).where(job_steps.c.job_id == bindparam("b_job"),
                                                                job_steps.c.step_id == bindparam("b_step"))
_END_STEP = (update(job_steps).where(job_steps.c.job_id == bindparam("b_job"),
                                     job_steps.c.step_id == bindparam("b_step"), job_steps.c.state == "RUNNING")
             .values(state=bindparam("v_state"), end_time=bindparam("v_end"), exit_code=bindparam("v_code"),
                     exit_signal=bindparam("v_sig")))
# a scheduling pass's notes on a pending job (Store.update_pending)
_UPDATE_PENDING = (
    update(jobs).where(jobs.c.job_id == bindparam("b_id"), jobs.c.state == "PENDING")
    .values(reason=bindparam("b_reason"), priority=bindparam("b_prio"), start_estimate=bindparam("b_est"),
            eligible_time=bindparam("b_eligible"),
            state_desc=case((jobs.c.reason == bindparam("b_reason"), jobs.c.state_desc), else_=""),
            reason_prev=func.coalesce(bindparam("b_kept", type_=String), jobs.c.reason_prev)))
_CAS: dict[tuple[str, ...], Any] = {}  # the columns a change sets -> its compare-and-set UPDATE


def _cas_statement(columns: tuple[str, ...]) -> Any:
    stmt = _CAS.get(columns)
    if stmt is None:
        stmt = _CAS[columns] = (
            update(jobs).where(jobs.c.job_id == bindparam("b_job"), jobs.c.state == bindparam("b_state"),
                               jobs.c.restarts == bindparam("b_restarts"))
            .values({c: bindparam(f"v_{c}") for c in columns}))
    return stmt


def _apply(conn: Connection, job_id: int, now: float, decide: Callable[[JobFlags], Change]) -> Change:
    """One lifecycle operation inside the caller's transaction: read, decide, compare-and-set, event."""
    row = conn.execute(_READ_FLAGS, {"b_job": job_id}).first()
    if row is None:
        raise InvalidTransition(f"job {job_id} does not exist")
    change = decide(_flags(job_id, row))
    values = {k: indices_to_column(v) if k == "gpu_indices" else v for k, v in change.values.items()}
    values["state"] = change.to.value
    params = {f"v_{k}": v for k, v in values.items()}
    params.update(b_job=job_id, b_state=row.state, b_restarts=row.restarts)
    result = conn.execute(_cas_statement(tuple(sorted(values))), params)
    if result.rowcount != 1:  # cannot happen with one writer; a second one would lose here
        raise InvalidTransition(f"job {job_id} changed meanwhile")
    conn.execute(_ADD_EVENT, dict(job_id=job_id, time=now, from_state=change.from_state.value,
                                  to_state=change.to.value, detail=change.detail, op=change.op))
    if row.nodes and row.nodes != row.node:  # a multi-node job's: whoever ends it ends its other nodes' runs
        change = dataclasses.replace(change, nodes=row.nodes)
    steps_end = lifecycle.run_ended_steps(change)
    if steps_end is not None:
        conn.execute(_END_RUN_STEPS, {"b_job": job_id, "v_state": steps_end.value, "v_end": now,
                                      "v_sig": 15 if steps_end is JobState.CANCELLED else 0})
    return change


def _flags(job_id: int, row: Any) -> JobFlags:
    return JobFlags(job_id, JobState(row.state), row.hold, bool(row.cancel_requested), bool(row.requeue_requested),
                    bool(row.requeue), row.restarts, row.node, row.relinquish_code, row.nodes or "",
                    row.suspend_time, row.suspended_seconds or 0.0)


def _read_flags(conn: Connection, job_id: int) -> JobFlags:
    row = conn.execute(_READ_FLAGS, {"b_job": job_id}).first()
    if row is None:
        raise InvalidTransition(f"job {job_id} does not exist")
    return _flags(job_id, row)


def _end_step(conn: Connection, e: StepEnd) -> StepRecord:
    """One step's end inside the caller's transaction: read, guard (lifecycle.end_step), compare-and-set."""
    row = conn.execute(_READ_STEP, {"b_job": e.job_id, "b_step": e.step_id}).first()
    if row is None:
        raise InvalidTransition(f"step {e.job_id}.{e.step_id} does not exist")
    lifecycle.end_step(e.job_id, e.step_id, JobState(row.state), e.state)
    nodes = expand(row.nodes) if e.node else []
    if e.node and e.node not in nodes:
        raise InvalidTransition(f"step {e.job_id}.{e.step_id} does not run on {e.node}")
    state, code, sig = e.state, e.exit_code, e.exit_signal
    if len(nodes) > 1:  # a step on several nodes ends when each has reported: the worst end, the largest code
        reported = [n for n in row.reported.split(",") if n]
        if e.node in reported:
            raise InvalidTransition(f"step {e.job_id}.{e.step_id}: {e.node} reported its end already")
        before = (JobState(row.ended_state), row.exit_code, row.exit_signal) if row.ended_state else None
        state, code, sig = lifecycle.combine_step_ends(before, (state, code, sig))
        reported.append(e.node)
        if set(reported) != set(nodes):
            conn.execute(update(job_steps).where(job_steps.c.job_id == e.job_id, job_steps.c.step_id == e.step_id,
                                                 job_steps.c.state == "RUNNING")
                         .values(reported=",".join(reported), ended_state=state.value, exit_code=code,
                                 exit_signal=sig))
            return step_from_row(conn.execute(select(job_steps).where(job_steps.c.job_id == e.job_id,
                                                                      job_steps.c.step_id == e.step_id)).one())
    result = conn.execute(_END_STEP, {"b_job": e.job_id, "b_step": e.step_id, "v_state": state.value,
                                      "v_end": e.end_time, "v_code": code, "v_sig": sig})
    if result.rowcount != 1:
        raise InvalidTransition(f"step {e.job_id}.{e.step_id} changed meanwhile")
    step = conn.execute(select(job_steps).where(job_steps.c.job_id == e.job_id,
                                                job_steps.c.step_id == e.step_id)).one()
    return step_from_row(step)


# The node monitor's reads on every heartbeat, built once (building a statement cost more than running it):
# the runs held RUNNING or COMPLETING on a node, and the RUNNING steps of the jobs whose first node it is
_RUNS_ON = select(jobs.c.job_id, jobs.c.restarts, jobs.c.start_time).where(
    jobs.c.job_id.in_(select(job_nodes.c.job_id).where(job_nodes.c.node == bindparam("b_node"))),
    jobs.c.state.in_(ACTIVE_STATES))
_STEPS_ON = (select(job_steps).join_from(job_steps, jobs, job_steps.c.job_id == jobs.c.job_id)
             .where(job_steps.c.state == JobState.RUNNING.value, jobs.c.node == bindparam("b_node")))
_HEARD = update(nodes).where(nodes.c.name == bindparam("b_name")).values(last_heartbeat=bindparam("b_time"))


def _set_node_state(conn: Connection, name: str, to: NodeState, allowed: list[str],
                    values: dict[str, Any]) -> NodeState:
    return NodeState(_compare_and_set(conn, nodes.c.name, name, f"node {name}", to.value, allowed, values))


def _compare_and_set(conn: Connection, key: Any, ident: Any, what: str, to: str, allowed: list[str],
                     values: dict[str, Any]) -> str:
    """``UPDATE <key's table> SET state=:to WHERE key=:ident AND state IN (:allowed)``; the old state.
    InvalidTransition, with nothing written, when the row is missing or ``to`` may not follow its state."""
    table = key.table
    old = conn.execute(select(table.c.state).where(key == ident)).scalar()
    if old is None:
        raise InvalidTransition(f"{what} does not exist")
    result = conn.execute(update(table).where(key == ident, table.c.state.in_(allowed)).values(state=to, **values))
    if result.rowcount != 1:
        raise InvalidTransition(f"{what} is {old}, it cannot become {to}")
    return str(old)


def _make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
        # hide_parameters: an error's text never carries a request's values (a script, a million ids) into a log
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, hide_parameters=True)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            cursor.execute("PRAGMA synchronous=FULL")  # a commit is on disk before the submit is acknowledged
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, pool_size=8, max_overflow=8, pool_pre_ping=True, hide_parameters=True)
