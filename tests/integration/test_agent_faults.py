"""The agent against real process trees: a run ends only once none of its processes is left, a
restarted agent kills what the previous one left running, a newer run waits for the older one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.core.states import JobState
from pslurm.nodeagent.runs import RunRecord, RunRecords, boot_id, proc_info, start_ticks
from tests.agentlink import ended
from tests.conftest import wait_for
from tests.unit import test_agent_runs
from tests.unit.test_agent_runs import record, runs

make_agent = test_agent_runs.make_agent  # the fixture: an agent with a fake controller

PY = f"{sys.executable} -I -S"


def alive(pid: int) -> bool:
    """Running (a zombie holds nothing and only waits for its parent)."""
    info = proc_info(pid)
    return info is not None and info.state not in "ZXx"


def read_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def own_group_child(pid_file: Path) -> str:
    """A shell line: a background child in a process group of its own (same session), ignoring
    SIGTERM; it writes its pid to ``pid_file`` once it is there."""
    code = (f"import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); os.setpgid(0, 0); "
            f"open('{pid_file}.tmp', 'w').write(str(os.getpid())); os.rename('{pid_file}.tmp', '{pid_file}'); "
            f"time.sleep(100)")
    return f'{PY} -c "{code}" &\nwhile [ ! -e {pid_file} ]; do sleep 0.02; done\n'


class Freezer:
    """A cgroup v1 freezer: a frozen process that is sent SIGKILL dies only once thawed."""

    def __init__(self, path: str) -> None:
        self.path = path

    def add(self, pid: int) -> None:
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(pid))

    def set(self, state: str) -> None:
        with open(os.path.join(self.path, "freezer.state"), "w") as f:
            f.write(state)
        wait_for(lambda: open(os.path.join(self.path, "freezer.state")).read().strip() == state,
                 timeout=5, interval=0.01)


@pytest.fixture
def freezer() -> Iterator[Freezer]:
    if os.geteuid() != 0:
        pytest.skip("freezing a process needs root")
    with open("/proc/self/mounts") as f:
        mounts = [line.split() for line in f]
    base = next((m[1] for m in mounts if m[2] == "cgroup" and "freezer" in m[3].split(",")), None)
    if base is None:
        pytest.skip("no cgroup v1 freezer mounted")
    path = os.path.join(base, f"pslurm-test-{os.getpid()}")
    try:
        os.mkdir(path)
    except OSError as exc:
        pytest.skip(f"cannot create a freezer cgroup: {exc}")
    fz = Freezer(path)
    try:
        yield fz
    finally:
        fz.set("THAWED")
        for pid in read_pids(Path(path) / "cgroup.procs"):
            os.kill(pid, 9)
        wait_for(lambda: not read_pids(Path(path) / "cgroup.procs"), timeout=5, interval=0.02)
        os.rmdir(path)


def test_the_end_comes_once_a_background_child_in_its_own_process_group_is_gone(make_agent, tmp_path: Path) -> None:
    agent, controller = make_agent()
    child = tmp_path / "child"
    seen_alive: list[bool] = []
    controller.on_end = lambda request: seen_alive.append(alive(int(child.read_text())))
    agent.launch(record(tmp_path, 20, script=f'#!/bin/sh\ntrap "" TERM\n{own_group_child(child)}exit 0\n'))
    end = ended(controller, 20)
    assert end.state == JobState.COMPLETED
    assert seen_alive == [False]  # killpg alone misses it: the session's other process groups go too
    assert not alive(int(child.read_text()))


def test_the_end_waits_while_a_process_of_the_run_cannot_die(make_agent, freezer: Freezer, tmp_path: Path) -> None:
    agent, controller = make_agent()
    child, go = tmp_path / "child", tmp_path / "go"
    agent.launch(record(tmp_path, 21, script=f"#!/bin/sh\nsleep 100 &\necho $! > {child}\n"
                                             f"while [ ! -e {go} ]; do sleep 0.02; done\n"))
    pid = wait_for(lambda: read_pids(child), timeout=5)[0]
    freezer.add(pid)
    freezer.set("FROZEN")
    go.touch()  # the leader exits; the agent SIGKILLs the group, but a frozen process dies only once thawed
    leader = agent.jobs[21].proc
    assert leader is not None
    wait_for(lambda: leader.returncode is not None, timeout=5, interval=0.02)
    time.sleep(1.0)
    assert controller.ended == [] and runs(agent) == [(21, 0)] and agent.jobs[21].end is None
    assert alive(pid)
    thawed = time.time()
    freezer.set("THAWED")
    end = ended(controller, 21)
    assert end.end_time >= thawed and not alive(pid)
    assert end.state == JobState.COMPLETED


def test_the_wait_for_a_run_that_cannot_die_is_bounded(make_agent, freezer: Freezer, tmp_path: Path) -> None:
    agent, controller = make_agent()
    agent.launcher.reap_timeout = 1.0
    child = tmp_path / "child"
    agent.launch(record(tmp_path, 22, script=f"#!/bin/sh\nsleep 100 &\necho $! > {child}\n"
                                             f"while [ ! -e {tmp_path}/go ]; do sleep 0.02; done\n"))
    pid = wait_for(lambda: read_pids(child), timeout=5)[0]
    freezer.add(pid)
    freezer.set("FROZEN")
    (tmp_path / "go").touch()
    start = time.time()
    ended(controller, 22)
    assert 0.9 <= time.time() - start < 4.0
    assert alive(pid)  # still frozen: reported anyway, the error is logged
    freezer.set("THAWED")
    wait_for(lambda: not alive(pid), timeout=5, interval=0.02)  # the SIGKILL it was sent lands


def test_a_restarted_agent_kills_what_the_previous_one_left_running(make_agent, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    grouped = tmp_path / "grouped"
    script = (f'trap "" TERM\nsleep 100 &\necho $! >> {pids}\n{own_group_child(grouped)}'
              f"echo $(cat {grouped}) >> {pids}\necho $$ >> {pids}\nwait\n")
    victim = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    bystanders = [subprocess.Popen(["sleep", "100"], start_new_session=True) for _ in range(2)]
    try:
        wait_for(lambda: len(read_pids(pids)) == 3, timeout=5)
        spool_runs = RunRecords(str(tmp_path / "spool" / "c000" / "runs"))  # the previous agent's records
        ticks = start_ticks(victim.pid)
        spool_runs.save(RunRecord(30, 1, victim.pid, ticks, boot_id(), "", time.time()))
        # the group number now names a later process (the run was gone), and a run from before a reboot
        spool_runs.save(RunRecord(31, 0, bystanders[0].pid, start_ticks(bystanders[0].pid) - 1, boot_id()))  # type: ignore[operator]
        spool_runs.save(RunRecord(32, 0, bystanders[1].pid, start_ticks(bystanders[1].pid), "another-boot"))
        Path(spool_runs.path(33, 0)).write_text("\0garbage")
        leftover = tmp_path / "spool" / "c000" / "job00030" / "slurm_script"
        leftover.parent.mkdir()
        leftover.write_text("#!/bin/sh\n")
        agent, _ = make_agent()
        before = time.time()
        agent.recover()
        assert time.time() - before < 3.0
        assert [p for p in read_pids(pids) if alive(p)] == []
        assert victim.wait(timeout=5) == -9
        assert all(b.poll() is None for b in bystanders)
        assert spool_runs.load() == [] and os.listdir(spool_runs.directory) == []
        assert not leftover.parent.exists()
        agent.recover()  # nothing left: nothing to do
    finally:
        for p in [*read_pids(pids), *(b.pid for b in bystanders)]:
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        try:
            os.killpg(victim.pid, 9)
        except ProcessLookupError:
            pass
        victim.wait()
        for b in bystanders:
            b.wait()


def test_a_newer_run_starts_once_the_older_runs_processes_are_gone(make_agent, tmp_path: Path) -> None:
    agent, controller = make_agent(kill_wait=1)
    pids, started, still = tmp_path / "pids", tmp_path / "started", tmp_path / "alive"
    agent.launch(record(tmp_path, 40, restarts=0, script=(
        f'#!/bin/sh\ntrap "" TERM\nsleep 100 &\necho $! >> {pids}\necho $$ >> {pids}\n'
        "while :; do sleep 0.05; done\n")))
    old = wait_for(lambda: len(read_pids(pids)) == 2 and read_pids(pids), timeout=5)
    newer = record(tmp_path, 40, restarts=1, script=(
        f"#!/bin/sh\n{PY} -c 'import time; print(time.time())' >> {started}\n"
        f"for p in $(cat {pids}); do\n"
        f"  if [ -e /proc/$p ] && ! grep -q ') Z ' /proc/$p/stat; then echo $p >> {still}; fi\n"
        "done\n"))
    before = time.time()
    agent.launch(newer)
    agent.launch(newer)  # the controller's retry: still one run
    assert time.time() - before < 0.5  # the RPC does not wait for the older run to die
    assert runs(agent) == [(40, 0), (40, 1)]
    assert not started.exists()
    new_end = ended(controller, 40, restarts=1, timeout=15)
    old_end = controller.end_of(40, 0)
    assert old_end is not None and old_end.state == JobState.CANCELLED
    assert new_end.state == JobState.COMPLETED
    starts = [float(x) for x in started.read_text().split()]
    assert len(starts) == 1 and starts[0] >= old_end.end_time >= before + 0.9  # KillWait=1: TERM is ignored
    assert not still.exists() and not any(alive(p) for p in old)
    assert runs(agent) == []


def test_a_kill_of_the_older_run_spares_the_waiting_newer_run(make_agent, tmp_path: Path) -> None:
    agent, controller = make_agent(kill_wait=1)
    started = tmp_path / "started"
    agent.launch(record(tmp_path, 41, restarts=0, script='#!/bin/sh\ntrap "" TERM\nwhile :; do sleep 0.05; done\n'))
    wait_for(lambda: agent.jobs[41].proc is not None, timeout=5)
    agent.launch(record(tmp_path, 41, restarts=1, script=f"#!/bin/sh\ntouch {started}\n"))
    agent.kill([(41, 0)])  # what the controller answers for the ended run
    ended(controller, 41, restarts=1, timeout=10)
    assert started.exists()
