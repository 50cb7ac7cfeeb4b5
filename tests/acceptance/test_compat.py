"""`pslurm compat install|uninstall`: Slurm's command names for pslurm's commands, and a program
written for Slurm run through them against a `pslurm up` cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pslurm.cli.common import SLURM_NAMES
from pslurm.cli.compat import executable_text
from tests.conftest import Cluster, cli, wait_for

REPO = Path(__file__).resolve().parents[2]


def slurm(cluster: Cluster, bin_dir: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A Slurm command by its name, found on a PATH with only ``bin_dir`` and the system's directories:
    nothing of this environment's bin (the executables must not need it)."""
    env = {**cluster.env, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    return subprocess.run(list(args), env=env, cwd=cwd, capture_output=True, text=True, timeout=60, input="")


def test_a_slurm_workflow_runs_through_the_installed_names(cluster: Cluster, tmp_path: Path) -> None:
    bin_dir = tmp_path / "slurm-bin"
    proc = cli("pslurm", "compat", "install", "--bin-dir", str(bin_dir), check=True)
    written = sorted(p.name for p in bin_dir.iterdir())
    assert written == sorted(n for n in SLURM_NAMES.values() if n != "salloc" or (bin_dir / "salloc").exists())
    assert f"pslurm: wrote {bin_dir / 'squeue'} (psqueue)" in proc.stdout
    if "salloc" not in written:  # no psalloc in this pslurm yet: said, not written
        assert "pslurm: salloc not written: this pslurm has no psalloc" in proc.stdout
    assert all(os.access(bin_dir / name, os.X_OK) for name in written)

    # submit, poll, list: as a pipeline written for Slurm does
    submitted = slurm(cluster, bin_dir, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    assert job.isdigit()

    def state() -> str:
        out = slurm(cluster, bin_dir, "sacct", "-X", "--parsable2", "--noheader", "-j", job, "-o", "JobID,State")
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert wait_for(lambda: state() == f"{job}|COMPLETED")
    listed = slurm(cluster, bin_dir, "squeue", "--json", "-t", "all", "-j", job)
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["meta"]["plugin"]["type"] == "openapi/v0.0.38"  # Slurm 22.05's squeue --json
    assert [(j["job_id"], j["job_state"]) for j in data["jobs"]] == [(int(job), "COMPLETED")]

    # the commands speak by Slurm's names
    bad = slurm(cluster, bin_dir, "squeue", "--bogus")
    assert bad.returncode == 1 and bad.stderr.startswith("squeue: error: unrecognized option '--bogus'")
    bad = slurm(cluster, bin_dir, "sbatch", "--bogus", "--wrap", "true")
    assert bad.returncode == 1 and bad.stderr.startswith("sbatch: error: ")
    assert slurm(cluster, bin_dir, "squeue", "-j", "x").stderr.startswith("squeue: error: ")
    assert cluster.run("psqueue", "--bogus").stderr.startswith("psqueue: error: ")  # its own name as ever

    proc = cli("pslurm", "compat", "uninstall", "--bin-dir", str(bin_dir), check=True)
    assert f"pslurm: removed {bin_dir / 'sbatch'}" in proc.stdout
    assert list(bin_dir.iterdir()) == []


def test_install_never_overwrites_a_file_it_did_not_write(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho the real squeue\n")
    refused = cli("pslurm", "compat", "install", "--bin-dir", str(bin_dir))
    assert refused.returncode == 1
    assert refused.stderr == (f"pslurm compat: error: not overwriting {bin_dir / 'squeue'}: not written by pslurm "
                              "compat install (--force replaces them)\n")
    assert [p.name for p in bin_dir.iterdir()] == ["squeue"]  # nothing written
    assert "the real squeue" in (bin_dir / "squeue").read_text()
    assert not (bin_dir / "sbatch").exists()
    forced = cli("pslurm", "compat", "install", "--bin-dir", str(bin_dir), "--force", check=True)
    assert "over a file it had not written" in forced.stdout
    assert "pslurm.cli.psqueue" in (bin_dir / "squeue").read_text()
    again = cli("pslurm", "compat", "install", "--bin-dir", str(bin_dir), check=True)  # its own: rewritten
    assert f"pslurm: wrote {bin_dir / 'squeue'} (psqueue)\n" in again.stdout
    (bin_dir / "sinfo").unlink()
    (bin_dir / "sinfo").write_text("mine\n")
    gone = cli("pslurm", "compat", "uninstall", "--bin-dir", str(bin_dir), check=True)
    assert f"pslurm: left {bin_dir / 'sinfo'}: not written by pslurm compat install" in gone.stdout
    assert [p.name for p in bin_dir.iterdir()] == ["sinfo"]
    assert cli("pslurm", "compat", "uninstall", "--bin-dir", str(bin_dir), check=True).stdout.startswith(
        f"pslurm: left {bin_dir / 'sinfo'}")


def test_an_interpreter_path_a_shebang_cannot_hold_goes_through_sh(tmp_path: Path) -> None:
    # a blank in the path (or one past the kernel's #! limit): /bin/sh runs the interpreter, Python the file
    spaced = tmp_path / "python env" / "bin"
    spaced.mkdir(parents=True)
    (spaced / "python").symlink_to(sys.executable)
    exe = tmp_path / "sinfo"
    exe.write_text(executable_text("sinfo", "pslurm.cli.psinfo:main", str(spaced / "python")))
    exe.chmod(0o755)
    assert exe.read_text().startswith("#!/bin/sh\n")
    proc = subprocess.run([str(exe), "--bogus"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1 and proc.stderr.startswith("sinfo: error: unrecognized option '--bogus'")
    with pytest.raises(Exception, match="quotes"):
        executable_text("sinfo", "pslurm.cli.psinfo:main", "/opt/py'thon env/python")
