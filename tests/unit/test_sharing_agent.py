"""The agent's side of GPU sharing: gres.conf shard/mps/Memory= and how counts are split over the
GPUs (as Slurm's gres_c_s.c), the environment of shared jobs (as gres_shard.c / gres_mps.c), MPS
control daemons reference counted (against a fake ``nvidia-cuda-mps-control`` first on PATH: the
binary is the boundary), and the simulated GPUs' meter reading what jobs declare."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pslurm.core.config import ConfigError, parse_gres_conf
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.sharing import GpuShare
from pslurm.core.states import JobState
from pslurm.nodeagent.environment import GpuSetup, job_environment
from pslurm.nodeagent.gpumon import UsageTracker
from pslurm.nodeagent.gpus import (
    GpuDevice,
    check_inventory,
    default_shares,
    format_gres_conf,
    inventory_from_gres_conf,
    split_evenly,
)
from pslurm.nodeagent.mps import MPS_CONTROL, MpsDaemons, MpsError
from pslurm.nodeagent.shares import GpuSharing, SetupError
from pslurm.nodeagent.simgpu import SimulatedGpus, declared_memory

# -- gres.conf ---------------------------------------------------------------------------------


def inventory(text: str, node: str | None = "c000") -> list[GpuDevice]:
    return inventory_from_gres_conf(parse_gres_conf(text, "gres.conf"), node)[0]


def test_gres_conf_reads_shard_mps_and_memory_lines() -> None:
    lines = parse_gres_conf("NodeName=c000 Name=gpu Count=2 Memory=16G\n"
                            "Name=shard Count=8 File=/dev/nvidia[0-1]\n"
                            "Name=mps Count=2k\n"
                            "Name=gpu File=/dev/nvidia0 Memory=40960\n", "g")
    assert lines[0].memory_mb == 16 * 1024 and lines[0].count == 2 and lines[0].node_names == ("c000",)
    assert (lines[1].name, lines[1].count, lines[1].files) == ("shard", 8, ("/dev/nvidia0", "/dev/nvidia1"))
    assert (lines[2].name, lines[2].count, lines[2].files) == ("mps", 2048, ())
    assert lines[3].memory_mb == 40960


@pytest.mark.parametrize("text, message", [
    ("Name=gpu Count=2 Memory=lots", "g:1: Memory=lots: expected a size such as 16G or 16384 (MB)"),
    ("Name=gpu Count=2 Memory=0", "g:1: Memory=0: expected a size such as 16G or 16384 (MB)"),
    ("Name=shard Count=4 Memory=1G", "g:1: Memory=1G: only a Name=gpu line has Memory="),
    ("Name=shard File=/dev/nvidia0", "g:1: Name=shard needs Count= (the shards its GPUs offer)"),
    ("Name=mps", "g:1: Name=mps needs Count= (the MPS units its GPUs offer)"),
    ("Name=mps Count=many", "g:1: Count=many: expected a whole number"),
    ("Name=shard Count=4g", "g:1: Count=4g: expected a whole number from 0 to 2147483647"),
    ("Name=gpu Count=1 Memory=4096T", "g:1: Memory=4096T: expected a size such as 16G or 16384 (MB)"),
])  # fmt: skip
def test_gres_conf_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_gres_conf(text, "g")
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_split_evenly_gives_the_remainder_to_the_last_gpus_as_slurm() -> None:
    assert split_evenly(10, 4) == [2, 2, 3, 3]
    assert split_evenly(8, 2) == [4, 4]
    assert split_evenly(1, 3) == [0, 0, 1]
    assert split_evenly(0, 2) == [0, 0]


def test_a_count_without_file_is_split_over_all_the_nodes_gpus() -> None:
    devs = inventory("Name=gpu Count=3 Memory=8G\nName=shard Count=10\nName=mps Count=300\n"
                     "NodeName=c001 Name=shard Count=99\n")
    assert [(d.shards, d.mps, d.memory_mb) for d in devs] == [(3, 100, 8192), (3, 100, 8192), (4, 100, 8192)]


def test_a_count_with_file_goes_to_those_gpus_split_evenly() -> None:
    devs = inventory("Name=gpu File=/dev/nvidia[0-3]\n"
                     "Name=shard Count=8 File=/dev/nvidia[1-2]\n"
                     "Name=shard Count=5 File=/dev/nvidia3\n"
                     "Name=mps Count=7 File=/dev/nvidia[0-1]\n")  # Slurm drops the 1 left over
    assert [d.shards for d in devs] == [0, 4, 4, 5]
    assert [d.mps for d in devs] == [3, 3, 0, 0]
    assert all(d.memory_mb is None for d in devs)


@pytest.mark.parametrize("text, message", [
    ("Name=gpu File=/dev/nvidia0\nName=shard Count=4 File=/dev/nvidia7\n",
     "gres.conf: Name=shard File=/dev/nvidia7: no GPU of this node has that File"),
    ("Name=gpu Count=2\nName=mps Count=100\nName=mps Count=100\n",
     "gres.conf: Name=mps: a line without File= must be the node's only mps line"),
    ("Name=gpu File=/dev/nvidia[0-1]\nName=shard Count=4\nName=shard Count=4 File=/dev/nvidia0\n",
     "gres.conf: Name=shard: a line without File= must be the node's only shard line"),
])  # fmt: skip
def test_shared_lines_that_do_not_fit_the_gpus_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{message}$"):
        inventory(text)


def test_node_gres_shares_where_gres_conf_has_none_and_the_inventory_check() -> None:
    devs = [GpuDevice(i, "gpu", None, None, None) for i in range(2)]
    node_gres = (GresRequest("gpu", None, 2), GresRequest("shard", None, 64), GresRequest("mps", None, 3))
    shared = default_shares(devs, node_gres)
    assert [(d.shards, d.mps) for d in shared] == [(32, 1), (32, 2)]
    configured = [replace(d, shards=4) for d in devs]  # gres.conf says 4 each: it wins
    assert [d.shards for d in default_shares(configured, node_gres)] == [4, 4]
    assert check_inventory(configured, 2, None, {"shard": 64}) == ("gres/shard count reported lower than "
                                                                   "configured (8 < 64)")
    assert check_inventory(shared, 2, None, {"shard": 64, "mps": 3}) is None


def test_print_gres_gives_the_shard_mps_and_memory_lines_back() -> None:
    files = "Name=gpu File=/dev/nvidia[0-1]\nName=shard Count=6 File=/dev/nvidia1\nName=mps Count=200\n"
    printed = format_gres_conf(inventory(files))
    assert printed == ("Name=gpu File=/dev/nvidia0\nName=gpu File=/dev/nvidia1\n"
                       "Name=shard Count=6 File=/dev/nvidia1\n"
                       "Name=mps Count=100 File=/dev/nvidia0\nName=mps Count=100 File=/dev/nvidia1\n")
    simulated = "Name=gpu Count=3 Memory=16G\nName=shard Count=10\n"
    printed = format_gres_conf(inventory(simulated))
    assert printed == "Name=gpu Count=1 Memory=16384M\n" * 3 + "Name=shard Count=10\n"
    for text in (files, simulated):  # read back, the same GPUs
        assert inventory(format_gres_conf(inventory(text))) == inventory(text)


# -- the environment ----------------------------------------------------------------------------


def shared_job(share: GpuShare | None, gpu: int = 1, env: dict[str, str] | None = None) -> JobRecord:
    gres = (GresRequest(share.kind, None, share.amount),) if share is not None else ()
    spec = JobSpec(name="t", user="u", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\n",
                   environment=env or {}, gres=gres)
    return JobRecord(job_id=5, spec=spec, state=JobState.RUNNING, node="c000",
                     gpu_indices=(gpu,) if share is not None else ())


SUBMITTERS = {name: "theirs" for name in (
    "SLURM_SHARDS_ON_NODE", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
    "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "PSLURM_GPU_MEM_MB", "PSLURM_SIMULATED_GPU_DIR", "CUDA_VISIBLE_DEVICES")}


def sharing_vars(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in SUBMITTERS or k in ("SLURM_GPUS_ON_NODE", "SLURM_JOB_GPUS")}


def test_a_job_without_a_share_inherits_none_of_the_submitters_sharing_variables() -> None:
    env = job_environment(shared_job(None, env=SUBMITTERS), "c000", "cl", [])
    assert sharing_vars(env) == {}  # nor SLURM_GPUS_ON_NODE: Slurm sets it only for a job with GPUs


def test_shard_job_env_is_slurms_with_the_gpu_as_for_a_gpu_job() -> None:
    job = shared_job(GpuShare("shard", 3), gpu=1, env=SUBMITTERS)
    setup = GpuSetup(share=GpuShare("shard", 3))
    assert sharing_vars(job_environment(job, "c000", "cl", [1], setup)) == {
        "SLURM_SHARDS_ON_NODE": "3", "CUDA_VISIBLE_DEVICES": "1", "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "1"}
    # behind a device cgroup the one GPU is device 0
    assert job_environment(job, "c000", "cl", [0], setup)["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize("units, count, percentage", [(25, 100, "25"), (50, 200, "25"), (33, 200, "16"),
                                                      (1, 1000, "1"), (7, 0, "7")])
def test_mps_job_env_thread_percentage_as_slurm_rounds_it(units: int, count: int, percentage: str) -> None:
    job = shared_job(GpuShare("mps", units), gpu=3, env=SUBMITTERS)
    setup = GpuSetup(share=GpuShare("mps", units), mps_count=count, mps_pipe="/s/mps/gpu3/pipe",
                     mps_log="/s/mps/gpu3/log")
    assert sharing_vars(job_environment(job, "c000", "cl", [3], setup)) == {
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": percentage, "CUDA_MPS_PIPE_DIRECTORY": "/s/mps/gpu3/pipe",
        "CUDA_MPS_LOG_DIRECTORY": "/s/mps/gpu3/log",
        "CUDA_VISIBLE_DEVICES": "0",  # the GPU's daemon shows its clients that one GPU as device 0
        "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "3"}


def test_gpumem_job_env_with_and_without_mps() -> None:
    job = shared_job(GpuShare("gpumem", 8192), gpu=2, env=SUBMITTERS)
    plain = GpuSetup(share=GpuShare("gpumem", 8192), simulated_dir="/s/gpusim/job5.0")
    assert sharing_vars(job_environment(job, "c000", "cl", [2], plain)) == {
        "PSLURM_GPU_MEM_MB": "8192", "PSLURM_SIMULATED_GPU_DIR": "/s/gpusim/job5.0", "CUDA_VISIBLE_DEVICES": "2",
        "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "2"}
    under_mps = GpuSetup(share=GpuShare("gpumem", 8192), mps_count=100, mps_pipe="/p", mps_log="/l")
    assert sharing_vars(job_environment(job, "c000", "cl", [2], under_mps)) == {
        "PSLURM_GPU_MEM_MB": "8192", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=8192M",
        "CUDA_MPS_PIPE_DIRECTORY": "/p", "CUDA_MPS_LOG_DIRECTORY": "/l", "CUDA_VISIBLE_DEVICES": "0",
        "SLURM_GPUS_ON_NODE": "1", "SLURM_JOB_GPUS": "2"}


# -- MPS control daemons against a fake binary ----------------------------------------------------


@dataclass
class FakeMps:
    """A fake ``nvidia-cuda-mps-control`` first on PATH: each call appends ``argv|CUDA_VISIBLE_DEVICES|
    pipe dir|log dir|stdin`` to ``log``; ``-d`` leaves a ``control`` file in the pipe directory, as a
    daemon leaves its pipe, and ``quit`` removes it."""

    bin_dir: Path
    log: Path

    def calls(self) -> list[list[str]]:
        return [line.split("|") for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def starts(self) -> list[list[str]]:
        return [c for c in self.calls() if c[0] == "-d"]

    def quits(self) -> list[list[str]]:
        return [c for c in self.calls() if c[4] == "quit"]

    def fail_with(self, message: str, code: int = 1) -> None:
        script = self.bin_dir / MPS_CONTROL
        script.write_text(f"#!/bin/sh\necho '{message}'\necho 'second line'\nexit {code}\n")


FAKE_SCRIPT = """#!/bin/sh
input=""
[ "$1" = "-d" ] || input=$(cat)
printf '%s|%s|%s|%s|%s\\n' "$*" "$CUDA_VISIBLE_DEVICES" "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY" \
    "$input" >> {log}
