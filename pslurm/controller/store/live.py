"""The live jobs in memory: the pending queue and what active jobs hold, for the scheduler's passes.

The store stays the durable record: every change is committed there first, by whoever makes it.
This is the scheduler's copy of its live part, loaded in full once (at the first pass, so a
restarted controller starts from everything the store holds) and then kept current from the
store's change notices: each committed write names the jobs it may have changed, and only those
are read again before the next pass. A notice comes after its commit, and the ids noted are taken
before they are read again, so a change is never missed (one that lands between both is read twice).

The scheduler's own notes on pending jobs (reason, priority, expected start, eligible time) are
applied here as written (:meth:`LiveJobs.note`), not read back: they would otherwise make most of
the queue "changed" after every pass.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from pslurm.controller.store.queries import Store
from pslurm.controller.store.records import Allocation, QueuedJob


class LiveJobs:
    """Pending jobs (QueuedJob) and active jobs' allocations by id, kept in step with the store."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._lock = threading.Lock()  # the noted ids: store notices come from any thread
        self._dirty: set[int] = set()
        self._loaded = False
        self._own = threading.local()  # set while the scheduler writes its own notes (see note)
        self._pending: dict[int, QueuedJob] = {}
        self._active: dict[int, list[Allocation]] = {}  # a multi-node job's: one per node
        self._queue: list[QueuedJob] | None = None  # the pending jobs in id order, until they change
        store.subscribe(self._changed)  # before the first load: nothing committed after it is missed

    def _changed(self, job_ids: Collection[int]) -> None:
        if getattr(self._own, "notes", False):
            return
        with self._lock:
            self._dirty.update(job_ids)

    def refresh(self) -> None:
        """Bring the copy up to date: everything at the first call, then the jobs changed since."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            loaded, self._loaded = self._loaded, True
        try:
            if not loaded:
                self._pending = {q.job_id: q for q in self._store.queue()}
                self._active = _by_job(self._store.allocations())
                self._queue = None
            elif dirty:
                pending = self._store.queue(job_ids=dirty)
                active = self._store.allocations(job_ids=dirty)
                for job_id in dirty:
                    self._pending.pop(job_id, None)
                    self._active.pop(job_id, None)
                self._pending.update((q.job_id, q) for q in pending)
                self._active.update(_by_job(active))
                self._queue = None
        except BaseException:  # not read: read them again next time
            with self._lock:
                self._dirty |= dirty
                self._loaded = self._loaded and loaded
            raise

    def queue(self) -> list[QueuedJob]:
        """The pending jobs in id order (as :meth:`Store.queue`), as of the last refresh."""
        if self._queue is None:
            self._queue = sorted(self._pending.values(), key=lambda q: q.job_id)
        return self._queue

    def allocations(self) -> list[Allocation]:
        """What the RUNNING and COMPLETING jobs hold (as :meth:`Store.allocations`), as of the last refresh."""
        return [a for held in self._active.values() for a in held]

    @contextmanager
    def own_notes(self) -> Iterator[None]:
        """Around the scheduler's own ``update_pending``: its notices are not changes to read back."""
        self._own.notes = True
        try:
            yield
        finally:
            self._own.notes = False

    def note(self, changes: dict[int, tuple[str, int, float | None, float | None]]) -> None:
        """Apply what ``Store.update_pending(changes)`` committed: (reason, priority, expected start,
        eligible time) of pending jobs."""
        for job_id, (reason, priority, estimate, eligible) in changes.items():
            q = self._pending.get(job_id)
            if q is not None:
                self._pending[job_id] = dataclasses.replace(q, reason=reason, priority=priority,
                                                            start_estimate=estimate, eligible_time=eligible)
        if changes:
            self._queue = None


def _by_job(allocations: list[Allocation]) -> dict[int, list[Allocation]]:
    out: dict[int, list[Allocation]] = {}
    for a in allocations:
        out.setdefault(a.job_id, []).append(a)
    return out
