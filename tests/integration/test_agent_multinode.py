"""A real agent on the second node of a multi-node job: it holds the allocation (never runs the
script), runs the job's steps with the job's multi-node variables, and ends when cancelled."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import replace

from pslurm.core.jobspec import JobRecord
from pslurm.core.states import JobState
from pslurm.nodeagent.servicer import AgentServicer
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb
from tests.agentlink import ended
from tests.integration.conftest import Place
from tests.integration.test_agent_steps import MakeAgent, job, make_agent, output, started, state, step

__all__ = ["make_agent"]  # the fixture (place: tests/integration/conftest.py)


def two_node_job(place: Place, job_id: int, script: str) -> JobRecord:
    record = job(place, job_id, script)
    spec = replace(record.spec, num_nodes=2, ntasks=3, cpus_per_task=2)
    return replace(record, spec=spec, node="c999", nodes=("c999", "c000"))


def env_of(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_a_later_node_holds_the_allocation_runs_steps_and_ends_on_cancel(make_agent: MakeAgent,
                                                                         place: Place) -> None:
    agent, controller = make_agent()  # node c000, the job's second node (index 1)
    record = two_node_job(place, 11, "touch ran-the-script\nsleep 1000\n")
    agent.launch(record, node_index=1)
    started(agent, 11)
    time.sleep(0.5)
    assert not (place.home / "ran-the-script").exists()  # the script runs on the first node only
    assert agent.jobs[11].job.spec.allocation and agent.jobs[11].node_index == 1
    launch = step(place, 11, 0, "env > step.env; echo on $SLURMD_NODENAME")
    launch = dataclasses.replace(launch, task_offset=2, total_tasks=3, step_nodelist="c[000,999]", tasks_per_node="1,2")
    agent.launch_step(launch)
    out, _, last = output(agent, 11, 0)
    assert out == b"on c000\n" and state(last) == JobState.COMPLETED
    env = env_of((place.home / "step.env").read_text())
    assert (env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"]) == ("c[000,999]", "2")
    assert (env["SLURM_JOB_CPUS_PER_NODE"], env["SLURM_CPUS_ON_NODE"]) == ("4,2", "2")
    assert (env["SLURM_PROCID"], env["SLURM_STEP_NODELIST"], env["SLURM_NODELIST"]) == ("2", "c[000,999]",
                                                                                      "c[000,999]")
    assert controller.end_of(11, 0) is None  # held on
    agent.signal(11, 0)
    end = ended(controller, 11, timeout=10)
    assert state(end) == JobState.CANCELLED


def test_the_launch_message_carries_the_node_index(make_agent: MakeAgent, place: Place) -> None:
    agent, _ = make_agent()
    record = two_node_job(place, 12, "touch ran-the-script\nsleep 1000\n")
    message = convert.job_to_pb(record)
    message.node_index = 1
    servicer = AgentServicer.__new__(AgentServicer)
    servicer.agent = agent
    servicer.operators = frozenset({os.getuid()})
    servicer._from_controller = lambda context: None  # type: ignore[method-assign]
    servicer.LaunchJobs(pb.LaunchJobsRequest(launches=[pb.LaunchRequest(job=message)]), None)  # type: ignore[arg-type]
    started(agent, 12)
    assert agent.jobs[12].node_index == 1 and agent.jobs[12].job.spec.allocation
    time.sleep(0.3)
    assert not (place.home / "ran-the-script").exists()
    agent.signal(12, 0)
