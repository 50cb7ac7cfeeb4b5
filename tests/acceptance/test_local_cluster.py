"""`pslurm up`/`down` themselves: side-by-side clusters, idempotent up, nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import cli


def processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_two_clusters_side_by_side_then_down_leaves_nothing(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    try:
        for d in dirs:
            up = cli("pslurm", "up", "--nodes", "2", "--gpus-per-node", "1", "--state-dir", str(d), timeout=120)
            assert up.returncode == 0, up.stderr
            assert f"export PSLURM_CONF={d}/pslurm.conf" in up.stdout
        ports = {(d / "pslurm.conf").read_text().split("SlurmctldPort=")[1].split()[0] for d in dirs}
        assert len(ports) == 2  # each picked its own free port
        names = {(d / "pslurm.conf").read_text().split("ClusterName=")[1].split()[0] for d in dirs}
        assert len(names) == 2 and all(n.startswith("pslurm-") for n in names)  # job cgroups of their own
        for d in dirs:
            env = {**os.environ, "PSLURM_CONF": str(d / "pslurm.conf")}
            out = cli("psrun", "--gres=gpu:1", "sh", "-c", "echo $SLURM_JOB_ID $SLURM_CLUSTER_NAME", env=env,
                      cwd=tmp_path, check=True).stdout
            name = (d / "pslurm.conf").read_text().split("ClusterName=")[1].split()[0]
            assert out == f"1 {name}\n"  # its own store: job ids start at 1 in each
        again = cli("pslurm", "up", "--nodes", "2", "--gpus-per-node", "1", "--state-dir", str(dirs[0]))
        assert again.returncode == 0 and "already up" in again.stdout
        other = cli("pslurm", "up", "--nodes", "3", "--state-dir", str(dirs[0]))
        assert other.returncode == 1 and "already running" in other.stderr
    finally:
        for d in dirs:
            cli("pslurm", "down", "--state-dir", str(d), timeout=60)
    assert processes_mentioning(str(tmp_path)) == []
    assert not list((dirs[0] / "run").glob("*.pid"))
