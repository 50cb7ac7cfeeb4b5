"""GPU sharing through the real commands (issue #13) on a cluster started with `pslurm up --conf`:
one node, two simulated GPUs of 16000 MB with 4 shards each.

Jobs "use" simulated GPU memory by writing MB to $PSLURM_SIMULATED_GPU_DIR/$$ (docs/gpu-sharing.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, cluster_from_conf, wait_for

CONF = """ClusterName=sharing
SlurmdTimeout=10
KillWait=2
NodeName=c000 CPUs=8 RealMemory=4000 Gres=gpu:2,shard:8
PartitionName=gpu Nodes=c000 Default=YES
"""
GRES = "NodeName=c000 Name=gpu Count=2 Memory=16000\nNodeName=c000 Name=shard Count=8\n"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_from_conf(tmp_path_factory.mktemp("sharing"), CONF, GRES) as c:
        yield c


def submit(c: Cluster, tmp: Path, *args: str, use_mb: int = 0) -> tuple[str, Path]:
    """A job that declares ``use_mb`` of GPU memory and runs until its release file exists."""
    release = tmp / f"release-{time.monotonic_ns()}"
    wrap = f"echo {use_mb} > $PSLURM_SIMULATED_GPU_DIR/$$; " if use_mb else ""
    wrap += f"echo gpu=$CUDA_VISIBLE_DEVICES shards=$SLURM_SHARDS_ON_NODE; while [ ! -e {release} ]; do sleep 0.1; done"
    proc = c.run("psbatch", "--parsable", "-o", str(tmp / "%j.out"), *args, "--wrap", wrap, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), release


def fields(c: Cluster, job: str, fmt: str = "%T|%r|%b") -> list[str]:
    return c.run("psqueue", "-h", "-t", "all", "-j", job, "-o", fmt, check=True).stdout.strip().split("|")


def account(c: Cluster, job: str, fmt: str) -> list[str]:
    out = c.run("psacct", "-X", "-n", "-P", "-j", job, "-o", fmt.replace("|", ","), check=True).stdout
    return out.strip().split("|")


def ended(c: Cluster, *jobs: str) -> None:
    wait_for(lambda: all(fields(c, j, "%T")[0] not in ("PENDING", "RUNNING", "COMPLETING") for j in jobs), timeout=30)


def test_memory_slices_pack_one_gpu_and_keep_whole_gpus_whole(shared: Cluster, tmp_path: Path) -> None:
    # time limits make the plan certain: a job without one is expected to end a year after its start (as
    # slurmctld's), and a third slice without one would run past the waiting whole-GPU job's reservation
    a, release_a = submit(shared, tmp_path, "--gpu-mem=6G", "-t", "10", use_mb=5000)
    b, release_b = submit(shared, tmp_path, "--gpu-mem=6G", "-t", "10", use_mb=3000)
    wait_for(lambda: fields(shared, a, "%T")[0] == fields(shared, b, "%T")[0] == "RUNNING", timeout=30)
    whole, release_w = submit(shared, tmp_path, "--gres=gpu:1", "-t", "10")
    wait_for(lambda: fields(shared, whole, "%T")[0] == "RUNNING", timeout=30)
    another, release_x = submit(shared, tmp_path, "--gres=gpu:1", "-t", "10")  # both GPUs taken: one whole, one shared
    try:
        wait_for(lambda: fields(shared, another, "%T|%r") == ["PENDING", "Resources"], timeout=30)
        gpus = {j: (tmp_path / f"{j}.out") for j in (a, b, whole)}
        wait_for(lambda: all(p.exists() and p.read_text() for p in gpus.values()), timeout=30)
        seen = {j: p.read_text().split()[0] for j, p in gpus.items()}
        assert seen[a] == seen[b] != seen[whole]  # the two slices on one GPU, the whole job on the other
        assert fields(shared, a, "%b") == ["gres:gpumem:6144"]
        node = shared.run("pscontrol", "show", "node", "c000", check=True).stdout
        shared_gpu = seen[a].removeprefix("gpu=")
        assert f"gpumem:12288(IDX:{shared_gpu}:12288/16000)" in node
        wait_for(lambda: f"{shared_gpu}:12288/16000M(used:8000M)" in shared.run(
            "psinfo", "-h", "-N", "-O", "GpuMem:60", check=True).stdout, timeout=15)
        # a third slice that does not fit what is left of the shared GPU waits, behind the whole-GPU job;
        # once there is room on the shared GPU again, backfill starts it (it delays nobody: the GPU stays
        # shared as long as the job already on it runs)
        c, release_c = submit(shared, tmp_path, "--gpu-mem=6G", "-t", "5")
        wait_for(lambda: fields(shared, c, "%T|%r") == ["PENDING", "Priority"], timeout=30)
        release_a.touch()
        wait_for(lambda: fields(shared, c, "%T")[0] == "RUNNING", timeout=30)
        release_c.touch()
    finally:
        for release in (release_a, release_b, release_w, release_x):
            release.touch()
    ended(shared, a, b, whole, another)
    assert account(shared, a, "GPUMem|GPUMemPeak|State") == ["6144M", "5000M", "COMPLETED"]


def test_a_job_over_its_slice_ends_out_of_memory_and_auto_learns_from_it(shared: Cluster, tmp_path: Path) -> None:
    over, release = submit(shared, tmp_path, "--gpu-mem=2G", "-J", "grower", use_mb=3000)
    try:
        ended(shared, over)  # it would run until released: the agent's watch ends it
    finally:
        release.touch()
    assert fields(shared, over, "%T|%r") == ["OUT_OF_MEMORY", "OutOfMemory"]
    state, comment, peak = account(shared, over, "State|SystemComment|GPUMemPeak")
    assert (state, comment, peak) == ("OUT_OF_MEMORY", "GPU memory slice exceeded: used 3000 MiB of 2048 MiB "
                                      "(--gpu-mem)", "3000M")
    assert "over the job's slice of 2048 MiB (--gpu-mem). The job is killed." in \
        (tmp_path / f"{over}.out").read_text()
    again, release = submit(shared, tmp_path, "--gpu-mem=auto", "-J", "grower", use_mb=3000)
    release.touch()
    ended(shared, again)
    assert account(shared, again, "GPUMem|State") == ["3600M", "COMPLETED"]  # its peak, plus 20 %


def test_shards_and_bad_requests(shared: Cluster, tmp_path: Path) -> None:
    job, release = submit(shared, tmp_path, "--gres=shard:3")
    release.touch()
    ended(shared, job)
    assert (tmp_path / f"{job}.out").read_text().split()[1] == "shards=3"
    assert account(shared, job, "AllocTRES|State") == ["billing=1,cpu=1,gres/shard=3,node=1", "COMPLETED"]
    for args, message in ((("--gres=shard:5",), "Requested node configuration is not available"),
                          (("--gres=gpu:1", "--gpu-mem=1G"), "cannot be combined with whole GPUs"),
                          (("--gpu-mem=20G",), "--gpu-mem asks 20480 MB of one GPU, and the largest GPU"),
                          (("--gpu-mem=lots",), "Invalid --gpu-mem specification: lots")):
        proc = shared.run("psbatch", *args, "--wrap", "true", cwd=tmp_path)
        assert proc.returncode == 1 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
