"""Controller and agents as real processes over gRPC: lost nodes, controller restarts."""

from __future__ import annotations

import os
import signal
import time

from tests.conftest import wait_for


def test_a_node_that_stops_heartbeating_goes_down_and_its_job_ends_node_fail(procs, tmp_path):
    pid_file = tmp_path / "job.pid"
    job = procs.run("psbatch", "--parsable", "--no-requeue", "--gres=gpu:1", "--wrap",
                    f"echo $$ > {pid_file}; exec sleep 60").stdout.strip()
    wait_for(lambda: procs.state(job) == "RUNNING" and pid_file.exists() and pid_file.read_text().strip())
    node = procs.run("psqueue", "-h", "-j", job, "-o", "%N").stdout.strip()
    procs.kill(node)  # the agent dies; its job is orphaned
    try:
        wait_for(lambda: procs.state(job) == "NODE_FAIL", timeout=15)
        assert f"{node} down" in procs.node_states().replace("  ", " ")
        # the other node still takes work
        other = procs.run("psbatch", "--parsable", "--gres=gpu:1", "--wrap", "true").stdout.strip()
        wait_for(lambda: procs.state(other) == "COMPLETED")
        # the agent comes back: the node is UP again and the stale job is not resurrected
        procs.start(node)
        wait_for(lambda: f"{node} idle" in procs.node_states().replace("  ", " "))
        assert procs.state(job) == "NODE_FAIL"
    finally:  # the restarted agent has ended the orphaned job already; make sure of it
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_requeueable_job_on_a_lost_node_runs_again_elsewhere_with_its_id(procs, tmp_path):
    pids = tmp_path / "pids"
    job = procs.run("psbatch", "--parsable", "--requeue", "--gres=gpu:1", "--wrap",
                    f"echo $$ $SLURMD_NODENAME $SLURM_RESTART_COUNT >> {pids}; exec sleep 60").stdout.strip()
    wait_for(lambda: procs.state(job) == "RUNNING" and pids.exists() and pids.read_text().strip())
    first_pid, node, count = pids.read_text().split()
    procs.kill(node)
    try:
        wait_for(lambda: pids.exists() and len(pids.read_text().splitlines()) == 2, timeout=20)
        second = pids.read_text().splitlines()[1].split()
        assert second[1] != node and second[2] == "1" and count == "0"
        assert procs.state(job) == "RUNNING"
        shown = procs.run("pscontrol", "show", "job", job).stdout
        assert "Restarts=1" in shown and "Requeue=1" in shown
        procs.run("pscancel", job)
        wait_for(lambda: procs.state(job) == "CANCELLED")
    finally:
        for line in pids.read_text().splitlines():
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_controller_restart_loses_no_job_and_hears_of_ends_it_missed(procs, tmp_path):
    release = tmp_path / "release"
    hold = f"while [ ! -e {release} ]; do sleep 0.1; done"
    running = [procs.run("psbatch", "--parsable", "--gres=gpu:1", "--wrap", hold).stdout.strip() for _ in range(2)]
    wait_for(lambda: all(procs.state(j) == "RUNNING" for j in running))
    waiting = procs.run("psbatch", "--parsable", "--gres=gpu:1", "--wrap", "echo later").stdout.strip()
    assert procs.state(waiting) == "PENDING"
    procs.kill("psctld")
    release.touch()  # the jobs end while the controller is away
    time.sleep(1.0)
    procs.start("psctld")
    wait_for(lambda: all(procs.state(j) == "COMPLETED" for j in running), timeout=20)
    wait_for(lambda: procs.state(waiting) == "COMPLETED", timeout=20)
    assert (tmp_path / f"slurm-{waiting}.out").read_text() == "later\n"
