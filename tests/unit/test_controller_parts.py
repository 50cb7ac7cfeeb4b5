"""The controller's parts one at a time, each with fakes of its neighbours and a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.auth.credential import Identity
from pslurm.controller.agents import AgentRefused, AgentUnreachable
from pslurm.controller.jobs import JobService
from pslurm.controller.monitor import NodeMonitor, Run
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import RunEnd, Store
from pslurm.core import lifecycle
from pslurm.core.config import ClusterConfig, parse_slurm_conf
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobReason, JobState, NodeState
from tests.conftest import store_with_nodes

CONF = ("SlurmdTimeout=30\nBatchStartTimeout=10\n"
        "NodeName=c000 NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "NodeName=c001 NodeAddr=127.0.0.1 Port=7001 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "PartitionName=p Nodes=c[000-001] Default=YES\n")
ROOT = Identity(0, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Doorbell:
    def __init__(self) -> None:
        self.rings = 0

    def __call__(self) -> None:
        self.rings += 1


class FakeAgents:
    """What the parts asked of the node agents; a launch may be made to fail."""

    def __init__(self) -> None:
        self.launches: list[tuple[str, int]] = []
        self.signals: list[tuple[str, int, int]] = []
        self.launch_error: Exception | None = None

    def launch_async(self, target: str, job: JobRecord, on_error) -> None:  # type: ignore[no-untyped-def]
        self.launches.append((target, job.job_id))
        if self.launch_error is not None:
            on_error(job, self.launch_error)

    def signal(self, target: str, job_id: int, signal: int) -> None:
        self.signals.append((target, job_id, signal))


class FakeNodeHealth:
    def __init__(self) -> None:
        self.unreachable_nodes: list[str] = []
        self.measured: dict[str, dict[int, tuple[int, float]]] = {}

    def unreachable(self, node: str, why: str) -> None:
        self.unreachable_nodes.append(node)

    def gpu_measured(self, node: str) -> dict[int, tuple[int, float]]:
        return self.measured.get(node, {})


@pytest.fixture
def config() -> ClusterConfig:
    return parse_slurm_conf(CONF)


@pytest.fixture
def store(tmp_path: Path, config: ClusterConfig):
    s = store_with_nodes(tmp_path / "parts.db", config, up=())
    yield s
    s.close()


def spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


def running_job(store: Store, node: str = "c000", now: float = 1000.0, **kw: object) -> int:
    job_id = store.submit(spec(**kw), "p", None, now, requeue=bool(kw.get("requeue")))
    assert store.start_jobs([(job_id, node, (0,))], now) == [job_id]
    return job_id


def bring_up(store: Store, *names: str, now: float = 1000.0) -> None:
    for name in names:
        store.set_node_state(name, NodeState.UP, now)
        store.update_node(name, last_heartbeat=now)


# -- the node monitor ------------------------------------------------------------------------


@pytest.fixture
def monitor(config, store):  # type: ignore[no-untyped-def]
    clock, bell = Clock(), Doorbell()
    m = NodeMonitor(config, store, bell, clock)
    bring_up(store, "c000", "c001")
    return m, clock, bell


def test_a_run_missing_from_heartbeats_is_lost_only_after_the_launch_grace(monitor, store):
    m, clock, bell = monitor
    job_id = running_job(store)
    clock.now = 1005.0  # its launch may still be on the way
    assert m.heartbeat("c000", [], "") == (False, [])
    assert store.get_job(job_id).state is JobState.RUNNING
    clock.now = 1011.0
    m.heartbeat("c000", [], "")
    job = store.get_job(job_id)
    assert (job.state, job.reason) == (JobState.NODE_FAIL, JobReason.NODE_DOWN)
    assert job.system_comment == "the agent on c000 does not run it"
    assert bell.rings >= 1


def test_a_lost_run_that_may_requeue_pends_again(monitor, store):
    m, clock, _ = monitor
    job_id = running_job(store, requeue=True)
    clock.now = 1020.0
    m.heartbeat("c000", [Run(99, 0)], "")
    job = store.get_job(job_id)
    assert (job.state, job.restarts, job.node) == (JobState.PENDING, 1, None)


def test_runs_the_controller_does_not_hold_there_are_killed(monitor, store):
    m, clock, _ = monitor
    mine = running_job(store, "c000")
    elsewhere = running_job(store, "c001")
    ended = running_job(store, "c000")
    store.finish(ended, "c000", 0, JobState.COMPLETED, 0, 0, 1001.0)
    clock.now = 1002.0
    again, kill = m.heartbeat("c000", [Run(mine, 0), Run(elsewhere, 0), Run(ended, 0), Run(mine, 7)], "")
    assert not again
    assert kill == [Run(elsewhere, 0), Run(ended, 0), Run(mine, 7)]
    assert store.get_job(mine).state is JobState.RUNNING


def test_an_earlier_run_on_the_node_is_killed_and_the_current_one_lost_after_the_grace(monitor, store):
    m, clock, _ = monitor
    job_id = running_job(store, requeue=True)
    store.node_lost(job_id, "c000", 1001.0, "test")
    store.start_jobs([(job_id, "c000", (0,))], 1002.0)  # run 1 on the same node
    clock.now = 1003.0
    assert m.heartbeat("c000", [Run(job_id, 0)], "")[1] == [Run(job_id, 0)]
    clock.now = 1013.0
    m.heartbeat("c000", [Run(job_id, 0)], "")  # still only the old run: the new one never arrived
    job = store.get_job(job_id)
    assert (job.state, job.restarts) == (JobState.PENDING, 2)


def test_silent_nodes_go_down_and_their_jobs_are_lost(monitor, store):
    m, clock, _ = monitor
    job_id = running_job(store)
    clock.now = 1031.0
    m.check_heartbeats()
    assert store.get_node("c000").state is NodeState.DOWN
    assert store.get_job(job_id).state is JobState.NODE_FAIL
    again, _ = m.heartbeat("c000", [], "")
    assert again  # the agent is back: it registers again
    m.register("c000", "127.0.0.1", 7000, [], [], "", "none")
    assert store.get_node("c000").state is NodeState.UP


def test_a_node_an_operator_set_down_stays_down_when_its_agent_registers(monitor, store):
    m, clock, _ = monitor
    job_id = running_job(store)
    m.update_node("c000", "DOWN", "bad fan")
    assert store.get_job(job_id).state is JobState.NODE_FAIL
    assert m.heartbeat("c000", [Run(job_id, 0)], "") == (False, [Run(job_id, 0)])  # its job is killed
    m.register("c000", "127.0.0.1", 7000, [], [], "", "none")
    assert store.get_node("c000").state is NodeState.DOWN
    m.update_node("c000", "RESUME", "")
    assert store.get_node("c000").state is NodeState.UP


def test_a_node_reason_records_who_set_it_and_when_as_slurmctld(monitor, store):
    m, clock, _ = monitor
    clock.now = 1020.0
    m.update_node("c001", "DRAIN", "bad fan", uid=1234)
    node = store.get_node("c001")
    assert (node.reason, node.reason_uid, node.reason_time) == ("bad fan", 1234, 1020.0)
    m.update_node("c001", "RESUME", "", uid=1234)
    node = store.get_node("c001")
    assert (node.reason, node.reason_uid, node.reason_time) == ("", None, None)
    clock.now = 1031.0  # its agent silent past SlurmdTimeout: the controller sets it DOWN, as root
    m.check_heartbeats()
    node = store.get_node("c001")
    assert (node.reason, node.reason_uid, node.reason_time) == ("Not responding", 0, 1031.0)
    m.register("c001", "127.0.0.1", 7000, [], [], "", "none")  # back: the reason goes, and who set it
    assert (store.get_node("c001").reason_uid, store.get_node("c001").reason_time) == (None, None)


def test_a_node_whose_runs_agreed_is_reconciled_again_once_any_job_changed(monitor, store):
    m, clock, _ = monitor
    first = running_job(store)
    clock.now = 1001.0
    assert m.heartbeat("c000", [Run(first, 0)], "", steps=[]) == (False, [])  # agrees: later beats read nothing
    second = running_job(store, now=1001.0)  # started on c000; its agent never got it
    clock.now = 1012.0
    m.heartbeat("c000", [Run(first, 0)], "", steps=[])
    assert store.get_job(second).state is JobState.NODE_FAIL
    store.finish(first, "c000", 0, JobState.COMPLETED, 0, 0, 1012.0)  # ended while its agent still runs it
    assert m.heartbeat("c000", [Run(first, 0)], "", steps=[]) == (False, [Run(first, 0)])


def test_a_heartbeat_handled_late_judges_by_when_the_agent_listed_its_runs(monitor, store):
    m, clock, _ = monitor
    job_id = running_job(store, now=1000.0)
    clock.now = 1030.0  # a heartbeat listed at 1004 (the launch had not arrived yet) handled 26 s later
    assert m.heartbeat("c000", [], "", steps=[], sent_at=1004.0) == (False, [])
    assert store.get_job(job_id).state is JobState.RUNNING
    m.heartbeat("c000", [], "", steps=[], sent_at=1040.0)  # an agent's clock ahead of ours: ours counts
    job = store.get_job(job_id)
    assert (job.state, job.end_time) == (JobState.NODE_FAIL, 1030.0)


def test_heartbeats_are_written_to_the_store_once_a_second_not_one_by_one(monitor, store):
    m, clock, _ = monitor
    clock.now = 1025.0
    m.heartbeat("c000", [], "")
    assert store.get_node("c000").last_heartbeat == 1000.0  # not written yet: one write per flush
    assert next(s.node for s in m.nodes() if s.node.name == "c000").last_heartbeat == 1025.0
    clock.now = 1040.0  # c000 was heard 15 s ago, c001 40 s ago (SlurmdTimeout=30)
    m.check_heartbeats()
    assert (store.get_node("c000").state, store.get_node("c001").state) == (NodeState.UP, NodeState.DOWN)
    m.flush_heard()
    assert store.get_node("c000").last_heartbeat == 1025.0


# -- the scheduler ---------------------------------------------------------------------------


@pytest.fixture
def scheduler(config, store):  # type: ignore[no-untyped-def]
    agents, health, started = FakeAgents(), FakeNodeHealth(), []
    s = Scheduler(config, store, agents, health, partitions_of=lambda name: frozenset({"p"}),
                  clock=Clock(), after_start=lambda ids: started.append((list(ids), list(agents.launches))))
    bring_up(store, "c000", "c001")
    return s, agents, health, started


def test_a_pass_starts_and_launches_and_the_fault_point_sits_between(scheduler, store):
    s, agents, _, started = scheduler
    job_id = store.submit(spec(gres=()), "p", None, 1000.0)
    assert s.schedule() == 1
    assert started == [([job_id], [])]  # the start is committed; no launch has gone yet
    assert agents.launches == [("127.0.0.1:7000", job_id)]
    assert store.get_job(job_id).state is JobState.RUNNING


def test_a_launch_the_agent_refuses_ends_the_job_failed_with_the_reason(scheduler, store):
    s, agents, health, _ = scheduler
    agents.launch_error = AgentRefused("cannot start: bad things")
    job_id = store.submit(spec(), "p", None, 1000.0)
    s.schedule()
    job = store.get_job(job_id)
    assert (job.state, job.reason) == (JobState.FAILED, JobReason.JOB_LAUNCH_FAILURE)
    assert "bad things" in job.system_comment and not health.unreachable_nodes


def test_a_launch_that_does_not_reach_the_agent_tells_the_node_monitor(scheduler, store):
    s, agents, health, _ = scheduler
    agents.launch_error = AgentUnreachable("127.0.0.1:7000: UNAVAILABLE")
    store.submit(spec(), "p", None, 1000.0)
    s.schedule()
    assert health.unreachable_nodes == ["c000"]


def test_a_held_job_is_not_placed(scheduler, store):
    s, agents, _, _ = scheduler
    job_id = store.submit(spec(hold=True), "p", None, 1000.0)
    assert s.schedule() == 0 and agents.launches == []
    assert store.get_job(job_id).reason is JobReason.JOB_HELD_USER


# -- the job service -------------------------------------------------------------------------


@pytest.fixture
def service(config, store):  # type: ignore[no-untyped-def]
    agents, bell = FakeAgents(), Doorbell()
    bring_up(store, "c000", "c001")
    return JobService(config, store, agents, bell, Clock(), operators=frozenset({0})), agents, bell


def report_end(config: ClusterConfig, store: Store, job_id: int, node: str, restarts: int, state: JobState,
               exit_code: int, exit_signal: int, end_time: float, launch_failure: str = "") -> None:
    """What an agent's JobEnded does: the node monitor records the end."""
    end = RunEnd(job_id, node, restarts, state, exit_code, exit_signal, end_time, launch_failure=launch_failure)
    NodeMonitor(config, store, Doorbell(), Clock()).runs_ended(node, [end])


