"""Waiting for a job to change (psrun, ``-W``), woken by the store's commits, not by polling.

Two kinds of waiters: :meth:`JobWatch.wait`, a generator that blocks its thread (the agents' gRPC
servicer), and :meth:`JobWatch.wait_async`, an async generator for the HTTP API's event loop, which
holds no thread while it waits: the store's commit notification, which comes on the committing
thread, is handed to the waiter's loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Collection, Generator
from concurrent.futures import Executor
from typing import TypeVar

from pslurm.controller.errors import NotFound
from pslurm.controller.store import StepRecord, Store
from pslurm.core.jobspec import JobRecord
from pslurm.core.states import JobState

T = TypeVar("T")
_NOTHING = object()
RECHECK = 1.0  # seconds between re-reads of a waited-for job when no change was announced (to be safe)


class _AsyncWaiter:
    """One async waiter: its loop and the event its changes set."""

    __slots__ = ("loop", "event")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()


class JobWatch:
    """Waiters for jobs. The store tells it which jobs each commit changed; only their waiters wake
    and re-read their job, not every waiter on every change in the cluster."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock
        self._changed = threading.Condition()
        self._watched: Counter[int] = Counter()  # job id -> how many wait for it
        self._versions: Counter[int] = Counter()  # job id -> changes seen since waiting began
        self._async: dict[int, set[_AsyncWaiter]] = {}  # job id -> its async waiters (under _changed)
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

    async def wait_async(self, job_id: int, executor: Executor | None = None) -> AsyncGenerator[JobRecord, None]:
        """:meth:`wait` for an asyncio loop: the job now and at each change of state, node or reason,
        until it ends. Store reads run on ``executor``; between them the waiter holds no thread."""
        def read() -> JobRecord:
            job = self._store.get_job(job_id, light=True)
            if job is None:
                raise NotFound(f"Invalid job id specified: {job_id}")
            return job

        async for job in self._follow(job_id, read, lambda j: (j.state, j.node, j.reason),
                                      lambda j: j.state.is_final, executor):
            yield job

    async def wait_step_async(self, job_id: int, step_id: int,
                              executor: Executor | None = None) -> AsyncGenerator[StepRecord, None]:
        """A step now and at each change of its state, until it ended (its job's changes wake it)."""
        def read() -> StepRecord:
            step = self._store.get_step(job_id, step_id)
            if step is None:
                raise NotFound(f"Invalid job id specified: {job_id}.{step_id}")
            return step

        async for step in self._follow(job_id, read, lambda s: s.state, lambda s: s.state is not JobState.RUNNING,
                                       executor):
            yield step

    async def _follow(self, job_id: int, read: Callable[[], T], key: Callable[[T], object],
                      ended: Callable[[T], bool], executor: Executor | None) -> AsyncGenerator[T, None]:
        """What ``read`` returns now and each time ``key`` of it changes, until ``ended``: read again
        when the store says the job changed, and once a second to be safe."""
        loop = asyncio.get_running_loop()
        waiter = _AsyncWaiter(loop)
        last: object = _NOTHING
        with self._changed:
            self._async.setdefault(job_id, set()).add(waiter)
        try:
            while not self._stopping.is_set():
                waiter.event.clear()  # before the read: a change committed during it sets it again
                found = await loop.run_in_executor(executor, read)
                if key(found) != last:
                    last = key(found)
                    yield found
                if ended(found):
                    return
                try:
                    await asyncio.wait_for(waiter.event.wait(), RECHECK)
                except TimeoutError:
                    pass
        finally:
            with self._changed:
                waiters = self._async.get(job_id)
                if waiters is not None:
                    waiters.discard(waiter)
                    if not waiters:
                        del self._async[job_id]

    def _wait_for_change(self, job_id: int, seen: int, timeout: float = RECHECK) -> None:
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
            woken = [w for i in job_ids for w in self._async.get(i, ())] if self._async else []
        for waiter in woken:
            _wake(waiter)

    def stop(self) -> None:
        self._stopping.set()
        with self._changed:
            self._changed.notify_all()
            woken = [w for waiters in self._async.values() for w in waiters]
        for waiter in woken:
            _wake(waiter)


def _wake(waiter: _AsyncWaiter) -> None:
    try:
        waiter.loop.call_soon_threadsafe(waiter.event.set)
    except RuntimeError:  # its loop has closed: the waiter is gone
        pass
