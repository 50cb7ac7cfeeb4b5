"""The agent's runs with real processes, reporting to a recording link (the agent's port to the
link): launch failures, run keys, records, the ends and what heartbeats say."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from pslurm.nodeagent import agent as agent_module
from pslurm.nodeagent import runner as job_runner
from pslurm.nodeagent.agent import Agent
from pslurm.nodeagent.cgroups import CgroupError
from pslurm.nodeagent.link import RunEnded
from pslurm.nodeagent.runs import RunRecord, RunRecords, parse_stat, proc_info, start_ticks
from pslurm.nodeagent.servicer import AgentServicer
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb
from tests.agentlink import RecordingLink, ended
from tests.conftest import wait_for


@pytest.fixture(params=["agent forks", "job runner forks"])
def make_agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., tuple[Agent, RecordingLink]]]:
    """Agents whose jobs' processes the agent forks itself, or its job runner (as psd runs them)."""
    agents: list[Agent] = []
    if request.param == "job runner forks":
        assert job_runner.begin() is not None

    links: list[RecordingLink] = []

    def make(kill_wait: int = 1) -> tuple[Agent, RecordingLink]:
        # a cluster name of its own: job cgroups are named by cluster and node, and an agent's
        # recovery removes its node's leftovers (never another cluster's, such as a `pslurm up` one)
        config = ClusterConfig(path=str(tmp_path / "pslurm.conf"), controller_port=1, cluster_name=f"unit{os.getpid()}",
                               spool_dir=str(tmp_path / "spool"), kill_wait=kill_wait)
        link = RecordingLink()
        agent = Agent(config, NodeConfig("c000", port=2), [], CgroupConfig(), link)
        agents.append(agent)
        links.append(link)
        return agent, link

    yield make
    for agent, link in zip(agents, links, strict=True):
        link.up = False
        agent.stop(grace=5)
    job_runner.end()


def record(tmp_path: Path, job_id: int = 1, restarts: int = 0, script: str | None = None,
           argv: tuple[str, ...] = (), env: dict[str, str] | None = None, workdir: str | None = None,
           interactive: bool = False) -> JobRecord:
    spec = JobSpec(name="t", user=getpass.getuser(), uid=os.getuid(), gid=os.getgid(),
                   workdir=workdir if workdir is not None else str(tmp_path), script=script, argv=argv,
                   environment={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})},
                   interactive=interactive)
    return JobRecord(job_id=job_id, spec=spec, state=JobState.RUNNING, node="c000", restarts=restarts)


def runs(agent: Agent) -> list[tuple[int, int]]:
    return agent.runs()


# -- launch failures ---------------------------------------------------------------------------


@pytest.mark.parametrize("case, expected", [
    ("env", "the environment contains a NUL byte (in BAD)"),
    ("argv", "the command line contains a NUL byte"),
    ("workdir_nul", "the working directory contains a NUL byte"),
    ("workdir_missing", "chdir({tmp}/nope): No such file or directory"),
    ("workdir_file", "chdir({tmp}/file): Not a directory"),
    ("no_program", "execve(): {tmp}/no-such-program: No such file or directory"),
])
def test_a_launch_that_cannot_start_ends_failed_with_the_reason(make_agent, tmp_path: Path, case: str,
                                                                 expected: str) -> None:
    (tmp_path / "file").write_text("")
    kw: dict[str, Any] = {"script": "#!/bin/sh\necho hi\n"}
    if case == "env":
        kw["env"] = {"BAD": "a\0b"}
    elif case == "argv":
        kw = {"argv": ("echo", "a\0b")}
    elif case == "workdir_nul":
        kw["workdir"] = f"{tmp_path}/x\0y"
    elif case == "workdir_missing":
        kw["workdir"] = f"{tmp_path}/nope"
    elif case == "workdir_file":
        kw["workdir"] = f"{tmp_path}/file"
    elif case == "no_program":
        kw = {"argv": (f"{tmp_path}/no-such-program",)}
    agent, link = make_agent()
    agent.launch(record(tmp_path, 3, **kw))  # returns: the failure travels as the end
    end = ended(link, 3)
    reason = expected.format(tmp=tmp_path)
    assert end.state == JobState.FAILED
    assert (end.exit_code, end.exit_signal, end.launch_failure) == (2, 0, reason)
    assert runs(agent) == []
    assert agent.records.load() == []  # never started: never recorded
    if case in ("env", "argv", "no_program"):  # where the output file can be written
        out = tmp_path / "slurm-3.out"
        assert out.read_text() == f"slurmstepd: error: {reason}\n"