def test_submit_commits_pending_and_rings_the_scheduler(service, store):
    jobs, _, bell = service
    job_id = jobs.submit(spec(), ROOT)
    assert store.get_job(job_id).state is JobState.PENDING and bell.rings == 1


def test_cancel_of_a_running_job_asks_its_agent_and_waits_for_the_end(config, service, store):
    jobs, agents, _ = service
    job_id = running_job(store)
    assert jobs.cancel([job_id], 0) == []
    assert store.get_job(job_id).state is JobState.COMPLETING
    assert agents.signals == [("127.0.0.1:7000", job_id, 0)]
    report_end(config, store, job_id, "c000", 0, JobState.FAILED, 0, 15, 1001.0)
    assert store.get_job(job_id).state is JobState.CANCELLED


@pytest.mark.parametrize("action, hold, reason", [("requeue", "", JobReason.NONE),
                                                   ("requeuehold", "user", JobReason.JOB_HELD_USER)])
def test_requeue_of_a_running_job_pends_only_after_its_end(config, service, store, action, hold, reason):
    jobs, agents, _ = service
    job_id = running_job(store)
    assert jobs.update_job(str(job_id), 0, action) == []
    assert store.get_job(job_id).state is JobState.COMPLETING and agents.signals
    report_end(config, store, job_id, "c000", 0, JobState.CANCELLED, 0, 15, 1001.0)
    job = store.get_job(job_id)  # requeuehold: PENDING and held at once, no scheduling pass in between
    assert (job.state, job.restarts, job.hold, job.reason) == (JobState.PENDING, 1, hold, reason)
    assert [e.op for e in store.events(job_id)][-2:] == ["request_requeue", "finish"]


