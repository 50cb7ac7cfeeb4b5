"""scontrol suspend / resume end to end on a `pslurm up` cluster: a two-node job whose tasks count
into files stops counting on both nodes while suspended (SUSPENDED, ``S`` in psqueue, in psacct too),
counts again once resumed, and its time limit's end moves later by the time it was suspended (its
agent ends it TIMEOUT only then); a suspended job is cancelled as a running one."""

from __future__ import annotations

import time
from pathlib import Path

from tests.acceptance.test_multinode import job_info, state_of, submit
from tests.conftest import BIN, Cluster, wait_for

PSRUN = str(BIN / "psrun")


def counted(tmp_path: Path) -> list[int]:
    """How many ticks each task (rank 0 and 1) has written so far."""
    return [len((tmp_path / f"tick-{rank}").read_text().split()) if (tmp_path / f"tick-{rank}").exists() else 0
            for rank in (0, 1)]


def test_a_suspended_job_stops_on_every_node_and_its_limit_waits(cluster: Cluster, tmp_path: Path) -> None:
    count = f"i=0; while :; do echo $i >> {tmp_path}/tick-$SLURM_PROCID; i=$((i+1)); sleep 0.2; done"
    job = submit(cluster, tmp_path, f"{PSRUN} -N 2 -n 2 sh -c '{count}'", "-N", "2", "-t", "1")
    wait_for(lambda: min(counted(tmp_path)) > 3, timeout=60)

    suspend = cluster.run("pscontrol", "suspend", str(job))
    assert suspend.returncode == 0, suspend.stderr
    assert cluster.run("psqueue", "-h", "-j", str(job), "-o", "%T %t %r").stdout.split() == ["SUSPENDED", "S", "None"]
    assert cluster.run("psacct", "-n", "-X", "-j", str(job), "-o", "State").stdout.split() == ["SUSPENDED"]
    show = cluster.run("pscontrol", "show", "job", str(job)).stdout
    assert "JobState=SUSPENDED" in show and "SuspendTime=None" not in show, show
    time.sleep(1)  # a tick written as it was stopped lands
    stopped = counted(tmp_path)
    time.sleep(4)
    assert counted(tmp_path) == stopped  # no task counts on either node while suspended
    again = cluster.run("pscontrol", "resume", str(job))
    assert again.returncode == 0, again.stderr
    wait_for(lambda: all(now > before for now, before in zip(counted(tmp_path), stopped, strict=True)), timeout=30)
    assert state_of(cluster, job) == "RUNNING"
    refused = cluster.run("pscontrol", "resume", str(job))
    assert (refused.returncode, refused.stderr) == (1, f"Job is not suspended for job {job}\n")

    suspended = float(job_info(cluster, job)["pslurm"]["suspended_seconds"])  # type: ignore[index]
    assert suspended >= 5
    final = wait_for(lambda: (s := state_of(cluster, job)) not in ("RUNNING", "COMPLETING") and s, timeout=150)
    assert final == "TIMEOUT"
    info = job_info(cluster, job)
    ran = info["end_time"]["number"] - info["start_time"]["number"]  # type: ignore[index]
    assert ran >= 60 + suspended - 1, (ran, suspended)  # the limit counted running time only
    elapsed = cluster.run("psacct", "-n", "-X", "-j", str(job), "-o", "ElapsedRaw,Suspended").stdout.split()
    assert int(elapsed[0]) < ran and elapsed[1] != "00:00:00", elapsed


def test_a_suspended_job_is_cancelled(cluster: Cluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, "sleep 300")
    wait_for(lambda: state_of(cluster, job) == "RUNNING", timeout=60)
    assert cluster.run("pscontrol", "suspend", str(job)).returncode == 0
    wait_for(lambda: state_of(cluster, job) == "SUSPENDED", timeout=10)
    cancel = cluster.run("pscancel", str(job))
    assert cancel.returncode == 0, cancel.stderr
    assert wait_for(lambda: state_of(cluster, job) == "CANCELLED", timeout=30)
    # sacct's CANCELLED by 0, cut to its column
    assert cluster.run("psacct", "-n", "-X", "-j", str(job), "-o", "State").stdout.split() == ["CANCELLED+"]
