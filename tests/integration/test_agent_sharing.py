"""GPU sharing through the agent with its real launcher and real jobs (a recording link): a shard
job's environment; mps jobs share their GPU's MPS control daemon (a fake ``nvidia-cuda-mps-control``
first on PATH), started for the first and quit after the last; a ``--gpu-mem`` job on a simulated
GPU that declares more than its slice ends OUT_OF_MEMORY with the reason, one within it completes,
both with their peak recorded; heartbeats carry the GPUs' use. As root the jobs run as ``nobody``."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from pslurm.nodeagent.agent import Agent
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.link import RunEnded
from tests.agentlink import RecordingLink, ended
from tests.conftest import wait_for
from tests.integration.conftest import Place
from tests.unit.test_sharing_agent import FakeMps, install_fake_mps

USAGE_INTERVAL = 0.05  # seconds: the agent's usage loop, shortened for the tests


MakeAgent = Callable[..., tuple[Agent, RecordingLink]]


@pytest.fixture
def make_agent(place: Place) -> Iterator[MakeAgent]:
    agents: list[tuple[Agent, RecordingLink]] = []

    def make(devices: list[GpuDevice], sample: bool = False) -> tuple[Agent, RecordingLink]:
        config = ClusterConfig(path=str(place.top / "pslurm.conf"), cluster_name=f"share{os.getpid()}",
                               controller_port=1, spool_dir=str(place.top / "spool"), kill_wait=1)
        controller = RecordingLink()
        agent = Agent(config, NodeConfig("c000", port=2, cpus=2), devices, CgroupConfig(), controller)
        agents.append((agent, controller))
        agent.recover()  # what psd does before it serves
        if sample:
            threading.Thread(target=agent.usage_loop, args=(USAGE_INTERVAL,), daemon=True).start()
        return agent, controller

    yield make
    for agent, controller in agents:
        controller.up = False
        agent.stop(grace=5)


def job(place: Place, job_id: int, script: str, share: str, gpu: int = 0,
        env: dict[str, str] | None = None, interactive: bool = False) -> JobRecord:
    """A batch job with one GRES share (``shard:2``) placed on GPU ``gpu``, run in ``place.home``
    (``interactive``: psrun's job, the script run by ``sh -c``, its output kept for psrun)."""
    name, count = share.split(":")
    spec = JobSpec(name="t", user=place.user, uid=place.uid, gid=place.gid, workdir=str(place.home),
                   script=None if interactive else "#!/bin/sh\n" + script,
                   argv=("sh", "-c", script) if interactive else (), interactive=interactive,
                   environment={"PATH": os.environ["PATH"], **(env or {})}, gres=(GresRequest(name, None, int(count)),))
    return JobRecord(job_id=job_id, spec=spec, state=JobState.RUNNING, node="c000", gpu_indices=(gpu,))


def state(end: RunEnded) -> JobState:
    return end.state


def job_env(place: Place, job_id: int) -> dict[str, str]:
    path = place.home / f"env.{job_id}"
    wait_for(path.exists, timeout=15, interval=0.02)
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


DUMP_ENV = "env > env.$SLURM_JOB_ID.tmp && mv env.$SLURM_JOB_ID.tmp env.$SLURM_JOB_ID\n"  # whole once there
WAIT_GO = "while [ ! -e go.$SLURM_JOB_ID ]; do sleep 0.02; done\n"
SHARING_VARS = ("SLURM_SHARDS_ON_NODE", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PIPE_DIRECTORY",
                "CUDA_MPS_LOG_DIRECTORY", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "PSLURM_GPU_MEM_MB",
                "PSLURM_SIMULATED_GPU_DIR")


def test_a_shard_jobs_environment_and_no_gpu_use_without_a_meter(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent([GpuDevice(i, "gpu", None, None, None, shards=4) for i in range(2)])
    submitters = dict.fromkeys(SHARING_VARS, "theirs")
    agent.launch(job(place, 1, DUMP_ENV, "shard:2", gpu=1, env=submitters))
    assert state(ended(controller, 1, timeout=15)) == JobState.COMPLETED
    env = job_env(place, 1)
    assert {k: v for k, v in env.items() if k in SHARING_VARS} == {"SLURM_SHARDS_ON_NODE": "2"}
    assert (env["CUDA_VISIBLE_DEVICES"], env["SLURM_JOB_GPUS"], env["SLURM_GPUS_ON_NODE"]) == ("1", "1", "1")
    agent.heartbeats.beat()
    assert list(controller.beats[-1].gpu_use) == []  # GPUs without NVML or Memory= are not measured


def test_mps_jobs_share_their_gpus_daemon_started_first_and_quit_last(make_agent: MakeAgent, place: Place,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    fake: FakeMps = install_fake_mps(place.top, monkeypatch)
    agent, controller = make_agent([GpuDevice(0, "gpu", None, None, None, uuid="GPU-0000-fake", mps=100),
                                    GpuDevice(1, "gpu", None, None, None, mps=100)])
    agent.launch(job(place, 11, DUMP_ENV + WAIT_GO, "mps:25", gpu=0))
    agent.launch(job(place, 12, DUMP_ENV + WAIT_GO, "mps:50", gpu=0))
    first, second = job_env(place, 11), job_env(place, 12)
    pipe, log = (str(place.top / f"spool/c000/mps/gpu0/{d}") for d in ("pipe", "log"))
    assert fake.starts() == [["-d", "GPU-0000-fake", pipe, log, ""]]  # one daemon for both, seeing GPU 0 only
    for env, percentage in ((first, "25"), (second, "50")):
        assert {k: v for k, v in env.items() if k in SHARING_VARS} == {
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": percentage, "CUDA_MPS_PIPE_DIRECTORY": pipe,
            "CUDA_MPS_LOG_DIRECTORY": log}
        assert env["CUDA_VISIBLE_DEVICES"] == "0"
    (place.home / "go.11").touch()
    assert state(ended(controller, 11, timeout=15)) == JobState.COMPLETED
    assert fake.quits() == []  # job 12 still uses it
    (place.home / "go.12").touch()
    assert state(ended(controller, 12, timeout=15)) == JobState.COMPLETED
    assert fake.quits() == [["", "GPU-0000-fake", pipe, log, "quit"]]


def test_an_mps_job_without_nvidias_mps_fails_to_launch_with_the_reason(make_agent: MakeAgent, place: Place,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    agent, controller = make_agent([GpuDevice(0, "gpu", None, None, None, mps=100)])
    monkeypatch.setenv("PATH", str(place.top / "nothing-here"))
    agent.launch(job(place, 21, "echo ran > ran\n", "mps:10"))
    end = ended(controller, 21, timeout=15)
    reason = "nvidia-cuda-mps-control: not found; MPS jobs need NVIDIA's MPS"
    assert (state(end), end.launch_failure) == (JobState.FAILED, reason)
    assert (place.home / "slurm-21.out").read_text() == f"slurmstepd: error: {reason}\n"
    assert not (place.home / "ran").exists()


SIMULATED = [GpuDevice(0, "gpu", None, None, None, memory_mb=16384), GpuDevice(1, "gpu", None, None, None)]


def test_a_gpumem_job_over_its_slice_is_killed_out_of_memory(make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent(SIMULATED, sample=True)
    script = ('echo "$PSLURM_SIMULATED_GPU_DIR" > simdir\n'
              'echo 9000 > "$PSLURM_SIMULATED_GPU_DIR/$$"\n'
              "sleep 60\n")
    agent.launch(job(place, 31, script, "gpumem:8192"))
    end = ended(controller, 31, timeout=20)
    assert state(end) == JobState.OUT_OF_MEMORY
    assert end.comment == "GPU memory slice exceeded: used 9000 MiB of 8192 MiB (--gpu-mem)"
    assert end.gpu_usage is not None and end.gpu_usage.peak_gpu_memory_mb == 9000  # its profile for --gpu-mem=auto
    assert (place.home / "slurm-31.out").read_text() == (
        "slurmstepd: error: Detected GPU memory use of 9000 MiB on GPU 0 by StepId=31.batch, over the job's "
        "slice of 8192 MiB (--gpu-mem). The job is killed.\n")
    simdir = (place.home / "simdir").read_text().strip()
    assert simdir == str(place.top / "spool/c000/gpusim/job31.0") and not os.path.exists(simdir)


def test_a_gpumem_job_within_its_slice_completes_with_its_peak_and_heartbeats_carry_gpu_use(
        make_agent: MakeAgent, place: Place) -> None:
    agent, controller = make_agent(SIMULATED, sample=True)
    script = ('echo 3000 > "$PSLURM_SIMULATED_GPU_DIR/$$"\n'
              'stat -c %U "$PSLURM_SIMULATED_GPU_DIR" > owner\n'
              'echo "$PSLURM_GPU_MEM_MB" > slice\n' + WAIT_GO)
    agent.launch(job(place, 41, script, "gpumem:8192"))
    wait_for(lambda: agent.gpus.usage.peak_memory(41) == 3000, timeout=15, interval=0.02)
    agent.heartbeats.beat()
    assert [(u.index, u.memory_used_mb, u.util) for u in controller.beats[-1].gpu_use] == [(0, 3000, 100.0)]
    assert (place.home / "owner").read_text().strip() == place.user  # the job's own directory
    assert (place.home / "slice").read_text().strip() == "8192"
    (place.home / "go.41").touch()
    end = ended(controller, 41, timeout=15)
    assert end.gpu_usage is not None
    assert (state(end), end.comment, end.gpu_usage.peak_gpu_memory_mb) == (JobState.COMPLETED, "", 3000)
    agent.heartbeats.beat()
    assert [(u.index, u.memory_used_mb, u.util) for u in controller.beats[-1].gpu_use] == [(0, 0, 0.0)]


REFUSED = ("echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity "
           "of 2.00 GiB' >&2; exit 1\n")


def test_a_slice_that_mps_refused_ends_out_of_memory_saying_so(make_agent: MakeAgent, place: Place,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """With MPS configured a --gpu-mem slice is MPS's pinned-memory limit: CUDA refuses past it in the job
    (here: its words, as torch prints them, and exit 1); the job ends OUT_OF_MEMORY as an overrun does."""
    install_fake_mps(place.top, monkeypatch)
    agent, controller = make_agent([GpuDevice(0, "gpu", None, None, None, mps=100)])
    agent.launch(job(place, 51, REFUSED, "gpumem:2048"))
    end = ended(controller, 51, timeout=15)
    comment = "GPU memory slice exceeded: MPS refused an allocation past the slice of 2048 MiB (--gpu-mem)"
    assert (state(end), end.exit_code, end.comment) == (JobState.OUT_OF_MEMORY, 1, comment)
    assert (place.home / "slurm-51.out").read_text().endswith(
        "GPU 0 has a total capacity of 2.00 GiB\nslurmstepd: error: MPS refused an allocation of StepId=51.batch past "
        "the job's GPU memory slice of 2048 MiB (--gpu-mem, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). The job ends "
        "OUT_OF_MEMORY.\n")
    agent.launch(job(place, 52, "echo 'ValueError: bad input' >&2; exit 1\n", "gpumem:2048"))
    assert (state(end := ended(controller, 52, timeout=15)), end.comment) == (JobState.FAILED, "")  # its own bug
    agent.launch(job(place, 53, REFUSED.replace("exit 1", "exit 0"), "gpumem:2048"))
    assert state(ended(controller, 53, timeout=15)) == JobState.COMPLETED  # it caught the error and went on
    agent.launch(job(place, 54, REFUSED, "gpumem:2048", interactive=True))  # psrun's: its stderr goes to psrun
    assert (state(end := ended(controller, 54, timeout=15)), end.comment) == (JobState.OUT_OF_MEMORY, comment)
    agent.launch(job(place, 55, REFUSED, "mps:50"))  # no slice, no refusal of one: CUDA's error is the job's
    assert state(ended(controller, 55, timeout=15)) == JobState.FAILED