def test_requeuehold_requeues_held_in_the_same_operation(config, service, store):
    jobs, _, _ = service
    job_id = running_job(store)
    assert jobs.update_job(str(job_id), 0, "requeuehold") == []
    report_end(config, store, job_id, "c000", 0, JobState.CANCELLED, 0, 15, 1001.0)
    assert store.start_jobs([(job_id, "c000", (0,))], 1002.0) == []  # a held job does not start
    assert jobs.update_job(str(job_id), 0, "release") == []  # a user's hold: its owner releases it
    assert store.get_job(job_id).hold == ""
    # a finished job: back to PENDING held in one step
    report_end(config, store, done := running_job(store), "c000", 0, JobState.COMPLETED, 0, 0, 1003.0)
    assert jobs.update_job(str(done), 0, "requeuehold") == []
    job = store.get_job(done)
    assert (job.state, job.hold, job.reason) == (JobState.PENDING, "user", JobReason.JOB_HELD_USER)
    assert jobs.update_job(str(done), 0, "requeuehold") == [f"Job {done}: Job is pending execution"]


def test_requeuehold_words_and_the_reason_a_job_waited_for(config, service, store):
    """slurmctld's state_desc for a requeuehold ("job requeued in held state") lasts while passes find the
    job held and ends with its release; the last reason it waited for but None, Priority and Resources is
    kept (accounting's state_reason_prev) whatever the passes write after it."""
    jobs, _, _ = service
    report_end(config, store, done := running_job(store), "c000", 0, JobState.COMPLETED, 0, 0, 1001.0)
    assert store.get_job(done).reason_prev is JobReason.NONE
    assert jobs.update_job(str(done), 0, "requeuehold") == []
    job = store.get_job(done)
    assert (job.reason, job.state_desc, job.reason_prev) == (
        JobReason.JOB_HELD_USER, lifecycle.REQUEUED_HELD, JobReason.JOB_HELD_USER)
    store.update_pending({done: ("JobHeldUser", 0, None, None)})  # a pass that finds it held keeps the words
    assert store.get_job(done).state_desc == lifecycle.REQUEUED_HELD
    assert jobs.update_job(str(done), 0, "release") == []
    store.update_pending({done: ("Priority", 5, None, None)})
    job = store.get_job(done)
    assert (job.reason, job.state_desc, job.reason_prev) == (JobReason.PRIORITY, "", JobReason.JOB_HELD_USER)
    waiting = store.submit(spec(), "p", None, 1002.0)
    store.update_pending({waiting: ("Dependency", 0, None, None)})
    store.update_pending({waiting: ("Resources", 0, None, None)})
    listed = {j.job_id: j for j in store.get_jobs(light=True)}
    assert (listed[waiting].reason, listed[waiting].reason_prev) == (JobReason.RESOURCES, JobReason.DEPENDENCY)
    assert listed[done].reason_prev is JobReason.JOB_HELD_USER
    held_at_submit = store.submit(spec(hold=True), "p", None, 1003.0)
    assert store.get_job(held_at_submit).reason_prev is JobReason.JOB_HELD_USER


