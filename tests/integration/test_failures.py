"""Controller and agents as real processes over gRPC: lost nodes, controller restarts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pslurm.auth.credential import create_key
from pslurm.cluster.local import free_ports
from tests.conftest import cli, wait_for


class Procs:
    def __init__(self, tmp: Path) -> None:
        ports = free_ports(3)
        self.tmp = tmp
        self.conf = tmp / "pslurm.conf"
        self.conf.write_text(f"""ClusterName=fail
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports[0]}
StateSaveLocation={tmp}
SlurmdSpoolDir={tmp}/spool
SlurmdTimeout=2
KillWait=1
NodeName=c000 NodeAddr=127.0.0.1 Port={ports[1]} CPUs=2 RealMemory=1000 Gres=gpu:1
NodeName=c001 NodeAddr=127.0.0.1 Port={ports[2]} CPUs=2 RealMemory=1000 Gres=gpu:1
PartitionName=gpu Nodes=c[000-001] Default=YES
""")
        create_key(str(tmp / "pslurm.key"))  # what an operator installs on every host (munge.key's place)
        self.env = {**os.environ, "PSLURM_CONF": str(self.conf)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str) -> None:
        module = "pslurm.controller.app" if name == "psctld" else "pslurm.nodeagent.app"
        extra = [] if name == "psctld" else ["-N", name]
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([sys.executable, "-m", module, "-f", str(self.conf), *extra],
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for name in sorted(self.procs, key=lambda n: n == "psctld"):
            self.procs[name].terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, env=self.env, cwd=self.tmp)

    def state(self, job: str) -> str:
        return self.run("psqueue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip()

    def node_states(self) -> str:
        return self.run("psinfo", "-N", "-h", "-o", "%N %t").stdout


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path)
    try:  # stopped also when they never came up: nothing outlives the test
        for name in ("psctld", "c000", "c001"):
            p.start(name)
        wait_for(lambda: p.node_states().split() == ["c000", "idle", "c001", "idle"])
        yield p
    finally:
        p.stop_all()


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
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)


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
