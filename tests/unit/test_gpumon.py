"""A job's GPU memory is its own processes' only (issue 30): against the NVML fake at the pynvml
boundary, a job whose processes the driver does not name while it names others' (a neighbour's, an
MPS server's) used none of the GPU's memory; only a driver that names no process at all (pids hidden,
in containers) leaves the devices' used memory to stand for the job's."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from pslurm.nodeagent.gpumon import GpuMonitor, UsageAccumulator, UsageTracker
from pslurm.nodeagent.gpus import discover_nvml
from tests.unit import test_gpus
from tests.unit.test_gpus import MB, FakeNvml

nvml = test_gpus.nvml  # the NVML fake at the pynvml boundary, as a fixture here too


@pytest.fixture
def neighbour() -> Iterator[int]:
    """Another job's process: a child in a session of its own."""
    with subprocess.Popen(["sleep", "30"], start_new_session=True) as other:
        yield other.pid
        other.kill()


def test_a_job_the_driver_does_not_name_used_none_of_the_gpus_memory(nvml: FakeNvml, neighbour: int) -> None:
    clock = iter([0.0, 2.0, 4.0, 6.0]).__next__
    tracker = UsageTracker(GpuMonitor(discover_nvml()), clock=clock)
    tracker.begin(1, [0], slice_mb=1000)
    tracker.set_session(1, os.getsid(0))  # this test process stands in for the job, which never touches the GPU
    g = nvml.gpus[0]
    g.util, g.used = 70, 6150
    g.procs = [SimpleNamespace(pid=neighbour, usedGpuMemory=6000 * MB)]  # a neighbour's (or an MPS server's)
    assert tracker.sample_all() == []  # the neighbour's 6000 MiB are not this job's: no overrun of its slice
    assert tracker.peak_memory(1) == 0
    g.procs.append(SimpleNamespace(pid=os.getpid(), usedGpuMemory=300 * MB))  # now it allocates
    tracker.sample_all()
    usage = tracker.end(1, 1, elapsed=6.0)
    assert usage is not None and usage.peak_gpu_memory_mb == 300  # never 6150 (the device) nor 6300


def test_only_a_driver_that_names_no_process_leaves_the_devices_memory(nvml: FakeNvml) -> None:
    tracker = UsageTracker(GpuMonitor(discover_nvml()), clock=iter([0.0, 1.0, 2.0]).__next__)
    tracker.begin(2, [1])
    tracker.set_session(2, os.getsid(0))
    nvml.gpus[1].used, nvml.gpus[1].procs = 2048, []  # pids hidden (a container): the device's memory is the job's
    tracker.sample_all()
    assert tracker.peak_memory(2) == 2048
    usage = tracker.end(2, 1, elapsed=2.0)
    assert usage is not None and usage.peak_gpu_memory_mb == 2048


def test_the_accumulator_keeps_the_own_processes_figure_once_the_driver_named_any() -> None:
    acc = UsageAccumulator(1, start=0.0)
    acc.add(1.0, {0: (50.0, 4000)}, None)  # nothing named yet: the device's 4000 stands in
    assert acc.peak_memory_mb == 4000
    acc.add(2.0, {0: (50.0, 4000)}, 0)  # named others only: the job used none
    assert acc.peak_memory_mb == 0
    acc.add(3.0, {0: (50.0, 4500)}, 500)
    assert acc.peak_memory_mb == 500