def test_a_job_cancelled_while_it_waited_keeps_the_reason_it_waited_for(service, store):
    jobs, _, _ = service
    held = store.submit(spec(hold=True), "p", None, 1000.0)
    waiting = store.submit(spec(), "p", None, 1000.0)
    store.update_pending({waiting: ("Priority", 0, None, None)})  # a scheduling pass's reason
    admin_held = store.submit(spec(), "p", None, 1000.0)
    store.hold(admin_held, 1000.0, by_operator=True)  # no scheduling pass wrote its reason yet
    assert jobs.cancel([held, waiting, admin_held], 0) == []
    reasons = {j.job_id: (j.state, j.reason) for j in store.get_jobs(job_ids=[held, waiting, admin_held],
                                                                     include_finished=True)}
    assert reasons == {held: (JobState.CANCELLED, JobReason.JOB_HELD_USER),
                       waiting: (JobState.CANCELLED, JobReason.PRIORITY),
                       admin_held: (JobState.CANCELLED, JobReason.JOB_HELD_ADMIN)}


def test_an_end_from_an_earlier_run_or_another_node_is_ignored(config, service, store):
    jobs, _, _ = service
    job_id = running_job(store)
    report_end(config, store, job_id, "c000", 3, JobState.COMPLETED, 0, 0, 1001.0)
    report_end(config, store, job_id, "c001", 0, JobState.COMPLETED, 0, 0, 1001.0)
    assert store.get_job(job_id).state is JobState.RUNNING
    report_end(config, store, job_id, "c000", 0, JobState.COMPLETED, 0, 0, 1002.0)
    report_end(config, store, job_id, "c000", 0, JobState.FAILED, 1, 0, 1003.0)  # repeated: ignored
    assert store.get_job(job_id).state is JobState.COMPLETED


