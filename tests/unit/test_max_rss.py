"""MaxRSS (sacct's, issue #11): the job's memory cgroup's peak as the agent reads it, its way to the
controller in the run's end, and the job's record."""

from __future__ import annotations

import pathlib

import pytest

from pslurm.controller.servicer import _run_end
from pslurm.core import lifecycle
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from pslurm.nodeagent.cgroups import JobCgroup
from pslurm.nodeagent.controllers import _usage_pb
from pslurm.nodeagent.gpumon import JobGpuUsage
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb


@pytest.mark.parametrize("name", ["memory.max_usage_in_bytes", "memory.peak"])
def test_max_rss_is_read_from_the_memory_directory(tmp_path: pathlib.Path, name: str) -> None:
    freezer, memory = tmp_path / "freezer", tmp_path / "memory"
    freezer.mkdir()
    memory.mkdir()
    (freezer / "freezer.state").write_text("THAWED\n")
    (memory / name).write_text("52428800\n")
    assert JobCgroup([str(freezer), str(memory)]).max_rss_bytes() == 52428800


def test_no_memory_cgroup_or_no_file_is_not_measured(tmp_path: pathlib.Path) -> None:
    (tmp_path / "freezer.state").write_text("THAWED\n")
    (tmp_path / "memory.oom_control").write_text("oom_kill 0\n")  # a memory cgroup on a kernel without the file
    assert JobCgroup(str(tmp_path)).max_rss_bytes() is None
    assert JobCgroup(str(tmp_path / "gone")).max_rss_bytes() is None  # removed already
    (tmp_path / "memory.max_usage_in_bytes").write_text("garbage\n")
    assert JobCgroup(str(tmp_path)).max_rss_bytes() is None


def test_the_end_carries_max_rss_with_or_without_gpus() -> None:
    assert _usage_pb(None, None) is None
    cpu_only = _usage_pb(None, 52428800 + 1000)
    assert cpu_only is not None and cpu_only.max_rss_kb == 51200 and cpu_only.gpu_count == 0
    assert not cpu_only.HasField("peak_gpu_memory_mb")
    gpus = _usage_pb(JobGpuUsage(2, 20.0, 3000, 50.0), 1024)
    assert gpus is not None and (gpus.gpu_count, gpus.gpu_seconds, gpus.peak_gpu_memory_mb, gpus.max_rss_kb) == (
        2, 20.0, 3000, 1)
    unmeasured = _usage_pb(JobGpuUsage(1, 5.0), None)
    assert unmeasured is not None and not unmeasured.HasField("max_rss_kb")


def _end(usage: pb.JobUsage | None) -> pb.JobEndedRequest:
    msg = pb.JobEndedRequest(job_id=5, node="c000", state=convert.job_state_to_pb(JobState.COMPLETED), end_time=9.0)
    if usage is not None:
        msg.usage.CopyFrom(usage)
    return msg


def test_the_controller_keeps_max_rss_and_the_gpu_fields_as_before() -> None:
    assert _run_end(_end(None), "c000").usage is None
    assert _run_end(_end(pb.JobUsage(max_rss_kb=51200)), "c000").usage == {"max_rss_kb": 51200}
    assert _run_end(_end(pb.JobUsage(gpu_count=1, gpu_seconds=4.0)), "c000").usage == {
        "gpu_seconds": 4.0, "peak_gpu_memory_mb": None, "mean_gpu_util": None}
    both = _run_end(_end(pb.JobUsage(gpu_count=1, gpu_seconds=4.0, peak_gpu_memory_mb=10, max_rss_kb=7)), "c000")
    assert both.usage == {"gpu_seconds": 4.0, "peak_gpu_memory_mb": 10, "mean_gpu_util": None, "max_rss_kb": 7}


def test_finish_records_it_and_a_requeue_clears_it() -> None:
    job = lifecycle.JobFlags(5, JobState.RUNNING, node="c000")
    change = lifecycle.finish(job, "c000", 0, JobState.COMPLETED, 0, 0, 9.0, {"max_rss_kb": 51200})
    assert change.values["max_rss_kb"] == 51200
    assert lifecycle.requeue(lifecycle.JobFlags(5, JobState.COMPLETED), 10.0, "again").values["max_rss_kb"] is None


def test_the_record_carries_it_on_the_wire() -> None:
    spec = JobSpec(name="a", user="ana", uid=1, gid=1, workdir="/")
    measured = JobRecord(job_id=5, spec=spec, state=JobState.COMPLETED, max_rss_kb=51200)
    assert convert.job_from_pb(convert.job_to_pb(measured)).max_rss_kb == 51200
    unmeasured = convert.job_to_pb(JobRecord(job_id=6, spec=spec, state=JobState.COMPLETED))
    assert not unmeasured.HasField("max_rss_kb") and convert.job_from_pb(unmeasured).max_rss_kb is None


def test_cpu_time_in_all_user_and_system_from_v2_and_v1_and_its_way_to_the_record(tmp_path: pathlib.Path) -> None:
    """sacct's TotalCPU, UserCPU and SystemCPU: the job's cgroup's cpu.stat (v2) or cpuacct files (v1),
    carried in the run's end and kept on the job's record."""
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 2466000\nuser_usec 2400000\nsystem_usec 66000\nnr_periods 0\n")
    assert JobCgroup(str(v2)).cpu_times() == (2.466, 2.4, 0.066)
    assert JobCgroup(str(v2)).cpu_seconds() == 2.466
    v1 = tmp_path / "cpuacct"
    v1.mkdir()
    for name, ns in (("cpuacct.usage", 3_000_000_000), ("cpuacct.usage_user", 2_000_000_000),
                     ("cpuacct.usage_sys", 1_000_000_000)):
        (v1 / name).write_text(f"{ns}\n")
    assert JobCgroup(str(v1)).cpu_times() == (3.0, 2.0, 1.0)
    assert JobCgroup(str(tmp_path / "gone")).cpu_times() is None
    usage = _usage_pb(None, None, (2.466, 2.4, 0.066))
    assert usage is not None and (usage.total_cpu_usec, usage.user_cpu_usec, usage.system_cpu_usec) == (
        2466000, 2400000, 66000)
    end = _run_end(_end(usage), "c000")
    assert end.usage == {"total_cpu_seconds": 2.466, "user_cpu_seconds": 2.4, "system_cpu_seconds": 0.066}
