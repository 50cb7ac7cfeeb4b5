"""The store's job steps on SQLite and PostgreSQL: created guarded in one transaction (the job
RUNNING, the allocation not busy unless overlapping, ids in order), ended guarded, and ended with
their job on every path that ends the job's run (finish, cancel, launch failure, node loss, requeue)."""

from __future__ import annotations

import threading

import pytest

from pslurm.controller.store import NewStep, StepEnd, Store
from pslurm.core.jobspec import JobSpec
from pslurm.core.lifecycle import JOB_ENDED, StepBusy
from pslurm.core.states import InvalidTransition, JobState


def running(store: Store, now: float = 10.0, **kw: object) -> int:
    values: dict[str, object] = dict(name="j", user="alice", uid=1000, gid=1000, workdir="/w", script="#!/bin/sh\n")
    values.update(kw)
    job_id = store.submit(JobSpec(**values), "p", None, now)  # type: ignore[arg-type]
    assert store.start_jobs([(job_id, "c000", (0,))], now) == [job_id]
    return job_id


def new(name: str = "hostname", overlap: bool = False) -> NewStep:
    return NewStep(name, "c000", 2, 2, "", overlap, (name, "-a"), "/w")


def test_migrate_twice_is_a_no_op(store):
    store.migrate()


def test_steps_are_numbered_in_creation_order_and_listed(store):
    job = running(store)
    first = store.create_step(job, 0, new("a"), 11.0)
    assert (first.step_id, first.state, first.argv, first.start_time) == (0, JobState.RUNNING, ("a", "-a"), 11.0)
    store.end_steps([StepEnd(job, 0, "c000", JobState.COMPLETED, 0, 0, 12.0)])
    second = store.create_step(job, 0, new("b"), 13.0)
    assert second.step_id == 1
    listed = store.steps([job])[job]
    assert [(s.step_id, s.name, s.state) for s in listed] == [(0, "a", JobState.COMPLETED), (1, "b", JobState.RUNNING)]
    assert store.get_step(job, 0).end_time == 12.0 and store.get_step(job, 7) is None
    assert store.running_steps_on("c000") == [second] and store.running_steps_on("c001") == []


def test_a_step_waits_while_a_non_overlapping_one_runs_and_overlapping_ones_share(store):
    job = running(store)
    store.create_step(job, 0, new(), 11.0)
    with pytest.raises(StepBusy, match="Requested nodes are busy"):
        store.create_step(job, 0, new(), 11.0)
    assert store.create_step(job, 0, new(overlap=True), 11.0).step_id == 1  # --overlap shares
    store.end_steps([StepEnd(job, 0, "c000", JobState.COMPLETED, 0, 0, 12.0)])
    assert store.create_step(job, 0, new(), 13.0).step_id == 2  # an overlapping one does not make it busy


def test_a_step_only_in_a_running_job_of_this_run(store):
    pending = store.submit(JobSpec("j", "alice", 1000, 1000, "/w", script="x"), "p", None, 1.0)
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        store.create_step(pending, 0, new(), 2.0)
    job = running(store)
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        store.create_step(job, 1, new(), 11.0)  # an earlier or later run
    store.cancel(job, 12.0)  # COMPLETING
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        store.create_step(job, 0, new(), 12.5)
    assert store.steps([job]) == {}


def test_concurrent_creates_have_exactly_one_winner(store):
    job = running(store)
    outcomes: list[object] = []

    def race() -> None:
        try:
            outcomes.append(store.create_step(job, 0, new(), 11.0).step_id)
        except StepBusy as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [o for o in outcomes if not isinstance(o, Exception)] == [0]


def test_a_step_ends_once_and_only_from_its_node(store):
    job = running(store)
    store.create_step(job, 0, new(), 11.0)
    wrong_node, unknown, ended, never = store.end_steps([
        StepEnd(job, 0, "c001", JobState.COMPLETED, 0, 0, 12.0),
        StepEnd(job, 9, "c000", JobState.COMPLETED, 0, 0, 12.0),
        StepEnd(job, 0, "c000", JobState.FAILED, 3, 0, 12.0),
        StepEnd(job, 0, "c000", JobState.RUNNING, 0, 0, 12.0)])
    assert isinstance(wrong_node, InvalidTransition) and isinstance(unknown, InvalidTransition)
    assert not isinstance(ended, Exception) and (ended.state, ended.exit_code) == (JobState.FAILED, 3)
    assert isinstance(never, InvalidTransition)
    [again] = store.end_steps([StepEnd(job, 0, "c000", JobState.COMPLETED, 0, 0, 13.0)])
    assert isinstance(again, InvalidTransition) and JOB_ENDED in str(again)
    assert store.get_step(job, 0).state is JobState.FAILED


@pytest.mark.parametrize("end", ["finish", "cancel", "launch_failed", "node_lost", "requeue"])
def test_every_end_of_the_jobs_run_ends_its_running_steps_in_the_same_transaction(store, end):
    job = running(store, requeue=True) if end == "requeue" else running(store)
    store.create_step(job, 0, new(), 11.0)
    store.end_steps([StepEnd(job, 0, "c000", JobState.COMPLETED, 0, 0, 12.0)])
    store.create_step(job, 0, new(), 13.0)
    if end == "finish":
        store.finish(job, "c000", 0, JobState.COMPLETED, 0, 0, 20.0)
    elif end == "cancel":
        store.cancel(job, 19.0)
        assert store.get_step(job, 1).state is JobState.RUNNING  # still running until the run's end is seen
        store.finish(job, "c000", 0, JobState.CANCELLED, 0, 15, 20.0)
    elif end == "launch_failed":
        store.launch_failed(job, "c000", 0, "no such directory", 20.0)
    elif end == "node_lost":
        store.node_lost(job, "c000", 20.0, "node down")
    else:
        store.requeue(job, 20.0, "requeued")
    done, ended = store.steps([job])[job]
    assert done.state is JobState.COMPLETED and done.end_time == 12.0  # an ended step keeps its end
    assert ended.state is (JobState.NODE_FAIL if end == "node_lost" else JobState.CANCELLED)
    assert ended.end_time == 20.0
    assert store.running_steps_on("c000") == []


def test_relinquish_ends_an_allocation_completed_or_failed_with_the_commands_exit_code(store):
    job = running(store, script=None, allocation=True)
    change = store.relinquish(job, 0, 20.0)
    assert change.to is JobState.COMPLETING
    store.finish(job, "c000", 0, JobState.CANCELLED, 0, 15, 21.0)  # the agent ended the run
    record = store.get_job(job)
    assert (record.state, record.exit_code, record.exit_signal) == (JobState.COMPLETED, 0, 0)
    other = running(store, script=None, allocation=True)
    store.relinquish(other, 3, 20.0)
    with pytest.raises(InvalidTransition):
        store.relinquish(other, 0, 20.5)  # once
    store.finish(other, "c000", 0, JobState.CANCELLED, 0, 15, 21.0)
    record = store.get_job(other)
    assert (record.state, record.exit_code) == (JobState.FAILED, 3)


def test_a_relinquished_allocation_that_ran_out_of_time_is_a_timeout(store):
    job = running(store, script=None, allocation=True)
    store.relinquish(job, 0, 20.0)
    store.finish(job, "c000", 0, JobState.TIMEOUT, 0, 9, 21.0)
    assert store.get_job(job).state is JobState.TIMEOUT
