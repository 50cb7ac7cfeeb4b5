"""The real CLIs as subprocesses against a cluster started with `pslurm up` (4 nodes x 2 GPUs)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, Cluster, wait_for


def queue(cluster: Cluster, *args: str) -> list[list[str]]:
    out = cluster.run("psqueue", "-h", "-t", "all", "-o", "%i|%T|%N|%r", *args, check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def states(cluster: Cluster, ids: list[str]) -> dict[str, str]:
    return {row[0]: row[1] for row in queue(cluster, "-j", ",".join(ids))}


def all_in(cluster: Cluster, ids: list[str], state: str) -> dict[str, str] | None:
    found = states(cluster, ids)
    return found if all(v == state for v in found.values()) else None


def submit(cluster: Cluster, *args: str, cwd: Path) -> str:
    proc = cluster.run("psbatch", "--parsable", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(r"\d+\n", proc.stdout)
    return proc.stdout.strip()


def test_psinfo_shows_four_idle_nodes_with_two_gpus(cluster):
    out = cluster.run("psinfo", "-h", "-o", "%N %G %t", check=True).stdout
    assert out.split() == ["c[000-003]", "gpu:2", "idle"]
    summary = cluster.run("psinfo", check=True).stdout.splitlines()
    assert summary[0].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"]
    assert summary[1].split() == ["gpu*", "up", "infinite", "4", "idle", "c[000-003]"]


def test_nine_one_gpu_jobs_run_eight_at_a_time_on_distinct_gpus(cluster, tmp_path):
    release = tmp_path / "release"
    script = tmp_path / "gpu.sh"
    script.write_text(f"""#!/bin/sh
