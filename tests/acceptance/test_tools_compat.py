"""Tools written for Slurm, run as their users run them, through `pslurm compat install` against a
`pslurm up` cluster: submitit and snakemake's Slurm executor installed from PyPI (the test extras), Open
OnDemand's Slurm adapter by its exact command lines (ood_core's job/adapters/slurm.rb is Ruby: its
``call`` adds ``-M CLUSTER`` to every command and reads squeue's output split on its separators)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, cli, wait_for

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def slurm_names(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment a tool runs in: Slurm's names first on PATH (then this environment's, for the
    tool's own interpreter), the cluster's PSLURM_CONF."""
    bin_dir = tmp_path_factory.mktemp("slurm-bin")
    cli("pslurm", "compat", "install", "--bin-dir", str(bin_dir), check=True)
    yield {**cluster.env, "PATH": f"{bin_dir}:{VENV_BIN}:/usr/bin:/bin"}


def test_submitit_runs_a_function_and_an_array_and_cancels(slurm_names: dict[str, str], tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("submitit") is None:
        pytest.fail("submitit is in the test extras: pip install -e '.[test]'")
    # As submitit's README: a folder with %j (made by submitit only once sbatch has answered, so the job
    # may start before its log directory exists: the agent waits for it), results read back.
    code = f"""
import submitit, sys
ex = submitit.AutoExecutor(folder={str(tmp_path / 'log' / '%j')!r}, cluster="slurm")
ex.update_parameters(timeout_min=2, slurm_partition="gpu", gpus_per_node=1, cpus_per_task=1, mem_gb=0.1)
job = ex.submit(pow, 2, 10)
assert job.result() == 1024, job.stderr()
jobs = ex.map_array(abs, [-1, -2, -3])
assert [j.result() for j in jobs] == [1, 2, 3]
sleeper = ex.submit(__import__("time").sleep, 120)
sleeper.cancel(check=True)  # scancel; check=True: its exit status must be 0
assert sleeper.state.split()[0] in ("CANCELLED", "COMPLETING", "PENDING", "RUNNING", "UNKNOWN"), sleeper.state
print("ok", job.job_id)
"""
    proc = subprocess.run([sys.executable, "-c", code], env=slurm_names, cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.startswith("ok ")


SNAKEFILE = """
rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    resources: runtime=5, mem_mb=100
    shell: "echo hello > {output}"

rule b:
    input: "a.txt"
    output: "b.txt"
    resources: runtime=5, mem_mb=100
    shell: "tr a-z A-Z < {input} > {output}"
"""


def test_snakemakes_slurm_executor_runs_a_workflow(slurm_names: dict[str, str], tmp_path: Path) -> None:
    snakemake = shutil.which("snakemake", path=str(VENV_BIN))
    if snakemake is None:
        pytest.fail("snakemake is in the test extras (with snakemake-executor-plugin-slurm): pip install -e '.[test]'")
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    # its status queries: sacct -X --parsable2 --clusters all ... (the line issue #19 found refused)
    proc = subprocess.run([snakemake, "--executor", "slurm", "-j", "2", "--default-resources", "slurm_partition=gpu",
                           "--latency-wait", "10", "--slurm-init-seconds-before-status-checks", "1"],
                          env=slurm_names, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "b.txt").read_text() == "HELLO\n"


RS, US = "\x1e", "\x1f"  # ood_core's RECORD_SEPARATOR and UNIT_SEPARATOR
OOD_FIELDS = ("%a", "%A", "%B", "%c", "%C", "%d", "%D", "%e", "%E", "%f", "%F", "%g", "%G", "%h", "%H", "%i", "%I",
              "%j", "%J", "%k", "%K", "%l", "%L", "%m", "%M", "%n", "%N", "%o", "%O", "%q", "%P", "%Q", "%r", "%S",
              "%t", "%T", "%u", "%U", "%v", "%V", "%w", "%W", "%x", "%X", "%y", "%Y", "%z", "%Z", "%b")


def test_open_ondemands_adapter_command_lines(slurm_names: dict[str, str], cluster: Cluster, tmp_path: Path) -> None:
    """submit_string, get_jobs, hold_job, release_job, delete_job: each with -M CLUSTER, as `call` adds it."""
    cluster_name = next(line.split("=", 1)[1] for line in cluster.conf.read_text().splitlines()
                        if line.startswith("ClusterName="))

    def call(*args: str, stdin: str = "") -> str:
        proc = subprocess.run([*args, "-M", cluster_name], env=slurm_names, cwd=tmp_path, input=stdin,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stderr == "", (args, proc.stderr)  # the adapter raises on stderr
        return proc.stdout

    script = "#!/bin/bash\nsleep 30\n"
    out = call("sbatch", "-H", "-D", str(tmp_path), "-J", "ood", "-o", "ood.out", "--export", "NONE", "--parsable",
               stdin=script)
    job_id = out.strip().split(";")[0]
    assert out.strip() == f"{job_id};{cluster_name}" and job_id.isdigit()

    def get_jobs(job: str) -> list[dict[str, str]]:
        fields = OOD_FIELDS
        output = call("squeue", "--all", "--states=all", "--noconvert", "-o", RS + US.join(fields), "-j", job)
        records = output.split(RS)[2:]  # advance_past_squeue_header!: "CLUSTER: name" and the header
        return [dict(zip(fields, r.rstrip("\n").strip().split(US), strict=True)) for r in records if r.strip()]

    [info] = get_jobs(job_id)
    assert (info["%A"], info["%j"], info["%t"], info["%r"]) == (job_id, "ood", "PD", "JobHeldUser")
    call("scontrol", "hold", job_id)  # hold_job of a pending job
    call("scontrol", "release", job_id)  # release_job
    wait_for(lambda: get_jobs(job_id)[0]["%t"] == "R", timeout=30)
    call("scancel", job_id)  # delete_job
    wait_for(lambda: get_jobs(job_id)[0]["%t"] in ("CA", "CG"), timeout=30)
    call("scancel", job_id)  # again: the job has ended, scancel says nothing and exits 0 (OOD raises otherwise)
    assert os.path.exists(tmp_path / "ood.out")
