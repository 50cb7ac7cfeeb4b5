"""Multi-node jobs in the controller's parts, with fake agents and a real SQLite store: admission
of -N > 1, the scheduler's placement on every node and its launches (node_index, each node's own
GPUs), the end of the first node's run ending the others', a lost node ending the whole job."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.controller.admission import UNAVAILABLE, admit
from pslurm.controller.agents import AgentRefused, launch_pb
from pslurm.controller.jobs import JobService
from pslurm.controller.monitor import NodeMonitor
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import RunEnd, Store
from pslurm.core.config import ClusterConfig, parse_slurm_conf
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.states import JobReason, JobState
from pslurm.proto import convert
from tests.conftest import store_with_nodes

CONF = ("SlurmdTimeout=30\nBatchStartTimeout=10\n"
        "NodeName=c[000-003] NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "NodeName=big NodeAddr=127.0.0.1 Port=7009 CPUs=16 RealMemory=1000\n"
        "PartitionName=p Nodes=c[000-003] Default=YES\n"
        "PartitionName=two Nodes=c[000-001]\n"
        "PartitionName=mixed Nodes=c000,big\n")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeAgents:
    def __init__(self) -> None:
        self.launches: list[tuple[str, JobRecord, int]] = []
        self.signals: list[tuple[str, int, int]] = []
        self.refuse_index: int | None = None

    def launch_async(self, target: str, job: JobRecord, on_error, node_index: int = 0) -> None:  # type: ignore[no-untyped-def]
        self.launches.append((target, job, node_index))
        if node_index == self.refuse_index:
            on_error(job, AgentRefused("no such directory"))

    def signal(self, target: str, job_id: int, signal: int) -> None:
        self.signals.append((target, job_id, signal))


class FakeNodeHealth:
    def unreachable(self, node: str, why: str) -> None:
        pass

    def gpu_measured(self, node: str) -> dict[int, tuple[int, float]]:
        return {}


@pytest.fixture
def config() -> ClusterConfig:
    return parse_slurm_conf(CONF)


@pytest.fixture
def store(tmp_path: Path, config: ClusterConfig):
    s = store_with_nodes(tmp_path / "multi.db", config, heartbeat=True)
    yield s
    s.close()


def spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


# -- admission -------------------------------------------------------------------------------


def test_admission_takes_multi_node_jobs_the_partition_can_hold(config):
    assert admit(spec(num_nodes=4, ntasks=16), config).partition == "p"
    assert admit(spec(num_nodes=2, ntasks_per_node=4, gres=(GresRequest("gpu", None, 2),)), config).partition == "p"
    assert admit(spec(num_nodes=3, nodelist="c[000-001]"), config).partition == "p"  # -w: nodes it must have
    with pytest.raises(SpecError, match="^Node count specification invalid"):
        admit(spec(num_nodes=3, partition="two"), config)
    with pytest.raises(SpecError, match="^Node count specification invalid"):
        admit(spec(num_nodes=4, exclude="c000"), config)
    with pytest.raises(SpecError, match=UNAVAILABLE):  # 4 tasks per node of 2 CPUs: 8 CPUs, nodes have 4
        admit(spec(num_nodes=2, ntasks_per_node=4, cpus_per_task=2), config)
    with pytest.raises(SpecError, match=UNAVAILABLE):  # 17 tasks on 2: 9 and 8 CPUs; only big holds 9
        admit(spec(num_nodes=2, ntasks=17, partition="mixed"), config)
    assert admit(spec(num_nodes=2, ntasks=5, partition="mixed"), config).partition == "mixed"  # 3 and 2
    with pytest.raises(SpecError, match="shared GPU"):
        admit(spec(num_nodes=2, gres=(GresRequest("shard", None, 1),)), config)
    with pytest.raises(SpecError, match="-w names 3 nodes"):
        admit(spec(num_nodes=2, nodelist="c[000-002]"), config)
    with pytest.raises(SpecError, match="^Node count specification invalid$"):
        admit(spec(num_nodes=3, max_nodes=2), config)


# -- the scheduler -----------------------------------------------------------------------------


@pytest.fixture
def parts(config, store):  # type: ignore[no-untyped-def]
    agents, clock = FakeAgents(), Clock()
    sched = Scheduler(config, store, agents, FakeNodeHealth(), partitions_of=lambda name: frozenset({"p"}),
                      clock=clock)
    monitor = NodeMonitor(config, store, sched.reschedule, clock)
    jobs = JobService(config, store, agents, sched.reschedule, clock, frozenset({0}))
    monitor.end_on_nodes = jobs.end_on_nodes
    return sched, monitor, jobs, agents, clock


def test_a_multi_node_job_starts_on_n_nodes_and_is_launched_on_each(parts, store):
    sched, _, _, agents, _ = parts
    job_id = store.submit(spec(num_nodes=2, ntasks=4, gres=(GresRequest("gpu", None, 1),)), "p", None, 1000.0)
    assert sched.schedule() == 1
    job = store.get_job(job_id)
    assert job.state is JobState.RUNNING and len(set(job.nodes)) == 2 and job.node == job.nodes[0]
    assert [len(g) for g in job.node_gpus] == [1, 1]
    held = sorted((a.node, a.cpus) for a in store.allocations())
    assert held == sorted((n, 2) for n in job.nodes)
    launched = [(j.job_id, i, j.gpu_indices) for _, j, i in agents.launches]
    assert launched == [(job_id, 0, job.node_gpus[0]), (job_id, 1, job.node_gpus[1])]
    msg = launch_pb(agents.launches[1][1], 1)
    assert (list(msg.nodes), msg.node_index, msg.node, list(msg.gpu_indices)) == (
        list(job.nodes), 1, job.node, list(job.node_gpus[1]))
    back = convert.job_from_pb(convert.job_to_pb(job))
    assert (back.nodes, back.node_gpus, back.spec.num_nodes) == (job.nodes, job.node_gpus, 2)


def test_the_first_nodes_end_ends_the_job_and_the_other_runs(parts, store):
    sched, monitor, _, agents, _ = parts
    job_id = store.submit(spec(num_nodes=3, ntasks=3), "p", None, 1000.0)
    sched.schedule()
    job = store.get_job(job_id)
    first, *others = job.nodes
    monitor.runs_ended(others[0], [RunEnd(job_id, others[0], 0, JobState.COMPLETED, 0, 0, 1001.0)])
    assert store.get_job(job_id).state is JobState.RUNNING  # only the first node's end finishes it
    assert agents.signals == []
    monitor.runs_ended(first, [RunEnd(job_id, first, 0, JobState.FAILED, 3, 0, 1002.0)])
    ended = store.get_job(job_id)
    assert (ended.state, ended.exit_code) == (JobState.FAILED, 3)
    targets = {store.get_node(n).target for n in others}
    assert sorted(agents.signals) == sorted((t, job_id, 0) for t in targets)
    assert store.allocations() == []


def test_a_lost_node_ends_the_whole_job_node_fail(parts, store):
    sched, monitor, _, agents, clock = parts
    job_id = store.submit(spec(num_nodes=2), "p", None, 1000.0)
    sched.schedule()
    first, second = store.get_job(job_id).nodes
    clock.now = 1100.0  # past the launch grace: the agent on the second node does not run it
    monitor.heartbeat(first, [], "")  # unrelated node's view does not matter here
    job = store.get_job(job_id)
    assert (job.state, job.reason) == (JobState.NODE_FAIL, JobReason.NODE_DOWN)
    assert [s[1:] for s in agents.signals] == [(job_id, 0)]
    assert second in job.nodes


def test_a_cancel_signals_every_node(parts, store):
    sched, _, jobs, agents, _ = parts
    job_id = store.submit(spec(num_nodes=2), "p", None, 1000.0)
    sched.schedule()
    jobs.cancel([job_id], 0)
    assert [s[1:] for s in agents.signals] == [(job_id, 0), (job_id, 0)]


def test_a_refused_launch_on_any_node_fails_the_job(parts, store):
    sched, _, _, agents, _ = parts
    agents.refuse_index = 1  # the second node's agent refuses
    job_id = store.submit(spec(num_nodes=2), "p", None, 1000.0)
    sched.schedule()
    job = store.get_job(job_id)
    assert (job.state, job.reason) == (JobState.FAILED, JobReason.JOB_LAUNCH_FAILURE)
    assert job.system_comment.startswith(f"launch failed on {job.node}: on {job.nodes[1]}: no such directory")


def test_will_run_names_every_node(parts, store):
    sched = parts[0]
    will = sched.will_run(spec(num_nodes=2), "p", None, 77)
    assert will.node_list.startswith("c[") or "," in will.node_list


# -- steps across nodes ------------------------------------------------------------------------


class StepAgents(FakeAgents):
    def __init__(self) -> None:
        super().__init__()
        self.step_launches: list[tuple[str, object]] = []
        self.step_signals: list[tuple[str, int, int, int]] = []

    def launch_step(self, target: str, launch) -> None:  # type: ignore[no-untyped-def]
        self.step_launches.append((target, launch))

    def signal_step(self, target: str, job_id: int, step_id: int, signal: int) -> None:
        self.step_signals.append((target, job_id, step_id, signal))


def _running_multi(store: Store, **kw: object) -> int:
    from pslurm.controller.store import NodeShare

    job_id = store.submit(spec(num_nodes=2, ntasks=4, gres=(GresRequest("gpu", None, 1),), **kw), "p", None, 1000.0)
    shares = [NodeShare("c001", (1,), 2, 0), NodeShare("c000", (0,), 2, 0)]
    assert store.start_jobs([(job_id, "c001", (1,))], 1000.0, shares={job_id: shares}) == [job_id]
    return job_id


def test_a_step_fans_out_over_the_jobs_nodes_in_block_order(store):
    from pslurm.controller.steps import StepRequest, StepService

    agents = StepAgents()
    service = StepService(store, agents, Clock(), frozenset({0}))
    job_id = _running_multi(store)
    step = service.create(job_id, 0, StepRequest(argv=("hostname",), label=True))
    assert step.nodes == "c[000-001]" or step.nodes == "c001,c000"
    launches = [(t, lz.ntasks, lz.task_offset, lz.node_index, list(lz.gpu_indices), lz.total_tasks, lz.tasks_per_node)
                for t, lz in agents.step_launches]
    assert launches == [(store.get_node("c001").target, 2, 0, 0, [1], 4, "2(x2)"),
                        (store.get_node("c000").target, 2, 2, 1, [0], 4, "2(x2)")]
    one = service.create(job_id, 0, StepRequest(argv=("true",), ntasks=1, overlap=True))
    assert one.nodes == "c001" and agents.step_launches[-1][1].total_tasks == 1


def test_a_multi_node_step_ends_when_every_node_reported(store):
    from pslurm.controller.store import NewStep, StepEnd

    job_id = _running_multi(store)
    store.create_step(job_id, 0, NewStep("x", "c[000-001]", 4, 4, "", False, ("x",), "/w"), 1001.0)
    first = store.end_steps([StepEnd(job_id, 0, "c000", JobState.FAILED, 3, 0, 1002.0)])[0]
    assert first.state is JobState.RUNNING  # c001 has not reported
    again = store.end_steps([StepEnd(job_id, 0, "c000", JobState.FAILED, 3, 0, 1002.0)])[0]
    assert isinstance(again, Exception)  # a repeated report
    last = store.end_steps([StepEnd(job_id, 0, "c001", JobState.COMPLETED, 1, 0, 1003.0)])[0]
    assert (last.state, last.exit_code, last.exit_signal, last.end_time) == (JobState.FAILED, 3, 0, 1003.0)


def test_the_worst_end_and_a_signal_win():
    from pslurm.core.lifecycle import combine_step_ends

    assert combine_step_ends(None, (JobState.COMPLETED, 0, 0)) == (JobState.COMPLETED, 0, 0)
    assert combine_step_ends((JobState.FAILED, 2, 0), (JobState.CANCELLED, 0, 15)) == (JobState.CANCELLED, 2, 15)
    assert combine_step_ends((JobState.NODE_FAIL, 0, 0), (JobState.FAILED, 1, 0)) == (JobState.NODE_FAIL, 1, 0)


def test_the_relay_merges_whole_lines_from_every_node():
    import asyncio

    from pslurm.controller.rest.relay import AgentRelay
    from pslurm.core.steps import StepResult, TaskEnd

    streams = {
        "a": [(b"0: c000\n1: c0", b"", None), (b"00\n", b"", None),
              (b"", b"", StepResult(JobState.COMPLETED, tasks=(TaskEnd(0, node="c000"), TaskEnd(1, node="c000"))))],
        "b": [(b"2: c001\n3: c001", b"warn\n", None),
              (b"", b"", StepResult(JobState.FAILED, 4, tasks=(TaskEnd(2, 4, node="c001"), TaskEnd(3, node="c001"))))],
    }

    class Relay(AgentRelay):
        async def output(self, target, job_id, step_id, for_uid=None):  # type: ignore[no-untyped-def,override]
            for msg in streams[target]:
                await asyncio.sleep(0)
                yield msg

    async def collect() -> list[tuple[object, str]]:
        return [item async for item in Relay(lambda: ()).merged_output(["a", "b"], 1, 0)]  # type: ignore[arg-type]

    out = asyncio.run(collect())
    stdout = b"".join(m[0] for m, _ in out)
    assert sorted(stdout.decode().splitlines()) == ["0: c000", "1: c000", "2: c001", "3: c001"]
    assert b"".join(m[1] for m, _ in out) == b"warn\n"
    done = [m[2] for m, _ in out if m[2] is not None]
    assert len(done) == 1 and out[-1][0][2] is not None
    assert (done[0].state, done[0].exit_code) == (JobState.FAILED, 4)
    assert [(t.rank, t.exit_code, t.node) for t in done[0].tasks] == [
        (0, 0, "c000"), (1, 0, "c000"), (2, 4, "c001"), (3, 0, "c001")]  # every node's tasks
    for m, _ in out[:-1]:  # every chunk but the last is whole lines
        assert not m[0] or m[0].endswith(b"\n") or m is out[-2][0]


def test_the_json_carries_the_nodes_and_the_layout_fields():
    from pslurm.core import restjson
    from pslurm.core.jobinfo import JobInfo

    s = spec(num_nodes=2, max_nodes=4, ntasks=4, ntasks_per_node=2)
    job = JobRecord(job_id=5, spec=s, state=JobState.RUNNING, node="c001", gpu_indices=(1,),
                    nodes=("c001", "c000"), node_gpus=((1,), (0,)), partition="p")
    data = restjson.job_to_json(job)
    assert (data["nodes"], data["batch_host"]) == ("c[000-001]", "c001")
    back = JobInfo(data)
    assert (back.node, back.nodes, back.node_gpus) == ("c001", ("c001", "c000"), ((1,), (0,)))
    assert (back.spec.num_nodes, back.spec.max_nodes, back.spec.ntasks_per_node) == (2, 4, 2)
    brief = restjson.job_to_brief_json(job, {})
    assert brief["nodes"] == "c[000-001]"
    assert restjson.spec_from_json(restjson.spec_to_json(s)) == s
    assert convert.spec_from_pb(convert.spec_to_pb(s)) == s
