"""The job runner: a process of the agent's that forks the jobs' processes, as the agent itself would."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.nodeagent.childstart import FDS, FILES, PTY, ChildFailed, ChildPlan, start_child
from pslurm.nodeagent.runner import Runner
from tests.conftest import wait_for

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


@pytest.fixture
def runner() -> Iterator[Runner]:
    started = Runner.start()
    assert started is not None
    yield started
    started.close()


def piped(runner: Runner | None, command: str, stdin: bytes = b"") -> tuple[int, bytes, bytes]:
    """Run ``sh -c command`` with pipes, through the runner (None: in this process); its exit, output."""
    fds, ours = [], []
    for _ in range(3):
        read, write = os.pipe()
        fds.append(read if not fds else write)
        ours.append(write if len(ours) == 0 else read)
    plan = ChildPlan(["sh", "-c", command], ENV, "/", FDS)
    proc, _ = runner.spawn(plan, fds) if runner is not None else start_child(plan, fds)
    for fd in fds:
        os.close(fd)
    os.write(ours[0], stdin)
    os.close(ours[0])
    with open(ours[1], "rb") as out, open(ours[2], "rb") as err:
        output, errors = out.read(), err.read()
    return proc.wait(timeout=10), output, errors


def test_a_task_gets_its_stdio_status_and_signal_dispositions_as_from_the_agent(runner: Runner) -> None:
    command = "grep -E '^Sig(Ign|Blk)' /proc/self/status; read line; echo got $line; echo oops >&2; exit 3"
    assert piped(runner, command, b"hello\n") == piped(None, command, b"hello\n")
    rc, out, err = piped(runner, command, b"hello\n")
    assert rc == 3 and out.endswith(b"got hello\n") and err == b"oops\n"
    assert b"SigIgn:\t0000000000000000" in out  # nothing ignored: a cancelled job's shell dies of SIGTERM


def test_a_task_killed_by_a_signal_and_tasks_that_end_at_once(runner: Runner) -> None:
    assert piped(runner, "kill -TERM $$")[0] == -signal.SIGTERM
    codes: list[int] = []

    def many() -> None:
        for i in range(10):
            codes.append(piped(runner, f"exit {i}")[0])

    threads = [threading.Thread(target=many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == sorted(list(range(10)) * 4)  # each exit reached its own task, none lost


def test_a_task_on_a_pty_has_it_as_its_terminal(runner: Runner) -> None:
    master, slave = pty.openpty()
    proc, _ = runner.spawn(ChildPlan(["sh", "-c", "tty -s && echo terminal"], ENV, "/", PTY), [slave])
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 1024)
        except OSError:  # EIO: the terminal's last holder is gone
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert proc.wait(timeout=10) == 0 and b"terminal" in output


def test_a_batch_task_opens_its_files_and_fails_with_the_agents_words(runner: Runner, tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    plan = ChildPlan(["sh", "-c", "echo to-out; echo to-err >&2"], ENV, str(tmp_path), FILES, stdout=str(out),
                     stderr=str(err))
    proc, note = runner.spawn(plan)
    assert proc.wait(timeout=10) == 0 and note is not None
    note.write("slurmstepd: error: a note\n")  # through the file the task opened as its user
    note.close()
    assert out.read_text() == "to-out\n" and err.read_text() == "to-err\nslurmstepd: error: a note\n"
    missing = ChildPlan(["true"], ENV, str(tmp_path / "nope"), FILES, stdout=str(out), stderr=str(err))
    with pytest.raises(ChildFailed) as by_runner:
        runner.spawn(missing)
    with pytest.raises(ChildFailed) as by_agent:
        start_child(missing)
    assert by_runner.value.reason == by_agent.value.reason == f"chdir({tmp_path}/nope): No such file or directory"
    for failed in (by_runner.value, by_agent.value):
        if failed.note is not None:
            failed.note.close()


def test_when_the_runner_dies_its_tasks_are_followed_and_new_ones_are_refused(runner: Runner) -> None:
    proc, _ = runner.spawn(ChildPlan(["sleep", "30"], ENV, "/", FDS), _devnull_fds())
    os.kill(runner._proc.pid, signal.SIGKILL)
    wait_for(lambda: not runner.alive, timeout=5)
    with pytest.raises(OSError):
        runner.spawn(ChildPlan(["true"], ENV, "/", FDS), _devnull_fds())
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=0.3)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == 1  # its status went with the runner


def _devnull_fds() -> list[int]:
    return [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
