"""psacct as sacct 22.05 prints it, against a cluster of `pslurm up` (the ``cluster`` fixture of conftest)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Cluster, wait_for


def acct(cluster: Cluster, *args: str) -> list[list[str]]:
    out = cluster.run("psacct", "-n", "-P", *args, check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def done(cluster: Cluster, job: str, count: int) -> list[list[str]] | None:
    rows = acct(cluster, "-X", "-j", job, "-o", "JobID,JobIDRaw,State")
    return rows if len(rows) == count and all(r[2] == "COMPLETED" for r in rows) else None


def test_array_ids_times_and_fields_as_sacct_prints_them(cluster: Cluster, tmp_path: Path) -> None:
    array = cluster.run("psbatch", "--parsable", "--array=0-1", "-J", "arr", "-o", "/dev/null", "--wrap", "true",
                        cwd=tmp_path, check=True).stdout.strip()
    single = cluster.run("psbatch", "--parsable", "-J", "one", "--mem=4000", "-t", "1-02:03:04", "-o", "/dev/null",
                         "--wrap", "sleep 1", cwd=tmp_path, check=True).stdout.strip()
    tasks = wait_for(lambda: done(cluster, array, 2))
    assert sorted(r[0] for r in tasks) == [f"{array}_0", f"{array}_1"]  # J_T, and JobIDRaw the raw id
    assert all(re.fullmatch(r"\d+", r[1]) for r in tasks) and array in {r[1] for r in tasks}
    wait_for(lambda: done(cluster, single, 1))
    (row,) = acct(cluster, "-X", "-j", single, "-o", "JobID,JobName,State,ExitCode,Elapsed,CPUTime,Timelimit,Submit,"
                  "Start,End,NodeList,AllocTRES,ReqMem,MaxRSS,NTasks,AllocCPUS")
    assert row[:4] == [single, "one", "COMPLETED", "0:0"]
    assert re.fullmatch(r"00:00:0\d", row[4]) and row[5] == row[4] and row[6] == "1-02:03:04"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", t) for t in row[7:10])
    assert re.fullmatch(r"c00\d", row[10]) and row[11] == "billing=1,cpu=1,mem=4000M,node=1"
    assert row[12:] == ["4000M", "", "", "1"]  # NTasks: sacct fills it on steps' lines only
    # --name, -X (the job without its steps), -p's trailing '|', and sacct's header names; the batch
    # script is the J.batch step, its Timelimit blank as sacct prints a step's
    assert acct(cluster, "--name", "one", "-X", "-o", "JobID") == [[single]]
    out = cluster.run("psacct", "-j", single, "-p", "-o", "jobid,jobidraw,timelimit", check=True).stdout
    assert out == f"JobID|JobIDRaw|Timelimit|\n{single}|{single}|1-02:03:04|\n{single}.batch|{single}.batch||\n"
    table = cluster.run("psacct", "-X", "-j", single, "-o", "JobID,Elapsed,NodeList,NTasks", check=True).stdout
    header, rule, line = table.splitlines()
    assert rule == " ".join("-" * w for w in (12, 10, 15, 8)) and header.split() == ["JobID", "Elapsed",
                                                                                      "NodeList", "NTasks"]
    assert line.startswith(single.ljust(12) + " ")