def test_a_launch_failure_reported_by_the_agent_ends_the_job_failed(config, service, store):
    jobs, _, _ = service
    job_id = running_job(store)
    report_end(config, store, job_id, "c000", 0, JobState.FAILED, 2, 0, 1001.0,
                   launch_failure="chdir(/nope): No such file or directory")
    job = store.get_job(job_id)
    assert (job.state, job.reason, job.exit_code) == (JobState.FAILED, JobReason.JOB_LAUNCH_FAILURE, 2)
    assert job.system_comment == "launch failed on c000: chdir(/nope): No such file or directory"


def test_an_agents_batch_of_ends_is_one_commit_and_one_ring(monitor, store):
    m, _, bell = monitor
    done, failed, cancelled, again = (running_job(store) for _ in range(4))
    store.cancel(cancelled, 1000.5)
    rings, commits = bell.rings, store._writer.commits
    m.runs_ended("c000", [
        RunEnd(done, "c000", 0, JobState.COMPLETED, 0, 0, 1001.0),
        RunEnd(failed, "c000", 0, JobState.FAILED, 2, 0, 1001.0, launch_failure="chdir(/nope): gone"),
        RunEnd(cancelled, "c000", 0, JobState.FAILED, 0, 15, 1001.0),
        RunEnd(again, "c000", 3, JobState.COMPLETED, 0, 0, 1001.0),  # an earlier run: ignored, the rest go on
        RunEnd(done, "c000", 0, JobState.FAILED, 1, 0, 1002.0),  # repeated: ignored
    ])
    assert store._writer.commits == commits + 1 and bell.rings == rings + 1
    states = {j: store.get_job(j).state for j in (done, failed, cancelled, again)}
    assert states == {done: JobState.COMPLETED, failed: JobState.FAILED, cancelled: JobState.CANCELLED,
                      again: JobState.RUNNING}
    assert store.get_job(failed).reason is JobReason.JOB_LAUNCH_FAILURE
    assert [e.op for e in store.events(done)][-1] == "finish" and len(store.events(done)) == 3
    m.runs_ended("c000", [RunEnd(done, "c000", 0, JobState.COMPLETED, 0, 0, 1003.0)])
    assert bell.rings == rings + 1  # nothing changed: no pass needed


