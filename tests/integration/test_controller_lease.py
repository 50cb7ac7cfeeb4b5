"""The controller lease and its fence, on SQLite and on a real PostgreSQL: one holder at a time, taken
over once it runs out, released or handed over; a controller that lost it can write nothing more."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection

from pslurm.controller.store import Fenced, Lease, LeaseLost, Store
from pslurm.core.jobspec import JobSpec
from tests.conftest import fresh_pg_database

PERIOD = 0.4  # seconds: short, so that a lease runs out within the test


def spec(name: str = "j") -> JobSpec:
    return JobSpec(name=name, user="alice", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\ntrue\n")


def test_one_holder_at_a_time_and_a_run_out_lease_changes_hands_with_a_new_token(store: Store) -> None:
    primary, backup = Lease(store.engine, "ctl0", PERIOD), Lease(store.engine, "ctl1", PERIOD)
    assert primary.try_acquire() and primary.token == 1
    assert not backup.try_acquire()  # held, not run out
    assert primary.renew() == ""
    state = backup.state()
    assert (state.holder, state.token, state.handover) == ("ctl0", 1, "") and 0 < state.remaining <= PERIOD
    time.sleep(PERIOD + 0.2)
    assert backup.try_acquire() and backup.token == 2
    with pytest.raises(LeaseLost):
        primary.renew()


def test_a_controller_that_lost_the_lease_writes_nothing_and_the_new_one_writes(store: Store) -> None:
    primary, backup = Lease(store.engine, "ctl0", PERIOD), Lease(store.engine, "ctl1", PERIOD)
    assert primary.try_acquire()
    store.fence(primary.check)
    first = store.submit(spec("a"), "gpu", None, 1.0)
    time.sleep(PERIOD + 0.2)
    assert backup.try_acquire()
    with pytest.raises(Fenced, match="ctl0 is no longer the active controller"):
        store.submit(spec("b"), "gpu", None, 2.0)
    assert [job.spec.name for job in store.get_jobs()] == ["a"]
    other = Store(store.url)  # the backup's own store, fenced by its own lease
    try:
        other.fence(backup.check)
        second = other.submit(spec("c"), "gpu", None, 3.0)
    finally:
        other.close()
    assert second == first + 1 and [job.spec.name for job in store.get_jobs()] == ["a", "c"]


def test_released_lease_is_taken_at_once_and_the_releaser_is_fenced(store: Store) -> None:
    primary, backup = Lease(store.engine, "ctl0", 60.0), Lease(store.engine, "ctl1", 60.0)
    assert primary.try_acquire()
    store.fence(primary.check)
    primary.release()
    with pytest.raises(Fenced):
        store.submit(spec(), "gpu", None, 1.0)
    assert backup.try_acquire() and backup.state().holder == "ctl1"


def test_a_handover_goes_to_the_backup_that_asked_and_to_no_other(store: Store) -> None:
    primary = Lease(store.engine, "ctl0", 60.0)
    second, third = Lease(store.engine, "ctl1", 60.0), Lease(store.engine, "ctl2", 60.0)
    assert primary.try_acquire()
    third.ask_handover()
    assert primary.renew() == "ctl2"  # the active controller learns of it when it renews
    primary.release()
    assert not second.try_acquire()  # handed to ctl2: the others wait a whole period more
    assert third.try_acquire() and third.state().handover == ""


def test_a_later_backup_waits_its_grace_after_the_lease_ran_out(store: Store) -> None:
    primary = Lease(store.engine, "ctl0", PERIOD)
    late = Lease(store.engine, "ctl2", PERIOD, grace=30.0)
    assert primary.try_acquire()
    time.sleep(PERIOD + 0.2)
    assert not late.try_acquire()  # ctl1 comes first
    assert Lease(store.engine, "ctl1", PERIOD).try_acquire()


@pytest.fixture
def pg_store() -> Iterator[Store]:
    """A store on PostgreSQL alone: row locks are what fence a write under way (SQLite clusters have one
    controller)."""
    with fresh_pg_database(f"pslurm_lease{os.getpid()}") as url:
        s = Store(url)
        s.migrate()
        yield s
        s.close()


def take(lease: Lease, within: float = 20.0) -> bool:
    """Try for the lease as a backup does, every 0.1 s, until it is had (or ``within`` seconds passed)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if lease.try_acquire():
            return True
        time.sleep(0.1)
    return False


def test_a_takeover_waits_for_the_write_under_way_which_commits_and_the_next_is_fenced(pg_store: Store) -> None:
    store, period = pg_store, 2.0
    primary, backup = Lease(store.engine, "ctl0", period), Lease(store.engine, "ctl1", period)
    assert primary.try_acquire()
    store.fence(primary.check)
    inside, order = threading.Event(), []

    def slow_submit(conn: Connection) -> None:
        inside.set()
        time.sleep(1.5)  # the lease runs out while this transaction holds the fence's lock
        order.append("write")

    time.sleep(period - 1.0)
    writer = threading.Thread(target=lambda: store._writer.write(slow_submit))
    writer.start()
    assert inside.wait(5)
    assert take(backup)  # it waited for the write's transaction to end
    order.append("takeover")
    writer.join()
    assert order == ["write", "takeover"]
    with pytest.raises(Fenced):
        store.submit(spec(), "gpu", None, 1.0)


def test_a_write_left_open_by_a_controller_cut_off_does_not_hold_the_lease_for_good(pg_store: Store) -> None:
    primary, backup = Lease(pg_store.engine, "ctl0", PERIOD), Lease(pg_store.engine, "ctl1", PERIOD)
    assert primary.try_acquire()
    cut_off = pg_store.engine.connect()  # its transaction begun, the fence's lock taken, then nothing more
    cut_off.begin()
    primary.check(cut_off)
    try:
        assert take(backup)  # the server ended the idle transaction, and with it the lock
    finally:
        cut_off.invalidate()
