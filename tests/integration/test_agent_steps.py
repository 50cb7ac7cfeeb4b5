"""Job steps through the agent with its real launcher and real processes (a recording link to the controller): a step
inside a running batch job gets the step variables and runs in the job's cgroup as the job's user;
several tasks with ranks and --label output; the step's exit code and signal; a step refused when
its job does not run; cancelling a step leaves its job running; the job's end ends its steps
(CANCELLED, reported first); an allocation job (psalloc) holds until cancelled, relinquished or
timed out; a pty step; heartbeats list steps. As root the jobs run as ``nobody``."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from pslurm.core.steplaunch import StepLaunch
from pslurm.core.steps import StepResult
from pslurm.nodeagent.agent import Agent, StepRefused
from pslurm.nodeagent.link import StepEnded
from pslurm.nodeagent.servicer import AgentServicer
from tests.agentlink import RecordingLink, ended
from tests.conftest import wait_for
from tests.integration.conftest import Place

Controller = RecordingLink  # the agent's link, recording step ends, heartbeats and the order of every end


MakeAgent = Callable[..., tuple[Agent, Controller]]


@pytest.fixture
def make_agent(place: Place) -> Iterator[MakeAgent]:
    agents: list[tuple[Agent, Controller]] = []

    def make() -> tuple[Agent, Controller]:
        config = ClusterConfig(path=str(place.top / "pslurm.conf"), cluster_name=f"steps{os.getpid()}",
                               controller_port=1, spool_dir=str(place.top / "spool"), kill_wait=1)
        controller = Controller()
        agent = Agent(config, NodeConfig("c000", port=2, cpus=2), [], CgroupConfig(), controller)
        agents.append((agent, controller))
        agent.recover()
        return agent, controller

    yield make
    for agent, controller in agents:
        controller.up = False
        agent.stop(grace=5)


def job(place: Place, job_id: int, script: str | None = "sleep 1000\n", allocation: bool = False,
        time_limit: int | None = None) -> JobRecord:
    spec = JobSpec(name="t", user=place.user, uid=place.uid, gid=place.gid, workdir=str(place.home),
                   script=None if allocation else "#!/bin/sh\n" + (script or ""),
                   environment={"PATH": os.environ["PATH"]}, allocation=allocation)
    return JobRecord(job_id=job_id, spec=spec, state=JobState.RUNNING, node="c000", time_limit=time_limit)


def step(place: Place, job_id: int, step_id: int, command: str, ntasks: int = 1, **kw: Any) -> StepLaunch:
    env = {"PATH": os.environ["PATH"], "FROM_PSRUN": "yes", **kw.pop("env", {})}
    return StepLaunch(job_id=job_id, restarts=0, step_id=step_id, name="sh", argv=("sh", "-c", command),
                      environment=env, workdir=str(place.home),
                      uid=place.uid, gid=place.gid, user=place.user, ntasks=ntasks, task_offset=0,
                      total_tasks=ntasks, node_index=0, step_nodelist="c000", tasks_per_node=str(ntasks), **kw)


def started(agent: Agent, job_id: int) -> None:
    wait_for(lambda: agent.jobs.get(job_id) is not None and agent.jobs[job_id].proc is not None, timeout=10)


def step_ended(controller: Controller, job_id: int, step_id: int, timeout: float = 10.0) -> StepEnded:
    return wait_for(lambda: controller.step_end(job_id, step_id), timeout=timeout, interval=0.02)


def output(agent: Agent, job_id: int, step_id: int) -> tuple[bytes, bytes, StepResult]:
    pieces = list(agent.streams.output(job_id, step_id, lambda spec: True))
    end = pieces[-1][2]
    assert end is not None
    return (b"".join(p[0] for p in pieces), b"".join(p[1] for p in pieces), end)


def state(end: Any) -> JobState:
    return end.state


def test_a_step_runs_with_the_step_variables_in_the_jobs_cgroup(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent()
    agent.launch(job(place, 1))
    started(agent, 1)
    agent.launch_step(step(place, 1, 0, "env > step.env; cat /proc/self/cgroup > step.cg; id -u; pwd"))
    out, err, last = output(agent, 1, 0)
    assert out.decode().split() == [str(place.uid), str(place.home)] and err == b""
    assert last is not None and state(last) == JobState.COMPLETED
    end = step_ended(controller, 1, 0)
    assert (state(end), end.exit_code, end.exit_signal, end.node) == (JobState.COMPLETED, 0, 0, "c000")
    env = dict(line.split("=", 1) for line in (place.home / "step.env").read_text().splitlines() if "=" in line)
    assert (env["SLURM_JOB_ID"], env["SLURM_STEP_ID"], env["SLURM_STEPID"], env["SLURM_PROCID"]) == ("1", "0", "0", "0")
    assert (env["SLURM_STEP_NODELIST"], env["SLURM_STEP_NUM_NODES"], env["SLURM_STEP_NUM_TASKS"]) == ("c000", "1", "1")
    assert env["FROM_PSRUN"] == "yes" and env["SLURM_JOB_USER"] == place.user
    cgroup = agent.jobs[1].cgroup
    if cgroup is not None:  # root: in the job's own cgroup
        assert any(line.endswith("/c000/job_1") for line in (place.home / "step.cg").read_text().splitlines())
    assert agent.jobs[1].end is None  # the job runs on


def test_tasks_with_ranks_and_labels_and_the_largest_exit_code(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent()
    agent.launch(job(place, 2))
    started(agent, 2)
    agent.launch_step(step(place, 2, 0, 'echo "hello $SLURM_PROCID of $SLURM_NTASKS"; printf part; exit $SLURM_PROCID',
                           ntasks=3, label=True))
    out, _, last = output(agent, 2, 0)
    lines = out.decode().splitlines()
    assert sorted(lines) == ["0: hello 0 of 3", "0: part", "1: hello 1 of 3", "1: part", "2: hello 2 of 3", "2: part"]
    assert (state(last), last.exit_code) == (JobState.FAILED, 2)
    end = step_ended(controller, 2, 0)
    assert (state(end), end.exit_code, end.exit_signal) == (JobState.FAILED, 2, 0)
    # a task killed by a signal: the step ends with it
    agent.launch_step(step(place, 2, 1, '[ "$SLURM_PROCID" = 1 ] && kill -9 $$; exit 0', ntasks=2))
    end = step_ended(controller, 2, 1)
    assert (state(end), end.exit_signal) == (JobState.FAILED, 9)
    # a command that cannot start: exit 2 and slurmstepd's line
    agent.launch_step(StepLaunch(job_id=2, step_id=2, argv=("/no/such/program",), workdir=str(place.home),
                                    ntasks=1, total_tasks=1, step_nodelist="c000"))
    out, err, last = output(agent, 2, 2)
    assert (state(last), last.exit_code) == (JobState.FAILED, 2) and b"/no/such/program" in err


def test_a_step_is_refused_when_its_job_does_not_run(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent()
    with pytest.raises(StepRefused, match="does not run"):
        agent.launch_step(step(place, 3, 0, "true"), wait=0.2)
    agent.launch(job(place, 3, "exit 0\n"))
    ended(controller, 3)
    with pytest.raises(StepRefused, match="already completing or completed"):
        agent.launch_step(step(place, 3, 0, "true"))
    servicer = AgentServicer(agent, type("Auth", (), {"identity": lambda self, ctx: type("I", (), {"uid": 0})})())

    class Aborted(Exception):
        pass

    class Context:
        def abort(self, code: grpc.StatusCode, message: str) -> None:
            raise Aborted(code, message)

    with pytest.raises(Aborted) as caught:
        servicer.LaunchStep(step(place, 3, 0, "true"), Context())  # type: ignore[arg-type]
    assert caught.value.args[0] is grpc.StatusCode.FAILED_PRECONDITION and "\n" not in caught.value.args[1]
    assert controller.step_ends == []


def test_cancelling_a_step_leaves_its_job_running(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent()
    agent.launch(job(place, 4))
    started(agent, 4)
    agent.launch_step(step(place, 4, 0, "trap '' TERM; sleep 1000 & wait; sleep 1000"))
    wait_for(lambda: agent.steps.get(4, 0) is not None, timeout=5)
    agent.heartbeats.beat()  # the heartbeat lists the running step
    assert list(controller.beats[-1].steps) == [(4, 0)]
    agent.signal_step(4, 0, 0)
    end = step_ended(controller, 4, 0)  # SIGTERM ignored: SIGKILL after KillWait
    assert state(end) == JobState.CANCELLED
    assert agent.jobs[4].end is None and agent.jobs[4].proc is not None and agent.jobs[4].proc.poll() is None
    agent.heartbeats.beat()  # acknowledged: no longer listed
    assert list(controller.beats[-1].steps) == []


def test_the_end_of_the_job_ends_its_steps_first(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent()
    flag = place.home / "go"
    agent.launch(job(place, 5, f"while [ ! -e {flag} ]; do sleep 0.05; done\n"))
    started(agent, 5)
    agent.launch_step(step(place, 5, 0, "echo started; sleep 1000"))
    agent.launch_step(step(place, 5, 1, "exit 0"))
    step_ended(controller, 5, 1)
    flag.touch()
    assert state(ended(controller, 5, timeout=10)) == JobState.COMPLETED
    end = controller.step_end(5, 0)
    assert end is not None and state(end) == JobState.CANCELLED
    assert controller.order.index("step 5.0") < controller.order.index("job 5")
    # a cancelled job: the same
    agent.launch(job(place, 6))
    started(agent, 6)
    agent.launch_step(step(place, 6, 0, "sleep 1000"))
    agent.signal(6, 0)
    assert state(ended(controller, 6, timeout=10)) == JobState.CANCELLED
    assert state(controller.step_end(6, 0)) == JobState.CANCELLED
    assert controller.order.index("step 6.0") < controller.order.index("job 6")


@pytest.mark.parametrize("how, expected, exit_code", [
    ("cancel", JobState.CANCELLED, 0), ("relinquish", JobState.COMPLETED, 0),
    ("relinquish 3", JobState.FAILED, 3), ("time limit", JobState.TIMEOUT, 0)])
def test_an_allocation_holds_until_it_ends(make_agent: MakeAgent, place: Place, how: str, expected: JobState,
                                           exit_code: int) -> None:
    agent, controller = make_agent()
    agent.launch(job(place, 7, None, allocation=True, time_limit=2 if how == "time limit" else None))
    started(agent, 7)
    agent.launch_step(step(place, 7, 0, "echo in $SLURM_JOB_ID.$SLURM_STEP_ID"))
    out, _, last = output(agent, 7, 0)
    assert out == b"in 7.0\n" and state(last) == JobState.COMPLETED
    agent.launch_step(step(place, 7, 1, "sleep 1000"))
    time.sleep(0.3)
    agent.heartbeats.beat()
    assert (7, 0) in controller.beats[-1].runs  # held
    assert controller.end_of(7, 0) is None
    if how == "cancel":
        agent.signal(7, 0)
    elif how.startswith("relinquish"):
        agent.signal(7, -1 - exit_code)
    end = ended(controller, 7, timeout=10)
    assert (state(end), end.exit_code, end.exit_signal) == (expected, exit_code, 0)
    assert state(controller.step_end(7, 1)) == JobState.CANCELLED
    assert controller.order.index("step 7.1") < controller.order.index("job 7")


def test_a_pty_step_runs_task_0_on_a_terminal(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent()
    agent.launch(job(place, 8))
    started(agent, 8)
    agent.launch_step(step(place, 8, 0, "test -t 0 && tty && stty size; read line; echo got $line", pty=True,
                           env={"SLURM_PTY_WIN_ROW": "40", "SLURM_PTY_WIN_COL": "100"}))
    running = wait_for(lambda: agent.steps.get(8, 0), timeout=5)
    agent.streams.input(8, 0, iter([b"hi\n"]), lambda spec: True)
    out, err, last = output(agent, 8, 0)
    text = out.decode().replace("\r", "")
    lines = text.splitlines()  # the terminal echoes the input too
    assert any(line.startswith("/dev/pts/") for line in lines) and "40 100" in lines and "got hi" in lines, text
    assert err == b"" and state(last) == JobState.COMPLETED and running.end is not None
    assert state(step_ended(controller, 8, 0)) == JobState.COMPLETED


def test_a_restarted_agent_kills_leftover_step_tasks(make_agent: MakeAgent, place: Place) -> None:
    crashed, _ = make_agent()
    crashed.launch(job(place, 9))
    started(crashed, 9)
    crashed.launch_step(step(place, 9, 0, "sleep 1000"))
    task = wait_for(lambda: (s := crashed.steps.get(9, 0)) is not None and s.tasks and s.tasks[0].proc, timeout=5)
    assert any(r.step == "0.0" for r in crashed.records.load())  # the task's own record
    successor, _ = make_agent()  # same node and spool: what an agent restarted after a crash finds
    successor.recover()
    assert wait_for(lambda: task.poll() is not None, timeout=5)
    assert successor.records.load() == []
