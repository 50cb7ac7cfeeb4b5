"""Per-task GPUs through the agent with its real launcher (a recording link to the controller): a step whose launch
names each task's GPUs (StepLaunch.task_gpus: psrun --gpus-per-task, --gpu-bind) gives each task its
own CUDA_VISIBLE_DEVICES, the step's GPUs in SLURM_STEP_GPUS; without them every task sees the step's."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.gres import GresRequest
from pslurm.nodeagent.agent import Agent
from pslurm.nodeagent.app import simulated_devices
from tests.integration.conftest import Place
from tests.integration.test_agent_steps import Controller, job, output, started, step  # noqa: F401


@pytest.fixture
def agent(place: Place) -> Iterator[Agent]:  # noqa: F811
    config = ClusterConfig(path=str(place.top / "pslurm.conf"), cluster_name=f"stepgpus{os.getpid()}",
                           controller_port=1, spool_dir=str(place.top / "spool"), kill_wait=1)
    node = NodeConfig("c000", port=2, cpus=4, gres=(GresRequest("gpu", None, 2),))
    link = Controller()
    made = Agent(config, node, simulated_devices(node), CgroupConfig(), link)
    made.recover()
    yield made
    link.up = False
    made.stop(grace=5)


def test_each_task_gets_its_own_gpus(agent: Agent, place: Place) -> None:  # noqa: F811
    record = job(place, 1)
    record = dataclasses.replace(record, gpu_indices=(0, 1))
    agent.launch(record)
    started(agent, 1)
    show = 'echo "$SLURM_PROCID $CUDA_VISIBLE_DEVICES $SLURM_STEP_GPUS"'
    agent.launch_step(step(place, 1, 0, show, ntasks=2, gpu_indices=(0, 1), task_gpus=((0,), (1,))))
    out, _, _ = output(agent, 1, 0)
    assert sorted(out.decode().splitlines()) == ["0 0 0,1", "1 1 0,1"]
    agent.launch_step(step(place, 1, 1, show, ntasks=2, gpu_indices=(1,)))  # an exact step's one GPU, shared
    out, _, _ = output(agent, 1, 1)
    assert sorted(out.decode().splitlines()) == ["0 1 1", "1 1 1"]
