"""Multi-node jobs end to end on a `pslurm up` cluster (4 nodes): -N 2 -n 4 gets two nodes, the job's
variables say so, psrun's step runs two tasks on each, psqueue shows NODES 2, and a lost node ends
the job NODE_FAIL. (The local agents share one host: the hosts are told apart by SLURMD_NODENAME.)"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from pslurm.client.api import Api
from tests.conftest import BIN, Cluster, local_cluster, wait_for

PSRUN = str(BIN / "psrun")


def submit(cluster: Cluster, tmp_path: Path, wrap: str, *args: str) -> int:
    proc = cluster.run("psbatch", "--parsable", "-o", str(tmp_path / "out-%j.txt"), *args, "--wrap", wrap,
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def job_info(cluster: Cluster, job_id: int) -> dict[str, object]:
    with Api.load(cluster.conf) as api:
        found = api.jobs([job_id], include_finished=True)
    return found[0] if found else {}


def state_of(cluster: Cluster, job_id: int) -> str:
    info = job_info(cluster, job_id)
    return str(info["job_state"][0]) if info else ""  # type: ignore[index]


def test_a_two_node_job_runs_its_steps_on_both_nodes(cluster: Cluster, tmp_path: Path) -> None:
    wrap = (f"echo $SLURM_JOB_NODELIST $SLURM_TASKS_PER_NODE; sleep 2; "
            f"{PSRUN} -l printenv SLURMD_NODENAME | sort")
    job = submit(cluster, tmp_path, wrap, "-N", "2", "-n", "4")
    wait_for(lambda: state_of(cluster, job) in ("RUNNING", "COMPLETED", "FAILED"), timeout=60)
    squeue = cluster.run("psqueue", "-h", "-j", str(job), "-o", "%D %N").stdout.split()
    if squeue:  # still listed (running)
        assert squeue[0] == "2", squeue
    final = wait_for(lambda: (s := state_of(cluster, job)) in ("COMPLETED", "FAILED", "CANCELLED") and s,
                     timeout=90)
    text = (tmp_path / f"out-{job}.txt").read_text()
    assert final == "COMPLETED", text
    lines = text.splitlines()
    assert lines[0] == "c[000-001] 2(x2)", text
    labelled = [line for line in lines[1:] if line[:1].isdigit()]
    assert labelled == ["0: c000", "1: c000", "2: c001", "3: c001"], text
    info = job_info(cluster, job)
    assert info["nodes"] == "c[000-001]"


def test_psrun_outside_an_allocation_runs_every_task_on_every_node(cluster: Cluster, tmp_path: Path) -> None:
    # srun's behaviour: an allocation of its own, then all its tasks as step 0 (not only task 0)
    proc = cluster.run("psrun", "-N", "2", "--ntasks-per-node=2", "-l", "printenv", "SLURMD_NODENAME", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = sorted(proc.stdout.split("\n")[:-1])
    assert [line.split(": ")[0].strip() for line in lines] == ["0", "1", "2", "3"]
    assert len({line.split(": ")[1] for line in lines}) == 2  # two nodes
    failed = cluster.run("psrun", "-n", "2", "sh", "-c", "exit $SLURM_PROCID", cwd=tmp_path)
    # the step's largest exit code; which tasks failed is not reported per task yet (the line names them all)
    assert failed.returncode == 1 and "Exited with exit code 1" in failed.stderr, failed.stderr


def test_a_lost_node_ends_the_job_node_fail(tmp_path: Path) -> None:
    with local_cluster(tmp_path / "lost", 2, 0) as cluster:
        job = submit(cluster, tmp_path, "sleep 300", "-N", "2", "--no-requeue")
        wait_for(lambda: state_of(cluster, job) == "RUNNING", timeout=60)
        time.sleep(1)
        pid = int((cluster.state_dir / "run" / "psd-c001.pid").read_text())
        os.kill(pid, signal.SIGKILL)  # the second node's agent dies: its node is lost after SlurmdTimeout
        final = wait_for(lambda: (s := state_of(cluster, job)) not in ("RUNNING", "COMPLETING") and s, timeout=90)
        assert final == "NODE_FAIL"
