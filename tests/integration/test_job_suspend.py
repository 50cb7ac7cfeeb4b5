"""scontrol suspend / resume on a node, for real: the agent freezes the job's cgroup (the v2
``cgroup.freeze`` or the v1 freezer, as cgroup.conf's CgroupPlugin picks the hierarchies) or, without
one, stops its processes with SIGSTOP; the job's counter stops and goes on after resume; its time limit
does not run while it is suspended; a suspended job is cancelled."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pslurm.core.config import CgroupConfig
from pslurm.core.states import JobState
from pslurm.nodeagent.launcher import RunningJob
from tests.agentlink import ended
from tests.conftest import wait_for
from tests.integration.test_job_cgroups import MakeAgent, job, make_agent, state  # noqa: F401 - the fixture

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="job cgroups need root")
COUNT = "i=0; while :; do echo $i >> {}; i=$((i+1)); sleep 0.1; done\n"


def ticks(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


def frozen(run: RunningJob) -> bool:
    """The run's cgroup says it is frozen (v2 ``cgroup.events``, v1 ``freezer.state``)."""
    cgroup = run.cgroup
    if cgroup is not None:
        for path in cgroup.dirs:
            for name, word in (("cgroup.events", "frozen 1"), ("freezer.state", "FROZEN")):
                text = Path(path, name).read_text() if Path(path, name).exists() else ""
                if word in text:
                    return True
    return False


@pytest.mark.parametrize("plugin", ["autodetect", "cgroup/v1"])
def test_suspend_freezes_the_job_and_its_limit_waits(make_agent: MakeAgent, tmp_path: Path,  # noqa: F811
                                                     plugin: str) -> None:
    agent, controller = make_agent(CgroupConfig(plugin=plugin))
    out = tmp_path / "ticks"
    agent.launch(job(tmp_path, 31, COUNT.format(out), time_limit=2))
    wait_for(lambda: ticks(out) > 2, timeout=10)
    agent.suspend(31, 0, resume=False)
    run = agent.jobs[31]
    wait_for(lambda: frozen(run), timeout=5)  # v2's freeze completes asynchronously
    time.sleep(0.5)  # a tick written as it was frozen lands
    held = ticks(out)
    time.sleep(2.5)  # past its 2 s limit: a limit that ran would have ended it
    assert ticks(out) == held and controller.end_of(31, 0) is None
    agent.suspend(31, 0, resume=True)
    wait_for(lambda: ticks(out) > held, timeout=5)
    assert state(ended(controller, 31, timeout=10)) == JobState.TIMEOUT  # its limit, counted while it ran
    assert run.suspended_for >= 3


def test_a_suspended_job_is_cancelled(make_agent: MakeAgent, tmp_path: Path) -> None:  # noqa: F811
    agent, controller = make_agent()
    out = tmp_path / "ticks"
    agent.launch(job(tmp_path, 32, COUNT.format(out)))
    wait_for(lambda: ticks(out) > 2, timeout=10)
    agent.suspend(32, 0, resume=False)
    agent.signal(32, 0)
    assert state(ended(controller, 32, timeout=10)) == JobState.CANCELLED
