"""Job steps end to end on a `pslurm up` cluster: psrun inside a batch script and inside psalloc's
command runs as steps J.0, J.1, ... of that job (srun's behaviour), psacct lists them, pscancel J.S ends
one, cancelling the job ends them, and psrun --pty gives the command a terminal."""

from __future__ import annotations

import os
import re
import select
import time
from pathlib import Path

from pslurm.client.api import Api
from tests.conftest import BIN, Cluster, wait_for

PSRUN = str(BIN / "psrun")


def submit(cluster: Cluster, tmp_path: Path, wrap: str, *args: str) -> int:
    proc = cluster.run("psbatch", "--parsable", "-o", str(tmp_path / "out-%j.txt"), *args, "--wrap", wrap,
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def job_state(cluster: Cluster, job_id: int) -> str:
    with Api.load(cluster.conf) as api:
        found = api.jobs([job_id], include_finished=True)
    return str(found[0]["job_state"][0]) if found else ""


def ended(cluster: Cluster, job_id: int, timeout: float = 60) -> str:
    return str(wait_for(lambda: (s := job_state(cluster, job_id)) in ("COMPLETED", "FAILED", "CANCELLED") and s,
                        timeout=timeout))


def step_running(cluster: Cluster, job_id: int, step_id: int) -> bool:
    with Api.load(cluster.conf) as api:
        return any(s["step_id"] == step_id and s["state"] in ("RUNNING", ["RUNNING"]) for s in api.steps(job_id))


def acct(cluster: Cluster, job_id: int, *args: str) -> list[list[str]]:
    out = cluster.run("psacct", "-j", str(job_id), "-n", "-P", "-o", "JobID,State,ExitCode", *args, check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def test_psrun_in_a_batch_script_runs_labelled_steps_that_psacct_lists(cluster: Cluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, f"{PSRUN} -n 2 -l printenv SLURMD_NODENAME; {PSRUN} false; echo rc=$?",
                 "-n", "2")
    assert ended(cluster, job) == "COMPLETED"
    text = (tmp_path / f"out-{job}.txt").read_text()
    node = re.search(r"^0: (c00\d)$", text, re.M)
    assert node and re.search(rf"^1: {node.group(1)}$", text, re.M), text
    assert re.search(rf"psrun: error: {node.group(1)}: tasks? 0(-1)?: Exited with exit code 1", text), text
    assert "rc=1" in text
    rows = acct(cluster, job)
    assert rows == [[str(job), "COMPLETED", "0:0"], [f"{job}.batch", "COMPLETED", "0:0"],
                    [f"{job}.0", "COMPLETED", "0:0"], [f"{job}.1", "FAILED", "1:0"]], rows
    assert acct(cluster, job, "-X") == [[str(job), "COMPLETED", "0:0"]]


def test_a_second_step_waits_for_the_first_unless_it_overlaps(cluster: Cluster, tmp_path: Path) -> None:
    script = (f"{PSRUN} sh -c 'touch started; sleep 3' &\n"
              "while [ ! -e started ]; do sleep 0.1; done\n"
              f"{PSRUN} --overlap echo overlapped\n"
              f"{PSRUN} echo second\n"
              "wait\n")
    job = submit(cluster, tmp_path, script)
    assert ended(cluster, job) == "COMPLETED"
    text = (tmp_path / f"out-{job}.txt").read_text()
    busy = f"psrun: Job {job} step creation temporarily disabled, retrying (Requested nodes are busy)"
    assert text.count(busy) == 1, text
    assert f"psrun: Step created for job {job}" in text and "second" in text
    assert text.index("overlapped") < text.index(busy), text  # the overlapping step did not wait
    assert [row[0] for row in acct(cluster, job)][2:] == [f"{job}.0", f"{job}.1", f"{job}.2"]


def test_pscancel_ends_one_step_and_cancelling_the_job_ends_its_steps(cluster: Cluster, tmp_path: Path) -> None:
    job = submit(cluster, tmp_path, f"{PSRUN} sleep 60; echo after=$?; {PSRUN} sleep 60")
    wait_for(lambda: step_running(cluster, job, 0))
    cluster.run("pscancel", f"{job}.0", check=True)
    wait_for(lambda: step_running(cluster, job, 1))
    assert job_state(cluster, job) == "RUNNING"  # the job went on after its step was cancelled
    cluster.run("pscancel", str(job), check=True)
    assert ended(cluster, job) == "CANCELLED"
    text = (tmp_path / f"out-{job}.txt").read_text()
    assert re.search(r"after=[1-9]", text), text
    states = {row[0]: row[1] for row in acct(cluster, job)}
    assert states[f"{job}.0"].startswith("CANCELLED") and states[f"{job}.1"].startswith("CANCELLED"), states


def test_pscancel_signal_reaches_the_steps_only_unless_batch_or_full(cluster: Cluster, tmp_path: Path) -> None:
    """scancel -s SIG J of a batch job: its steps only (the step ends CANCELLED 0:15, the script goes
    on and the job COMPLETES, so its afterok dependents run); -b: the batch shell only; --full: both."""
    script = f"{PSRUN} sleep 60; echo after=$?"
    job = submit(cluster, tmp_path, script)
    dependent = submit(cluster, tmp_path, "true", f"--dependency=afterok:{job}")
    wait_for(lambda: step_running(cluster, job, 0))
    cluster.run("pscancel", "--signal=TERM", str(job), check=True)
    assert ended(cluster, job) == "COMPLETED"
    assert acct(cluster, job) == [[str(job), "COMPLETED", "0:0"], [f"{job}.batch", "COMPLETED", "0:0"],
                                  [f"{job}.0", "CANCELLED", "0:15"]]
    assert re.search(r"after=[1-9]", (tmp_path / f"out-{job}.txt").read_text())  # the script went on
    assert ended(cluster, dependent) == "COMPLETED"
    for flags in (["-b", "--signal=TERM"], ["--full", "--signal=TERM"]):
        job = submit(cluster, tmp_path, script)
        wait_for(lambda job=job: step_running(cluster, job, 0))  # type: ignore[misc]
        cluster.run("pscancel", *flags, str(job), check=True)
        assert ended(cluster, job) != "COMPLETED", flags  # the batch shell got TERM: the job did not go on
        assert acct(cluster, job, "-X")[0][2] == "0:15", flags
        assert "after=" not in (tmp_path / f"out-{job}.txt").read_text(), flags


def test_psalloc_runs_its_command_with_steps_in_the_allocation_and_gives_it_back(cluster: Cluster,
                                                                                  tmp_path: Path) -> None:
    env = {**cluster.env, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    proc = cluster.run("psalloc", "-n", "1", "sh", "-c", "psrun env | grep SLURM_STEP_ID; echo job=$SLURM_JOB_ID",
                       env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    job = int(re.search(r"job=(\d+)", proc.stdout).group(1))  # type: ignore[union-attr]
    assert "SLURM_STEP_ID=0" in proc.stdout
    assert f"psalloc: Granted job allocation {job}" in proc.stderr
    assert f"psalloc: Relinquishing job allocation {job}" in proc.stderr
    assert ended(cluster, job) == "COMPLETED"
    failed = cluster.run("psalloc", "sh", "-c", "exit 3", env=env, cwd=tmp_path)
    assert failed.returncode == 3, failed.stderr


def test_psalloc_says_when_its_allocation_is_revoked(cluster: Cluster, tmp_path: Path) -> None:
    env = {**cluster.env, "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
    marker = tmp_path / "job-id"
    import subprocess

    proc = subprocess.Popen([str(BIN / "psalloc"), "sh", "-c", f"echo $SLURM_JOB_ID > {marker}; sleep 60"],
                            env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        job = int(wait_for(lambda: marker.exists() and marker.read_text().strip()))
        cluster.run("pscancel", str(job), check=True)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert f"psalloc: Job allocation {job} has been revoked." in err, err
    assert "Relinquishing" not in err
    assert ended(cluster, job) == "CANCELLED"


def test_psrun_pty_gives_the_command_a_terminal(cluster: Cluster, tmp_path: Path) -> None:
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: psrun on a terminal
        os.chdir(tmp_path)
        os.execve(PSRUN, [PSRUN, "--pty", "sh", "-c", "tty; test -t 0 && echo stdin-is-a-tty"], cluster.env)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # EIO: the child closed its terminal
                break
            if not data:
                break
            out += data
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert re.search(r"/dev/pts/\d+", text) and "stdin-is-a-tty" in text, text


def test_psrun_overcommit_runs_more_tasks_than_the_job_has_cpus(cluster: Cluster, tmp_path: Path) -> None:
    """-O/--overcommit on a step (srun's): 3 tasks in a 1-CPU job; without it the step is refused."""
    job = submit(cluster, tmp_path, f"{PSRUN} -n 3 true; echo plain=$?; {PSRUN} -O -n 3 -l echo hi; echo over=$?",
                 "-n", "1")
    assert ended(cluster, job) == "COMPLETED"
    text = (tmp_path / f"out-{job}.txt").read_text()
    assert "More processors requested than permitted" in text and "plain=1" in text, text
    assert sorted(line for line in text.splitlines() if line.endswith(": hi")) == ["0: hi", "1: hi", "2: hi"], text
    assert "over=0" in text and "no effect" not in text, text
