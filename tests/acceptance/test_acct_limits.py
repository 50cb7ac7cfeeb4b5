"""Association and QOS limits that hold (issue 34), through the real commands on a cluster started with
`pslurm up --conf` (2 nodes x 2 GPUs, ``AccountingStorageEnforce=associations,limits,qos``): limits set
with psacctmgr, jobs submitted with psbatch, the reasons psqueue's %r shows; and scontrol update by a
job's owner (nobody, through the user API) admitted as at submit.

  lab1  root, nobody      lab2  root (root's default)
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.core import restjson
from pslurm.core.request import JobOptions, build_spec
from tests.conftest import Cluster, api_as, cluster_for_users, wait_for

CONF = """ClusterName=limits
SlurmdTimeout=10
KillWait=1
AccountingStorageEnforce=associations,limits,qos
NodeName=c[000-001] CPUs=4 RealMemory=4000 Gres=gpu:2
PartitionName=gpu Nodes=c[000-001] Default=YES MaxTime=INFINITE
AccountName=lab1 Users=root,nobody
AccountName=lab2 Users=root
UserName=root DefaultAccount=lab2
"""
NOBODY = 65534
POLICY = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


@pytest.fixture(scope="module")
def acct() -> Iterator[Cluster]:
    with cluster_for_users("pslurm-limits-", CONF, "NodeName=c[000-001] Name=gpu Count=2\n") as c:
        yield c


def mgr(c: Cluster, *words: str) -> None:
    done = c.run("psacctmgr", "-i", *words)
    assert done.returncode == 0, done.stdout + done.stderr


def submit(c: Cluster, *args: str, cwd: Path) -> str:
    proc = c.run("psbatch", "--parsable", "-o", "/dev/null", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def queue(c: Cluster, job: str, fmt: str) -> str:
    return c.run("psqueue", "-h", "-t", "all", "-j", job, "-o", fmt, check=True).stdout.strip()


def test_an_accounts_gpu_quota_holds_with_slurms_reason(acct: Cluster, tmp_path: Path) -> None:
    mgr(acct, "modify", "account", "lab1", "set", "GrpTRES=gres/gpu=1")
    first = submit(acct, "-A", "lab1", "--gres=gpu:1", "--wrap", "sleep 300", cwd=tmp_path)
    wait_for(lambda: queue(acct, first, "%T") == "RUNNING")
    second = submit(acct, "-A", "lab1", "--gres=gpu:1", "--wrap", "sleep 300", cwd=tmp_path)
    other = submit(acct, "-A", "lab2", "--gres=gpu:1", "--wrap", "sleep 300", cwd=tmp_path)
    wait_for(lambda: queue(acct, other, "%T") == "RUNNING")  # another account's job takes a free GPU
    wait_for(lambda: queue(acct, second, "%T %r") == "PENDING AssocGrpGRES")
    acct.run("pscancel", first, check=True)  # the quota frees: the waiting job starts
    wait_for(lambda: queue(acct, second, "%T") == "RUNNING")
    acct.run("pscancel", second, other, check=True)
    mgr(acct, "modify", "account", "lab1", "set", "GrpTRES=gres/gpu=-1")  # sacctmgr's way to clear it


def test_an_accounts_max_wall_reaches_its_users_and_a_qos_limits_each_user(acct: Cluster, tmp_path: Path) -> None:
    mgr(acct, "modify", "account", "lab2", "set", "MaxWall=10")
    over = submit(acct, "-A", "lab2", "-t", "60", "--wrap", "true", cwd=tmp_path)
    wait_for(lambda: queue(acct, over, "%T %r") == "PENDING AssocMaxWallDurationPerJobLimit")
    unset = submit(acct, "-A", "lab2", "-H", "--wrap", "true", cwd=tmp_path)
    assert queue(acct, unset, "%l") == "10:00"  # MaxWall is the limit of a job that asks none
    acct.run("pscancel", over, unset, check=True)
    mgr(acct, "modify", "account", "lab2", "set", "MaxWall=-1")
    # a QOS's MaxTRESPerUser, and its MaxSubmitJobsPerUser refusing at submit
    mgr(acct, "add", "qos", "onegpu", "MaxTRESPerUser=gres/gpu=1", "MaxSubmitJobsPerUser=2")
    mgr(acct, "modify", "user", "root", "where", "account=lab2", "set", "QOS=normal,onegpu")
    first = submit(acct, "-A", "lab2", "--qos=onegpu", "--gres=gpu:1", "--wrap", "sleep 300", cwd=tmp_path)
    second = submit(acct, "-A", "lab2", "--qos=onegpu", "--gres=gpu:1", "--wrap", "sleep 300", cwd=tmp_path)
    wait_for(lambda: queue(acct, second, "%T %r") == "PENDING QOSMaxGRESPerUser")
    assert queue(acct, first, "%T") == "RUNNING"
    refused = acct.run("psbatch", "-A", "lab2", "--qos=onegpu", "--wrap", "true", cwd=tmp_path)
    assert refused.returncode == 1 and POLICY in refused.stderr, refused.stderr
    assert "QOSMaxSubmitJobPerUserLimit" in refused.stderr
    acct.run("pscancel", first, second, check=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="a cluster that serves other users runs as root")
def test_an_owners_update_is_admitted_as_a_submit_is(acct: Cluster, tmp_path: Path) -> None:
    mgr(acct, "add", "qos", "short")
    mgr(acct, "modify", "user", "nobody", "where", "account=lab1", "set", "MaxWall=10", "QOS=short",
        "DefaultQOS=short")
    shared = Path(tempfile.mkdtemp(prefix="pslurm-nobody-"))
    shared.chmod(0o777)
    try:
        later = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 3600))
        spec = build_spec(JobOptions(output="/dev/null", account="lab1", begin=later), user="nobody", uid=NOBODY,
                          gid=NOBODY, cwd=str(shared), environ={"PATH": "/usr/bin:/bin"},
                          script="#!/bin/sh\ntrue\n", default_name="nobodys")
        status, reply = api_as(acct, NOBODY, "POST", "/slurm/v0.0.40/job/submit", {"job": restjson.spec_to_json(spec)})
        assert status == 200, reply
        job = str(reply["job_id"])
        assert queue(acct, job, "%l %q %r") == "10:00 short BeginTime"

        def update(changes: dict[str, object]) -> list[str]:
            status, reply = api_as(acct, NOBODY, "POST", "/pslurm/v1/job/update", {"job": job, "changes": changes})
            assert status == 200, reply
            return list(reply["job_errors"])

        assert update({"time_limit": "UNLIMITED"}) == []  # taken, as slurmctld takes it
        assert queue(acct, job, "%l") == "UNLIMITED"
        assert update({"qos": "normal"}) == [f"Invalid qos specification for job {job}"]  # refused at submit too
        assert update({"num_tasks": 2}) == []  # a job in QOS short takes a re-admitting update
        assert update({"begin_time": time.time()}) == []
        assert queue(acct, job, "%l %q") == "UNLIMITED short"  # neither reset the limit
        wait_for(lambda: queue(acct, job, "%T %r") == "PENDING AssocMaxWallDurationPerJobLimit")
        acct.run("pscancel", job, check=True)
    finally:
        shutil.rmtree(shared)
