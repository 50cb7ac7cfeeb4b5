"""Group commit with per-request isolation, on SQLite and on a real PostgreSQL: a write the database
refuses fails alone, with a one-line StoreError, and the writes that shared its transaction are stored."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from pslurm.controller.store import Store, StoreError
from pslurm.controller.store.writer import GroupCommit, store_error
from pslurm.core.jobspec import JobSpec
from pslurm.core.states import InvalidTransition, JobState

OUT_OF_RANGE = "the job could not be stored: a value is out of range or too long"
LEAKS = ("SELECT", "INSERT", "UPDATE", "[SQL", "sqlite", "psycopg", "\n")


def one_line_without_sql(exc: object) -> bool:
    return isinstance(exc, StoreError) and not any(leak in str(exc) for leak in LEAKS)


def job_spec(i: int, bad: bool) -> JobSpec:
    # 2**70 CPUs passes Python but no database: sqlite3 raises OverflowError, PostgreSQL "integer out of range"
    return JobSpec(name=f"j{i}", user="alice", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   cpus_per_task=2**70 if bad else 1)


def test_one_bad_submit_among_concurrent_ones_fails_alone(store: Store) -> None:
    n = 1000
    bad = {i for i in range(n) if i % 20 == 7}

    def submit(i: int) -> int | BaseException:
        try:
            return store.submit(job_spec(i, i in bad), "gpu", 60, now=float(i))
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test looks at
            return exc

    with ThreadPoolExecutor(max_workers=32) as pool:
        outcomes = list(pool.map(submit, range(n)))

    failed_good = [repr(out) for i, out in enumerate(outcomes) if i not in bad and not isinstance(out, int)]
    assert not failed_good, failed_good[:3]
    good_ids = {i: out for i, out in enumerate(outcomes) if isinstance(out, int)}
    assert len(good_ids) == n - len(bad)
    assert len(set(good_ids.values())) == len(good_ids)
    for i in bad:
        assert one_line_without_sql(outcomes[i]), repr(outcomes[i])
        assert str(outcomes[i]) == OUT_OF_RANGE
    assert store.count_jobs() == n - len(bad)
    stored = {job.job_id: job for job in store.get_jobs(job_ids=list(good_ids.values()), include_finished=True)}
    assert len(stored) == len(good_ids)
    for i, job_id in good_ids.items():  # each caller got its own job's id, from the transaction that committed
        assert (stored[job_id].spec.name, stored[job_id].state) == (f"j{i}", JobState.PENDING)


# -- the writer alone, with works queued behind a held writer lock: one group, deterministically ---------

@pytest.fixture
def writer(store: Store) -> GroupCommit:
    with store.engine.begin() as conn:
        conn.execute(text("CREATE TABLE parent (id INTEGER PRIMARY KEY)"))
        conn.execute(text("CREATE TABLE child (id INTEGER PRIMARY KEY, v INTEGER, parent_id INTEGER "
                          "REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"))
        conn.execute(text("INSERT INTO parent (id) VALUES (1)"))
        conn.execute(text("INSERT INTO child (id, v, parent_id) VALUES (1, 0, 1)"))
    return GroupCommit(store.engine)


def insert(row_id: int, v: int = 0, parent_id: int = 1) -> Callable[[Connection], int]:
    def work(conn: Connection) -> int:
        conn.execute(text("INSERT INTO child (id, v, parent_id) VALUES (:id, :v, :p)"),
                     dict(id=row_id, v=v, p=parent_id))
        return row_id
    return work


def refuse(conn: Connection) -> int:
    raise InvalidTransition("job 9 is COMPLETED, it cannot become RUNNING")


def broken(conn: Connection) -> int:
    raise RuntimeError("a bug in a work")


def run_as_one_group(writer: GroupCommit, works: list[Callable[[Connection], Any]]) -> list[Any]:
    """Queue every work behind the held writer lock, then let them go: the first caller to get the lock
    leads one group holding them all. Each work's result or error, in order."""
    outcomes: list[Any] = [None] * len(works)

    def call(i: int) -> None:
        try:
            outcomes[i] = writer.write(works[i])
        except BaseException as exc:  # noqa: BLE001
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(works))]
    with writer._writer:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while len(writer._queue) < len(works):
            assert time.monotonic() < deadline, "the works did not queue"
            time.sleep(0.005)
    for t in threads:
        t.join(10)
    return outcomes


def stored_children(store: Store) -> set[int]:
    with store.engine.connect() as conn:
        return {r[0] for r in conn.execute(text("SELECT id FROM child WHERE id > 1"))}


def test_a_failing_work_does_not_fail_the_others_in_its_group(store: Store, writer: GroupCommit,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    works = [insert(2), insert(1), insert(3), refuse, insert(4, v=2**70), insert(5), broken, insert(6)]
    with caplog.at_level(logging.WARNING, logger="psctld"):
        outcomes = run_as_one_group(writer, works)
    assert [outcomes[i] for i in (0, 2, 5, 7)] == [2, 3, 5, 6]
    assert isinstance(outcomes[3], InvalidTransition)  # unchanged: raised before writing, the others go on
    assert [str(outcomes[i]) for i in (1, 4)] == [OUT_OF_RANGE, OUT_OF_RANGE]  # duplicate key; out of range
    assert str(outcomes[6]).startswith("the job could not be stored")
    assert all(one_line_without_sql(outcomes[i]) for i in (1, 4, 6))
    assert isinstance(outcomes[1].__cause__, IntegrityError)
    assert stored_children(store) == {2, 3, 5, 6}
    assert writer.commits == 1  # one group: three tries, one commit
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records if r.name == "psctld")
    assert "child" in logged  # the operator sees the full error, SQL and all


def test_when_the_commit_fails_each_work_is_committed_alone(store: Store, writer: GroupCommit) -> None:
    # a deferred foreign key is checked at COMMIT: the statement passes, the commit of the group fails
    outcomes = run_as_one_group(writer, [insert(2), insert(3, parent_id=99), insert(4), refuse])
    assert outcomes[0::2] == [2, 4]
    assert str(outcomes[1]) == OUT_OF_RANGE and one_line_without_sql(outcomes[1])
    assert isinstance(outcomes[3], InvalidTransition)
    assert stored_children(store) == {2, 4}
    assert writer.commits == 3  # each alone (the InvalidTransition commits nothing, but commits)


def test_a_base_exception_is_raised_to_every_caller_and_the_writer_goes_on(store: Store,
                                                                           writer: GroupCommit) -> None:
    def interrupt(conn: Connection) -> int:
        raise SystemExit(3)

    outcomes = run_as_one_group(writer, [insert(2), interrupt, insert(3)])
    assert all(isinstance(out, SystemExit) for out in outcomes)
    assert stored_children(store) == set()
    assert writer.write(insert(4)) == 4


@pytest.mark.parametrize("exc, message", [
    (OperationalError("SELECT 1", {}, Exception("connection refused")), "the job store is unavailable"),
    (DataError("INSERT INTO jobs", {}, Exception("integer out of range")), OUT_OF_RANGE),
    (IntegrityError("INSERT INTO jobs", {}, Exception("duplicate key")), OUT_OF_RANGE),
    (OverflowError("Python int too large to convert to SQLite INTEGER"), OUT_OF_RANGE),
    (ValueError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), OUT_OF_RANGE),
])
def test_store_error_messages(exc: Exception, message: str) -> None:
    error = store_error(exc)
    assert (str(error), error.__cause__) == (message, exc)
