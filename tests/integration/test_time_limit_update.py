"""A running job's time limit changed (pscontrol update TimeLimit=): the agent enforces the new one at
once, with real processes, its gRPC face included, and a recording link that takes the ends."""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from pslurm.nodeagent.agent import Agent
from pslurm.nodeagent.link import RunEnded
from pslurm.nodeagent.servicer import AgentServicer
from pslurm.proto import pslurm_pb2 as pb
from tests.agentlink import RecordingLink
from tests.conftest import wait_for


class Controller(RecordingLink):
    """The agent's link, recording when each end came (the monotonic clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.came: dict[int, tuple[float, RunEnded]] = {}
        self.on_end = lambda end: self.came.__setitem__(end.job_id, (time.monotonic(), end))

    def end(self, job_id: int, timeout: float = 15.0) -> tuple[float, JobState]:
        at, end = wait_for(lambda: self.came.get(job_id), timeout=timeout, interval=0.02)
        return at, end.state


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[tuple[Agent, Controller, AgentServicer]]:
    config = ClusterConfig(path=str(tmp_path / "pslurm.conf"), controller_port=1, cluster_name=f"limit{os.getpid()}",
                           spool_dir=str(tmp_path / "spool"), kill_wait=1)
    controller = Controller()
    found = Agent(config, NodeConfig("c000", port=2), [], CgroupConfig(), controller)
    servicer = AgentServicer(found, SimpleNamespace(identity=lambda ctx: SimpleNamespace(uid=0)))  # type: ignore[arg-type]
    yield found, controller, servicer
    found.stop(grace=5)


def job(tmp_path: Path, job_id: int, time_limit: int | None) -> JobRecord:
    spec = JobSpec(name="t", user=getpass.getuser(), uid=os.getuid(), gid=os.getgid(), workdir=str(tmp_path),
                   script="#!/bin/sh\nsleep 60\n", environment={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    return JobRecord(job_id=job_id, spec=spec, state=JobState.RUNNING, node="c000", time_limit=time_limit)


def set_limit(servicer: AgentServicer, job_id: int, time_limit: int | None) -> None:
    request = pb.TimeLimitRequest(job_id=job_id, restarts=0, time_limit=time_limit)
    assert servicer.SetTimeLimit(request, None) == pb.Empty()  # type: ignore[arg-type]


def running(agent: Agent, job_id: int) -> Callable[[], bool]:
    return lambda: (r := agent.jobs.get(job_id)) is not None and r.proc is not None


def test_a_lowered_limit_ends_the_job_timeout_at_once(agent, tmp_path: Path) -> None:
    a, controller, servicer = agent
    a.launch(job(tmp_path, 1, 3600))
    wait_for(running(a, 1))
    lowered = time.monotonic()
    set_limit(servicer, 1, 1)  # a second from its start: already past
    at, state = controller.end(1)
    assert state is JobState.TIMEOUT and at - lowered < 5.0  # SIGTERM at once (it dies of it), not in an hour
    assert "DUE TO TIME LIMIT" in (tmp_path / "slurm-1.out").read_text()


def test_a_raised_limit_keeps_the_job_and_a_limit_given_to_an_unlimited_job_ends_it(agent, tmp_path: Path) -> None:
    a, controller, servicer = agent
    a.launch(job(tmp_path, 2, 2))
    a.launch(job(tmp_path, 3, None))
    wait_for(running(a, 2))
    wait_for(running(a, 3))
    set_limit(servicer, 2, 3600)
    time.sleep(3.0)
    assert 2 not in controller.came and 3 not in controller.came  # its old limit has passed
    set_limit(servicer, 3, 4)  # had none: now four seconds from its start
    assert controller.end(3)[1] is JobState.TIMEOUT
    set_limit(servicer, 2, None)  # lifted
    a.signal(2, 0)
    assert controller.end(2)[1] is JobState.CANCELLED


def test_a_limit_that_overtakes_the_launch_holds_for_the_run(agent, tmp_path: Path) -> None:
    a, controller, servicer = agent
    set_limit(servicer, 4, 1)  # the controller's update went out after the launch, but came first
    a.launch(job(tmp_path, 4, 3600))
    assert controller.end(4)[1] is JobState.TIMEOUT
