"""psbatch -W/--wait and -t 0, pscontrol write batch_script and show job's expanded StdOut/StdErr/StdIn,
against a `pslurm up` cluster (the module-scoped ``cluster`` fixture of tests/conftest.py: 4 nodes x 2 GPUs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import BIN, Cluster


def show(cluster: Cluster, job_id: str) -> dict[str, str]:
    text = cluster.run("pscontrol", "show", "job", job_id, check=True).stdout
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def test_wait_prints_the_id_then_exits_with_the_jobs_code(cluster: Cluster, tmp_path: Path) -> None:
    ok = cluster.run("psbatch", "-W", "-o", "/dev/null", "--wrap", "true", cwd=tmp_path)
    assert ok.returncode == 0 and ok.stdout.startswith("Submitted batch job "), ok.stderr
    job_id = ok.stdout.split()[-1]
    assert show(cluster, job_id)["JobState"] == "COMPLETED"  # it ended before psbatch did
    bad = cluster.run("psbatch", "--wait", "--parsable", "-o", "/dev/null", "--wrap", "sleep 0.5; exit 3",
                      cwd=tmp_path)
    assert bad.returncode == 3 and bad.stdout.strip().isdigit(), bad.stderr
    script = tmp_path / "w.sh"
    script.write_text("#!/bin/sh\n#SBATCH -W\n#SBATCH -o /dev/null\nexit 4\n")
    assert cluster.run("psbatch", str(script), cwd=tmp_path).returncode == 4  # as a directive too


def test_wait_on_an_array_is_its_highest_exit_code(cluster: Cluster, tmp_path: Path) -> None:
    proc = cluster.run("psbatch", "-W", "-a", "0-3", "-o", "/dev/null", "--wrap", "exit $SLURM_ARRAY_TASK_ID",
                       cwd=tmp_path)
    assert proc.returncode == 3 and proc.stdout.startswith("Submitted batch job "), proc.stderr


def test_wait_on_a_cancelled_job_is_1(cluster: Cluster, tmp_path: Path) -> None:
    proc = subprocess.Popen([str(BIN / "psbatch"), "-W", "-o", "/dev/null", "--wrap", "sleep 60"], env=cluster.env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        job_id = proc.stdout.readline().split()[-1]  # printed before the wait, as sbatch
        cluster.run("pscancel", job_id, check=True)
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_time_zero_is_no_limit(cluster: Cluster, tmp_path: Path) -> None:
    limits = []
    for option in (["-t", "UNLIMITED"], ["-t", "0"], ["--time=0"], ["-t", "0:00"]):
        proc = cluster.run("psbatch", "--parsable", "-H", *option, "-o", "/dev/null", "--wrap", "true",
                           cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        job_id = proc.stdout.strip()
        limits.append(show(cluster, job_id)["TimeLimit"])
        cluster.run("pscancel", job_id, check=True)
    assert limits[1:] == limits[:1] * 3  # as -t UNLIMITED


def test_write_batch_script(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    body = "#!/bin/sh\n#SBATCH -o /dev/null\necho written\n"
    script.write_text(body)
    job_id = cluster.run("psbatch", "--parsable", "-H", str(script), cwd=tmp_path, check=True).stdout.strip()
    try:
        out = cluster.run("pscontrol", "write", "batch_script", job_id, cwd=tmp_path, check=True)
        assert out.stdout == f"batch script for job {job_id} written to slurm-{job_id}.sh\n"
        assert (tmp_path / f"slurm-{job_id}.sh").read_text() == body
        out = cluster.run("pscontrol", "write", "batch_script", job_id, "copy.sh", cwd=tmp_path, check=True)
        assert out.stdout == f"batch script for job {job_id} written to copy.sh\n"
        assert (tmp_path / "copy.sh").read_text() == body
        assert cluster.run("pscontrol", "write", "batch_script", job_id, "-", check=True).stdout == body
    finally:
        cluster.run("pscancel", job_id, check=True)
    missing = cluster.run("pscontrol", "write", "batch_script", "999999", cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (0, "")  # scontrol's status
    assert missing.stderr == "job script retrieval failed: Invalid job id specified\n"
    assert not (tmp_path / "slurm-999999.sh").exists()
    step = cluster.run("psrun", "sh", "-c", "echo $SLURM_JOB_ID", cwd=tmp_path, check=True).stdout.strip()
    none = cluster.run("pscontrol", "write", "batch_script", step, cwd=tmp_path)
    assert none.stderr == "job script retrieval failed: Job script not specified\n"


def test_show_job_expands_stdout_stderr(cluster: Cluster, tmp_path: Path) -> None:
    job_id = cluster.run("psbatch", "--parsable", "-H", "-J", "named", "-e", "err_%x_%j.txt", "--wrap", "true",
                         cwd=tmp_path, check=True).stdout.strip()
    array = cluster.run("psbatch", "--parsable", "-H", "-a", "2-3", "--wrap", "true", cwd=tmp_path,
                        check=True).stdout.strip()
    try:
        fields = show(cluster, job_id)
        assert fields["StdOut"] == f"{tmp_path}/slurm-{job_id}.out"
        assert fields["StdErr"] == f"{tmp_path}/err_named_{job_id}.txt"
        assert fields["StdIn"] == "/dev/null"
        text = cluster.run("pscontrol", "show", "job", array, check=True).stdout  # pending tasks: one record
        assert f"ArrayJobId={array} ArrayTaskId=2-3 " in text
        task = cluster.run("pscontrol", "show", "job", f"{array}_3", check=True).stdout
        assert f"StdOut={tmp_path}/slurm-{array}_3.out\n" in task
    finally:
        cluster.run("pscancel", job_id, array, check=True)
