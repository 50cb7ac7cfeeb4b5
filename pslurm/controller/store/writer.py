"""Group commit: concurrent writes share one transaction, and so one fsync; one bad write fails alone.

Every write of the store goes through :meth:`GroupCommit.write`. There is one writer at a time
(SQLite has one anyway, and serialising in-process avoids busy retries). A caller queues its work
and takes the writer lock; whoever holds it runs everything queued by then in one transaction and
commits once. Under load (agents reporting job ends, clients submitting) the callers that queued
behind a commit are served by the next one, so the cost of a durable commit is shared; alone, a
caller commits its own work at once, as before. Each caller returns only after the commit that
holds its work, so an acknowledged write is on disk.

A work is a plain function of a connection, so it can be run again after a rollback. Work may
raise InvalidTransition only before it writes anything (the compare-and-set helpers do): that
caller gets the error and the others in the transaction go on. Any other error from a work (a
value the database refuses, a lost connection) rolls the transaction back; that caller gets a
:class:`StoreError` and the rest of the group runs again in a fresh transaction. When the COMMIT
itself fails, each work of the group is committed alone, so that only the one the database
refuses fails. When no connection can be had at all, every caller in the group gets the
StoreError. A StoreError's message is one line for the user, without SQL or driver text; the
driver's message goes to the ``psctld`` log, cut to MAX_LOGGED characters (the statement, as long
as a request makes it, only at debug level). With several controllers, a fence runs first in every
transaction (the lease's token check): when it refuses, every caller of the group gets
:class:`Fenced` and nothing is written. A BaseException that is not an Exception
(KeyboardInterrupt, SystemExit) is not handled: the transaction is rolled back, and the leading
caller and every caller whose work was still to run get it raised.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DataError, IntegrityError, OperationalError, StatementError

from pslurm.core.states import InvalidTransition

T = TypeVar("T")
log = logging.getLogger("psctld")


class StoreError(Exception):
    """A write the store could not make; the message is one line for the user (no SQL, no driver
    text), the error that caused it is its ``__cause__`` and in the controller's log."""


class Fenced(StoreError):
    """A write refused because this controller is no longer the active one (the lease's fence,
    :mod:`pslurm.controller.store.lease`): nothing of it was written, so the request may be sent to
    the active controller."""


def store_error(exc: Exception) -> StoreError:
    """The StoreError a user sees for ``exc``, raised while writing."""
    cause = exc.orig if isinstance(exc, StatementError) and exc.orig is not None else exc
    if isinstance(exc, OperationalError):
        message = "the job store is unavailable"
    elif isinstance(exc, (DataError, IntegrityError)) or isinstance(cause, (OverflowError, ValueError)):
        message = "the job could not be stored: a value is out of range or too long"
    else:
        message = "the job could not be stored: the job store failed (see the controller's log)"
    error = StoreError(message)
    error.__cause__ = exc
    return error


MAX_LOGGED = 300  # characters of a database error in the log: its statement and values could be megabytes


def brief(exc: BaseException) -> str:
    """A database error in one bounded line: the driver's own message, without the statement."""
    cause = exc.orig if isinstance(exc, StatementError) and exc.orig is not None else exc
    text = " ".join(str(cause).split())
    return f"{type(cause).__name__}: {text[:MAX_LOGGED]}{'...' if len(text) > MAX_LOGGED else ''}"


def _log_failure(what: str, exc: BaseException) -> None:
    """One bounded warning line; the traceback only at debug level (its statement can be long)."""
    log.warning("%s: %s", what, brief(exc))
    log.debug("%s", what, exc_info=exc)


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
        # run first in every transaction; raises Fenced when this controller may no longer write
        self.fence: Callable[[Connection], None] | None = None

    def write(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in a committed transaction (perhaps shared); return its result.

        Raises what ``fn`` raises when that is InvalidTransition, StoreError for any other error of
        ``fn`` or of its commit."""
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
        """Run and commit the batch, each work's outcome left on it; the failing works are set
        aside and the others run again until a transaction commits (or none is left)."""
        todo = batch
        try:
            while todo:
                todo = self._transaction(todo)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: nobody's work is known committed
            for work in todo:
                work.error = exc
            raise
        finally:
            for work in batch:
                work.done = True

    def _transaction(self, works: list[_Work[Any]]) -> list[_Work[Any]]:
        """One transaction over ``works``: [] when it committed or each work has its outcome, else
        the works to run again (one of them failed, and has its StoreError)."""
        for work in works:
            work.result, work.error = None, None  # from an attempt that was rolled back
        culprit: _Work[Any] | None = None
        connected = False
        try:
            with self._engine.begin() as conn:
                connected = True
                if self.fence is not None:
                    self.fence(conn)
                for work in works:
                    try:
                        work.result = work.fn(conn)
                    except InvalidTransition as exc:
                        work.error = exc
                    except Exception:
                        culprit = work
                        raise  # rolls back
        except Fenced as exc:  # before any work ran: none is written, each caller hears why
            for work in works:
                work.result, work.error = None, exc
            return []
        except Exception as exc:
            if culprit is not None:
                _log_failure(f"a write failed and was rolled back ({len(works) - 1} other(s) in its transaction "
                             "run again)", exc)
                culprit.error = store_error(exc)
                return [work for work in works if work is not culprit]
            if len(works) == 1 or not connected:  # its own commit failed, or no connection at all
                _log_failure(f"the store could not commit {len(works)} write(s)", exc)
                for work in works:
                    work.result, work.error = None, store_error(exc)
                return []
            _log_failure(f"a commit of {len(works)} writes failed: committing each alone", exc)
            for work in works:
                self._transaction([work])  # settles it: committed, or its StoreError
            return []
        self.commits += 1
        return []