def test_a_failing_launch_rpc_succeeds_and_an_interactive_job_gets_the_line(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    servicer = AgentServicer(agent, SimpleNamespace(identity=lambda ctx: SimpleNamespace(uid=0)))  # type: ignore[arg-type]
    job = record(tmp_path, 4, argv=("true",), env={"X": "\0"}, interactive=True)
    assert servicer.LaunchJob(pb.LaunchRequest(job=convert.job_to_pb(job)), None) == pb.Empty()  # type: ignore[arg-type]
    assert ended(link, 4).launch_failure == "the environment contains a NUL byte (in X)"
    chunks = list(agent.streams.output(4, 0, lambda spec: True))
    assert chunks[0][1] == b"slurmstepd: error: the environment contains a NUL byte (in X)\n"
    assert chunks[-1][2] is not None and chunks[-1][2].state == JobState.FAILED


def test_launch_jobs_starts_each_and_fails_each_alone(make_agent, tmp_path: Path) -> None:
    """One LaunchJobs call: each job starts (or fails) as its own LaunchJob would; a launch that
    does not decode is refused alone, in the reply."""
    agent, link = make_agent()
    servicer = AgentServicer(agent, SimpleNamespace(identity=lambda ctx: SimpleNamespace(uid=0)))  # type: ignore[arg-type]
    good = record(tmp_path, 11, argv=("true",))
    bad_env = record(tmp_path, 12, argv=("true",), env={"X": "\0"})
    undecodable = convert.job_to_pb(record(tmp_path, 13, argv=("true",)))
    undecodable.state = 999  # no such state: job_from_pb raises
    request = pb.LaunchJobsRequest(launches=[pb.LaunchRequest(job=convert.job_to_pb(good)),
                                             pb.LaunchRequest(job=convert.job_to_pb(bad_env)),
                                             pb.LaunchRequest(job=undecodable)])
    reply = servicer.LaunchJobs(request, None)  # type: ignore[arg-type]
    assert [r.job_id for r in reply.refused] == [13] and reply.refused[0].error
    assert ended(link, 11).state == JobState.COMPLETED
    assert ended(link, 12).launch_failure == "the environment contains a NUL byte (in X)"


def test_a_cgroup_error_or_an_agent_error_is_a_launch_failure(make_agent, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    agent, link = make_agent()

    def no_cgroup(job: JobRecord) -> None:
        raise CgroupError("cannot create device cgroup: Permission denied")

    monkeypatch.setattr(agent.placement, "cgroup_for", no_cgroup)
    agent.launch(record(tmp_path, 5, argv=("true",)))
    end = ended(link, 5)
    assert (end.exit_code, end.launch_failure) == (2, "cannot create device cgroup: Permission denied")
    assert (tmp_path / "slurm-5.out").read_text() == (
        "slurmstepd: error: cannot create device cgroup: Permission denied\n")
    monkeypatch.undo()

    def broken(*args: object) -> dict[str, str]:
        raise RuntimeError("no environment\ntoday")

    monkeypatch.setattr(agent_module, "job_environment", broken)
    agent.launch(record(tmp_path, 6, argv=("true",)))
    assert ended(link, 6).launch_failure == "RuntimeError: no environment today"
    assert link.end_of(6, 0).state == JobState.FAILED  # type: ignore[union-attr]


def test_a_job_that_starts_reports_no_launch_failure(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    agent.launch(record(tmp_path, 7, argv=("sh", "-c", "exit 3")))
    end = ended(link, 7)
    assert (end.state, end.exit_code, end.launch_failure) == (JobState.FAILED, 3, "")


# -- runs, their keys and their records ----------------------------------------------------------


def test_a_repeated_launch_of_the_same_run_or_an_older_one_is_a_no_op(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    starts = tmp_path / "starts"
    job = record(tmp_path, 8, restarts=1, script=f"#!/bin/sh\necho $$ >> {starts}\nsleep 0.5\n")
    agent.launch(job)
    agent.launch(job)
    agent.launch(record(tmp_path, 8, restarts=0, script=f"#!/bin/sh\necho older >> {starts}\n"))
    assert runs(agent) == [(8, 1)]
    assert ended(link, 8, restarts=1).exit_code == 0
    agent.launch(job)  # after its end too
    time.sleep(0.2)
    assert len(starts.read_text().split()) == 1
    assert [(r.job_id, r.restarts) for _, r in link.ended] == [(8, 1)]


def test_a_run_is_recorded_until_its_end_is_acknowledged(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    link.up = False
    release = tmp_path / "release"
    agent.launch(record(tmp_path, 9, restarts=2, script=f"#!/bin/sh\nwhile [ ! -e {release} ]; do sleep 0.02; done\n"))
    wait_for(lambda: agent.jobs[9].proc is not None, timeout=5)
    path = Path(agent.records.path(9, 2))
    data = json.loads(path.read_text())
    pid = agent.jobs[9].proc.pid  # type: ignore[union-attr]
    assert (data["job_id"], data["restarts"], data["pgid"]) == (9, 2, pid)
    assert data["start_ticks"] == start_ticks(pid) and data["start_ticks"] > 0
    release.touch()
    wait_for(lambda: agent.jobs[9].end is not None, timeout=5)
    assert runs(agent) == [(9, 2)]  # ended, not acknowledged: still said, and still recorded
    agent.heartbeats.beat()
    assert path.exists() and runs(agent) == [(9, 2)]
    link.up = True
    agent.heartbeats.beat()  # the heartbeat retries the end
    assert link.end_of(9, 2) is not None and runs(agent) == [] and not path.exists()


def test_a_run_that_ended_is_said_while_its_end_is_being_prepared(make_agent, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Between its leader's end and its end's queueing (teardown, usage, its steps' ends) a run is
    still the agent's: a heartbeat then that left it out made the controller requeue a finished job."""
    agent, link = make_agent()
    preparing, go_on = threading.Event(), threading.Event()

    def slow_teardown(*args: object) -> None:
        preparing.set()
        go_on.wait(10)

    monkeypatch.setattr(agent.gpus.sharing, "teardown", slow_teardown)
    agent.launch(record(tmp_path, 21, argv=("true",)))
    assert preparing.wait(5)
    assert agent.jobs[21].end is not None and runs(agent) == [(21, 0)]
    go_on.set()
    ended(link, 21)
    wait_for(lambda: runs(agent) == [], timeout=5)


def test_the_agents_of_one_process_take_turns_at_forks_and_script_writes(make_agent) -> None:
    """A fork while another thread writes a batch script makes that script's exec fail (ETXTBSY):
    psd --virtual runs many nodes' agents in one process, so the turns are the process's."""
    (first, _), (second, _) = make_agent(), make_agent()
    assert first.launcher.spawn_lock is second.launcher.spawn_lock is second.steps.spawn_lock


def test_ends_that_come_while_one_is_sent_go_together_in_the_next_call(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    first_sent, go_on = threading.Event(), threading.Event()

    def slow_first(request: RunEnded) -> None:
        if request.job_id == 20:
            first_sent.set()
            assert go_on.wait(5)

    link.on_end = slow_first
    agent.launch(record(tmp_path, 20, argv=("true",)))
    assert first_sent.wait(5)  # a lone end is sent at once, alone
    for job_id in (21, 22, 23):
        agent.launch(record(tmp_path, job_id, argv=("true",)))
    wait_for(lambda: len(agent.ends.unreported) == 4, timeout=5)
    go_on.set()
    for job_id in (20, 21, 22, 23):
        ended(link, job_id)
    assert link.calls == [1, 3]  # what ended meanwhile went in one call
    wait_for(lambda: runs(agent) == [], timeout=5)


def test_an_older_runs_unreported_end_and_a_newer_run_coexist(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    link.up = False
    agent.launch(record(tmp_path, 10, restarts=0, argv=("sh", "-c", "exit 1")))
    wait_for(lambda: agent.ends.unreported, timeout=5)
    started = tmp_path / "started"
    agent.launch(record(tmp_path, 10, restarts=1, script=f"#!/bin/sh\ntouch {started}\nsleep 30\n"))
    wait_for(started.exists, timeout=5)  # the newer run is not lost behind the older one's unreported end
    assert runs(agent) == [(10, 0), (10, 1)]
    link.up = True
    agent.heartbeats.beat()
    old = link.end_of(10, 0)
    assert old is not None and old.exit_code == 1 and old.state == JobState.FAILED
    assert runs(agent) == [(10, 1)]
    agent._forget_old()
    assert agent.table.get((10, 0)) is None and agent.jobs[10].job.restarts == 1


def test_kill_names_a_run_and_spares_a_newer_run_of_the_job(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    link.up = False
    agent.launch(record(tmp_path, 11, restarts=0, argv=("true",)))
    wait_for(lambda: agent.ends.unreported, timeout=5)
    agent.launch(record(tmp_path, 11, restarts=1, argv=("sleep", "30")))
    wait_for(lambda: agent.jobs[11].proc is not None, timeout=5)
    link.up = True
    link.kill = [(11, 0)]
    agent.heartbeats.beat()
    time.sleep(0.3)
    assert agent.jobs[11].end is None and runs(agent) == [(11, 1)]
    link.kill = [(11, 1)]
    agent.heartbeats.beat()
    end = ended(link, 11, restarts=1)
    assert end.state == JobState.CANCELLED
    assert runs(agent) == []


def test_a_run_killed_before_it_starts_never_starts(make_agent, tmp_path: Path) -> None:
    agent, link = make_agent()
    hold = tmp_path / "hold"
    gate = threading.Event()
    real_start = agent.launcher.start

    def slow_start(*args: Any) -> Any:
        gate.wait(5)
        return real_start(*args)

    agent.launcher.start = slow_start  # type: ignore[method-assign]
    t = threading.Thread(target=agent.launch, args=(record(tmp_path, 12, argv=("touch", str(hold))),))
    t.start()
    wait_for(lambda: runs(agent) == [(12, 0)], timeout=5)
    agent.kill([(12, 0)])
    gate.set()
    t.join(5)
    end = ended(link, 12)
    assert end.state == JobState.CANCELLED and end.launch_failure == ""
    assert not hold.exists()


def test_records_survive_corruption(tmp_path: Path) -> None:
    records = RunRecords(str(tmp_path / "runs"))
    assert records.load() == []  # no directory yet
    rec = RunRecord(1, 2, 12345, 999, "boot", "", 1.5)
    records.save(rec)
    (tmp_path / "runs" / "2.0.json").write_text("{not json")
    (tmp_path / "runs" / "3.0.json").write_text('{"job_id": 3}')
    (tmp_path / "runs" / "4.0.json").write_text("[]")
    (tmp_path / "runs" / "5.0.json.tmp77").write_text('{"job_id"')
    assert records.load() == [rec]
    assert sorted(os.listdir(tmp_path / "runs")) == ["1.2.json"]
    records.remove(1, 2)
    records.remove(1, 2)
    assert records.load() == []


def test_proc_stat_parsing() -> None:
    info = parse_stat(42, "42 (a) b (c)) S 1 40 41 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0")
    assert info is not None and (info.state, info.pgrp, info.session, info.start_ticks) == ("S", 40, 41, 777)
    assert parse_stat(42, "garbage") is None
    me = proc_info(os.getpid())
    assert me is not None and me.session == os.getsid(0) and me.pgrp == os.getpgrp()
    with subprocess.Popen([sys.executable, "-c", "pass"]) as p:
        p.wait()
    assert proc_info(p.pid) is None
