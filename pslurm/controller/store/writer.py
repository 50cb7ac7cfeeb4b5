"""Group commit: concurrent writes share one transaction, and so one fsync.

Every write of the store goes through :meth:`GroupCommit.write`. There is one writer at a time
(SQLite has one anyway, and serialising in-process avoids busy retries). A caller queues its work
and takes the writer lock; whoever holds it runs everything queued by then in one transaction and
commits once. Under load (agents reporting job ends, clients submitting) the callers that queued
behind a commit are served by the next one, so the cost of a durable commit is shared; alone, a
caller commits its own work at once, as before. Each caller returns only after the commit that
holds its work, so an acknowledged write is on disk.

Work may raise InvalidTransition only before it writes anything (the compare-and-set helpers
do): that caller gets the error and the others in the transaction go on. Any other error aborts
the transaction and every caller in it gets the error; none of their work is stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine

from pslurm.core.states import InvalidTransition

T = TypeVar("T")


class _Work(Generic[T]):
    __slots__ = ("fn", "result", "error", "done")

    def __init__(self, fn: Callable[[Connection], T]) -> None:
        self.fn = fn
        self.result: T | None = None
        self.error: BaseException | None = None
        self.done = False


class GroupCommit:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._writer = threading.Lock()
        self._queue_lock = threading.Lock()
        self._queue: list[_Work[Any]] = []
        self.commits = 0  # transactions committed (what group commit saves shows against writes)

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in a committed transaction (perhaps shared); return its result."""
        work = _Work(fn)
        with self._queue_lock:
            self._queue.append(work)
        with self._writer:
            if not work.done:  # nobody committed it while we waited: lead a transaction
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                self._commit(batch)
        if work.error is not None:
            raise work.error
        return work.result  # type: ignore[return-value]

    def _commit(self, batch: list[_Work[Any]]) -> None:
        try:
            with self._engine.begin() as conn:
                for work in batch:
                    try:
                        work.result = work.fn(conn)
                    except InvalidTransition as exc:
                        work.error = exc
            self.commits += 1
        except BaseException as exc:
            for work in batch:
                work.error = exc
        finally:
            for work in batch:
                work.done = True
