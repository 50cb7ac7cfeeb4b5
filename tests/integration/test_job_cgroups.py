"""Job cgroups through the agent, for real (root): every job in its cgroup, named for its cluster and
node; cancel, time limit and the end of the job kill what left its session; --mem ends a job
OUT_OF_MEMORY; ConstrainCores gives it a cpuset; a restarted agent removes leftover job cgroups;
the node says how it isolates devices, and why not when it cannot."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord
from pslurm.core.states import JobState
from pslurm.nodeagent import bpfdev
from pslurm.nodeagent.agent import Agent
from pslurm.nodeagent.cgroupnode import Mounts, NodeCgroups
from pslurm.nodeagent.cgroups import ChildSetup
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.link import RunEnded
from pslurm.nodeagent.runs import proc_info
from tests.agentlink import RecordingLink, ended
from tests.conftest import wait_for
from tests.unit.test_agent_runs import record

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="job cgroups need root")
CLUSTER = f"jc{os.getpid()}"
MakeAgent = Callable[..., tuple[Agent, RecordingLink]]


def alive(pid: int) -> bool:
    info = proc_info(pid)
    return info is not None and info.state not in "ZXx"


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[MakeAgent]:
    agents: list[tuple[Agent, RecordingLink]] = []

    def make(conf: CgroupConfig = CgroupConfig(), devices: tuple[GpuDevice, ...] = (), node: str = "c000",
             kill_wait: int = 1) -> tuple[Agent, RecordingLink]:
        config = ClusterConfig(path=str(tmp_path / "pslurm.conf"), cluster_name=CLUSTER, controller_port=1,
                               spool_dir=str(tmp_path / "spool"), kill_wait=kill_wait)
        controller = RecordingLink()
        agent = Agent(config, NodeConfig(node, port=2, cpus=2), list(devices), conf, controller)
        assert agent.placement.cgroups is not None, "a root agent makes job cgroups"
        agents.append((agent, controller))
        return agent, controller

    yield make
    for agent, controller in agents:
        controller.up = False
        agent.stop(grace=5)
        cgroups = agent.placement.cgroups
        assert cgroups is not None
        assert not any(os.path.exists(cgroups.node_dir(r)) for r in cgroups.layout.roots)


def job(tmp_path: Path, job_id: int, script: str, **spec: object) -> JobRecord:
    rec = record(tmp_path, job_id, script="#!/bin/sh\n" + script)
    time_limit = spec.pop("time_limit", None)
    gpus = spec.pop("gpu_indices", ())
    return replace(rec, spec=replace(rec.spec, **spec), time_limit=time_limit, gpu_indices=gpus)  # type: ignore[arg-type]


def state(end: RunEnded) -> JobState:
    return end.state


def test_every_job_runs_in_its_cgroup_named_for_cluster_and_node(make_agent: MakeAgent, tmp_path: Path) -> None:
    agent, controller = make_agent(node="c007")
    agent.launch(job(tmp_path, 7, f"cat /proc/self/cgroup > {tmp_path}/cgroups\n"))
    assert state(ended(controller, 7)) == JobState.COMPLETED
    cgroup = agent.jobs[7].cgroup
    assert cgroup is not None and cgroup.dirs
    assert all(d.endswith(f"/pslurm_{CLUSTER}/c007/job_7") for d in cgroup.dirs)
    lines = (tmp_path / "cgroups").read_text().splitlines()
    if agent.placement.cgroups.layout.v2:  # type: ignore[union-attr]
        assert f"0::/pslurm_{CLUSTER}/c007/job_7" in lines
    assert not any(os.path.exists(d) for d in cgroup.dirs)  # removed with the end


def test_paths_of_two_clusters_or_nodes_do_not_meet() -> None:
    made = [NodeCgroups.setup(CgroupConfig(), cluster, node) for cluster, node in
            ((CLUSTER, "c000"), (CLUSTER + "b", "c000"), (CLUSTER, "c001"))]
    try:
        jobs = [cg.create(5) for cg in made if cg is not None]
        assert len({d for j in jobs for d in j.dirs}) == 3 * len(jobs[0].dirs)
        assert all(j.remove() for j in jobs)
    finally:
        for cg in made:
            cg.remove_parents() if cg is not None else None


ESCAPEE = ("trap '' TERM\n"  # the job and its escapee ignore SIGTERM: only SIGKILL ends them
           "setsid sh -c 'echo $$ > {pid}.tmp; mv {pid}.tmp {pid}; exec sleep 1000' &\n"
           "while [ ! -e {pid} ]; do sleep 0.02; done\n")


@pytest.mark.parametrize("how, expected", [("cancel", JobState.CANCELLED), ("time limit", JobState.TIMEOUT),
                                           ("node lost", JobState.CANCELLED), ("exit", JobState.COMPLETED)])
def test_a_process_that_left_the_session_does_not_outlive_its_job(make_agent: MakeAgent, tmp_path: Path,
                                                                 how: str, expected: JobState) -> None:
    agent, controller = make_agent()
    pid_file = tmp_path / "escapee"
    seen_alive: list[bool] = []
    controller.on_end = lambda request: seen_alive.append(alive(int(pid_file.read_text())))
    script = ESCAPEE.format(pid=pid_file) + ("exit 0\n" if how == "exit" else "sleep 1000\n")
    agent.launch(job(tmp_path, 8, script, time_limit=2 if how == "time limit" else None))
    escapee = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=10))
    try:
        leader = agent.jobs[8].proc
        assert leader is not None and os.getsid(escapee) not in (leader.pid, os.getsid(0))  # out of the session
        if how == "cancel":
            agent.signal(8, 0)
        elif how == "node lost":  # the controller's answer to a node it had given up: kill that run
            agent.kill([(8, 0)])
        end = ended(controller, 8, timeout=15)
        assert state(end) == expected
        assert seen_alive == [False] and not alive(escapee)
    finally:
        if alive(escapee):
            os.kill(escapee, 9)


def test_a_restarted_agent_kills_what_left_the_session_of_a_previous_run(make_agent: MakeAgent,
                                                                          tmp_path: Path) -> None:
    crashed, _ = make_agent()
    pid_file = tmp_path / "escapee"
    crashed.launch(job(tmp_path, 13, ESCAPEE.format(pid=pid_file) + "sleep 1000\n"))
    escapee = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=10))
    leader = crashed.jobs[13].proc
    assert leader is not None
    try:
        successor, _ = make_agent()  # same node and spool: what an agent restarted after a crash finds
        successor.recover()
        assert not alive(escapee) and not alive(leader.pid)
        assert not any(os.path.exists(d) for d in crashed.jobs[13].cgroup.dirs)  # type: ignore[union-attr]
    finally:
        for pid in (escapee, leader.pid):
            if alive(pid):
                os.kill(pid, 9)


def oom_note(step: str) -> re.Pattern[str]:
    """slurmstepd's line; the kernel may kill more than one process of a pipe (tail, then head under load),
    and Slurm counts them, with the plural."""
    return re.compile(r"slurmstepd: error: Detected (1 oom_kill event|[2-9] oom_kill events) "
                      rf"in StepId={re.escape(step)}\. Some of the step tasks have been OOM Killed\.")


def test_memory_limit_ends_the_job_out_of_memory(make_agent: MakeAgent, tmp_path: Path) -> None:
    agent, controller = make_agent(CgroupConfig(constrain_ram_space=True))
    layout = agent.placement.cgroups.layout  # type: ignore[union-attr]
    if layout.memory is None:
        pytest.skip(f"no memory controller for job cgroups here: {layout.problems}")
    limit_file = "memory.max" if layout.memory == layout.v2 else "memory.limit_in_bytes"
    controller_name = "" if layout.memory == layout.v2 else "memory"
    show_limit = (f"cat {layout.memory}$(grep '^[0-9]*:{controller_name}:' /proc/self/cgroup | cut -d: -f3)"
                  f"/{limit_file}\n")
    # The pipe's processes ask to be the kernel's first choice (raising one's own oom_score_adj needs no
    # privilege), so that the batch shell is never the one killed when a second OOM event follows under load.
    greedy_pipe = "sh -c 'echo 1000 > /proc/self/oom_score_adj; head -c 200M /dev/zero | tail'\n"
    agent.launch(job(tmp_path, 9, show_limit + greedy_pipe + "echo survived\n", mem_mb=20))
    agent.launch(job(tmp_path, 10, show_limit + "head -c 5M /dev/zero | tail | wc -c\n", mem_mb=20))
    assert state(ended(controller, 9, timeout=30)) == JobState.OUT_OF_MEMORY
    assert state(ended(controller, 10, timeout=30)) == JobState.COMPLETED
    out = (tmp_path / "slurm-9.out").read_text().splitlines()
    assert out[0] == str(20 * 2**20)
    assert oom_note("9.batch").fullmatch(out[-1]), out[-1]
    assert "survived" in out  # only the pipe was killed; the job's end state says so all the same
    assert (tmp_path / "slurm-10.out").read_text().splitlines() == [str(20 * 2**20), str(5 * 2**20)]
    psrun = record(tmp_path, 14, argv=("sh", "-c", "head -c 200M /dev/zero | tail"), interactive=True)
    agent.launch(replace(psrun, spec=replace(psrun.spec, mem_mb=20)))
    assert state(ended(controller, 14, timeout=30)) == JobState.OUT_OF_MEMORY
    assert oom_note("14.0").fullmatch(bytes(agent.jobs[14].step.output.buffers["stderr"]).decode().splitlines()[-1])


def test_constrain_cores_gives_the_job_its_cpus_as_its_cpuset(make_agent: MakeAgent, tmp_path: Path) -> None:
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip(f"needs at least 2 usable CPUs, have {len(mine)}")
    gpu = GpuDevice(0, "gpu", None, None, None, cores=(mine[1],))
    agent, controller = make_agent(CgroupConfig(constrain_cores=True), devices=(gpu,))
    if agent.placement.cgroups.layout.cpuset is None:  # type: ignore[union-attr]
        pytest.skip(f"no cpuset controller for job cgroups here: {agent.placement.cgroups.layout.problems}")  # type: ignore[union-attr]
    show = f"{sys.executable} -c 'import os; print(sorted(os.sched_getaffinity(0)))'\n"
    go = tmp_path / "go"
    hold = f"while [ ! -e {go} ]; do sleep 0.02; done\n"
    agent.launch(job(tmp_path, 11, show + hold, gpu_indices=(0,)))  # near its GPU: CPU mine[1]
    agent.launch(job(tmp_path, 12, show + hold))  # the CPU job 11 does not use
    wait_for(lambda: all(agent.jobs[i].cgroup is not None for i in (11, 12)), timeout=10)
    cpusets = {i: agent.jobs[i].cgroup.cpus for i in (11, 12)}  # type: ignore[union-attr]
    assert cpusets == {11: {mine[1]}, 12: {mine[0]}}
    go.touch()
    for i in (11, 12):
        assert state(ended(controller, i, timeout=10)) == JobState.COMPLETED
    assert (tmp_path / "slurm-11.out").read_text() == f"[{mine[1]}]\n"
    assert (tmp_path / "slurm-12.out").read_text() == f"[{mine[0]}]\n"


def test_a_restarted_agent_removes_leftover_job_cgroups(make_agent: MakeAgent, tmp_path: Path) -> None:
    import subprocess

    previous = NodeCgroups.setup(CgroupConfig(constrain_devices=True), CLUSTER, "c000")
    other_node = NodeCgroups.setup(CgroupConfig(), CLUSTER, "c001")
    assert previous is not None and other_node is not None
    busy, empty, elsewhere = previous.create(77, [0]), previous.create(78), other_node.create(77)
    procs = []
    for cgroup in (busy, elsewhere):  # a process in each that left its session, as a job's may
        with ChildSetup(cgroup) as setup:
            procs.append(subprocess.Popen(["setsid", "sleep", "1000"], preexec_fn=setup))  # noqa: PLW1509
    try:
        wait_for(lambda: busy.pids() and elsewhere.pids(), timeout=5)
        agent, _ = make_agent(CgroupConfig(constrain_devices=True))
        agent.recover()
        assert procs[0].wait(timeout=5) == -9
        assert not any(os.path.exists(d) for d in (*busy.dirs, *empty.dirs))
        assert procs[1].poll() is None and elsewhere.pids() != []  # another node's: not ours to touch
        agent.recover()  # nothing left: nothing to do
    finally:
        for p in procs:
            p.kill()
            p.wait()
        wait_for(lambda: elsewhere.remove(), timeout=5)
        other_node.remove_parents()


def test_isolation_is_reported_with_its_mechanism_or_why_there_is_none(
        make_agent: MakeAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    mounts = Mounts.read()
    if not mounts.v2 or "devices" not in mounts.v1:
        pytest.skip("this host is not a hybrid one")
    agent, _ = make_agent(CgroupConfig(constrain_devices=True))
    assert agent.placement.isolation == "devices (cgroup v2 bpf + cgroup v1)"
    assert make_agent(CgroupConfig())[0].placement.isolation == "none: ConstrainDevices=no"
    why = ("bpf(BPF_PROG_LOAD): Operation not permitted "
           "(needs CAP_SYS_ADMIN or CAP_BPF; a seccomp profile may block bpf())")
    monkeypatch.setattr(bpfdev, "probe", lambda parent: why)
    with caplog.at_level(logging.WARNING, logger="psd"):
        assert make_agent(CgroupConfig(constrain_devices=True))[0].placement.isolation == "devices (cgroup v1)"
    assert f"job cgroups: cannot attach cgroup v2 device programs: {why}" in caplog.messages
    pure_v2 = NodeCgroups.setup(CgroupConfig(constrain_devices=True, mountpoint=mounts.v2[0]), CLUSTER, "c009",
                                Mounts(mounts.v2, {}))
    assert pure_v2 is not None and pure_v2.isolation == f"none: cannot attach cgroup v2 device programs: {why}"
    pure_v2.remove_parents()
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # an agent that is not root: no job cgroups at all
    config = ClusterConfig(path=str(tmp_path / "pslurm.conf"), cluster_name=CLUSTER, spool_dir=str(tmp_path))
    unprivileged = Agent(config, NodeConfig("c000", port=2), [], CgroupConfig(constrain_devices=True), RecordingLink())
    assert unprivileged.placement.cgroups is None
    assert unprivileged.placement.isolation == "none: device cgroups need root (the agent runs as uid 1000)"


def test_max_rss_is_the_memory_cgroups_peak_in_the_end(make_agent: MakeAgent, tmp_path: Path) -> None:
    """sacct's MaxRSS: the job's memory cgroup's peak, read before the cgroup goes, in the end's usage,
    with a --mem limit or without, and no GPUs."""
    agent, controller = make_agent(CgroupConfig(constrain_ram_space=True))
    layout = agent.placement.cgroups.layout  # type: ignore[union-attr]
    if layout.memory is None:
        pytest.skip(f"no memory controller for job cgroups here: {layout.problems}")
    grow = "head -c 60M /dev/zero | tail >/dev/null\n"  # tail keeps the last line: all 60M, no newline
    agent.launch(job(tmp_path, 21, grow, mem_mb=500))
    agent.launch(job(tmp_path, 22, grow))
    for job_id in (21, 22):
        end = ended(controller, job_id, timeout=30)
        assert state(end) == JobState.COMPLETED
        assert end.max_rss_bytes is not None and end.gpu_usage is None
        assert 40 * 1024 * 1024 < end.max_rss_bytes < 500 * 1024 * 1024, end.max_rss_bytes


def test_without_a_memory_cgroup_max_rss_is_not_measured(make_agent: MakeAgent, tmp_path: Path) -> None:
    agent, controller = make_agent()
    agent.launch(job(tmp_path, 23, "true\n"))
    end = ended(controller, 23, timeout=30)
    assert state(end) == JobState.COMPLETED and end.max_rss_bytes is None
    assert end.cpu_times is not None  # its cgroup's CPU time is read all the same (seff)
