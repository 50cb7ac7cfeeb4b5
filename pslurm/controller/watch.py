"""Waiting for a job to change (psrun's WaitJob), woken by the store's commits, not by polling."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Collection, Generator

from pslurm.controller.errors import NotFound
from pslurm.controller.store import Store
from pslurm.core.jobspec import JobRecord
from pslurm.core.states import JobState


class JobWatch:
    """Waiters for jobs. The store tells it which jobs each commit changed; only their waiters wake
    and re-read their job, not every waiter on every change in the cluster."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock
        self._changed = threading.Condition()
        self._watched: Counter[int] = Counter()  # job id -> how many wait for it
        self._versions: Counter[int] = Counter()  # job id -> changes seen since waiting began
        self._stopping = threading.Event()
        store.subscribe(self._jobs_changed)

    def wait(self, job_id: int, timeout: float | None = None) -> Generator[JobRecord, None, None]:
        """The job now, then again each time it changes, until it reaches a final state (read again
        when the store says it changed, and once a second to be safe)."""
        last: tuple[JobState, str | None, str] | None = None
        deadline = None if timeout is None else self._clock() + timeout
        with self._changed:
            self._watched[job_id] += 1
        try:
            while not self._stopping.is_set():
                with self._changed:
                    seen = self._versions[job_id]
                job = self._store.get_job(job_id, light=True)
                if job is None:
                    raise NotFound(f"Invalid job id specified: {job_id}")
                if (job.state, job.node, job.reason) != last:
                    last = (job.state, job.node, job.reason)
                    yield job
                if job.state.is_final or (deadline is not None and self._clock() > deadline):
                    return
                self._wait_for_change(job_id, seen)
        finally:
            with self._changed:
                self._watched[job_id] -= 1
                if self._watched[job_id] <= 0:
                    del self._watched[job_id]
                    self._versions.pop(job_id, None)

    def _wait_for_change(self, job_id: int, seen: int, timeout: float = 1.0) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._versions[job_id] != seen or self._stopping.is_set(),
                                   timeout=timeout)

    def _jobs_changed(self, job_ids: Collection[int]) -> None:
        with self._changed:
            watched = [i for i in job_ids if i in self._watched]
            for job_id in watched:
                self._versions[job_id] += 1
            if watched:
                self._changed.notify_all()

    def stop(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
