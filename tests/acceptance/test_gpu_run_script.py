"""tests/gpu/run.sh, the whole GPU validation in one go (issue 22, 30).

On a machine without a GPU it says so, checks the rest (pslurm doctor on a local cluster of simulated
GPUs) and exits 0. On the GPU stand-in every GPU step runs as on a GPU host, so that a change of what
the commands print breaks CI, not the GPU day: the fake NVML of test_gpu_cluster.py (two H100s), the
doctor's stand-in CUDA driver (test_doctor.py), and tests/gpu/standin/'s nvidia-smi, MPS control daemon
and torch (which see the GPUs a process may open, hold what they allocate as NVML names it, and refuse an
allocation past an MPS pinned-memory limit as CUDA does); /dev/nvidia0 and 1 are device nodes in a
private mount namespace (an overlay on /dev: nothing of it outside the script)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.acceptance.test_gpu_cluster import write_fake_nvml
from tests.integration.test_doctor import FAKE_LIBCUDA

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "run.sh"
STANDIN = SCRIPT.parent / "standin"
BIN = Path(sys.executable).parent
GPUS = [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-standin-{i}", "minor": i, "bus": f"00000000:{i + 1:02X}:00.0",
         "used": 0, "util": 60} for i in range(2)]  # bus ids as the stand-in CUDA driver numbers its GPUs
STEPS = ("discovery", "up", "doctor", "isolation", "isolation (torch)", "binding", "sharing", "overrun", "mps",
         "usage", "packing")


def results(lines: list[str]) -> dict[str, str]:
    """step -> the rest of its line, for the lines that say PASS, FAIL or SKIP."""
    out = {}
    for line in lines:
        if line[:4] in ("PASS", "FAIL", "SKIP"):
            step_and_text = line[6:]
            step = next((s for s in sorted(STEPS + ("doctor --gpu",), key=len, reverse=True)
                         if step_and_text.startswith(s + " ")), step_and_text.split()[0])
            out[step] = f"{line[:4]} {step_and_text[len(step):].strip()}"
    return out


def test_without_a_gpu_it_says_so_and_checks_the_rest() -> None:
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("nvidia-smi is on this machine's PATH")
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=900,
                          env={"PATH": f"{BIN}:/usr/bin:/bin", "PSLURM_BIN": str(BIN)})
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[-1].startswith("summary: 3 passed, 0 failed, 8 skipped (no GPU on this machine)"), lines
    assert "no GPU on this machine (nvidia-smi not found): the GPU steps are skipped; checking the rest" in lines
    found = results(lines)
    assert found["doctor --gpu"] == "PASS says there is no GPU, and checks the rest", found
    assert "| doctor --gpu | PASS | says there is no GPU, and checks the rest |" in lines  # the table for the docs


@pytest.fixture
def standin(tmp_path: Path) -> dict[str, str]:
    """The stand-in's environment: its tools first on PATH, the fake NVML and torch on PYTHONPATH."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("the GPU stand-in makes device nodes in a mount namespace: run the tests as root (CI is)")
    tmp_path.chmod(0o755)
    env = write_fake_nvml(tmp_path, {"gpus": GPUS})
    (tmp_path / "nvml.json").chmod(0o666)
    (tmp_path / "fake_cuda.c").write_text(FAKE_LIBCUDA)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "fake_cuda.c")],
                   check=True)
    return {**env, "PATH": f"{STANDIN}:{BIN}:/usr/bin:/bin", "PSLURM_BIN": str(BIN),
            "PYTHONPATH": f"{STANDIN}:{env['PYTHONPATH']}", "PSLURM_LIBCUDA": str(tmp_path / "libcuda.so.1"),
            "FAKE_CUDA_DEVICES": "/dev/nvidia0:/dev/nvidia1", "TMPDIR": str(tmp_path), "HOME": str(tmp_path)}


def test_every_step_holds_on_the_gpu_standin(standin: dict[str, str], tmp_path: Path) -> None:
    old, upper, work = (tmp_path / name for name in ("olddev", "upper", "work"))
    for d in (old, upper, work):
        d.mkdir()
    namespace = (f"mount --bind /dev {old} && mount -t overlay overlay -o lowerdir=/dev,upperdir={upper},"
                 f"workdir={work} /dev && rm -f /dev/nvidia[0-9]* && mknod -m 666 /dev/nvidia0 c 195 0 && "
                 f"mknod -m 666 /dev/nvidia1 c 195 1 && for m in pts shm mqueue; do [ -d {old}/$m ] && "
                 f"mount --bind {old}/$m /dev/$m; done; exec bash {SCRIPT}")
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", namespace], capture_output=True,
                          text=True, timeout=1200, env={**standin, "PSLURM_GPU_PACKING": "1", "STEPS": "3000"})
    lines = done.stdout.splitlines()
    found = results(lines)
    assert done.returncode == 0 and all(found.get(step, "").startswith("PASS") for step in STEPS), \
        done.stdout + done.stderr
    assert lines[-1] == "summary: 11 passed, 0 failed, 0 skipped (2 x NVIDIA H100 80GB HBM3, driver 580.0-standin, " \
                        f"{'cgroup v2' if 'cgroup v2' in lines[-1] else 'cgroup v1'})", lines
    assert found["discovery"] == "PASS psd -G: 2 GPUs, every UUID nvidia-smi lists"
    assert found["doctor"].startswith("PASS 2 GPU(s) probed"), found
    assert found["binding"] == "PASS two jobs, two GPUs (UUID: GPU-standin-0 / UUID: GPU-standin-1)" or \
        found["binding"] == "PASS two jobs, two GPUs (UUID: GPU-standin-1 / UUID: GPU-standin-0)", found
    assert found["sharing"].startswith("PASS two --gpu-mem=6G jobs running at once on one GPU (IDX:"), found
    # MPS is configured: CUDA refused the 4 GiB in the job; it ends OUT_OF_MEMORY all the same, saying why
    step = found["overrun"].split("StepId=")[1].split()[0]
    assert found["overrun"] == ("PASS ended OUT_OF_MEMORY: SystemComment=GPU memory slice exceeded: MPS refused an "
                                "allocation past the slice of 2048 MiB (--gpu-mem); stderr: MPS refused an allocation "
                                f"of StepId={step} past the job's GPU memory slice of 2048 MiB (--gpu-mem, "
                                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). The job ends OUT_OF_MEMORY."), found
    state, _, seconds, peak, util = found["usage"].removeprefix("PASS psacct: ").split("|")
    assert state == "COMPLETED" and int(seconds) >= 15 and peak == "2412M" and util == "60.0%", found
    assert found["packing"].count("makespan") == 0 and found["packing"].count(" s, GPU util ") == 4, found
    assert "| overrun | PASS |" in done.stdout and "| step | result | what it saw |" in done.stdout
    print(done.stdout)  # shown with -s: what docs/gpu-validation.md quotes
