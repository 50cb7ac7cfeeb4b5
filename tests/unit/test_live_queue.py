"""The scheduler's in-memory queue (LiveJobs) against a real SQLite store, and launches grouped per agent."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from pslurm.controller.agents import AgentClient, AgentRefused, AgentUnreachable
from pslurm.controller.store import LiveJobs, RunEnd, Store
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState


def spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = Store(f"sqlite:///{tmp_path}/live.db")
    s.migrate()
    yield s
    s.close()


def same_as_store(live: LiveJobs, store: Store) -> None:
    live.refresh()
    assert live.queue() == store.queue()
    assert sorted(live.allocations(), key=lambda a: a.job_id) == sorted(store.allocations(), key=lambda a: a.job_id)


def test_the_copy_follows_every_lifecycle_operation(store: Store) -> None:
    before = store.submit(spec(), "p", None, 1.0)  # committed before the copy exists: read at the first load
    live = LiveJobs(store)
    same_as_store(live, store)
    array = store.submit(spec(), "p", 60, 2.0, array_ids=[0, 1, 2])
    same_as_store(live, store)
    assert {q.job_id for q in live.queue()} == {before, array, array + 1, array + 2}
    assert store.start_jobs([(array, "c0", (1,)), (array + 1, "c0", ())], 3.0) == [array, array + 1]
    same_as_store(live, store)
    store.hold(array + 2, 4.0, by_operator=False)
    store.cancel(before, 4.0)
    store.set_pending_fields([array + 2], nice=5)
    same_as_store(live, store)
    store.end_runs([RunEnd(array, "c0", 0, JobState.COMPLETED, 0, 0, 5.0)])
    store.cancel(array + 1, 5.0)  # RUNNING -> COMPLETING: still holds its node
    same_as_store(live, store)
    assert [a.job_id for a in live.allocations()] == [array + 1]


def test_only_the_jobs_changed_are_read_again(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [store.submit(spec(), "p", None, 1.0) for _ in range(3)]
    live = LiveJobs(store)
    live.refresh()
    asked: list[set[int]] = []
    real = store.queue

    def queue(limit: int | None = None, job_ids: object = None) -> object:
        asked.append(set(job_ids) if job_ids is not None else set())  # type: ignore[call-overload]
        return real(limit, job_ids)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "queue", queue)
    live.refresh()
    assert asked == []  # nothing changed: no read at all
    store.hold(ids[1], 2.0, by_operator=False)
    live.refresh()
    assert asked == [{ids[1]}]


def test_the_schedulers_own_notes_are_applied_not_read_back(store: Store) -> None:
    job = store.submit(spec(), "p", None, 1.0)
    live = LiveJobs(store)
    live.refresh()
    changes = {job: ("Resources", 7, 50.0, 1.0)}
    with live.own_notes():
        store.update_pending(changes)
    live.note(changes)
    assert live._dirty == set()
    q = live.queue()[0]
    assert (q.reason, q.priority, q.start_estimate, q.eligible_time) == ("Resources", 7, 50.0, 1.0)
    same_as_store(live, store)


def test_a_change_from_another_thread_during_the_notes_is_still_read(store: Store) -> None:
    job = store.submit(spec(), "p", None, 1.0)
    live = LiveJobs(store)
    live.refresh()
    with live.own_notes():
        thread = threading.Thread(target=store.hold, args=(job, 2.0, False))
        thread.start()
        thread.join()
    assert live._dirty == {job}
    same_as_store(live, store)
    assert live.queue()[0].hold == "user"


def test_a_failed_read_is_read_again(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    live = LiveJobs(store)
    live.refresh()
    job = store.submit(spec(), "p", None, 1.0)

    def broken(*args: object, **kw: object) -> None:
        raise RuntimeError("database gone")

    with monkeypatch.context() as m:
        m.setattr(store, "queue", broken)
        with pytest.raises(RuntimeError):
            live.refresh()
    same_as_store(live, store)
    assert [q.job_id for q in live.queue()] == [job]


# -- launches grouped per agent --------------------------------------------------------------


def job(job_id: int) -> JobRecord:
    return JobRecord(job_id=job_id, spec=spec(), state=JobState.RUNNING, node="c0")


class Recorder(AgentClient):
    """An AgentClient whose LaunchJobs calls are recorded; the first one waits until released."""

    def __init__(self) -> None:
        super().__init__(lambda: [])
        self.batches: list[list[int]] = []
        self.release = threading.Event()
        self.refuse: dict[int, str] = {}
        self.error: Exception | None = None

    def launch_jobs(self, target: str, jobs: Sequence[JobRecord]) -> dict[int, str]:
        self.batches.append([j.job_id for j in jobs])
        self.release.wait(5)
        if self.error is not None:
            raise self.error
        return {i: why for i, why in self.refuse.items() if i in self.batches[-1]}


def test_launches_queued_while_a_call_is_on_its_way_go_in_the_next_call() -> None:
    client = Recorder()
    failures: list[tuple[int, str]] = []
    done = threading.Event()

    def on_error(j: JobRecord, exc: Exception) -> None:
        assert isinstance(exc, AgentRefused)
        failures.append((j.job_id, str(exc)))
        done.set()

    client.refuse = {4: "bad job"}
    client.launch_async("a:1", job(1), on_error)
    while not client.batches:  # the first call is on its way
        threading.Event().wait(0.01)
    for i in (2, 3, 4):
        client.launch_async("a:1", job(i), on_error)
    client.release.set()
    assert done.wait(5)
    assert client.batches == [[1], [2, 3, 4]]
    assert failures == [(4, "bad job")]
    client.close()


def test_an_unreachable_agent_fails_every_launch_of_the_call() -> None:
    client = Recorder()
    client.error = AgentUnreachable("a:1: UNAVAILABLE")
    client.release.set()
    failed: list[int] = []
    all_in = threading.Event()

    def on_error(j: JobRecord, exc: Exception) -> None:
        assert isinstance(exc, AgentUnreachable)
        failed.append(j.job_id)
        if len(failed) == 2:
            all_in.set()

    client.launch_async("a:1", job(1), on_error)
    client.launch_async("a:1", job(2), on_error)
    assert all_in.wait(5)
    assert sorted(failed) == [1, 2]
    client.close()
