"""tests/gpu/run.sh, the whole GPU validation in one go: here, on a machine without a GPU, it says so,
checks the rest (pslurm doctor on a local cluster of simulated GPUs) and exits 0; on a GPU host the
same script runs every GPU step (docs/gpu-validation.md records what it printed there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "run.sh"


def test_the_gpu_validation_runs_in_one_go_and_says_what_held() -> None:
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=900,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PSLURM_BIN":
                               str(Path(sys.executable).parent)})
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[-1].startswith("summary: ") and " 0 failed" in lines[-1], lines
    steps = [line.split()[0] for line in lines if line.split()[0] in ("held", "FAILED", "skipped")]
    assert "FAILED" not in steps and steps.count("held") >= 3, lines
    if shutil.which("nvidia-smi") is None:
        assert "no GPU on this machine (nvidia-smi not found): the GPU steps are skipped; checking the rest" in lines
        assert any(line.startswith("held     doctor --gpu") for line in lines), lines
