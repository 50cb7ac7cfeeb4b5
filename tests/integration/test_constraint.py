"""--constraint end to end on a ``pslurm up --conf`` cluster whose nodes have Features=."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
CONF = """ClusterName=feat
NodeName=a1 CPUs=2 RealMemory=500 Features=a100,ib
NodeName=h1 CPUs=2 RealMemory=500 Features=h100
PartitionName=p Nodes=a1,h1 Default=YES
"""


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("feat")
    (root / "pslurm.conf").write_text(CONF)
    up = run("pslurm", "up", "--conf", str(root / "pslurm.conf"), "--state-dir", str(root / "state"))
    assert up.returncode == 0, up.stderr
    try:
        yield {**os.environ, "PSLURM_CONF": str(root / "state" / "pslurm.conf")}
    finally:
        run("pslurm", "down", "--state-dir", str(root / "state"))


@pytest.mark.parametrize(("constraint", "node"), [("h100", "h1"), ("a100&ib", "a1"), ("v100|h100", "h1")])
def test_jobs_run_on_nodes_with_the_features(env: dict[str, str], constraint: str, node: str) -> None:
    for _ in range(3):
        out = run("psrun", f"--constraint={constraint}", "printenv", "SLURMD_NODENAME", env=env)
        assert out.returncode == 0 and out.stdout.strip() == node, out.stderr


def test_a_constraint_no_node_meets_is_refused(env: dict[str, str]) -> None:
    out = run("psbatch", "-C", "v100", "--wrap", "true", env=env)
    assert out.returncode != 0 and "Invalid feature specification" in out.stderr
    out = run("psbatch", "-C", "a100&h100", "--wrap", "true", env=env)
    assert out.returncode != 0 and "Invalid feature specification" in out.stderr


def test_features_are_shown(env: dict[str, str]) -> None:
    node = run("pscontrol", "show", "node", "a1", env=env).stdout
    assert "AvailableFeatures=a100,ib\n   ActiveFeatures=a100,ib" in node  # two lines, as scontrol 22.05
    assert run("psinfo", "-h", "-N", "-o", "%N %f", env=env).stdout.split() == ["a1", "a100,ib", "h1", "h100"]
    job = run("psbatch", "--parsable", "-H", "-C", "a100", "--wrap", "true", env=env).stdout.strip()
    assert "Features=a100" in run("pscontrol", "show", "job", job, env=env).stdout
    run("pscancel", job, env=env)
