"""sbatch's --begin, --deadline, --comment, --signal, --test-only and --qos through the real commands
on a `pslurm up` cluster (4 nodes x 2 GPUs), as Slurm 22.05 answers them (issue #11, item 4)."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.conftest import Cluster, wait_for


def submit(c: Cluster, *args: str, cwd: Path) -> str:
    proc = c.run("psbatch", "--parsable", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def row(c: Cluster, job: str, fmt: str = "%T|%r") -> list[str]:
    out = c.run("psqueue", "-h", "-t", "all", "-j", job, "-o", fmt, check=True).stdout.splitlines()
    assert len(out) == 1, out
    return out[0].split("|")


def show(c: Cluster, job: str) -> dict[str, str]:
    text = c.run("pscontrol", "show", "job", job, check=True).stdout
    return dict(re.findall(r"(\w[\w/]*)=(\S*)", text))


def test_begin_pends_begin_time_then_runs(cluster, tmp_path):
    job = submit(cluster, "--begin=now+3", "--wrap", "true", cwd=tmp_path)
    assert row(cluster, job, "%T|%r")[0] == "PENDING"
    wait_for(lambda: row(cluster, job) == ["PENDING", "BeginTime"], timeout=2.5, interval=0.05)
    shown = show(cluster, job)
    submitted = time.mktime(time.strptime(shown["SubmitTime"], "%Y-%m-%dT%H:%M:%S"))
    eligible = time.mktime(time.strptime(shown["EligibleTime"], "%Y-%m-%dT%H:%M:%S"))
    assert 2 <= eligible - submitted <= 4  # the begin time, whole seconds
    wait_for(lambda: row(cluster, job)[0] == "COMPLETED", timeout=30)
    start = time.mktime(time.strptime(show(cluster, job)["StartTime"], "%Y-%m-%dT%H:%M:%S"))
    assert start >= eligible
    bad = cluster.run("psbatch", "--begin=now+1h", "--wrap", "true", cwd=tmp_path)
    assert (bad.returncode, bad.stderr) == (1, "psbatch: error: Invalid --begin specification: now+1h\n")


def test_a_deadline_that_cannot_be_met_ends_the_job_deadline(cluster, tmp_path):
    # as Slurm 22.05: accepted (the deadline is still to come), then ended at the first pass
    job = submit(cluster, "--deadline=now+30", "-t", "1", "--wrap", "true", cwd=tmp_path)
    wait_for(lambda: row(cluster, job, "%T|%t|%r") == ["DEADLINE", "DL", "DeadLine"], timeout=10)
    shown = show(cluster, job)
    assert shown["JobState"] == "DEADLINE" and shown["Reason"] == "DeadLine" and shown["Deadline"] != "N/A"
    acct = cluster.run("psacct", "-j", job, "-n", "-P", "-o", "JobID,State,ExitCode", check=True).stdout.split()
    assert acct == [f"{job}|DEADLINE|1:0"]
    met = submit(cluster, "--deadline=now+600", "-t", "1", "--wrap", "true", cwd=tmp_path)
    wait_for(lambda: row(cluster, met)[0] == "COMPLETED", timeout=30)
    past = cluster.run("psbatch", "--deadline=now-60", "--wrap", "true", cwd=tmp_path)
    assert (past.returncode, past.stderr) == (1, "psbatch: error: Batch job submission failed: Requested time limit "
                                                 "is invalid (missing or exceeds some limit)\n")
    crossed = cluster.run("psbatch", "--begin=now+100", "--deadline=now+50", "--wrap", "true", cwd=tmp_path)
    assert (crossed.returncode, crossed.stderr) == (1, "psbatch: error: Incompatible begin and deadline time "
                                                       "specification\n")


def test_comment_and_qos_are_recorded_and_shown(cluster, tmp_path):
    job = submit(cluster, "--comment=for the paper", "-q", "normal", "-H", "--wrap", "true", cwd=tmp_path)
    assert row(cluster, job, "%k|%q") == ["for the paper", "normal"]
    text = cluster.run("pscontrol", "show", "job", job, check=True).stdout
    assert "   Comment=for the paper \n" in text and " QOS=normal\n" in text  # scontrol's blank after Comment
    cluster.run("pscancel", job, check=True)
    acct = cluster.run("psacct", "-j", job, "-n", "-P", "-o", "JobID,Comment,QOS,State", check=True).stdout.split("\n")
    assert acct[0] == f"{job}|for the paper|normal|CANCELLED by 0"  # sacct -P: who cancelled it
    plain = submit(cluster, "-H", "--wrap", "true", cwd=tmp_path)
    assert row(cluster, plain, "%k|%q") == ["(null)", "normal"]  # Slurm's default QOS
    cluster.run("pscancel", plain, check=True)
    before = cluster.run("psqueue", "-h", "-t", "all", "-o", "%i", check=True).stdout
    refused = cluster.run("psbatch", "--qos=high", "--wrap", "true", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (1, "psbatch: error: Batch job submission failed: "
                                                       "Invalid qos specification\n")
    assert cluster.run("psqueue", "-h", "-t", "all", "-o", "%i", check=True).stdout == before


def test_signal_b_usr1_reaches_the_batch_shell_before_the_time_limit(cluster, tmp_path):
    # -t 0:06 is six seconds; the shell notes when USR1 came (3 s before the limit) and ends
    script = ("date +%s.%N > started; trap 'date +%s.%N > warned; exit 0' USR1; "
              "sleep 30 & wait; echo never > reached")
    job = submit(cluster, "-t", "0:06", "--signal=B:USR1@3", "--wrap", script, cwd=tmp_path)
    wait_for(lambda: row(cluster, job)[0] == "COMPLETED", timeout=30)
    waited = float((tmp_path / "warned").read_text()) - float((tmp_path / "started").read_text())
    assert 2.3 <= waited <= 3.8, waited
    assert not (tmp_path / "reached").exists()
    bad = cluster.run("psbatch", "--signal=FOO", "--wrap", "true", cwd=tmp_path)
    assert (bad.returncode, bad.stderr) == (1, "psbatch: error: Invalid --signal specification\n")


def test_test_only_says_when_and_where_and_stores_nothing(cluster, tmp_path):
    before = cluster.run("psacct", "-n", "-P", "-o", "JobID", check=True).stdout
    probe = cluster.run("psbatch", "--test-only", "-n", "2", "--gres=gpu:1", "-t", "5", "--wrap", "true",
                        cwd=tmp_path)
    assert probe.returncode == 0 and probe.stdout == ""
    found = re.fullmatch(r"psbatch: Job (\d+) to start at (\S+) using 2 processors on nodes (c00\d) in partition gpu\n",
                         probe.stderr)
    assert found, probe.stderr
    assert cluster.run("psacct", "-n", "-P", "-o", "JobID", check=True).stdout == before
    job = submit(cluster, "--wrap", "true", cwd=tmp_path)
    assert int(job) >= int(found.group(1))  # the id it would have had: not reserved, not stored
    refused = cluster.run("psbatch", "--test-only", "--gres=gpu:9", "--wrap", "true", cwd=tmp_path)
    assert (refused.returncode, refused.stderr) == (1, "psbatch: error: allocation failure: Requested node "
                                                       "configuration is not available\n")
