"""The step service with fake agents and a real SQLite store: create (ownership, the job running,
busy unless overlapping, the StepLaunch built from the job's record), cancel, the agents' ends, the
job's end ending its steps, reconciliation from heartbeats, and psalloc's relinquish."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.controller.agents import AgentRefused
from pslurm.controller.errors import NotFound, PermissionDenied
from pslurm.controller.jobs import JobService
from pslurm.controller.monitor import NodeMonitor, Run
from pslurm.controller.steps import StepRequest, StepService, step_request_from_json, task_layout
from pslurm.controller.store import StepEnd, Store
from pslurm.core.config import parse_slurm_conf
from pslurm.core.jobspec import JobSpec, SpecError
from pslurm.core.layout import compress_counts as tasks_per_node_text
from pslurm.core.lifecycle import JOB_ENDED, StepBusy
from pslurm.core.states import InvalidTransition, JobState
from pslurm.core.steplaunch import StepLaunch
from tests.conftest import store_with_nodes

CONF = ("SlurmdTimeout=30\nBatchStartTimeout=10\n"
        "NodeName=c000 NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "PartitionName=p Nodes=c000 Default=YES\n")
OWNER, OTHER = 1000, 1001


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeAgents:
    def __init__(self) -> None:
        self.steps: list[tuple[str, StepLaunch]] = []
        self.step_signals: list[tuple[str, int, int, int]] = []
        self.signals: list[tuple[str, int, int]] = []
        self.refuse: str = ""

    def launch_step(self, target: str, launch: StepLaunch) -> None:
        if self.refuse:
            raise AgentRefused(self.refuse)
        self.steps.append((target, launch))

    def signal_step(self, target: str, job_id: int, step_id: int, signal: int) -> None:
        self.step_signals.append((target, job_id, step_id, signal))

    def signal(self, target: str, job_id: int, signal: int) -> None:
        self.signals.append((target, job_id, signal))


@pytest.fixture
def parts(tmp_path: Path):  # type: ignore[no-untyped-def]
    config = parse_slurm_conf(CONF)
    store = store_with_nodes(tmp_path / "steps.db", config, up=["c000"])
    clock, agents = Clock(), FakeAgents()
    steps = StepService(store, agents, clock)
    yield store, steps, agents, clock, config
    store.close()


def running(store: Store, **kw: object) -> int:
    values: dict[str, object] = dict(name="j", user="ana", uid=OWNER, gid=OWNER, workdir="/home/ana",
                                     script="#!/bin/sh\n", ntasks=2, cpus_per_task=2)
    values.update(kw)
    job_id = store.submit(JobSpec(**values), "p", None, 1000.0)  # type: ignore[arg-type]
    assert store.start_jobs([(job_id, "c000", (0, 1))], 1000.0) == [job_id]
    return job_id


def ask(**kw: object) -> StepRequest:
    values: dict[str, object] = dict(argv=("/bin/hostname", "-s"), environment={"A": "1"})
    values.update(kw)
    return StepRequest(**values)  # type: ignore[arg-type]


def test_a_step_is_launched_on_the_jobs_node_with_its_run_gpus_and_the_request(parts):
    store, steps, agents, _, _ = parts
    job = running(store)
    step = steps.create(job, OWNER, ask(label=True, pty=True))
    assert (step.step_id, step.name, step.nodes, step.ntasks, step.cpus) == (0, "hostname", "c000", 2, 2)
    [(target, launch)] = agents.steps
    assert target == "127.0.0.1:7000"
    assert (launch.job_id, launch.restarts, launch.step_id, launch.name) == (job, 0, 0, "hostname")
    assert list(launch.argv) == ["/bin/hostname", "-s"] and dict(launch.environment) == {"A": "1"}
    assert (launch.workdir, launch.uid, launch.gid, launch.user) == ("/home/ana", OWNER, OWNER, "ana")
    assert (launch.ntasks, launch.task_offset, launch.total_tasks, launch.node_index) == (2, 0, 2, 0)
    assert (launch.step_nodelist, launch.tasks_per_node, launch.cpus_per_task) == ("c000", "2", 1)
    assert list(launch.gpu_indices) == [0, 1] and launch.label and launch.pty


def test_tasks_default_to_the_jobs_and_may_not_exceed_its_cpus(parts):
    store, steps, agents, _, _ = parts
    job = running(store)  # 2 tasks x 2 CPUs
    assert steps.create(job, OWNER, ask(ntasks=4, overlap=True)).ntasks == 4
    with pytest.raises(SpecError, match="More processors requested than permitted"):
        steps.create(job, OWNER, ask(ntasks=5))
    with pytest.raises(SpecError, match="More processors requested than permitted"):  # --overlap shares, no more
        steps.create(job, OWNER, ask(ntasks=100_000, overlap=True))
    assert steps.create(job, OWNER, ask(ntasks=512, overcommit=True, overlap=True)).ntasks == 512  # -O: as srun
    with pytest.raises(SpecError, match="Task count specification invalid: at most 512 tasks a node"):
        steps.create(job, OWNER, ask(ntasks=513, overcommit=True, overlap=True))
    with pytest.raises(SpecError, match="Invalid generic resource"):
        steps.create(job, OWNER, ask(gres=("gpu:3",)))


def test_busy_unless_overlapping(parts):
    store, steps, _, _, _ = parts
    job = running(store)
    steps.create(job, OWNER, ask())
    with pytest.raises(StepBusy, match="Requested nodes are busy"):
        steps.create(job, OWNER, ask())
    assert steps.create(job, OWNER, ask(overlap=True)).step_id == 1
    steps.steps_ended("c000", [StepEnd(job, 0, "c000", JobState.COMPLETED, 0, 0, 1001.0)])
    assert steps.create(job, OWNER, ask()).step_id == 2


def test_only_the_owner_or_an_operator_and_only_in_a_running_job(parts):
    store, steps, _, _, _ = parts
    job = running(store)
    with pytest.raises(PermissionDenied, match="Access/permission denied"):
        steps.create(job, OTHER, ask())
    assert steps.create(job, 0, ask()).step_id == 0  # root
    with pytest.raises(NotFound, match="Invalid job id specified"):
        steps.create(999, OWNER, ask())
    pending = store.submit(JobSpec("j", "ana", OWNER, OWNER, "/w", script="x"), "p", None, 1000.0)
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        steps.create(pending, OWNER, ask())
    store.cancel(job, 1001.0)
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        steps.create(job, OWNER, ask(overlap=True))


def test_a_refused_launch_fails_the_step(parts):
    store, steps, agents, _, _ = parts
    job = running(store)
    agents.refuse = "job 1 does not run here"
    with pytest.raises(InvalidTransition, match="Unable to launch step 1.0 on c000: job 1 does not run here"):
        steps.create(job, OWNER, ask())
    assert store.get_step(job, 0).state is JobState.FAILED


def test_cancel_signals_the_step_on_its_nodes_and_its_end_comes_from_the_agent(parts):
    store, steps, agents, _, _ = parts
    job = running(store)
    steps.create(job, OWNER, ask())
    with pytest.raises(PermissionDenied):
        steps.cancel(job, 0, OTHER)
    with pytest.raises(NotFound, match="Invalid job id specified"):
        steps.cancel(job, 5, OWNER)
    steps.cancel(job, 0, OWNER, signal=10)
    steps.cancel(job, 0, OWNER)
    assert agents.step_signals == [("127.0.0.1:7000", job, 0, 10), ("127.0.0.1:7000", job, 0, 0)]
    assert store.get_step(job, 0).state is JobState.RUNNING
    steps.steps_ended("c000", [StepEnd(job, 0, "c000", JobState.CANCELLED, 0, 15, 1002.0)])
    steps.steps_ended("c000", [StepEnd(job, 0, "c000", JobState.CANCELLED, 0, 15, 1002.0)])  # repeated: ignored
    assert store.get_step(job, 0).state is JobState.CANCELLED
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        steps.cancel(job, 0, OWNER)


def test_the_jobs_end_ends_its_running_steps(parts):
    store, steps, _, _, _ = parts
    job = running(store)
    steps.create(job, OWNER, ask())
    steps.create(job, OWNER, ask(overlap=True))
    steps.steps_ended("c000", [StepEnd(job, 1, "c000", JobState.FAILED, 2, 0, 1001.0)])
    store.finish(job, "c000", 0, JobState.COMPLETED, 0, 0, 1002.0)
    assert [(s.state, s.exit_code) for s in steps.steps(job)] == [(JobState.CANCELLED, 0), (JobState.FAILED, 2)]


def test_a_step_the_agent_no_longer_lists_is_lost_after_the_grace(parts):
    store, steps, _, clock, config = parts
    monitor = NodeMonitor(config, store, lambda: None, clock)
    job = running(store)
    steps.create(job, OWNER, ask())
    steps.create(job, OWNER, ask(overlap=True))
    clock.now = 1005.0  # its launch may still be on the way
    runs = [Run(job, 0)]
    monitor.heartbeat("c000", runs, "", steps=[])
    assert [s.state for s in steps.steps(job)] == [JobState.RUNNING, JobState.RUNNING]
    clock.now = 1020.0
    monitor.heartbeat("c000", runs, "", steps=[(job, 1), (job, 7)])  # an unknown one: the agent's to kill
    assert [s.state for s in steps.steps(job)] == [JobState.NODE_FAIL, JobState.RUNNING]
    monitor.heartbeat("c000", runs, "")  # an agent that says nothing of steps: nothing decided
    assert steps.steps(job)[1].state is JobState.RUNNING


def test_request_json_is_checked():
    assert step_request_from_json({"argv": ["a"], "ntasks": 3, "overlap": True}).ntasks == 3
    for bad in ({}, {"argv": []}, {"argv": "ls"}, {"argv": ["a"], "ntasks": -1}, {"argv": ["a"], "ntasks": "2"},
                {"argv": ["a\0"]}, {"argv": ["a"], "environment": {"A": 1}}, {"argv": ["a"], "gres": "gpu:1"}):
        with pytest.raises(SpecError):
            step_request_from_json(bad)


def test_task_layout_is_block_order():
    assert task_layout(3, 7, None) == [3, 2, 2]
    assert task_layout(3, 7, 4) == [4, 2, 1]
    assert tasks_per_node_text([2, 2, 2, 1]) == "2(x3),1"
    with pytest.raises(SpecError):
        task_layout(2, 5, 2)


def test_relinquish_ends_the_allocation_completed_through_its_agent(parts):
    store, _, agents, clock, config = parts
    jobs = JobService(config, store, agents, lambda: None, clock)
    job = running(store, script=None, allocation=True)
    batch = running(store)
    with pytest.raises(PermissionDenied):
        jobs.relinquish(job, OTHER)
    with pytest.raises(SpecError, match="not an allocation"):
        jobs.relinquish(batch, OWNER)
    with pytest.raises(NotFound):
        jobs.relinquish(999, OWNER)
    jobs.relinquish(job, OWNER, 0)
    assert store.get_job(job).state is JobState.COMPLETING
    assert agents.signals == [("127.0.0.1:7000", job, 0)]  # the agent ends the run
    with pytest.raises(InvalidTransition, match=JOB_ENDED):
        jobs.relinquish(job, OWNER)
    store.finish(job, "c000", 0, JobState.CANCELLED, 0, 15, 1003.0)
    assert store.get_job(job).state is JobState.COMPLETED
