"""One contract for the store, run on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import threading

import pytest

from pslurm.controller.store import Store
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobSpec
from pslurm.core.node import GpuInfo, NodeRecord
from pslurm.core.states import InvalidTransition, JobReason, JobState, NodeState


def start(store, job_id, node, gpus, now):
    """The scheduler's start operation for one placement: True when the job started."""
    return store.start_jobs([(job_id, node, gpus)], now) == [job_id]


def spec(name="j", user="alice", gpus=1):
    return JobSpec(name=name, user=user, uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   environment={"A": "b"}, gres=(GresRequest("gpu", "a100", gpus),) if gpus else ())


def test_migrate_is_idempotent(store):
    store.migrate()
    assert store.count_jobs() == 0


def test_submit_stores_a_pending_job_with_its_spec_and_an_event(store):
    job_id = store.submit(spec(), "gpu", 60, now=100.0)
    job = store.get_job(job_id)
    assert job is not None
    assert (job.state, job.partition, job.time_limit, job.submit_time) == (JobState.PENDING, "gpu", 60, 100.0)
    assert job.spec == spec()
    assert [(e.from_state, e.to_state) for e in store.events(job_id)] == [(None, JobState.PENDING)]


def test_ids_increase(store):
    assert [store.submit(spec(), "gpu", None, 1.0) for _ in range(3)] == [1, 2, 3]


