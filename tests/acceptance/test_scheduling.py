"""Scheduling through the real CLIs (issue #5): partitions, arrays, dependencies, backfill, holds,
requeue and priority order, on a cluster started with `pslurm up --conf` (2 nodes x 2 GPUs).

  c000, c001  Gres=gpu:2   partition gpu (default, MaxTime=1:00:00), short (c001 only, MaxTime=5:00,
              PriorityJobFactor=10), closed (State=DRAIN)
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, cluster_from_conf, wait_for

CONF = """ClusterName=sched
SlurmdTimeout=10
KillWait=2
PriorityWeightPartition=1000
MaxArraySize=200
NodeName=c[000-001] CPUs=4 RealMemory=4000 Gres=gpu:2
PartitionName=gpu Nodes=c[000-001] Default=YES MaxTime=1:00:00 DefaultTime=10:00
PartitionName=short Nodes=c001 MaxTime=5:00 PriorityJobFactor=10
PartitionName=closed Nodes=c000 State=DRAIN
"""


@pytest.fixture(scope="module")
def sched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_from_conf(tmp_path_factory.mktemp("sched"), CONF, "NodeName=c[000-001] Name=gpu Count=2\n") as c:
        yield c



def submit(c: Cluster, *args: str, cwd: Path) -> str:
    proc = c.run("psbatch", "--parsable", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def rows(c: Cluster, *args: str, fmt: str = "%i|%T|%r") -> list[list[str]]:
    out = c.run("psqueue", "-h", "-t", "all", "-o", fmt, *args, check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def state(c: Cluster, job: str) -> tuple[str, str]:
    found = rows(c, "-r", "-j", job)
    assert len(found) == 1, found
    return found[0][1], found[0][2]


def holding(c: Cluster, tmp: Path, *args: str) -> tuple[str, Path]:
    """A job that runs until its release file exists."""
    release = tmp / f"release-{time.monotonic_ns()}"
    job = submit(c, *args, "--wrap", f"while [ ! -e {release} ]; do sleep 0.1; done", cwd=tmp)
    return job, release


def test_psinfo_shows_every_partition_and_partition_limits_apply(sched, tmp_path):
    out = sched.run("psinfo", "-h", "-o", "%P %a %l %N", check=True).stdout.split("\n")
    assert "gpu* up 1:00:00 c[000-001]" in out
    assert "short up 5:00 c001" in out and "closed drain infinite c000" in out
    refused = sched.run("psbatch", "-p", "short", "-t", "10:00", "--wrap", "true", cwd=tmp_path)
    assert refused.returncode == 1 and "time limit" in refused.stderr
    refused = sched.run("psbatch", "-p", "closed", "--wrap", "true", cwd=tmp_path)
    assert refused.returncode == 1 and "DRAIN" in refused.stderr
    shown = sched.run("pscontrol", "show", "partition", "short", check=True).stdout
    assert "PriorityJobFactor=10" in shown and "MaxTime=00:05:00" in shown  # secs2time_str


def test_array_tasks_throttle_env_output_names_and_collapsed_display(sched, tmp_path):
    array = submit(sched, "--array=0-5%2", "-o", "arr_%A_%a.out", "--gres=gpu:1", "--wrap",
                   "echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT "
                   "$SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX; sleep 0.3", cwd=tmp_path)
    assert re.fullmatch(r"\d+", array)
    seen_running = []
    collapsed = False

    def done() -> bool:
        nonlocal collapsed
        found = rows(sched, "-j", array)
        collapsed |= any(re.fullmatch(rf"{array}_\[\d+-5%2\]", r[0]) for r in found)
        seen_running.append(sum(r[1] == "RUNNING" for r in found))
        return all(r[1] == "COMPLETED" for r in rows(sched, "-r", "-j", array)) and len(found) == 6

    wait_for(done, timeout=40, interval=0.05)
    assert collapsed and max(seen_running) <= 2
    for task in range(6):
        text = (tmp_path / f"arr_{array}_{task}.out").read_text().split()
        assert text == [array, str(task), "6", "0", "5"]
    ids = [r[0] for r in rows(sched, "-r", "-S", "i", "-j", array)]  # squeue's default order is P,t,-p
    assert ids == [f"{array}_{i}" for i in range(6)]
    too_big = sched.run("psbatch", "--array=0-500", "--wrap", "true", cwd=tmp_path)
    assert too_big.returncode == 1 and "MaxArraySize" in too_big.stderr


def test_pscancel_array_tasks_and_whole_arrays(sched, tmp_path):
    array = submit(sched, "-H", "--array=0-5", "--wrap", "true", cwd=tmp_path)
    assert {r[2] for r in rows(sched, "-r", "-j", array)} == {"JobHeldUser"}
    sched.run("pscancel", f"{array}_[3-5]", check=True)
    sched.run("pscancel", f"{array}_0", check=True)
    got = {r[0]: r[1] for r in rows(sched, "-r", "-j", array)}
    assert got == {f"{array}_0": "CANCELLED", f"{array}_1": "PENDING", f"{array}_2": "PENDING",
                   f"{array}_3": "CANCELLED", f"{array}_4": "CANCELLED", f"{array}_5": "CANCELLED"}
    sched.run("pscancel", array, check=True)
    assert {r[1] for r in rows(sched, "-r", "-j", array)} == {"CANCELLED"}


def test_dependencies(sched, tmp_path):
    refused = sched.run("psbatch", "-d", "afterok:999999", "--wrap", "true", cwd=tmp_path)
    assert refused.returncode == 1 and "dependency" in refused.stderr.lower()
    first, release = holding(sched, tmp_path, "--gres=gpu:1")
    ok = submit(sched, "-d", f"afterok:{first}", "--wrap", "true", cwd=tmp_path)
    notok = submit(sched, "-d", f"afternotok:{first}", "--wrap", "true", cwd=tmp_path)
    killed = submit(sched, "-d", f"afterok:{first}", "--kill-on-invalid-dep=yes", "--wrap", "true", cwd=tmp_path)
    either = submit(sched, "-d", f"afterok:{first}?afterany:{first}", "--wrap", "true", cwd=tmp_path)
    wait_for(lambda: state(sched, ok) == ("PENDING", "Dependency"))
    assert rows(sched, "-j", ok, fmt="%E")[0][0] == f"afterok:{first}(unfulfilled)"
    sched.run("pscancel", first, check=True)  # ends CANCELLED: afterok can never be met
    wait_for(lambda: state(sched, ok) == ("PENDING", "DependencyNeverSatisfied"))
    assert rows(sched, "-j", ok, fmt="%E")[0][0] == f"afterok:{first}(failed)"
    wait_for(lambda: state(sched, notok)[0] == "COMPLETED")
    wait_for(lambda: state(sched, either)[0] == "COMPLETED")
    wait_for(lambda: state(sched, killed)[0] == "CANCELLED")
    release.touch()
    sched.run("pscancel", ok, check=True)


def test_hold_release_operator_priority_and_psprio(sched, tmp_path):
    blockers = [holding(sched, tmp_path, "--gres=gpu:2") for _ in range(2)]
    wait_for(lambda: all(state(sched, b)[0] == "RUNNING" for b, _ in blockers))
    order = tmp_path / "order"

    def job(name: str, *args: str) -> str:
        return submit(sched, "--gres=gpu:2", *args, "--wrap", f"echo {name} >> {order}", cwd=tmp_path)

    a, b, niced, held = job("a"), job("b"), job("niced", "--nice=50"), job("held")
    sched.run("pscontrol", "hold", held, check=True)
    sched.run("pscontrol", "update", f"JobId={b}", "Priority=5000", check=True)
    wait_for(lambda: state(sched, held) == ("PENDING", "JobHeldAdmin"))
    prio = {line.split()[0]: line.split() for line in sched.run("psprio", "-h", check=True).stdout.splitlines()}
    assert prio[a][2] == "100" and prio[b][2] == "5000*" and prio[niced][2] == "50"
    long = {line.split()[0]: line.split() for line in sched.run("psprio", "-h", "-l", check=True).stdout.splitlines()}
    assert long[niced][-1] == "50"  # NICE: -l's (sprio's default leaves it out); TRES, empty, after it
    assert prio[a][-1] == "100"  # the partition factor, weighted (the one weight not 0: its column only, as sprio)
    # GPUs free up: the operator's favourite goes first, then by priority; the held job never
    blockers[0][1].touch()
    blockers[1][1].touch()
    wait_for(lambda: all(state(sched, j)[0] == "COMPLETED" for j in (a, b, niced)))
    assert state(sched, held) == ("PENDING", "JobHeldAdmin")
    sched.run("pscontrol", "release", held, check=True)
    wait_for(lambda: state(sched, held)[0] == "COMPLETED")
    # two jobs started by one pass may append in either order: compare the recorded start times
    import json

    # pslurm's JSON: its start times are exact (Slurm's shape has whole seconds)
    listed = json.loads(sched.run("psqueue", "--json=pslurm", "-t", "all", "-j", ",".join((a, b, niced, held)),
                                  check=True).stdout)["jobs"]
    started = {str(j["job_id"]): j["start_time"] for j in listed}
    assert started[b] <= started[a] <= started[niced] < started[held]
    assert sorted(order.read_text().split()) == ["a", "b", "held", "niced"]


def test_backfill_fills_a_hole_without_delaying_the_reserved_job(sched, tmp_path):
    wide, release_wide = holding(sched, tmp_path, "--gres=gpu:2", "-t", "30:00")  # one node, 30 min
    wait_for(lambda: state(sched, wide)[0] == "RUNNING")
    narrow, release_narrow = holding(sched, tmp_path, "--gres=gpu:1", "-t", "3:00")  # the other, 3 min
    wait_for(lambda: state(sched, narrow)[0] == "RUNNING")
    big = submit(sched, "--gres=gpu:2", "-t", "10:00", "--wrap", "true", cwd=tmp_path)  # top: waits 3 min
    long = submit(sched, "--gres=gpu:1", "-t", "10:00", "--wrap", "sleep 60", cwd=tmp_path)  # would delay big
    short, release_short = holding(sched, tmp_path, "--gres=gpu:1", "-t", "1:00")  # ends before: backfills
    try:
        wait_for(lambda: state(sched, short)[0] == "RUNNING")
        assert state(sched, big) == ("PENDING", "Resources")
        assert state(sched, long) == ("PENDING", "Priority")
        start = sched.run("psqueue", "--start", "-h", "-j", big, "-o", "%i %S", check=True).stdout.split()
        assert start[0] == big and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", start[1])
    finally:
        for release in (release_wide, release_narrow, release_short):
            release.touch()
    wait_for(lambda: state(sched, big)[0] == "COMPLETED", timeout=30)
    sched.run("pscancel", long, check=True)


def test_pscontrol_requeue_keeps_the_id_and_reruns(sched, tmp_path):
    log = tmp_path / "runs"
    job = submit(sched, "--wrap", f"echo run $SLURM_RESTART_COUNT >> {log}; sleep 30", cwd=tmp_path)
    wait_for(lambda: log.exists() and log.read_text())
    sched.run("pscontrol", "requeue", job, check=True)
    wait_for(lambda: len(log.read_text().splitlines()) == 2, timeout=30)
    assert log.read_text().splitlines() == ["run 0", "run 1"]
    assert state(sched, job)[0] == "RUNNING"
    assert "Restarts=1" in sched.run("pscontrol", "show", "job", job, check=True).stdout
    sched.run("pscancel", job, check=True)
    wait_for(lambda: state(sched, job)[0] == "CANCELLED")


def test_pscontrol_requeuehold_brings_a_running_job_back_held(sched, tmp_path):
    log = tmp_path / "held-runs"
    job = submit(sched, "--wrap", f"echo run $SLURM_RESTART_COUNT >> {log}; sleep 30", cwd=tmp_path)
    wait_for(lambda: log.exists() and log.read_text())
    sched.run("pscontrol", "requeuehold", job, check=True)
    wait_for(lambda: state(sched, job)[0] == "PENDING", timeout=30)
    # held from the requeue on, in slurmctld's words (its state_desc): squeue's %r and %R, scontrol's Reason=
    assert state(sched, job) == ("PENDING", "job requeued in held state")
    assert rows(sched, "-j", job, fmt="%R") == [["(job requeued in held state)"]]
    show = sched.run("pscontrol", "show", "job", job, check=True).stdout
    assert "JobState=PENDING Reason=job_requeued_in_held_state " in show
    assert log.read_text().splitlines() == ["run 0"]
    sched.run("pscontrol", "release", job, check=True)
    wait_for(lambda: len(log.read_text().splitlines()) == 2, timeout=30)
    assert log.read_text().splitlines() == ["run 0", "run 1"]
    assert state(sched, job) == ("RUNNING", "None")  # the words went with the hold
    # accounting keeps the reason it waited for (state_reason_prev): sacct's Reason and --reason
    acct = sched.run("psacct", "-n", "-P", "-X", "-j", job, "-o", "JobID,Reason", check=True).stdout
    assert acct.split() == [f"{job}|JobHeldUser"]
    def selected(reason: str) -> list[str]:
        return sched.run("psacct", "-n", "-X", "-a", f"--reason={reason}", "-o", "JobID", check=True).stdout.split()

    assert job not in selected("None") and job in selected("JobHeldUser")
    sched.run("pscancel", job, check=True)
    wait_for(lambda: state(sched, job)[0] == "CANCELLED")


def test_a_finished_batch_job_is_requeued_and_an_interactive_one_is_not(sched, tmp_path):
    log = tmp_path / "runs"
    job = submit(sched, "--wrap", f"echo run $SLURM_RESTART_COUNT >> {log}; exit 3", cwd=tmp_path)
    wait_for(lambda: state(sched, job)[0] == "FAILED")
    sched.run("pscontrol", "requeue", job, check=True)  # as scontrol requeue: it runs again, same id
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 2, timeout=30)
    wait_for(lambda: state(sched, job)[0] == "FAILED")
    assert log.read_text().splitlines() == ["run 0", "run 1"]
    assert "Restarts=1" in sched.run("pscontrol", "show", "job", job, check=True).stdout
    sched.run("psrun", "-J", "interactive-once", "true", cwd=tmp_path, check=True)
    listing = sched.run("psqueue", "-h", "-t", "all", "-o", "%i %j", check=True).stdout.split("\n")
    interactive = next(line.split()[0] for line in listing if line.endswith(" interactive-once"))
    refused = sched.run("pscontrol", "requeue", interactive)
    assert refused.returncode == 1
    assert refused.stderr.strip() == f"Job {interactive}: Only batch jobs are accepted or processed"  # scontrol's


def test_nodelist_and_exclude_steer_jobs_as_in_slurm(sched, tmp_path):
    script = tmp_path / "pinned.sh"
    script.write_text("#!/bin/sh\n#SBATCH -w c001\necho $SLURMD_NODENAME\n")
    pinned = submit(sched, "-o", "pinned.out", str(script), cwd=tmp_path)  # a directive
    avoided = submit(sched, "-x", "c001", "-o", "avoided.out", "--wrap", "echo $SLURMD_NODENAME", cwd=tmp_path)
    wait_for(lambda: state(sched, pinned)[0] == state(sched, avoided)[0] == "COMPLETED")
    assert (tmp_path / "pinned.out").read_text() == "c001\n" and (tmp_path / "avoided.out").read_text() == "c000\n"
    shown = sched.run("pscontrol", "show", "job", pinned, check=True).stdout
    assert "ReqNodeList=c001 ExcNodeList=(null)" in shown
    ran = sched.run("psrun", "-w", "c000", "sh", "-c", "echo $SLURMD_NODENAME", cwd=tmp_path, check=True)
    assert ran.stdout == "c000\n"
    before = sched.run("psqueue", "-h", "-t", "all", "-o", "%i").stdout
    for args, message in ((["-w", "c007"], "Invalid node name specified: c007"),
                          (["-w", "c[000-001]"], "-w names 2 nodes"),
                          (["-p", "short", "-w", "c000"], "Requested node configuration is not available")):
        refused = sched.run("psbatch", *args, "--wrap", "true", cwd=tmp_path)
        assert refused.returncode == 1 and message in refused.stderr and refused.stderr.count("\n") == 1
    assert sched.run("psqueue", "-h", "-t", "all", "-o", "%i").stdout == before  # nothing stored


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    conf = ("ClusterName=limited\nSlurmdTimeout=10\nKillWait=2\nMaxSubmitJobsPerUser=3\nMaxTRESPerUser=gres/gpu=1\n"
            "NodeName=c000 CPUs=4 RealMemory=4000 Gres=gpu:2\nPartitionName=gpu Nodes=c000 Default=YES\n")
    with cluster_from_conf(tmp_path_factory.mktemp("limited"), conf, "NodeName=c000 Name=gpu Count=2\n") as c:
        yield c


def test_submit_and_run_limits(limited, tmp_path):
    first, release = holding(limited, tmp_path, "--gres=gpu:1")
    second = submit(limited, "--gres=gpu:1", "--wrap", "true", cwd=tmp_path)
    try:
        wait_for(lambda: state(limited, first)[0] == "RUNNING")
        wait_for(lambda: state(limited, second) == ("PENDING", "QOSMaxGRESPerUser"))  # a GPU is free, but
        submit(limited, "-H", "--wrap", "true", cwd=tmp_path)
        refused = limited.run("psbatch", "--wrap", "true", cwd=tmp_path)
        assert refused.returncode == 1
        assert "Job violates accounting/QOS policy" in refused.stderr and "MaxSubmitJobsPerUser=3" in refused.stderr
    finally:
        release.touch()
    wait_for(lambda: state(limited, second)[0] == "COMPLETED")
