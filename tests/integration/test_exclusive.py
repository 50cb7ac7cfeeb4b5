"""--exclusive end to end on a ``pslurm up`` cluster: whole idle nodes, every CPU and GPU, nothing beside."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    state = tmp_path_factory.mktemp("excl") / "state"
    up = run("pslurm", "up", "--nodes", "2", "--cpus", "4", "--gpus-per-node", "2", "--memory", "3000",
             "--state-dir", str(state))
    assert up.returncode == 0, up.stderr
    try:
        yield {**os.environ, "PSLURM_CONF": str(state / "pslurm.conf")}
    finally:
        run("pslurm", "down", "--state-dir", str(state))


def node_of(job: str, env: dict[str, str]) -> str:
    for _ in range(100):
        out = run("psqueue", "-h", "-j", job, "-o", "%T %N", env=env).stdout.split()
        if out and out[0] == "RUNNING":
            return out[1]
        time.sleep(0.1)
    raise AssertionError(f"job {job} did not start: {out}")


def test_exclusive_jobs_take_idle_nodes_whole(env: dict[str, str]) -> None:
    other = run("psbatch", "--parsable", "-c", "1", "--wrap", "sleep 60", env=env).stdout.strip()
    busy = node_of(other, env)
    try:
        out = run("psrun", "--exclusive", "sh", "-c", 'echo "$SLURMD_NODENAME $SLURM_CPUS_ON_NODE $SLURM_JOB_GPUS '
                  '$SLURM_JOB_CPUS_PER_NODE"', env=env)
        assert out.returncode == 0, out.stderr
        name, cpus, gpus, per_node = out.stdout.split()
        assert name != busy and cpus == "4" and gpus == "0,1" and per_node == "4"

        whole = run("psbatch", "--parsable", "--exclusive=user", "--wrap", "sleep 60", env=env).stdout.strip()
        held = node_of(whole, env)
        assert held != busy
        shown = run("pscontrol", "show", "node", held, env=env).stdout
        assert "CPUAlloc=4 " in shown and "AllocMem=3000" in shown
        # nothing else starts beside it: a small job goes to the busy node, an exclusive one waits
        small = run("psrun", "-c", "1", "printenv", "SLURMD_NODENAME", env=env)
        assert small.stdout.strip() == busy, small.stderr
        waiting = run("psbatch", "--parsable", "--exclusive", "--wrap", "true", env=env).stdout.strip()
        time.sleep(1.5)
        assert run("psqueue", "-h", "-j", waiting, "-o", "%T", env=env).stdout.strip() == "PENDING"
        assert "OverSubscribe=NO" in run("pscontrol", "show", "job", waiting, env=env).stdout
        run("pscancel", waiting, whole, env=env)
    finally:
        run("pscancel", other, env=env)


def test_bad_exclusive_value_is_refused(env: dict[str, str]) -> None:
    out = run("psbatch", "--exclusive=nope", "--wrap", "true", env=env)
    assert out.returncode != 0 and "Invalid --exclusive specification" in out.stderr