def test_start_is_compare_and_set(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    assert start(store, job_id, "c000", (1,), now=2.0)
    assert not start(store, job_id, "c001", (0,), now=3.0)  # already RUNNING: the second start loses
    job = store.get_job(job_id)
    assert (job.state, job.node, job.gpu_indices, job.start_time) == (JobState.RUNNING, "c000", (1,), 2.0)
    assert store.allocations()[0].gpu_indices == (1,)


def test_concurrent_starts_have_exactly_one_winner(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    wins = []
    barrier = threading.Barrier(8)

    def race(i):
        barrier.wait()
        wins.append(start(store, job_id, f"c{i:03d}", (0,), now=2.0))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(wins) == [False] * 7 + [True]
    assert len([e for e in store.events(job_id) if e.to_state is JobState.RUNNING]) == 1


def test_forbidden_transition_fails_loudly_and_changes_nothing(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    with pytest.raises(InvalidTransition, match="PENDING"):
        store.finish(job_id, "c000", 0, JobState.COMPLETED, 0, 0, 2.0)
    assert store.get_job(job_id).state is JobState.PENDING
    assert len(store.events(job_id)) == 1


def test_a_batch_script_a_signal_ended_fails_with_job_launch_failure_as_slurmctld_words_it(store):
    killed, failed = (store.submit(spec(), "gpu", None, 1.0) for _ in range(2))
    for job_id in (killed, failed):
        assert start(store, job_id, "c000", (0,), now=2.0)
    store.finish(killed, "c000", 0, JobState.FAILED, 0, 9, 3.0)  # `kill -9 $$`: WIFSIGNALED
    store.finish(failed, "c000", 0, JobState.FAILED, 3, 0, 3.0)
    assert (store.get_job(killed).reason, store.get_job(killed).exit_signal) == (JobReason.JOB_LAUNCH_FAILURE, 9)
    assert store.get_job(failed).reason is JobReason.NON_ZERO_EXIT_CODE


def test_final_states_are_left_only_by_a_requeue(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    start(store, job_id, "c000", (0,), 2.0)
    store.finish(job_id, "c000", 0, JobState.COMPLETED, 0, 0, 3.0, {"gpu_seconds": 1.0})
    for op in (lambda: store.cancel(job_id, 4.0), lambda: store.finish(job_id, "c000", 0, JobState.FAILED, 1, 0, 4.0),
               lambda: store.start_jobs([(job_id, "c000", (0,))], 4.0) or store.start_jobs([(-1, "", ())], 4.0)[0],
               lambda: store.node_lost(job_id, "c000", 4.0, "gone"), lambda: store.hold(job_id, 4.0, True)):
        with pytest.raises((InvalidTransition, IndexError)):
            op()
    assert store.allocations() == []
    assert store.requeue(job_id, 5.0, "requeued").from_state is JobState.COMPLETED
    job = store.get_job(job_id)
    assert (job.state, job.restarts, job.end_time, job.start_time, job.gpu_seconds) == (
        JobState.PENDING, 1, None, None, None)
    assert [e.to_state for e in store.events(job_id)][-2:] == [JobState.COMPLETED, JobState.PENDING]


def test_max_rss_is_kept_from_the_end_and_cleared_by_a_requeue(store):
    cpu_job, gpu_job = store.submit(spec(gpus=0), "cpu", None, 1.0), store.submit(spec(), "gpu", None, 1.0)
    start(store, cpu_job, "c000", (), 2.0)
    start(store, gpu_job, "c000", (0,), 2.0)
    store.finish(cpu_job, "c000", 0, JobState.COMPLETED, 0, 0, 3.0, {"max_rss_kb": 51200})
    store.finish(gpu_job, "c000", 0, JobState.COMPLETED, 0, 0, 3.0, {"gpu_seconds": 1.0})
    for light in (False, True):
        assert (store.get_job(cpu_job, light=light).max_rss_kb, store.get_job(gpu_job, light=light).max_rss_kb) == (
            51200, None)
        listed = store.get_jobs([cpu_job, gpu_job], light=light)
        assert [(j.max_rss_kb, j.gpu_seconds) for j in listed] == [(51200, None), (None, 1.0)]
    store.requeue(cpu_job, 4.0, "requeued")
    assert store.get_job(cpu_job).max_rss_kb is None


def test_unknown_job(store):
    assert store.get_job(99) is None
    with pytest.raises(InvalidTransition, match="does not exist"):
        store.cancel(99, 1.0)


def test_history_records_every_transition(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    start(store, job_id, "c000", (0,), 2.0)
    assert store.cancel(job_id, 3.0).to is JobState.COMPLETING
    store.finish(job_id, "c000", 0, JobState.FAILED, 0, 15, 4.0)  # the agent saw it end on SIGTERM
    assert [(e.op, e.to_state) for e in store.events(job_id)] == [
        ("submit", JobState.PENDING), ("start", JobState.RUNNING), ("cancel", JobState.COMPLETING),
        ("finish", JobState.CANCELLED)]
    assert store.get_job(job_id).cancel_requested


def test_queries_filter_by_user_state_and_activity(store):
    a = store.submit(spec(user="alice"), "gpu", None, 1.0)
    b = store.submit(spec(user="bob"), "gpu", None, 1.0)
    store.cancel(b, 2.0)
    assert [j.job_id for j in store.get_jobs()] == [a]
    assert [j.job_id for j in store.get_jobs(include_finished=True)] == [a, b]
    assert [j.job_id for j in store.get_jobs(users=["bob"], include_finished=True)] == [b]
    assert [j.job_id for j in store.get_jobs(states=[JobState.CANCELLED])] == [b]
    assert [j.job_id for j in store.get_jobs(job_ids=[b])] == [b]
    assert [(q.job_id, q.gres) for q in store.queue(limit=10)] == [(a, spec().gres)]


def test_collapsed_listing_groups_an_arrays_pending_tasks_by_reason(store):
    a = store.submit(spec(), "gpu", None, 1.0, array_ids=range(10), throttle=2)  # tasks 0-9: jobs a..a+9
    single = store.submit(spec(user="bob"), "gpu", None, 1.0)
    b = store.submit(spec(), "gpu", None, 1.0, array_ids=[1, 3, 5, 6, 7])
    start(store, a, "c000", (0,), 2.0)  # task 0 runs: its own row
    store.update_pending({a + 9: ("Dependency", 0, None, None)})  # task 9 waits for something else: its own row
    store.cancel(b + 1, 3.0)  # b's task 3 is gone: 1,5-7 left
    rows = store.get_jobs(light=True, collapse_arrays=True)
    assert [(j.job_id, j.state, j.collapsed_tasks) for j in rows] == [
        (a, JobState.RUNNING, ""), (a + 1, JobState.PENDING, "1-8"), (a + 9, JobState.PENDING, ""),
        (single, JobState.PENDING, ""), (b, JobState.PENDING, "1,5-7")]
    assert rows[1].spec.array == "%2" and rows[1].array_job_id == a
    assert len(store.get_jobs(light=True)) == 16 - 1  # uncollapsed: every task but the cancelled one
    assert [j.collapsed_tasks for j in store.get_jobs(users=["bob"], collapse_arrays=True)] == [""]
    assert [(j.job_id, j.state, j.collapsed_tasks) for j in store.get_jobs(job_ids=[b], collapse_arrays=True)] == [
        (b, JobState.PENDING, "1,5-7"), (b + 1, JobState.CANCELLED, "")]  # by id, finished tasks show too


def test_reason_is_kept_without_an_event(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    store.update_pending({job_id: ("Resources", 0, None, None)})
    assert store.get_job(job_id).reason == "Resources"
    assert len(store.events(job_id)) == 1


def test_nodes_are_inserted_once_and_keep_their_runtime_state(store):
    configured = [NodeRecord("c000", "127.0.0.1", 7000, 8, 1000, (GresRequest("gpu", None, 2),))]
    store.ensure_nodes(configured)
    assert store.get_node("c000").state is NodeState.UNKNOWN
    store.set_node_state("c000", NodeState.UP, 1.0)
    store.update_node("c000", drain=True, reason="maint", gpus=[GpuInfo(0, "gpu", "a100", "/dev/nvidia0", 0)])
    store.ensure_nodes(configured)  # a controller restart
    node = store.get_node("c000")
    assert (node.state, node.drain, node.reason) == (NodeState.UP, True, "maint")
    assert node.gpus[0].file == "/dev/nvidia0" and node.gres == (GresRequest("gpu", None, 2),)


def test_node_transitions_are_compare_and_set(store):
    store.ensure_nodes([NodeRecord("c000", "127.0.0.1", 7000, 8, 1000)])
    with pytest.raises(InvalidTransition):
        store.set_node_state("c000", NodeState.UNKNOWN, 1.0)
    assert store.set_node_state("c000", NodeState.UP, 1.0) is NodeState.UNKNOWN
    assert store.set_node_state("c000", NodeState.DOWN, 2.0, reason="Not responding") is NodeState.UP
    assert store.get_node("c000").reason == "Not responding"


def test_node_reads_answer_from_memory_and_follow_every_write_and_a_reopened_store(store, db_url):
    store.ensure_nodes([NodeRecord(f"c{i:03d}", "127.0.0.1", 7000 + i, 8, 1000) for i in range(3)])
    assert [n.name for n in store.get_nodes()] == ["c000", "c001", "c002"]
    store.set_node_state("c001", NodeState.UP, 5.0)
    store.update_node("c001", drain=True, reason="maint")
    store.heard({"c000": 7.0, "c001": 8.0})
    assert [(n.state, n.drain, n.last_heartbeat) for n in store.get_nodes()] == [
        (NodeState.UNKNOWN, False, 7.0), (NodeState.UP, True, 8.0), (NodeState.UNKNOWN, False, 0.0)]
    assert store.get_node("c001").reason == "maint" and store.get_node("c404") is None
    other = Store(db_url)  # what was written is in the database, not only in this store's memory
    try:
        assert [(n.state, n.drain, n.last_heartbeat) for n in other.get_nodes()] == [
            (NodeState.UNKNOWN, False, 7.0), (NodeState.UP, True, 8.0), (NodeState.UNKNOWN, False, 0.0)]
    finally:
        other.close()


def test_acknowledged_job_survives_reopening_the_store(db_url):
    first = Store(db_url)
    first.migrate()
    job_id = first.submit(spec(), "gpu", None, 1.0)
    first.close()
    second = Store(db_url)
    second.migrate()
    assert second.get_job(job_id).state is JobState.PENDING
    second.close()


def test_concurrent_writes_share_one_commit_and_keep_their_own_outcome(store):
    ids = [store.submit(spec(), "gpu", None, 1.0) for _ in range(6)]
    store.cancel(ids[5], 1.5)
    writer = store._writer  # the store's group commit: hold it so that the writes below queue up
    holding, release = threading.Event(), threading.Event()
    leader = threading.Thread(target=writer.write, args=(lambda conn: (holding.set(), release.wait(10)),))
    leader.start()
    holding.wait(10)
    before = writer.commits
    outcomes = {}

    def end(job_id):
        try:
            outcomes[job_id] = store.cancel(job_id, 2.0).from_state
        except InvalidTransition as exc:
            outcomes[job_id] = str(exc)

    threads = [threading.Thread(target=end, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    while len(writer._queue) < len(ids):  # every write waits behind the held one
        threading.Event().wait(0.01)
    release.set()
    for t in [leader, *threads]:
        t.join(10)
    assert writer.commits - before == 2  # the held transaction, then all six in one
    assert outcomes == {**{i: JobState.PENDING for i in ids[:5]}, ids[5]: f"job {ids[5]} is CANCELLED: it cannot "
                                                                       "cancel"}
    assert {j.state for j in store.get_jobs(job_ids=ids[:5])} == {JobState.CANCELLED}


def test_a_failed_group_commit_stores_none_of_its_writes(store):
    from pslurm.controller.store import StoreError
    from pslurm.controller.store.queries import _apply
    from pslurm.core import lifecycle

    job_id = store.submit(spec(), "gpu", None, 1.0)

    def work(conn):
        _apply(conn, job_id, 3.0, lambda job: lifecycle.cancel(job, 3.0))
        raise RuntimeError("disk on fire")

    with pytest.raises(StoreError):
        store._writer.write(work)
    assert store.get_job(job_id).state is JobState.PENDING and len(store.events(job_id)) == 1


def test_finished_usage_is_read_incrementally_by_event(store):
    a, b, never_ran = (store.submit(spec(user=u), "gpu", None, 1.0) for u in ("alice", "bob", "carol"))
    for job_id in (a, b):
        start(store, job_id, "c000", (0,), 2.0)
    store.finish(a, "c000", 0, JobState.COMPLETED, 0, 0, 5.0)
    store.cancel(never_ran, 5.0)  # never started: no usage
    first, mark = store.finished_usage(since=0.0)
    assert [(r.job_id, r.user, r.gpus, r.start_time, r.end_time) for r in first] == [(a, "alice", 1, 2.0, 5.0)]
    assert store.finished_usage(since=0.0, after_event=mark) == ([], mark)  # nothing new: nothing read
    store.finish(b, "c000", 0, JobState.FAILED, 1, 0, 9.0)
    later, newer = store.finished_usage(since=0.0, after_event=mark)
    assert [r.job_id for r in later] == [b] and newer > mark
    assert store.finished_usage(since=6.0)[0] == later  # ``since`` drops runs that ended before it


def test_a_held_job_does_not_start_and_only_an_operator_releases_an_operators_hold(store):
    from pslurm.core.lifecycle import NotPermitted

    job_id = store.submit(spec(), "gpu", None, 1.0)
    store.hold(job_id, 2.0, by_operator=True)
    assert not start(store, job_id, "c000", (0,), 3.0)  # held after the pass's snapshot: the start loses
    with pytest.raises(NotPermitted):
        store.release(job_id, 4.0, by_operator=False)
    store.release(job_id, 5.0, by_operator=True)
    with pytest.raises(InvalidTransition, match="not held"):
        store.release(job_id, 6.0, by_operator=True)
    assert start(store, job_id, "c000", (0,), 7.0)
    assert [e.op for e in store.events(job_id)] == ["submit", "hold", "release", "start"]


def test_an_earlier_runs_end_does_not_end_the_requeued_run(store):
    job_id = store.submit(spec(), "gpu", None, 1.0, requeue=True)
    start(store, job_id, "c000", (0,), 2.0)
    assert store.node_lost(job_id, "c000", 3.0, "node not responding").to is JobState.PENDING  # may requeue
    start(store, job_id, "c001", (0,), 4.0)
    with pytest.raises(InvalidTransition, match="run 0"):  # the first run's end, reported late
        store.finish(job_id, "c000", 0, JobState.COMPLETED, 0, 0, 5.0)
    with pytest.raises(InvalidTransition):  # the first node is no longer the job's
        store.node_lost(job_id, "c000", 5.0, "gone again")
    job = store.get_job(job_id)
    assert (job.state, job.node, job.restarts) == (JobState.RUNNING, "c001", 1)
    store.finish(job_id, "c001", 1, JobState.COMPLETED, 0, 0, 6.0)
    assert store.get_job(job_id).state is JobState.COMPLETED


def test_a_lost_node_fails_a_job_that_may_not_requeue_and_says_why(store):
    job_id = store.submit(spec(), "gpu", None, 1.0, requeue=False)
    start(store, job_id, "c000", (0,), 2.0)
    store.node_lost(job_id, "c000", 3.0, "the agent on c000 does not run it")
    job = store.get_job(job_id)
    assert (job.state, job.reason, job.system_comment) == (
        JobState.NODE_FAIL, "NodeDown", "the agent on c000 does not run it")


def test_a_launch_failure_ends_the_job_failed_with_its_reason(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    start(store, job_id, "c000", (0,), 2.0)
    store.launch_failed(job_id, "c000", 0, "chdir(/nope): No such file or directory", 3.0)
    job = store.get_job(job_id)
    assert (job.state, job.reason, job.exit_code) == (JobState.FAILED, "JobLaunchFailure", 2)
    assert job.system_comment == "launch failed on c000: chdir(/nope): No such file or directory"
    assert store.events(job_id)[-1].op == "launch_failed"


def test_a_requeue_asked_of_a_running_job_waits_for_its_end(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    start(store, job_id, "c000", (0,), 2.0)
    assert store.request_requeue(job_id, 3.0).to is JobState.COMPLETING
    assert store.allocations()[0].job_id == job_id  # still holds its GPU until the end is seen
    assert store.finish(job_id, "c000", 0, JobState.CANCELLED, 0, 15, 4.0).to is JobState.PENDING
    job = store.get_job(job_id)
    assert (job.state, job.restarts, job.requeue_requested, job.cancel_requested) == (JobState.PENDING, 1, False, False)


def test_a_held_requeue_comes_back_held_and_a_cancel_keeps_the_reason_it_waited_for(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    start(store, job_id, "c000", (0,), 2.0)
    assert store.request_requeue(job_id, 3.0, hold="user").to is JobState.COMPLETING
    assert store.finish(job_id, "c000", 0, JobState.CANCELLED, 0, 15, 4.0).to is JobState.PENDING
    job = store.get_job(job_id)
    assert (job.state, job.hold, job.reason, job.restarts) == (JobState.PENDING, "user", "JobHeldUser", 1)
    assert store.cancel(job_id, 5.0).to is JobState.CANCELLED
    assert store.get_job(job_id).reason == "JobHeldUser"  # as slurmctld: the reason it waited for stays
    assert store.requeue(job_id, 6.0, "requeued", hold="user").to is JobState.PENDING  # a final job: at once
    assert store.get_job(job_id).hold == "user"


def test_an_operators_settings_show_in_every_read_and_touch_no_state(store):
    job_id = store.submit(spec(), "gpu", None, 1.0)
    assert store.set_pending_fields([job_id], nice=5, admin_priority=7, priority=7) == [job_id]
    assert store.get_job(job_id).spec.nice == 5 and store.get_job(job_id, light=True).spec.nice == 5
    assert store.get_job(job_id).priority == 7 and len(store.events(job_id)) == 1
    with pytest.raises(ValueError):
        store.set_pending_fields([job_id], hold="user")  # the lifecycle's, not a setting


def test_begin_deadline_comment_and_qos_are_columns_and_deadline_is_an_operation(store):
    from dataclasses import replace

    asked = replace(spec(), begin_time=50.0, deadline=500.0, comment="for the paper", qos="normal", warn_signal=10,
                    warn_time=30, warn_batch=True)
    job_id = store.submit(asked, "gpu", 60, 1.0)
    [queued] = store.queue()
    assert (queued.begin_time, queued.deadline) == (50.0, 500.0)
    assert store.get_job(job_id).spec == asked  # --signal lives in the stored request
    light = store.get_jobs([job_id], light=True)[0].spec
    assert (light.comment, light.qos) == ("for the paper", "normal")
    assert store.next_job_id() == job_id + 1
    store.deadline(job_id, 450.0, "cannot end before its deadline")
    job = store.get_job(job_id)
    assert (job.state, job.reason, job.exit_code, job.start_time, job.end_time) == (
        JobState.DEADLINE, "DeadLine", 1, 450.0, 450.0)
    assert store.events(job_id)[-1].op == "deadline" and store.queue() == []
    with pytest.raises(InvalidTransition):
        store.deadline(job_id, 460.0, "again")
    later = store.submit(spec(), "gpu", None, 2.0)
    assert store.start_jobs([(later, "c000", (0,))], 3.0, time_limits={later: 497}) == [later]
    assert store.get_job(later).time_limit == 497


def test_a_pass_keeps_the_words_of_the_reason_it_keeps_and_the_reason_a_job_waited_for(store):
    """update_pending's CASE and COALESCE on each database: the description (state_desc) lasts while a pass
    writes the same reason and ends with another; a reason accounting keeps becomes reason_prev, None,
    Priority and Resources leave it."""
    job_id = store.submit(spec(), "gpu", None, 1.0)
    assert start(store, job_id, "c000", (0,), now=2.0)
    store.requeue(job_id, 3.0, "requeued held", hold="user")
    job = store.get_job(job_id)
    assert (job.reason, job.state_desc, job.reason_prev) == (
        JobReason.JOB_HELD_USER, "job requeued in held state", JobReason.JOB_HELD_USER)
    store.update_pending({job_id: ("JobHeldUser", 0, None, None)})
    assert store.get_job(job_id).state_desc == "job requeued in held state"
    store.update_pending({job_id: ("Dependency", 0, None, None)})
    store.update_pending({job_id: ("Resources", 0, None, None)})
    job = store.get_job(job_id)
    assert (job.reason, job.state_desc, job.reason_prev) == (JobReason.RESOURCES, "", JobReason.DEPENDENCY)
