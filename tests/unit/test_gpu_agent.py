"""The agent's GPU health polling and usage tracking against the NVML fake, and psacct's rendering."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.nodeagent.agent import Agent
from pslurm.nodeagent.gpumon import GpuMonitor, UsageTracker
from pslurm.nodeagent.gpus import discover_nvml
from tests.agentlink import RecordingLink
from tests.unit import test_gpus
from tests.unit.test_gpus import MB, FakeNvml

nvml = test_gpus.nvml  # the NVML fake at the pynvml boundary, as a fixture here too


def make_agent(tmp_path: Path, monitor: GpuMonitor | None) -> Agent:
    config = ClusterConfig(path=str(tmp_path / "pslurm.conf"), controller_port=1, spool_dir=str(tmp_path))
    node = NodeConfig("c000", port=2)
    devices = monitor and list(monitor.devices.values()) or []
    return Agent(config, node, devices, CgroupConfig(), RecordingLink(), monitor=monitor)


def test_health_polling_reports_ecc_lost_gpu_and_nvml_failure(nvml: FakeNvml, tmp_path: Path) -> None:
    agent = make_agent(tmp_path, GpuMonitor(discover_nvml()))
    assert agent.gpus.health() is None
    nvml.gpus[1].ecc_uncorrected = 3
    assert agent.gpus.health() == "gpu 1: 3 uncorrectable ECC error(s)"
    nvml.gpus[1].ecc_uncorrected = 0
    assert agent.gpus.health() is None  # level-triggered: a fixed GPU reports healthy again
    nvml.events.append((nvml.gpus[0], 48))
    assert agent.gpus.health() == "gpu 0: Xid 48 critical error"
    agent.gpus.monitor.forget_events()  # what a heartbeat does once the controller has the drain
    assert agent.gpus.health() is None
    nvml.gpus[0].lost = True
    assert agent.gpus.health() == "gpu 0: GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)"
    agent.gpus.monitor.close()


def test_health_when_nvml_cannot_be_loaded_is_a_drain_reason(nvml: FakeNvml, tmp_path: Path) -> None:
    devices = discover_nvml()
    nvml.lib_missing = True
    agent = make_agent(tmp_path, GpuMonitor(devices))
    assert agent.gpus.health() == ("GPU health check failed: AutoDetect=nvml but the NVML library could not "
                                    "be loaded: NVML Shared Library Not Found")


def test_no_monitor_no_health_and_gpu_seconds_only(tmp_path: Path) -> None:
    agent = make_agent(tmp_path, None)
    assert agent.gpus.health() is None
    tracker = UsageTracker(None)
    tracker.begin(7, [0, 1])
    tracker.sample_all()
    usage = tracker.end(7, 2, elapsed=10.0)
    assert usage is not None
    assert (usage.gpu_count, usage.gpu_seconds, usage.peak_gpu_memory_mb, usage.mean_gpu_util) == (2, 20.0, None,
                                                                                                 None)
    assert tracker.end(8, 0, elapsed=5.0) is None  # no GPUs, no GPU usage
    assert tracker.end(9, 1, elapsed=5.0).gpu_seconds == 5.0  # ended before tracking began


def test_usage_tracker_samples_the_jobs_own_processes(nvml: FakeNvml) -> None:
    clock = iter([0.0, 2.0, 4.0, 6.0]).__next__
    tracker = UsageTracker(GpuMonitor(discover_nvml()), clock=clock)
    tracker.begin(1, [1])
    tracker.set_session(1, os.getsid(0))  # this test process stands in for the job
    # Another job's process: a child in a session of its own (pid 1 may share ours inside a CI container).
    with subprocess.Popen(["sleep", "30"], start_new_session=True) as other:
        g = nvml.gpus[1]
        g.util, g.used = 80, 5000
        g.procs = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=3000 * MB),
                   SimpleNamespace(pid=other.pid, usedGpuMemory=MB)]
        tracker.sample_all()  # t=2
        g.util = 40
        tracker.sample_all()  # t=4
        usage = tracker.end(1, 1, elapsed=6.0)  # final sample at t=6, still 40 %
        other.kill()
    assert usage is not None
    assert usage.gpu_seconds == 6.0 and usage.peak_gpu_memory_mb == 3000
    assert usage.mean_gpu_util == pytest.approx((80 * 2 + 40 * 2 + 40 * 2) / 6)


def test_psacct_rendering() -> None:
    from pslurm.cli.psacct import account_fields, alloc_tres, format_elapsed, parse_fields, render
    from pslurm.core.gres import GresRequest
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.states import JobState

    job = JobRecord(job_id=12, state=JobState.COMPLETED, submit_time=100.0, start_time=100.0, end_time=3800.0,
                    node="c001", partition="gpu",
                    spec=JobSpec(name="train", user="ana", uid=0, gid=0, workdir="/", partition="gpu", ntasks=1,
                                 cpus_per_task=4, mem_mb=1000, gres=(GresRequest("gpu", "a100", 2),)),
                    gpu_seconds=7400.0, peak_gpu_memory_mb=30000, mean_gpu_util=87.25)
    assert alloc_tres(job) == "billing=4,cpu=4,gres/gpu=2,gres/gpu:a100=2,mem=1000M,node=1"  # by name, as sacct
    assert format_elapsed(3700) == "01:01:40" and format_elapsed(90061) == "1-01:01:01"
    fields = account_fields(now=4000.0)
    cols = parse_fields("JobID,JobName%4,State,GPUSeconds,GPUMemPeak,GPUUtil,Elapsed", list(fields))
    assert render([job], cols, fields, True, "|", trailing=False) == [
        "JobID|JobName|State|GPUSeconds|GPUMemPeak|GPUUtil|Elapsed",
        "12|train|COMPLETED|7400|30000M|87.2%|01:01:40",
    ]
    table = render([job], cols, fields, True, None, trailing=False)
    assert table[0] == "JobID        JobN      State GPUSeconds GPUMemPeak    GPUUtil    Elapsed"
    assert table[2] == "12           tra+  COMPLETED       7400     30000M      87.2%   01:01:40"
    with pytest.raises(ValueError, match='Invalid field requested: "Bogus"'):
        parse_fields("JobID,Bogus", list(fields))
    pending = JobRecord(job_id=13, state=JobState.PENDING,
                        spec=JobSpec(name="p", user="ana", uid=0, gid=0, workdir="/"))
    assert fields["alloctres"](pending) == "" and fields["alloccpus"](pending) == "1"  # the CPUs it asks
    assert fields["gpuseconds"](pending) == "" and fields["nodelist"](pending) == "None assigned"


def test_job_environment_has_slurms_task_and_account_variables() -> None:
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.states import JobState
    from pslurm.nodeagent.environment import job_environment

    stale = {"SLURM_JOB_ACCOUNT": "theirs", "SLURM_NTASKS_PER_NODE": "8", "SLURM_OPEN_MODE": "a"}
    spec = JobSpec(name="j", user="u", uid=1, gid=1, workdir="/w", script="#!/bin/sh\n", ntasks=2, account="lab",
                   environment=dict(stale), open_mode="truncate")
    env = job_environment(JobRecord(job_id=14, spec=spec, state=JobState.RUNNING), "c000", "cl", [])
    assert env["SLURM_JOB_ACCOUNT"] == "lab" and env["SLURM_OPEN_MODE"] == "t"
    assert env["SLURM_NTASKS"] == env["SLURM_NPROCS"] == env["SLURM_TASKS_PER_NODE"] == "2"
    assert env["SLURM_JOB_NUM_NODES"] == env["SLURM_NNODES"] == "1"
    assert "SLURM_NTASKS_PER_NODE" not in env  # --ntasks-per-node has no effect here yet
    bare = JobSpec(name="j", user="u", uid=1, gid=1, workdir="/w", script="#!/bin/sh\n", environment=dict(stale))
    env = job_environment(JobRecord(job_id=15, spec=bare, state=JobState.RUNNING), "c000", "cl", [])
    assert not {"SLURM_JOB_ACCOUNT", "SLURM_NTASKS_PER_NODE", "SLURM_OPEN_MODE"} & set(env)
    assert env["SLURM_TASKS_PER_NODE"] == "1"
