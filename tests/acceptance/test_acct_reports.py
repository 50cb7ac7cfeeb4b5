"""sdiag, seff and sreport through the real commands (issue 20), on a local cluster: a finished job's
efficiency from its cgroup's CPU time, sreport's usage of it, and the controller's own figures."""

from __future__ import annotations

from pathlib import Path

from pslurm.core.config import load_cluster_config
from tests.conftest import Cluster, wait_for

BUSY = "python3 -c 'sum(range(6 * 10**7))'"  # a fixed amount of CPU work (some 2 s), whatever the load


def run_busy_job(c: Cluster, tmp_path: Path) -> str:
    job = c.run("psbatch", "--parsable", "-n", "2", "--mem=100", "-o", str(tmp_path / "out"), "--wrap", BUSY,
                cwd=tmp_path)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip()
    wait_for(lambda: c.run("psacct", "-j", job_id, "-X", "-n", "-P", "-o", "State").stdout.strip() == "COMPLETED")
    return job_id


def test_seff_reports_cpu_and_memory_efficiency_of_a_finished_job(cluster: Cluster, tmp_path: Path) -> None:
    job_id = run_busy_job(cluster, tmp_path)
    lines = cluster.run("pseff", job_id, check=True).stdout.splitlines()
    assert lines[0] == f"Job ID: {job_id}"
    assert lines[2] == "User/Group: root/root" and lines[3] == "State: COMPLETED (exit code 0)"
    assert lines[4:6] == ["Nodes: 1", "Cores per node: 2"]
    used = dict(line.split(": ", 1) for line in lines[6:])
    hours, minutes, seconds = (int(x) for x in used["CPU Utilized"].split(":"))
    assert 1 <= hours * 3600 + minutes * 60 + seconds <= 30  # the loop's CPU time, measured by its cgroup
    assert used["CPU Efficiency"].endswith("core-walltime") and "Memory Efficiency" in used
    assert used["Memory Efficiency"].endswith("of 100.00 MB")
    missing = cluster.run("pseff", "999999")
    assert missing.returncode == 2 and missing.stderr == "Job not found.\n"
    usage = cluster.run("pseff")
    assert usage.returncode == 1 and usage.stdout.startswith("Usage: seff [Options] <Jobid>")


def test_sreport_counts_the_jobs_cpu_time_and_sdiag_the_controllers_figures(cluster: Cluster,
                                                                            tmp_path: Path) -> None:
    run_busy_job(cluster, tmp_path)
    window = ("start=now-1hour", "end=now+1hour")
    lines = cluster.run("psreport", "cluster", "utilization", *window, "-t", "seconds", check=True).stdout.splitlines()
    assert lines[0] == "-" * 80 and lines[1].startswith("Cluster Utilization ")
    assert lines[2] == "Usage reported in CPU Seconds"
    # sreport's headers, cut to the columns' widths (8 for figures under 10^8 seconds)
    assert lines[4] == "  Cluster Allocate     Down PLND Dow     Idle  Planned Reported "
    values = [int(v) for v in lines[6].split()[1:]]
    allocated, reported = values[0], values[-1]
    cpus = sum(n.cpus for n in load_cluster_config(str(cluster.conf)).nodes.values())
    assert reported % (cpus * 3600) == 0  # every CPU of the cluster for whole hours (sreport's window)
    assert values[3] == reported - allocated  # Idle: what was not allocated (no node history: Down is 0)
    top = cluster.run("psreport", "-P", "user", "topusage", *window, "-t", "percent", check=True).stdout.splitlines()
    assert top[1].startswith("Top 10 Users ") and top[4] == "Cluster|Login|Proper Name|Account|Used|Energy"
    sizes = cluster.run("psreport", "-P", "job", "sizesbyaccount", *window, check=True).stdout.splitlines()
    assert sizes[4] == "Cluster|Account|0-49 CPUs|50-249 CPUs|250-499 CPUs|500-999 CPUs|>= 1000 CPUs|% of cluster"
    bad = cluster.run("psreport", "cluster", "nosuchreport")
    assert bad.returncode == 1 and bad.stderr.startswith("psreport: error: Not valid report")
    diag = cluster.run("psdiag", check=True).stdout.splitlines()
    assert diag[0] == "*" * 55 and diag[1].startswith("sdiag output at ")
    figures = dict(line.split(":", 1) for line in diag if line.startswith("Jobs "))
    assert int(figures["Jobs submitted"]) >= 1 and int(figures["Jobs completed"]) >= 1
    cycles = next(line for line in diag if line.startswith("\tTotal cycles:"))
    assert int(cycles.split(":")[1]) >= 1
    assert "Remote Procedure Call statistics by message type" in diag


def test_sstat_measures_a_running_jobs_steps_on_each_node(cluster: Cluster, tmp_path: Path) -> None:
    import os

    from tests.conftest import BIN

    env = {**cluster.env, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}  # psrun inside the job
    hold = tmp_path / "hold"
    hold.touch()
    script = ("psrun python3 -c 'import os, time\nx = bytearray(40 * 2**20)\n"
              f"while os.path.exists(\"{hold}\"): time.sleep(0.1)'")
    job = cluster.run("psbatch", "--parsable", "-N", "2", "-n", "2", "-o", str(tmp_path / "out"), "--wrap", script,
                      cwd=tmp_path, env=env)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip()
    try:
        def step_line() -> list[str]:
            proc = cluster.run("psstat", "-n", "-P", "-j", job_id, "-o", "JobID,NTasks,MaxRSS,Nodelist,Pids")
            return proc.stdout.strip().split("|") if proc.returncode == 0 and proc.stdout.strip() else []

        found = wait_for(lambda: (line := step_line()) and line[0] == f"{job_id}.0" and line)
        assert found[1] == "2" and found[3] == "c[000-001]" and len(found[4].split(",")) == 2  # a task a node
        rss = found[2]  # sstat's size: K, M or G (in 1024s while exact)
        assert float(rss[:-1]) * {"K": 1 / 1024, "M": 1, "G": 1024}[rss[-1]] >= 40  # each task holds its 40 MiB
        everything = cluster.run("psstat", "-a", "-P", "-j", job_id, "-o", "JobID,TRESUsageInTot", check=True)
        lines = everything.stdout.splitlines()
        assert lines[0] == "JobID|TRESUsageInTot" and {line.split("|")[0] for line in lines[1:]} == {
            f"{job_id}.batch", f"{job_id}.0"}
        assert all("cpu=" in line and "mem=" in line and "vmem=" in line for line in lines[1:])
        header = cluster.run("psstat", "-j", f"{job_id}.batch", "-i", check=True).stdout.splitlines()[0]
        assert header.split() == ["JobID", "Nodelist", "Pids"]
    finally:
        hold.unlink()
    ended = cluster.run("psstat", "-j", "999999")
    assert ended.returncode == 1 and ended.stderr == "psstat: error: Invalid job id specified: 999999\n"
