"""Accounts and scontrol update JobId= through the real commands (issue #11, items 5 and 6), on a
cluster started with `pslurm up --conf` (2 nodes x 2 GPUs) whose pslurm.conf names accounts:

  heavy  root, nobody     light  root (root's default)     other  nobody
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pslurm.core import restjson
from pslurm.core.request import JobOptions, build_spec
from tests.conftest import Cluster, api_as, cli, cluster_for_users, wait_for

CONF = """ClusterName=accounts
SlurmdTimeout=10
KillWait=1
PriorityWeightFairshare=10000
NodeName=c[000-001] CPUs=4 RealMemory=4000 Gres=gpu:2
PartitionName=gpu Nodes=c[000-001] Default=YES MaxTime=1:00:00 DefaultTime=10:00
PartitionName=short Nodes=c001 MaxTime=5:00
AccountName=heavy Users=root,nobody
AccountName=light Users=root
AccountName=other Users=nobody
UserName=root DefaultAccount=light
"""
NOBODY = 65534
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"


@pytest.fixture(scope="module")
def acct() -> Iterator[Cluster]:
    with cluster_for_users("pslurm-accounts-", CONF, "NodeName=c[000-001] Name=gpu Count=2\n") as c:
        yield c


def submit(c: Cluster, *args: str, cwd: Path) -> str:
    proc = c.run("psbatch", "--parsable", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def queue(c: Cluster, job: str, fmt: str) -> str:
    return c.run("psqueue", "-h", "-r", "-t", "all", "-j", job, "-o", fmt, check=True).stdout.strip()


def acct_field(c: Cluster, job: str, fields: str) -> str:
    return c.run("psacct", "-j", job, "-X", "-n", "-P", "-o", fields, check=True).stdout.strip()


def update(c: Cluster, *words: str) -> tuple[int, str]:
    proc = c.run("pscontrol", "update", *words)
    assert proc.stdout == ""
    return proc.returncode, proc.stderr


def test_a_job_charges_its_users_default_account_and_a_foreign_one_is_refused(acct: Cluster, tmp_path: Path) -> None:
    job = submit(acct, "-t", "5", "-o", str(tmp_path / "out"), "--wrap", "echo account=$SLURM_JOB_ACCOUNT",
                 cwd=tmp_path)
    wait_for(lambda: acct_field(acct, job, "State") == "COMPLETED")
    assert (tmp_path / "out").read_text() == "account=light\n"
    assert acct_field(acct, job, "Account") == "light"
    held = submit(acct, "-H", "-A", "HEAVY", "--wrap", "true", cwd=tmp_path)
    assert queue(acct, held, "%a") == "heavy"
    assert "Account=heavy" in acct.run("pscontrol", "show", "job", held, check=True).stdout
    before = acct.run("psqueue", "-h", "-t", "all", check=True).stdout
    refused = acct.run("psbatch", "-A", "other", "--wrap", "true", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (
        1, f"psbatch: error: Batch job submission failed: {INVALID_ACCOUNT}\n")
    assert acct.run("psqueue", "-h", "-t", "all", check=True).stdout == before  # the queue untouched
    acct.run("pscancel", held, check=True)


def test_a_pending_jobs_limit_partition_name_and_account_change(acct: Cluster, tmp_path: Path) -> None:
    job = submit(acct, "-H", "-t", "10", "--wrap", "true", cwd=tmp_path)
    # over the new partition's MaxTime: refused as at submit, nothing changed
    assert update(acct, f"JobId={job}", "Partition=short", "JobName=renamed") == (
        1, f"Requested time limit is invalid (missing or exceeds some limit) for job {job}\n")
    assert queue(acct, job, "%P|%l|%j|%a") == "gpu|10:00|wrap|light"
    assert update(acct, f"JobId={job}", "Partition=short", "TimeLimit=4", "JobName=renamed", "Account=heavy") == (0, "")
    assert queue(acct, job, "%P|%l|%j|%a") == "short|4:00|renamed|heavy"
    assert update(acct, f"JobId={job}", "TimeLimit-=1") == (0, "")
    assert queue(acct, job, "%l") == "3:00"
    assert update(acct, f"JobId={job}", "Account=other") == (1, f"{INVALID_ACCOUNT} for job {job}\n")
    array = submit(acct, "-H", "-a", "0-2", "--wrap", "true", cwd=tmp_path)
    assert update(acct, f"JobId={array}", "TimeLimit=7") == (0, "")
    assert update(acct, f"JobId={array}_1", "JobName=one") == (0, "")
    rows = acct.run("psqueue", "-h", "-r", "-j", array, "-o", "%i|%l|%j", check=True).stdout.split()
    assert rows == [f"{array}_0|7:00|wrap", f"{array}_1|7:00|one", f"{array}_2|7:00|wrap"]
    acct.run("pscancel", job, array, check=True)


def test_refusals_are_one_line_exit_1_and_change_nothing(acct: Cluster, tmp_path: Path) -> None:
    job = submit(acct, "-H", "-t", "10", "--wrap", "true", cwd=tmp_path)
    assert update(acct, "JobId=999999", "TimeLimit=5") == (1, "Invalid job id specified for job 999999\n")
    assert update(acct, f"JobId={job}", "TimeLimit=5", "Frobnicate=1") == (
        1, "Update of this parameter is not supported: Frobnicate=1\nRequest aborted\n")
    assert update(acct, f"JobId={job}", "TimeLimit=bogus") == (1, "pscontrol: error: Invalid TimeLimit value\n")
    assert update(acct, f"JobId={job}", "Partition=nope", "TimeLimit=5") == (
        1, f"Invalid partition name specified for job {job}\n")
    assert update(acct, f"JobId={job}") == (1, "No changes specified\n")
    assert queue(acct, job, "%P|%l") == "gpu|10:00"
    acct.run("pscancel", job, check=True)


def test_a_running_jobs_new_limit_reaches_its_agent(acct: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "run.out"
    job = submit(acct, "-t", "10", "-o", str(out), "--wrap", "sleep 300", cwd=tmp_path)
    wait_for(lambda: queue(acct, job, "%T") == "RUNNING")
    assert update(acct, f"JobId={job}", "Partition=short") == (1, f"Job is no longer pending execution for job {job}\n")
    started = time.monotonic()
    assert update(acct, f"JobId={job}", "TimeLimit=0:08") == (0, "")  # eight seconds from its start
    assert queue(acct, job, "%l") == "0:08"
    wait_for(lambda: acct_field(acct, job, "State") == "TIMEOUT", timeout=30)
    assert time.monotonic() - started < 20  # not ten minutes
    assert "DUE TO TIME LIMIT" in out.read_text()


def _request(acct: Cluster, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """The user API as nobody."""
    return api_as(acct, NOBODY, method, path, body)


@pytest.mark.skipif(os.geteuid() != 0, reason="a cluster that serves other users runs as root")
def test_a_user_lowers_their_own_limit_only(acct: Cluster, tmp_path: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="pslurm-nobody-"))
    shared.chmod(0o777)
    try:
        def job_for(account: str) -> dict[str, Any]:
            spec = build_spec(JobOptions(output="/dev/null", time="10", account=account), user="nobody", uid=NOBODY,
                              gid=NOBODY, cwd=str(shared), environ={"PATH": "/usr/bin:/bin"},
                              script="#!/bin/sh\nsleep 300\n", default_name="nobodys")
            return {"job": restjson.spec_to_json(spec)}

        status, reply = _request(acct, "POST", "/slurm/v0.0.40/job/submit", job_for("light"))
        assert (status, reply["errors"][0]["error"]) == (400, INVALID_ACCOUNT)
        status, reply = _request(acct, "POST", "/slurm/v0.0.40/job/submit", job_for(""))
        assert status == 200, reply
        job = str(reply["job_id"])
        assert queue(acct, job, "%a") == "heavy"  # the first account that lists nobody
        wait_for(lambda: queue(acct, job, "%T") == "RUNNING")
        for change, errors in (({"time_limit": "+5"}, [f"Access/permission denied for job {job}"]),
                               ({"time_limit": "-5"}, [])):
            status, reply = _request(acct, "POST", "/pslurm/v1/job/update", {"job": job, "changes": change})
            assert (status, reply["job_errors"]) == (200, errors)
        assert queue(acct, job, "%l") == "5:00"
        roots = submit(acct, "-H", "--wrap", "true", cwd=tmp_path)
        status, reply = _request(acct, "POST", "/pslurm/v1/job/update", {"job": roots, "changes": {"name": "x"}})
        assert reply["job_errors"] == [f"Invalid user id for job {roots}"]
        acct.run("pscancel", job, roots, check=True)
    finally:
        shutil.rmtree(shared)


def test_fair_share_favours_the_account_that_used_less(acct: Cluster, tmp_path: Path) -> None:
    used = submit(acct, "-A", "heavy", "-c", "4", "--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 4", cwd=tmp_path)
    wait_for(lambda: acct_field(acct, used, "State") == "COMPLETED")
    # sprio lists the jobs that wait on their priority (a held one it leaves out): these wait for GPUs
    blocker = submit(acct, "-A", "heavy", "-N", "2", "--gres=gpu:2", "-o", "/dev/null", "--wrap", "sleep 300",
                     cwd=tmp_path)
    heavy = submit(acct, "-A", "heavy", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "true", cwd=tmp_path)
    light = submit(acct, "-A", "light", "--gres=gpu:1", "-o", "/dev/null", "--wrap", "true", cwd=tmp_path)
    wait_for(lambda: all(queue(acct, j, "%r") in ("Resources", "Priority") for j in (heavy, light)))
    rows = dict(line.split() for line in acct.run("psprio", "-h", "-n", "-o", "%i %f", check=True).stdout.splitlines())
    assert float(rows[light]) > float(rows[heavy])
    weighted = dict(line.split() for line in acct.run("psprio", "-h", "-o", "%i %Y", check=True).stdout.splitlines())
    assert int(weighted[light]) > int(weighted[heavy])
    shares = cli("pslurm", "accounts", "--json", env=acct.env, check=True).stdout
    tree = {(r["account"], r["user"]): r for r in json.loads(shares)["shares"]}
    assert tree[("heavy", "root")]["raw_usage"] > 0 and tree[("light", "root")]["raw_usage"] >= 0
    assert tree[("heavy", "root")]["fairshare"] < tree[("light", "root")]["fairshare"]
    table = cli("pslurm", "accounts", env=acct.env, check=True).stdout
    assert table.splitlines()[0].split() == ["Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage",
                                             "FairShare"]
    acct.run("pscancel", heavy, light, blocker, check=True)
