"""--signal on a real agent: the job's signal SIGTIME seconds before its time limit, to the batch shell
alone (``B:``) or to every process of the job; a job's processes get SLURM_JOB_QOS. Real processes
(and, as root, the job's cgroup), short time limits given to the agent directly."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord
from pslurm.core.states import JobState
from pslurm.nodeagent.agent import Agent
from tests.agentlink import RecordingLink, ended
from tests.unit.test_agent_runs import record

MakeAgent = Callable[[], tuple[Agent, RecordingLink]]

# the shell traps the signal and notes when; its child (a subshell: the trap is not its own) sleeps
# on and says so, unless it got the signal too
SCRIPT = """date +%s.%N > started
trap 'date +%s.%N > warned' USR1
(sleep 4; echo slept > child) &
wait
wait
echo "qos $SLURM_JOB_QOS" >> warned
"""


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[MakeAgent]:
    agents: list[tuple[Agent, RecordingLink]] = []

    def make() -> tuple[Agent, RecordingLink]:
        config = ClusterConfig(path=str(tmp_path / "pslurm.conf"), controller_port=1,
                               cluster_name=f"opts{os.getpid()}", spool_dir=str(tmp_path / "spool"), kill_wait=1)
        controller = RecordingLink()
        agent = Agent(config, NodeConfig("c000", port=2), [], CgroupConfig(), controller)
        agents.append((agent, controller))
        return agent, controller

    yield make
    for agent, controller in agents:
        controller.up = False
        agent.stop(grace=5)


def job(tmp_path: Path, job_id: int, time_limit: int, **spec: object) -> JobRecord:
    rec = record(tmp_path, job_id, script="#!/bin/sh\n" + SCRIPT)
    return replace(rec, spec=replace(rec.spec, **spec), time_limit=time_limit)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch", [True, False])
def test_the_signal_comes_sigtime_before_the_limit(make_agent: MakeAgent, tmp_path: Path, batch: bool) -> None:
    agent, controller = make_agent()
    agent.launch(job(tmp_path, 3, time_limit=5, warn_signal=int(signal.SIGUSR1), warn_time=3, warn_batch=batch,
                     qos="normal"))
    end = ended(controller, 3, timeout=15)
    lines = (tmp_path / "warned").read_text().splitlines()
    waited = float(lines[0]) - float((tmp_path / "started").read_text())
    assert 1.5 <= waited <= 2.8, waited  # 5 - 3 = 2 s after its start
    assert lines[1:] == ["qos normal"]
    # B: the shell alone (its child sleeps on and ends well); else every process (the child dies of it)
    assert (tmp_path / "child").exists() is batch
    assert end.state == JobState.COMPLETED  # it ended before its limit


def test_without_a_time_limit_no_signal_comes(make_agent: MakeAgent, tmp_path: Path) -> None:
    agent, controller = make_agent()
    rec = record(tmp_path, 4, script="#!/bin/sh\ntrap 'echo got > warned' USR1\nsleep 1\n")
    agent.launch(replace(rec, spec=replace(rec.spec, warn_signal=int(signal.SIGUSR1), warn_time=60)))
    assert ended(controller, 4).state == JobState.COMPLETED
    assert not (tmp_path / "warned").exists()


def test_a_job_that_ends_first_gets_no_signal(make_agent: MakeAgent, tmp_path: Path) -> None:
    agent, controller = make_agent()
    rec = record(tmp_path, 5, script="#!/bin/sh\ntrap 'echo got > warned' USR1\ntrue\n")
    agent.launch(replace(rec, spec=replace(rec.spec, warn_signal=int(signal.SIGUSR1), warn_time=1), time_limit=3))
    assert ended(controller, 5).state == JobState.COMPLETED
    assert not (tmp_path / "warned").exists()
