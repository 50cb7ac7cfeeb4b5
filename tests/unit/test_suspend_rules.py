"""scontrol suspend / resume: the lifecycle's transitions and refusals (Slurm's words), the run time and
time limit that leave the suspended time out, and the job service with a real SQLite store and fake
agents (every node of the allocation told, operators only, the allocation kept, scancel of a
suspended job)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.cli.jobview import run_time, suspended_time
from pslurm.controller.jobs import JobService
from pslurm.controller.scheduler import Scheduler
from pslurm.core import lifecycle
from pslurm.core.config import parse_slurm_conf
from pslurm.core.gres import GresRequest
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.lifecycle import JobFlags
from pslurm.core.restjson import job_to_json
from pslurm.core.states import InvalidTransition, JobState
from pslurm.nodeagent.launcher import RunningJob
from tests.conftest import store_with_nodes
from tests.unit.test_multinode_controller import Clock, FakeNodeHealth

CONF = ("NodeName=c[000-001] NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "PartitionName=p Nodes=c[000-001] Default=YES\n")


# -- the lifecycle -----------------------------------------------------------------------------


def test_suspend_and_resume_are_transitions_of_a_running_job():
    running = JobFlags(1, JobState.RUNNING)
    change = lifecycle.suspend(running, 100.0)
    assert (change.from_state, change.to, change.values["suspend_time"]) == (JobState.RUNNING, JobState.SUSPENDED,
                                                                             100.0)
    suspended = JobFlags(1, JobState.SUSPENDED, suspend_time=100.0, suspended_seconds=30.0)
    change = lifecycle.resume(suspended, 160.0)
    assert change.to is JobState.RUNNING
    assert change.values == {"suspend_time": 160.0, "suspended_seconds": 90.0}  # 30 before, 60 now
    again = lifecycle.suspend(suspended, 170.0)  # slurmctld's re-suspend: nothing changes
    assert again.to is JobState.SUSPENDED and again.values == {}
    assert lifecycle.can_transition(JobState.SUSPENDED, JobState.COMPLETING)  # scancel
    assert lifecycle.can_transition(JobState.SUSPENDED, JobState.NODE_FAIL)
    assert not lifecycle.can_transition(JobState.PENDING, JobState.SUSPENDED)


@pytest.mark.parametrize(("state", "resume", "why"), [
    (JobState.PENDING, False, "Job is pending execution"),
    (JobState.PENDING, True, "Job is pending execution"),
    (JobState.COMPLETED, False, "Job/step already completing or completed"),
    (JobState.CANCELLED, True, "Job/step already completing or completed"),
    (JobState.COMPLETING, False, "Job is not running"),
    (JobState.RUNNING, True, "Job is not suspended"),
    (JobState.COMPLETING, True, "Job is not suspended"),
])
def test_refusals_are_slurmctlds(state, resume, why):
    job = JobFlags(1, state)
    with pytest.raises(InvalidTransition, match=f"^{why}$"):
        (lifecycle.resume if resume else lifecycle.suspend)(job, 100.0)


def test_a_requeued_run_starts_with_no_suspended_time():
    job = JobFlags(1, JobState.SUSPENDED, requeue=True, node="c000", suspend_time=100.0, suspended_seconds=5.0)
    change = lifecycle.node_lost(job, "c000", 200.0, "lost")
    assert change.to is JobState.PENDING
    assert change.values["suspend_time"] is None and change.values["suspended_seconds"] == 0.0


def test_run_time_leaves_the_suspended_time_out():
    def job(state: JobState, start: float | None, suspend_time: float | None, suspended: float) -> JobInfo:
        record = JobRecord(1, spec(), state, start_time=start, suspend_time=suspend_time, suspended_seconds=suspended)
        return JobInfo(job_to_json(record))

    # started at 0, suspended at 100: a suspended job's run stopped then
    assert run_time(job(JobState.SUSPENDED, 0.0, 100.0, 0.0), 500.0) == 100.0
    # resumed at 300 (200 s suspended): at 500 it has run 300 s
    assert run_time(job(JobState.RUNNING, 0.0, 300.0, 200.0), 500.0) == 300.0
    assert run_time(job(JobState.PENDING, None, None, 0.0), 500.0) == 0.0
    # sacct's Suspended counts the current stretch while it lasts
    assert suspended_time(job(JobState.SUSPENDED, 0.0, 300.0, 200.0), 500.0) == 400.0


def test_an_agents_time_limit_does_not_run_while_suspended():
    run = RunningJob(JobRecord(1, JobSpec("j", "root", 0, 0, "/tmp"), JobState.RUNNING, time_limit=60), started=0.0)
    assert run.limit_left(50.0) == 10.0
    run.suspended_at = 50.0
    assert run.limit_left(500.0) is None  # paused: nobody ends it
    run.suspended_at, run.suspended_for = None, 450.0  # resumed at 500
    assert run.limit_left(500.0) == 10.0


# -- the job service ---------------------------------------------------------------------------


class Agents:
    def __init__(self) -> None:
        self.suspends: list[tuple[str, int, int, bool]] = []
        self.signals: list[tuple[str, int, int]] = []

    def launch_async(self, target: str, job: JobRecord, on_error, node_index: int = 0) -> None:  # type: ignore[no-untyped-def]
        pass

    def signal(self, target: str, job_id: int, signal: int) -> None:
        self.signals.append((target, job_id, signal))

    def suspend(self, target: str, job_id: int, restarts: int, resume: bool) -> None:
        self.suspends.append((target, job_id, restarts, resume))


@pytest.fixture
def cluster(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = parse_slurm_conf(CONF)
    store = store_with_nodes(tmp_path / "suspend.db", config)
    agents, clock = Agents(), Clock()
    sched = Scheduler(config, store, agents, FakeNodeHealth(), partitions_of=lambda name: frozenset({"p"}), clock=clock)
    service = JobService(config, store, agents, sched.reschedule, clock, frozenset({0}))
    yield store, sched, service, agents, clock
    store.close()


def spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="u", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


def test_suspend_stops_the_job_on_every_node_and_resume_moves_its_end(cluster):
    store, sched, service, agents, clock = cluster
    job_id = store.submit(spec(num_nodes=2), "p", 600, 1000.0)
    assert sched.schedule() == 1
    assert service.suspend(str(job_id), 0) == []
    job = store.get_job(job_id)
    assert job.state is JobState.SUSPENDED and job.suspend_time == 1000.0
    assert sorted(t for t, *_ in agents.suspends) == ["127.0.0.1:7000", "127.0.0.1:7001"]  # both nodes' agents
    assert all(not resume for *_, resume in agents.suspends)
    assert service.suspend(str(job_id), 0) == []  # again: nothing more sent
    assert len(agents.suspends) == 2
    clock.now = 1300.0
    assert service.suspend(str(job_id), 0, resume=True) == []
    job = store.get_job(job_id)
    assert job.state is JobState.RUNNING and job.suspended_seconds == 300.0 and job.suspend_time == 1300.0
    assert [r for *_, r in agents.suspends[2:]] == [True, True]
    assert service.suspend(str(job_id), 0, resume=True) == [f"Job is not suspended for job {job_id}"]


def test_only_operators_suspend_and_a_pending_job_is_refused(cluster):
    store, sched, service, agents, _ = cluster
    running = store.submit(spec(), "p", None, 1000.0)
    sched.schedule()
    pending = store.submit(spec(hold=True), "p", None, 1000.0)
    assert service.suspend(str(running), 1000) == [f"Access/permission denied for job {running}"]
    assert service.suspend(str(pending), 0) == [f"Job is pending execution for job {pending}"]
    assert service.suspend("999999", 0) == ["Invalid job id specified for job 999999"]
    assert store.get_job(running).state is JobState.RUNNING and agents.suspends == []


def test_a_suspended_job_keeps_its_gpus_and_is_cancelled_as_a_running_one(cluster):
    store, sched, service, agents, _ = cluster
    gpus = (GresRequest("gpu", None, 2),)
    first = store.submit(spec(num_nodes=2, gres=gpus), "p", None, 1000.0)
    assert sched.schedule() == 1
    service.suspend(str(first), 0)
    waiting = store.submit(spec(gres=gpus), "p", None, 1000.0)
    assert sched.schedule() == 0  # the suspended job's GPUs are still its own
    assert store.get_job(waiting).state is JobState.PENDING
    assert service.cancel([first], 1000) == []
    assert store.get_job(first).state is JobState.COMPLETING
    assert {(job, sig) for _, job, sig in agents.signals} == {(first, 0)}  # its agents end it (thawed first)