#SBATCH --gres=gpu:1
#SBATCH -o out-%j.txt
echo "$SLURMD_NODENAME $SLURM_JOB_GPUS $CUDA_VISIBLE_DEVICES $SLURM_GPUS_ON_NODE"
while [ ! -e {release} ]; do sleep 0.1; done
""")
    ids = [submit(cluster, str(script), cwd=tmp_path) for _ in range(9)]
    running = wait_for(lambda: [i for i, s in states(cluster, ids).items() if s == "RUNNING"]
                       if sum(s == "RUNNING" for s in states(cluster, ids).values()) == 8 else None)
    assert len(running) == 8
    rows = {row[0]: row for row in queue(cluster, "-j", ",".join(ids))}
    waiting = [i for i in ids if i not in running]
    assert waiting == [ids[-1]] and rows[ids[-1]][1] == "PENDING" and rows[ids[-1]][3] == "Resources"
    outputs = wait_for(lambda: [(tmp_path / f"out-{i}.txt").read_text().split() for i in running]
                       if all((tmp_path / f"out-{i}.txt").exists() and (tmp_path / f"out-{i}.txt").read_text()
                              for i in running) else None)
    pairs = {(node, gpu) for node, gpu, visible, count in outputs}
    assert len(pairs) == 8  # every running job has its own (node, GPU)
    assert all(gpu == visible and count == "1" for node, gpu, visible, count in outputs)
    assert {node for node, _ in pairs} == {"c000", "c001", "c002", "c003"}
    release.touch()
    final = wait_for(lambda: all_in(cluster, ids, "COMPLETED"))
    assert len(final) == 9


def test_psrun_streams_output_and_passes_the_exit_code(cluster, tmp_path):
    ok = cluster.run("psrun", "--gres=gpu:1", "sh", "-c", "echo out $SLURM_GPUS_ON_NODE; echo err >&2", cwd=tmp_path)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "out 1\n", "err\n")
    bad = cluster.run("psrun", "sh", "-c", "exit 3", cwd=tmp_path)
    assert bad.returncode == 3
    assert re.search(r"psrun: error: c00\d: task 0: Exited with exit code 3", bad.stderr)
    missing = cluster.run("psrun", "/no/such/program", cwd=tmp_path)
    assert missing.returncode != 0 and "/no/such/program" in missing.stderr


def test_more_waiting_psruns_than_controller_threads_all_finish(cluster, tmp_path):
    # 48 psrun wait at once, more than the controller's 32 RPC threads. Waits beyond its slots are
    # answered at once and asked again, so heartbeats and job ends still get a thread: no node is
    # declared down and every job completes (before, the waits took every thread: NODE_FAIL).
    procs = [subprocess.Popen([str(BIN / "psrun"), "sh", "-c", "sleep 2; echo done $SLURM_JOB_ID"],
                              env=cluster.env, cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(48)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 48, [err for _, err in outs if "error" in err][:3]
    assert len({out for out, _ in outs if out.startswith("done ")}) == 48
    assert "down" not in cluster.run("psinfo", "-N", "-h", "-o", "%t", check=True).stdout


def test_psrun_forwards_its_stdin_to_the_job_as_srun_does(cluster, tmp_path):
    counted = cluster.run("psrun", "sh", "-c", "wc -l", input="a\nb\nc\n", cwd=tmp_path, check=True)
    assert counted.stdout.strip() == "3"
    ignored = cluster.run("psrun", "-i", "none", "sh", "-c", "cat; echo done", input="not for the job\n",
                          cwd=tmp_path, check=True)
    assert ignored.stdout == "done\n"
    # a job that never reads stdin ends, and psrun with it, though psrun's stdin stays open
    open_stdin = subprocess.Popen([str(BIN / "psrun"), "true"], env=cluster.env, cwd=tmp_path, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert open_stdin.wait(timeout=30) == 0
    finally:
        open_stdin.kill()
        open_stdin.communicate()
    bad = cluster.run("psrun", "-i", "3", "true", cwd=tmp_path)
    assert (bad.returncode, bad.stderr) == (1, "psrun: error: Invalid --input specification: 3 (all or none)\n")


def test_ends_that_come_together_are_each_reported_once(cluster, tmp_path):
    log = cluster.state_dir / "log" / "psctld.log"
    before = log.read_text().count("end reported again")
    array = submit(cluster, "--array=0-15", "-o", "/dev/null", "--wrap", "sleep 1", cwd=tmp_path)
    wait_for(lambda: cluster.run("psqueue", "-h", "-t", "all", "-r", "-j", array, "-o", "%T").stdout.split()
             == ["COMPLETED"] * 16)
    assert log.read_text().count("end reported again") == before  # each agent sent each end once


def test_job_environment_is_slurms(cluster, tmp_path):
    out = cluster.run("psrun", "-J", "envcheck", "--gres=gpu:2", "env", cwd=tmp_path, check=True).stdout
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert env["SLURM_JOB_NAME"] == "envcheck"
    assert env["SLURM_GPUS_ON_NODE"] == "2" and env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["GPU_DEVICE_ORDINAL"] == env["NVIDIA_VISIBLE_DEVICES"] == "0,1"
    assert env["SLURM_JOB_NODELIST"] == env["SLURMD_NODENAME"]
    assert env["SLURM_SUBMIT_DIR"] == str(tmp_path) and env["PWD"] == str(tmp_path)
    for name in ("SLURM_JOB_ID", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
                 "SLURM_JOB_NUM_NODES", "SLURM_CPUS_PER_TASK", "SLURM_JOB_GPUS"):
        assert name in env
    assert env["PATH"]  # --export=ALL by default


def test_time_limit_ends_in_timeout(cluster, tmp_path):
    job = submit(cluster, "-t", "0:02", "-o", "to-%j.out", "--wrap", "echo started; sleep 60", cwd=tmp_path)
    t0 = time.time()
    wait_for(lambda: states(cluster, [job])[job] == "TIMEOUT", timeout=30)
    assert time.time() - t0 < 15
    text = (tmp_path / f"to-{job}.out").read_text()
    assert "started" in text and "DUE TO TIME LIMIT" in text
    show = cluster.run("pscontrol", "show", "job", job, check=True).stdout
    assert "JobState=TIMEOUT" in show and "Reason=TimeLimit" in show


def test_cancel_running_and_pending_jobs(cluster, tmp_path):
    running = submit(cluster, "--wrap", "sleep 60", cwd=tmp_path)
    wait_for(lambda: states(cluster, [running])[running] == "RUNNING")
    big = submit(cluster, "--gres=gpu:2", "-N", "1", "--mem", "16000", "--wrap", "sleep 60", cwd=tmp_path)
    blocker = submit(cluster, "--gres=gpu:2", "--mem", "16000", "--wrap", "sleep 60", cwd=tmp_path)
    cluster.run("pscancel", running, big, blocker, check=True)
    final = wait_for(lambda: all_in(cluster, [running, big, blocker], "CANCELLED"))
    assert set(final.values()) == {"CANCELLED"}
    assert "ExitCode=0:15" in cluster.run("pscontrol", "show", "job", running, check=True).stdout
    unknown = cluster.run("pscancel", "999999")  # scancel 22.05: an unknown id is no error (exit 0, silent)
    assert unknown.returncode == 0 and unknown.stderr == ""
    ended = cluster.run("pscancel", running)  # nor is a job that already ended
    assert ended.returncode == 0 and ended.stderr == ""


@pytest.mark.parametrize("args,message", [
    (["--gres=gpu:9"], "Requested node configuration is not available"),
    (["--gres=gpu:h100:1"], "Requested node configuration is not available"),
    (["-p", "nope"], "invalid partition specified: nope"),
    (["--gres=gpu:x:y:z"], "Invalid generic resource (gres) specification"),
    (["--time=abc"], "Invalid time limit"),
    (["--bogus-flag"], "No such option"),
])
def test_bad_input_is_refused_and_the_queue_is_unchanged(cluster, tmp_path, args, message):
    before = cluster.run("psqueue", "-h", "-t", "all", "-o", "%i", check=True).stdout
    proc = cluster.run("psbatch", *args, "--wrap", "true", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("psbatch: error: ") and message in lines[0]
    assert cluster.run("psqueue", "-h", "-t", "all", "-o", "%i", check=True).stdout == before


@pytest.mark.parametrize("content,message", [
    (b"#!/bin/sh\n#SBATCH -J\n#SBATCH --gres=gpu:9\ntrue\n",  # -J must not swallow the next line
     "invalid #SBATCH directive on line 2: option -J requires an argument"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00", "does not allow scripts that contain a NULL character"),
    (b"#!/bin/sh\necho \xff\xfe\n", "Batch script is not UTF-8 text"),
    (b"#!/bin/sh\r\ntrue\r\n", "Batch script contains DOS line breaks"),
    (b"echo no interpreter line\n", "This does not look like a batch script"),
    (b"", "Batch script is empty!"),
    (b"#!/bin/sh\n" + b"# padding\n" * 500_000, "Batch script is too large: 5000010 bytes, at most 4194304"),
])
def test_bad_scripts_get_one_line_and_the_queue_is_unchanged(cluster, tmp_path, content, message):
    before = cluster.run("psqueue", "-h", "-t", "all", "-o", "%i", check=True).stdout
    script = tmp_path / "job.sh"
    script.write_bytes(content)
    proc = cluster.run("psbatch", str(script), cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and message in lines[0], proc.stderr
    assert cluster.run("psqueue", "-h", "-t", "all", "-o", "%i", check=True).stdout == before


def test_psrun_refuses_an_impossible_request(cluster, tmp_path):
    proc = cluster.run("psrun", "--gres=gpu:3", "true", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == ("psrun: error: Unable to allocate resources: "
                                   "Requested node configuration is not available")


def test_directives_and_output_patterns(cluster, tmp_path):
    script = tmp_path / "named.sh"
    script.write_text("#!/bin/bash\n#SBATCH -J dirname\n#PSBATCH --output=o_%x_%j_%N_%u.out\n"
                      "#SBATCH -e e_%j.err\necho to-out; echo to-err >&2\n")
    job = submit(cluster, str(script), cwd=tmp_path)
    wait_for(lambda: states(cluster, [job])[job] == "COMPLETED")
    outs = list(tmp_path.glob(f"o_dirname_{job}_c00*_*.out"))
    assert len(outs) == 1 and outs[0].read_text() == "to-out\n"
    assert (tmp_path / f"e_{job}.err").read_text() == "to-err\n"
    # the command line wins over the directives
    job2 = submit(cluster, "-J", "cliname", str(script), cwd=tmp_path)
    wait_for(lambda: states(cluster, [job2])[job2] == "COMPLETED")
    assert list(tmp_path.glob(f"o_cliname_{job2}_*.out"))


def test_default_output_file_and_failed_state(cluster, tmp_path):
    job = submit(cluster, "--wrap", "echo hello; exit 4", cwd=tmp_path)
    wait_for(lambda: states(cluster, [job])[job] == "FAILED")
    assert (tmp_path / f"slurm-{job}.out").read_text() == "hello\n"
    show = cluster.run("pscontrol", "show", "job", job, check=True).stdout
    assert "ExitCode=4:0" in show and "Reason=NonZeroExitCode" in show


def test_submitted_batch_job_line_and_psqueue_columns(cluster, tmp_path):
    proc = cluster.run("psbatch", "-J", "sleeper", "--wrap", "sleep 30", cwd=tmp_path, check=True)
    job = re.fullmatch(r"Submitted batch job (\d+)\n", proc.stdout).group(1)
    wait_for(lambda: states(cluster, [job])[job] == "RUNNING")
    lines = cluster.run("psqueue", "-j", job, check=True).stdout.splitlines()
    assert lines[0].split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)"]
    assert lines[1].split()[:5] == [job, "gpu", "sleeper", lines[1].split()[3], "R"]
    import json
    # --json: Slurm's shape (squeue --json of Slurm 22.05); --json=pslurm: the shape psqueue printed before
    data = json.loads(cluster.run("psqueue", "--json", "-j", job, check=True).stdout)
    assert data["meta"]["plugin"]["type"] == "openapi/v0.0.38" and data["errors"] == []
    assert data["jobs"][0]["job_id"] == int(job) and data["jobs"][0]["job_state"] == "RUNNING"
    own = json.loads(cluster.run("psqueue", "--json=pslurm", "-j", job, check=True).stdout)
    assert own["jobs"][0]["job_id"] == int(job) and own["jobs"][0]["state"] == "RUNNING"
    cluster.run("pscancel", job, check=True)
    unknown = cluster.run("psqueue", "-j", "999999")
    assert unknown.returncode == 1 and "Invalid job id specified" in unknown.stderr


def test_drain_and_resume_a_node(cluster, tmp_path):
    cluster.run("pscontrol", "update", "NodeName=c003", "State=DRAIN", "Reason=maintenance", check=True)
    node = cluster.run("psinfo", "-N", "-h", "-o", "%N %t %E", check=True).stdout
    assert "c003 drain maintenance" in node
    assert "Reason=maintenance" in cluster.run("pscontrol", "show", "node", "c003", check=True).stdout
    no_reason = cluster.run("pscontrol", "update", "NodeName=c002", "State=DRAIN")
    assert no_reason.returncode == 1 and "reason" in no_reason.stderr
    cluster.run("pscontrol", "update", "NodeName=c003", "State=RESUME", check=True)
    assert "c003 idle" in cluster.run("psinfo", "-N", "-h", "-o", "%N %t", check=True).stdout