def test_a_batch_the_database_refuses_is_recorded_end_by_end(monitor, store, monkeypatch):
    from pslurm.controller.store import StoreError

    m, _, _ = monitor
    good, bad = running_job(store), running_job(store)
    real = store.end_runs

    def refuse_bad(ends):  # type: ignore[no-untyped-def]
        if any(e.job_id == bad for e in ends):
            raise StoreError("the job could not be stored: a value is out of range or too long")
        return real(ends)

    monkeypatch.setattr(store, "end_runs", refuse_bad)
    with pytest.raises(StoreError):  # the agent sends them again; the good one is recorded already
        m.runs_ended("c000", [RunEnd(bad, "c000", 0, JobState.COMPLETED, 0, 0, 1001.0),
                              RunEnd(good, "c000", 0, JobState.COMPLETED, 0, 0, 1001.0)])
    assert store.get_job(good).state is JobState.COMPLETED and store.get_job(bad).state is JobState.RUNNING


def test_a_user_cannot_release_an_operators_hold(service, store):
    jobs, _, _ = service
    job_id = jobs.submit(spec(), ROOT)
    assert jobs.update_job(str(job_id), 0, "hold") == []
    mine = store.get_job(job_id)
    assert mine.hold == "admin"
    jobs.operators = frozenset()
    assert jobs.update_job(str(job_id), 0, "release") == [
        f"Job {job_id}: Access/permission denied (held by an operator)"]
    assert store.get_job(job_id).hold == "admin"
