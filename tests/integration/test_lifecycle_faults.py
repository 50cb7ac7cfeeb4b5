"""Fault injection on real processes: no job stays RUNNING or COMPLETING without a process on its node
for longer than two heartbeats plus the launch grace, and a requeued job never runs beside its
previous run. (SlurmdTimeout=2 gives a 0.5 s heartbeat; BatchStartTimeout=2 is the launch grace.)"""

from __future__ import annotations

import os
import signal
from datetime import datetime
from pathlib import Path

from pslurm.client import Client
from tests.conftest import wait_for
from tests.integration.conftest import Procs

GRACE = 2.0 + 2 * 0.5  # BatchStartTimeout plus two heartbeats


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (killed processes whose parent has gone are reaped by
    init, which in some sandboxes takes its time)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def kill_quietly(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def controller_ready(log: Path) -> float:
    """When the last psctld in this log began to listen (its own log time)."""
    line = [line for line in log.read_text().splitlines() if " listening on " in line][-1]
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def show(procs: Procs, job: str) -> str:
    return procs.run("pscontrol", "show", "job", job).stdout


def test_a_controller_killed_between_the_start_commit_and_the_launch_loses_no_job(procs: Procs, tmp_path: Path):
    procs.kill("psctld")
    procs.start("psctld", env={"PSLURM_TEST_FAULT": "crash-after-start"})
    wait_for(lambda: "c000" in procs.node_states())
    out = tmp_path / "ran"
    batch = procs.run("psbatch", "--parsable", "--wrap", f"echo $SLURM_RESTART_COUNT >> {out}").stdout.strip()
    assert batch, "submit failed"
    dead = procs.procs.pop("psctld")
    assert dead.wait(timeout=20) == 86  # it died after committing RUNNING, before any launch
    procs.start("psctld")
    # requeued (batch jobs may requeue) once the grace is over, then run: exactly once
    wait_for(lambda: procs.state(batch) == "COMPLETED", timeout=20)
    assert out.read_text() == "1\n"
    assert "Restarts=1" in show(procs, batch)
    # one that may not requeue ends NODE_FAIL, with the reason, within the bound
    procs.kill("psctld")
    procs.start("psctld", env={"PSLURM_TEST_FAULT": "crash-after-start"})
    wait_for(lambda: "c000" in procs.node_states())
    once = procs.run("psbatch", "--parsable", "--no-requeue", "--wrap", "true").stdout.strip()
    assert procs.procs.pop("psctld").wait(timeout=20) == 86
    procs.start("psctld")
    wait_for(lambda: procs.state(once) == "NODE_FAIL", timeout=20)
    shown = show(procs, once)
    assert "Reason=NodeDown" in shown and "SystemComment=" in shown, shown
    # the bound, on the controller's clock: from the moment it listens again to the job's end
    ready = controller_ready(tmp_path / "psctld.log")
    with Client(str(procs.conf)) as client:
        ended = client.job(int(once)).end_time
    assert ended is not None and ended - ready < GRACE + 1.0, (ready, ended)


def test_a_launch_that_fails_on_the_agent_ends_the_job_failed_with_its_reason(procs: Procs):
    job = procs.run("psbatch", "--parsable", "-D", "/nonexistent/dir", "--wrap", "true").stdout.strip()
    assert job, "submit failed"
    wait_for(lambda: procs.state(job) == "FAILED", timeout=15)
    shown = show(procs, job)
    assert "Reason=JobLaunchFailure" in shown and "/nonexistent/dir" in shown, shown
    acct = procs.run("psacct", "-j", job, "-n", "-P", "-o", "JobID,State,ExitCode,Reason").stdout
    # sacct's Reason is the reason a job waited (None once it started), as Slurm's database keeps it
    assert acct.splitlines()[0] == f"{job}|FAILED|2:0|None", acct


def test_an_agent_restarted_without_its_jobs_is_reconciled_and_the_old_run_is_gone(procs: Procs, tmp_path: Path):
    pids = tmp_path / "pids"
    # the job leaves a child behind in a process group of its own (set -m), ignoring SIGTERM: all of it
    # must be gone before the next run
    job = procs.run("psbatch", "--parsable", "--requeue", "-w", "c000", "--wrap",
                    f"set -m; (trap '' TERM; sleep 300) & echo $! $SLURM_RESTART_COUNT >> {pids}; wait").stdout.strip()
    wait_for(lambda: procs.state(job) == "RUNNING" and pids.exists() and pids.read_text().strip())
    first = int(pids.read_text().split()[0])
    try:
        procs.kill("c000")  # the agent dies; its job's processes do not
        assert alive(first)
        procs.start("c000")  # and comes back without them, long before SlurmdTimeout
        wait_for(lambda: len(pids.read_text().splitlines()) == 2, timeout=20)
        assert not alive(first)  # the new agent ended the old run before it registered
        assert pids.read_text().splitlines()[1].split()[1] == "1"
        assert procs.state(job) == "RUNNING"
    finally:
        kill_quietly([int(line.split()[0]) for line in pids.read_text().splitlines()])
        procs.run("pscancel", job)


def test_a_requeued_job_does_not_start_again_while_its_first_run_is_alive(procs: Procs, tmp_path: Path):
    log = tmp_path / "runs"
    # each run: record its start, and the previous run's leftover child (if any) as alive or gone; the
    # child is in a process group of its own (set -m) and ignores SIGTERM
    script = ("set -m; "f"prev=$(tail -n 1 {log} 2>/dev/null | cut -d' ' -f2); "
              f"st=$(awk '{{print $3}}' /proc/$prev/stat 2>/dev/null); "
              f"if [ -n \"$prev\" ] && [ -n \"$st\" ] && [ \"$st\" != Z ]; then state=alive; else state=gone; fi; "
              f"(trap '' TERM; sleep 300) & echo $SLURM_RESTART_COUNT $! $state >> {log}; "
              "trap 'sleep 0.5; exit 1' TERM; while true; do sleep 0.1; done")
    job = procs.run("psbatch", "--parsable", "-w", "c000", "--wrap", script).stdout.strip()
    wait_for(lambda: procs.state(job) == "RUNNING" and log.exists() and log.read_text().strip())
    try:
        assert procs.run("pscontrol", "requeue", job).returncode == 0
        assert procs.state(job) in ("COMPLETING", "PENDING", "RUNNING")
        wait_for(lambda: len(log.read_text().splitlines()) == 2, timeout=20)
        first, second = (line.split() for line in log.read_text().splitlines())
        assert first[0] == "0" and second[0] == "1"
        assert second[2] == "gone", "the second run started while the first run's child was alive"
    finally:
        kill_quietly([int(line.split()[1]) for line in log.read_text().splitlines()])
        procs.run("pscancel", job)
