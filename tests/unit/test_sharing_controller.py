"""GPU sharing in the controller: admission of shares, --gpu-mem=auto from accounting, the end an
agent gives a reason for, and each GPU's usage as psinfo and pscontrol show it. Real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.auth.credential import Identity
from pslurm.cli.gpushow import gpu_mem, gres_used
from pslurm.controller.admission import admit
from pslurm.controller.jobs import JobService
from pslurm.controller.monitor import NodeMonitor, Run
from pslurm.controller.store import RunEnd, Store
from pslurm.core.config import ClusterConfig, parse_slurm_conf
from pslurm.core.gres import GresRequest, parse_gres
from pslurm.core.jobspec import JobSpec, SpecError
from pslurm.core.node import GpuInfo
from pslurm.core.sharing import GpuShare, share_of, sharing_error
from pslurm.core.states import JobState, NodeState
from tests.conftest import store_with_nodes

CONF = ("NodeName=c000 NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2,shard:8,mps:200\n"
        "NodeName=c001 NodeAddr=127.0.0.1 Port=7001 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "PartitionName=p Nodes=c[000-001] Default=YES\n")
ROOT = Identity(0, 0)
GPUS = [GpuInfo(0, memory_mb=16000, shards=4, mps=100), GpuInfo(1, memory_mb=16000, shards=4, mps=100)]


def spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="train", user="root", uid=0, gid=0, workdir="/tmp",
                                     script="#!/bin/sh\ntrue\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


@pytest.fixture
def config() -> ClusterConfig:
    return parse_slurm_conf(CONF)


@pytest.fixture
def store(tmp_path: Path, config: ClusterConfig):  # type: ignore[no-untyped-def]
    s = store_with_nodes(tmp_path / "sharing.db", config, up=())
    yield s
    s.close()


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def _bell() -> None:
    pass


@pytest.fixture
def monitor(config, store):  # type: ignore[no-untyped-def]
    m = NodeMonitor(config, store, _bell, Clock())
    m.register("c000", "127.0.0.1", 7000, GPUS, [], "", "devices")
    return m


@pytest.fixture
def service(config, store, monitor):  # type: ignore[no-untyped-def]
    return JobService(config, store, agents=None, reschedule=_bell, clock=Clock())  # type: ignore[arg-type]


# -- the request ------------------------------------------------------------------------------


def test_a_share_is_one_kind_and_never_beside_whole_gpus() -> None:
    assert share_of(parse_gres("shard:a100:2")) == GpuShare("shard", 2, "a100")
    assert share_of(parse_gres("gpu:2")) is None
    assert sharing_error(parse_gres("mps:50")) is None
    assert sharing_error(parse_gres("gpu:1,shard:2")) == \
        "Invalid GRES specification: shard cannot be combined with whole GPUs (gpu)"
    assert "only one of shard, mps and --gpu-mem" in (sharing_error(parse_gres("shard:1,mps:10")) or "")


def test_admission_knows_what_one_gpu_of_a_node_can_share(config: ClusterConfig) -> None:
    assert admit(spec(gres=parse_gres("shard:4")), config).partition == "p"  # 8 shards over 2 GPUs: 4 each
    with pytest.raises(SpecError, match="Requested node configuration is not available"):
        admit(spec(gres=parse_gres("shard:5")), config)  # no GPU has 5
    assert admit(spec(gres=parse_gres("mps:100")), config).partition == "p"
    with pytest.raises(SpecError, match="cannot be combined with whole GPUs"):
        admit(spec(gres=parse_gres("gpu:1,mps:50")), config)
    with pytest.raises(SpecError, match="Requested node configuration is not available"):
        admit(spec(gres=parse_gres("shard:1"), nodelist="c001"), config)  # c001 has no shards
    with pytest.raises(SpecError, match="Requested node configuration is not available"):
        admit(spec(gres=parse_gres("bandwidth:1")), config)  # unknown GRES


def test_a_memory_slice_larger_than_every_gpu_is_refused_in_one_line(config: ClusterConfig) -> None:
    slice_ = (GresRequest("gpumem", None, 20000),)
    assert admit(spec(gres=slice_), config).partition == "p"  # memory not known yet: it may fit
    with pytest.raises(SpecError) as refused:
        admit(spec(gres=slice_), config, gpu_memory={"c000": 16000, "c001": 16000})
    assert str(refused.value) == ("Requested node configuration is not available: --gpu-mem asks 20000 MB of one "
                                  "GPU, and the largest GPU of the partition has 16000 MB")


# -- --gpu-mem ----------------------------------------------------------------------------


def _ended_run(store: Store, name: str, peak: int | None, user: str = "root", end: float = 1100.0) -> None:
    job_id = store.submit(spec(name=name, user=user, gres=(GresRequest("gpu", None, 1),)), "p", None, 1000.0,
                          requeue=False)
    store.start_jobs([(job_id, "c000", (0,))], 1000.0)
    usage = {"gpu_seconds": 100.0, "peak_gpu_memory_mb": peak, "mean_gpu_util": None}
    store.end_runs([RunEnd(job_id, "c000", 0, JobState.COMPLETED, 0, 0, end, usage)])


def _slice(store: Store, job_id: int) -> list[GresRequest]:
    return [g for g in store.get_job(job_id).spec.gres if g.name == "gpumem"]


def test_gpu_mem_size_becomes_the_jobs_gpumem_item(service: JobService, store: Store) -> None:
    job_id = service.submit(spec(gpu_mem="8192"), ROOT)
    assert _slice(store, job_id) == [GresRequest("gpumem", None, 8192)]
    assert store.get_job(job_id).spec.gpu_mem == "8192"
    with pytest.raises(SpecError, match="--gpu-mem and --gres=gpumem both given"):
        service.submit(spec(gpu_mem="1024", gres=(GresRequest("gpumem", None, 1024),)), ROOT)
    with pytest.raises(SpecError, match="cannot be combined with whole GPUs"):
        service.submit(spec(gpu_mem="1024", gres=(GresRequest("gpu", None, 1),)), ROOT)


def test_gpu_mem_auto_packs_by_the_largest_recent_peak_plus_the_margin(service: JobService, store: Store) -> None:
    _ended_run(store, "train", 3000, end=1100.0)
    _ended_run(store, "train", 5000, end=1200.0)
    _ended_run(store, "train", None, end=1300.0)  # not measured: no profile
    _ended_run(store, "train", 9000, user="bo")  # somebody else's job of the same name
    _ended_run(store, "eval", 12000)
    job_id = service.submit(spec(gpu_mem="auto"), ROOT)
    assert _slice(store, job_id) == [GresRequest("gpumem", None, 6000)]  # 5000 + 20 %


def test_gpu_mem_auto_without_history_takes_a_whole_gpu_or_the_stated_default(
        service: JobService, store: Store, config: ClusterConfig) -> None:
    job_id = service.submit(spec(name="new", gpu_mem="auto"), ROOT)
    assert _slice(store, job_id) == [GresRequest("gpumem", None, 16000)]  # measured before it is packed
    stated = JobService(parse_slurm_conf(CONF + "GpuMemAutoDefault=4G\nGpuMemAutoMargin=50\n"), store, agents=None,
                        reschedule=_bell)  # type: ignore[arg-type]
    assert _slice(store, stated.submit(spec(name="new", gpu_mem="auto"), ROOT)) == [GresRequest("gpumem", None, 4096)]
    _ended_run(store, "new", 1000)
    assert _slice(store, stated.submit(spec(name="new", gpu_mem="auto"), ROOT)) == [GresRequest("gpumem", None, 1500)]


def test_gpu_mem_auto_with_nothing_to_size_it_by_is_refused(config: ClusterConfig, store: Store) -> None:
    service = JobService(config, store, agents=None, reschedule=_bell)  # type: ignore[arg-type]
    before = store.count_active()
    with pytest.raises(SpecError, match="no earlier run to size it by, and no GPU memory is known"):
        service.submit(spec(name="new", gpu_mem="auto"), ROOT)
    assert store.count_active() == before


# -- ends and usage ---------------------------------------------------------------------------


def test_an_end_the_agent_gives_a_reason_for_keeps_it_as_the_system_comment(
        monitor: NodeMonitor, store: Store) -> None:
    job_id = store.submit(spec(gres=(GresRequest("gpumem", None, 4000),)), "p", None, 1000.0, requeue=False)
    store.start_jobs([(job_id, "c000", (1,))], 1000.0)
    why = "GPU memory slice exceeded: used 5000 MiB of 4000 MiB (--gpu-mem)"
    usage = {"gpu_seconds": 5.0, "peak_gpu_memory_mb": 5000, "mean_gpu_util": 100.0}
    monitor.runs_ended("c000", [RunEnd(job_id, "c000", 0, JobState.OUT_OF_MEMORY, 0, 9, 1005.0, usage, "", why)])
    job = store.get_job(job_id)
    assert (job.state, job.system_comment, job.peak_gpu_memory_mb) == (JobState.OUT_OF_MEMORY, why, 5000)


def test_each_gpu_shows_how_it_is_held_and_what_was_measured(monitor: NodeMonitor, store: Store) -> None:
    for gres, gpu in (("gpumem:6000", 1), ("gpumem:2000", 1), ("gpu:1", 0)):
        job_id = store.submit(spec(gres=parse_gres(gres)), "p", None, 1000.0, requeue=False)
        store.start_jobs([(job_id, "c000", (gpu,))], 1000.0)
    monitor.heartbeat("c000", [Run(1, 0), Run(2, 0), Run(3, 0)], "", {0: (15000, 99.0), 1: (7000, 40.0)})
    status = next(s for s in monitor.nodes() if s.node.name == "c000")
    whole, shared = status.gpus
    assert (whole.mode, whole.memory_alloc_mb, whole.memory_used_mb) == ("gpu", 16000, 15000)
    assert (shared.mode, shared.allocated, shared.capacity, shared.jobs) == ("gpumem", 8000, 16000, 2)
    assert status.word == "alloc" and store.get_node("c000").state is NodeState.UP
    assert gres_used((0, 1), status.gpus) == "gpu:1(IDX:0),gpumem:8000(IDX:1:8000/16000)"
    assert gpu_mem(status.gpus) == "0:16000/16000M(used:15000M),1:8000/16000M(used:7000M)"
    assert monitor.gpu_measured("c000") == {0: (15000, 99.0), 1: (7000, 40.0)}