if [ "$1" = "-d" ]; then
    : > "$CUDA_MPS_PIPE_DIRECTORY/control"
elif [ "$input" = quit ]; then
    rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
fi
"""


def install_fake_mps(directory: Path, monkeypatch: pytest.MonkeyPatch) -> FakeMps:
    """Put the fake binary in ``directory``/bin, first on PATH (``directory`` must be reachable by
    whoever runs it)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = FakeMps(bin_dir, directory / "mps-calls.log")
    script = bin_dir / MPS_CONTROL
    script.write_text(FAKE_SCRIPT.format(log=fake.log))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    return fake


@pytest.fixture
def fake_mps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeMps:
    return install_fake_mps(tmp_path, monkeypatch)


GPUS = [GpuDevice(0, "gpu", None, None, None, uuid="GPU-aaaa", mps=100), GpuDevice(1, "gpu", None, None, None, mps=100)]


def test_mps_daemon_starts_for_the_first_user_and_quits_after_the_last(fake_mps: FakeMps, tmp_path: Path) -> None:
    daemons = MpsDaemons(str(tmp_path / "mps"), GPUS)
    dirs = daemons.acquire(0, "a")
    assert (dirs.pipe, dirs.log) == (str(tmp_path / "mps/gpu0/pipe"), str(tmp_path / "mps/gpu0/log"))
    assert daemons.acquire(0, "b") == dirs
    assert daemons.acquire(0, "b") == dirs  # the same user again: still two users
    daemons.acquire(1, "c")
    # one daemon per GPU, seeing that GPU only (its UUID where known), with its own directories
    assert fake_mps.starts() == [["-d", "GPU-aaaa", dirs.pipe, dirs.log, ""],
                                 ["-d", "1", str(tmp_path / "mps/gpu1/pipe"), str(tmp_path / "mps/gpu1/log"), ""]]
    assert stat.S_IMODE(os.stat(dirs.pipe).st_mode) == 0o755  # the jobs' users reach it
    assert daemons.in_use() == {0: 2, 1: 1}
    daemons.release(0, "a")
    daemons.release(0, "a")  # idempotent
    daemons.release(0, "nobody")  # never acquired: nothing
    assert fake_mps.quits() == []
    daemons.release(0, "b")
    assert fake_mps.quits() == [["", "GPU-aaaa", dirs.pipe, dirs.log, "quit"]]
    assert not os.path.exists(os.path.join(dirs.pipe, "control"))
    daemons.release(1, "c")
    assert len(fake_mps.quits()) == 2 and daemons.in_use() == {}
    daemons.acquire(0, "d")  # a later user starts it again
    assert len(fake_mps.starts()) == 3


def test_mps_missing_or_failing_binary_is_a_one_line_reason(fake_mps: FakeMps, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    daemons = MpsDaemons(str(tmp_path / "mps"), GPUS)
    fake_mps.fail_with("An instance of this daemon is already running")
    with pytest.raises(MpsError) as info:
        daemons.acquire(1, "a")
    assert str(info.value) == ("nvidia-cuda-mps-control -d failed for GPU 1 (exit 1): "
                               "An instance of this daemon is already running")
    assert daemons.in_use() == {}  # not counted: the next user tries again
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(MpsError, match="^nvidia-cuda-mps-control: not found; MPS jobs need NVIDIA's MPS$"):
        daemons.acquire(1, "a")


def test_mps_acquire_and_release_from_many_threads_start_and_quit_once(fake_mps: FakeMps, tmp_path: Path) -> None:
    daemons = MpsDaemons(str(tmp_path / "mps"), GPUS)
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def user(n: int) -> None:
        try:
            barrier.wait()
            daemons.acquire(0, n)
            barrier.wait()  # all eight hold it at once
            daemons.release(0, n)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=user, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert [c[0] for c in fake_mps.calls()] == ["-d", ""] and len(fake_mps.quits()) == 1


def test_a_daemon_left_by_a_crashed_agent_is_quit_on_recover(fake_mps: FakeMps, tmp_path: Path) -> None:
    crashed = MpsDaemons(str(tmp_path / "mps"), GPUS)
    crashed.acquire(1, "a")  # and the agent died
    fresh = MpsDaemons(str(tmp_path / "mps"), GPUS)
    fresh.recover()
    assert fake_mps.quits() == [["", "1", str(tmp_path / "mps/gpu1/pipe"), str(tmp_path / "mps/gpu1/log"), "quit"]]
    fresh.recover()  # nothing left: nothing more
    assert len(fake_mps.quits()) == 1


def test_sharing_setup_starts_mps_for_mps_jobs_and_gpumem_jobs_on_an_mps_gpu(
        fake_mps: FakeMps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    devices = [GpuDevice(0, "gpu", None, None, None, mps=100), GpuDevice(1, "gpu", None, None, None)]
    sharing = GpuSharing(devices, str(tmp_path), None)
    assert sharing.simulated is None  # no GPU with Memory=
    gpumem_on_mps = shared_job(GpuShare("gpumem", 1000), gpu=0)
    setup = sharing.setup(gpumem_on_mps, (5, 0), None)
    assert setup.mps_pipe == str(tmp_path / "mps/gpu0/pipe") and setup.mps_count == 100
    assert sharing.setup(shared_job(GpuShare("gpumem", 1000), gpu=1), (6, 0), None) == GpuSetup(
        share=GpuShare("gpumem", 1000))  # no MPS on GPU 1: watched only
    assert sharing.setup(shared_job(GpuShare("shard", 2), gpu=0), (7, 0), None).mps_pipe == ""
    assert len(fake_mps.starts()) == 1
    sharing.teardown(gpumem_on_mps, (5, 0))
    assert len(fake_mps.quits()) == 1
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SetupError, match="not found"):
        sharing.setup(shared_job(GpuShare("mps", 10), gpu=0), (8, 0), None)


# -- simulated GPUs -------------------------------------------------------------------------------


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(["sleep", "60"]) as proc:
        yield proc
        proc.kill()


def test_declared_memory_counts_live_pids_and_ignores_what_is_not_a_small_number(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    d = tmp_path / "job"
    d.mkdir()
    (d / str(sleeper.pid)).write_text("3000\n")
    (d / str(os.getpid())).write_text("500")
    (d / "999999999").write_text("4000")  # no such process
    (d / "notapid").write_text("100")
    secret = tmp_path / "secret"
    secret.write_text("7")
    dead = subprocess.Popen(["true"])
    dead.wait()
    (d / str(dead.pid)).write_text("800")  # its process has exited: the GPU freed its memory
    parent = os.getppid()
    (d / str(parent)).symlink_to(secret)  # never followed
    init = 1
    os.link(secret, d / str(init))  # a second link to a file: not read
    assert declared_memory(str(d), 7) == {sleeper.pid: 3000, os.getpid(): 500}
    for text in ("-5", "12abc", "0", "9" * 12, "1" * 40, ""):
        (d / str(os.getpid())).write_text(text)
        assert declared_memory(str(d), 7) == {sleeper.pid: 3000}, text
    os.unlink(d / str(os.getpid()))
    os.mkfifo(d / str(os.getpid()))  # not a regular file: not opened for reading (it would block)
    assert declared_memory(str(d), 7) == {sleeper.pid: 3000}
    assert declared_memory(str(tmp_path / "gone"), 7) == {}
    (tmp_path / "link").symlink_to(d)
    assert declared_memory(str(tmp_path / "link"), 7) == {}  # the directory itself is not followed either


def sleep_as(owner: tuple[int, int] | None) -> subprocess.Popen[bytes]:
    """``sleep 60`` as ``owner`` (uid, gid), or as this process's user."""
    def become() -> None:
        if owner is not None:
            os.setgid(owner[1])
            os.setuid(owner[0])

    return subprocess.Popen(["sleep", "60"], preexec_fn=become)  # noqa: PLW1509 - plain syscalls


def test_simulated_gpus_meter_jobs_directories(tmp_path: Path) -> None:
    devices = [GpuDevice(0, "gpu", None, None, None, memory_mb=16000), GpuDevice(1, "gpu", None, None, None),
               GpuDevice(2, "gpu", None, None, None, memory_mb=16000)]
    sim = SimulatedGpus(devices, str(tmp_path / "gpusim"))
    owner = (65534, 65534) if os.geteuid() == 0 else None
    assert sim.open_job((7, 0), [1], owner) is None  # no memory on GPU 1: not simulated
    path = sim.open_job((7, 1), [2], owner)
    assert path == str(tmp_path / "gpusim/job7.1")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o700 and (owner is None or (st.st_uid, st.st_gid) == owner)
    assert sim.sample([0, 1, 2]) == {0: (0.0, 0), 2: (0.0, 0)}
    with sleep_as(owner) as first, sleep_as(owner) as second:
        Path(path, str(first.pid)).write_text("3000")
        other = sim.open_job((8, 0), [2], owner)
        assert other is not None
        Path(other, str(second.pid)).write_text("1000")
        assert sim.sample([0, 1, 2]) == {0: (0.0, 0), 2: (100.0, 4000)}  # busy while memory is held
        assert sim.process_memory([2]) == {first.pid: 3000, second.pid: 1000}
        assert sim.process_memory([0]) == {}
        assert sim.health() is None
        sim.close_job((7, 1))
        sim.close_job((7, 1))  # idempotent
        assert not os.path.exists(path) and sim.sample([2]) == {2: (100.0, 1000)}
        first.kill()
        second.kill()
    SimulatedGpus(devices, str(tmp_path / "gpusim")).recover()  # a new agent: the old one's directories go
    assert not os.path.exists(tmp_path / "gpusim")


@pytest.mark.skipif(os.geteuid() != 0, reason="jobs of two users: their directories and processes need root")
def test_a_file_named_after_another_jobs_pid_is_ignored(tmp_path: Path) -> None:
    devices = [GpuDevice(0, "gpu", None, None, None, memory_mb=16000)]
    sim = SimulatedGpus(devices, str(tmp_path / "gpusim"))
    tracker = UsageTracker(sim)
    victim_dir, attacker_dir = sim.open_job((1, 0), [0], (65534, 65534)), sim.open_job((2, 0), [0], (65533, 65533))
    assert victim_dir is not None and attacker_dir is not None
    with subprocess.Popen(["sleep", "60"], start_new_session=True,
                          preexec_fn=lambda: (os.setgid(65534), os.setuid(65534))) as victim:  # noqa: PLW1509
        tracker.begin(1, [0], slice_mb=4000)
        tracker.set_session(1, victim.pid)
        Path(victim_dir, str(victim.pid)).write_text("1000")
        Path(attacker_dir, str(victim.pid)).write_text("900000")  # the other job's pid, in the attacker's own
        assert tracker.sample_all() == []  # the victim stays within its slice
        assert sim.process_memory([0]) == {victim.pid: 1000}
        victim.kill()


def test_usage_tracker_reports_a_job_over_its_slice_and_keeps_its_peak(tmp_path: Path) -> None:
    devices = [GpuDevice(0, "gpu", None, None, None, memory_mb=16000)]
    sim = SimulatedGpus(devices, str(tmp_path / "gpusim"))
    tracker = UsageTracker(sim)
    within, over = sim.open_job((1, 0), [0], None), sim.open_job((2, 0), [0], None)
    assert within is not None and over is not None
    # two jobs on one GPU, each a process in a session of its own (as the launcher starts jobs)
    with subprocess.Popen(["sleep", "60"], start_new_session=True) as one, \
            subprocess.Popen(["sleep", "60"], start_new_session=True) as two:
        for job_id, proc in ((1, one), (2, two)):
            tracker.begin(job_id, [0], slice_mb=4000)
            tracker.set_session(job_id, proc.pid)
        tracker.begin(3, [0])  # a whole-GPU job beside them (in a test): no slice, never over
        tracker.set_session(3, os.getsid(0))
        Path(within, str(one.pid)).write_text("3000")
        Path(over, str(two.pid)).write_text("5000")
        overruns = tracker.sample_all()
        assert [(o.job_id, o.used_mb, o.slice_mb, o.gpus) for o in overruns] == [(2, 5000, 4000, (0,))]
        assert (tracker.peak_memory(1), tracker.peak_memory(2)) == (3000, 5000)
        one.kill()
        two.kill()
    usage = tracker.end(2, 1, elapsed=1.0)  # a last sample, once its memory is freed: the peak stays
    assert usage is not None and usage.peak_gpu_memory_mb == 5000 and usage.mean_gpu_util is not None
    whole = tracker.end(3, 1, elapsed=1.0)  # the others' processes named, none of its own: it used none (issue 30)
    assert whole is not None and whole.peak_gpu_memory_mb == 0


def test_no_monitor_no_overruns() -> None:
    tracker = UsageTracker(None)
    tracker.begin(1, [0], slice_mb=1)
    assert tracker.sample_all() == [] and tracker.peak_memory(1) is None


# -- pslurm up's simulated GPUs -------------------------------------------------------------------


def test_pslurm_up_writes_simulated_gpus_with_memory_and_shards(tmp_path: Path) -> None:
    from pslurm.cluster.local import LocalCluster
    from pslurm.core.config import load_cluster_config, load_gres_conf

    cluster = LocalCluster(tmp_path / "with")
    config = cluster.write_config(2, 2, 4, 1000, None, gpu_memory_mb=16384, shards=4)
    assert (cluster.state_dir / "gres.conf").read_text().splitlines()[1:] == [
        "NodeName=c000 Name=gpu Count=2 Memory=16384", "NodeName=c000 Name=shard Count=8",
        "NodeName=c001 Name=gpu Count=2 Memory=16384", "NodeName=c001 Name=shard Count=8"]
    node = load_cluster_config(str(cluster.conf_path)).nodes["c001"]
    assert node.gres == config.nodes["c001"].gres == (GresRequest("gpu", None, 2), GresRequest("shard", None, 8))
    devices, _ = inventory_from_gres_conf(load_gres_conf(str(cluster.conf_path)), "c001")
    assert [(d.memory_mb, d.shards) for d in devices] == [(16384, 4), (16384, 4)]
    plain = LocalCluster(tmp_path / "without")
    plain.write_config(1, 2, 4, 1000, None)  # as before: no Memory=, no shards
    assert (plain.state_dir / "gres.conf").read_text().splitlines()[1:] == ["NodeName=c000 Name=gpu Count=2"]
