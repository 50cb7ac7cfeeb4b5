"""GPU steps end to end on a `pslurm up` cluster (2 simulated GPUs a node), issue #11: two concurrent
``psrun --exact --gres=gpu:1`` steps of one job run at once on distinct GPUs (no "Requested nodes
are busy" wait), and ``psrun --gpus-per-task=1`` gives each task its own CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import re
from pathlib import Path

from pslurm.client.api import Api
from tests.acceptance.test_steps import PSRUN, acct, ended, submit
from tests.conftest import Cluster


def test_two_exact_steps_run_at_once_on_distinct_gpus(cluster: Cluster, tmp_path: Path) -> None:
    show = "sh -c 'echo {0} CVD=$CUDA_VISIBLE_DEVICES GPUS=$SLURM_STEP_GPUS; sleep 2'"
    wrap = (f"{PSRUN} --exact -n 1 --gres=gpu:1 {show.format('A')} & "
            f"{PSRUN} --exact -n 1 --gres=gpu:1 {show.format('B')} & wait")
    job = submit(cluster, tmp_path, wrap, "--gres=gpu:2", "-n", "2")
    assert ended(cluster, job) == "COMPLETED"
    text = (tmp_path / f"out-{job}.txt").read_text()
    assert "Requested nodes are busy" not in text, text
    found = dict(re.findall(r"^([AB]) CVD=\S* GPUS=(\S+)$", text, re.M))
    assert set(found) == {"A", "B"} and found["A"] != found["B"], text
    assert sorted(found.values()) == sorted(re.findall(r"^[AB] CVD=\S* GPUS=(\d)$", text, re.M)), text  # one each
    with Api.load(cluster.conf) as api:
        steps = api.steps(job)
    assert len(steps) == 2 and all(s["state"] in ("COMPLETED", ["COMPLETED"]) for s in steps), steps
    a, b = steps
    assert a["start_time"] < b["end_time"] and b["start_time"] < a["end_time"], steps  # they overlapped
    assert acct(cluster, job)[2:] == [[f"{job}.0", "COMPLETED", "0:0"], [f"{job}.1", "COMPLETED", "0:0"]]


def test_gpus_per_task_gives_each_task_its_own_gpu(cluster: Cluster, tmp_path: Path) -> None:
    wrap = f"{PSRUN} -n 2 --gpus-per-task=1 sh -c 'echo T$SLURM_PROCID=$CUDA_VISIBLE_DEVICES:$SLURM_STEP_GPUS'"
    job = submit(cluster, tmp_path, wrap, "--gres=gpu:2", "-n", "2")
    assert ended(cluster, job) == "COMPLETED"
    text = (tmp_path / f"out-{job}.txt").read_text()
    tasks = {rank: visible for rank, visible, _ in re.findall(r"^T(\d)=(\S*):(\S+)$", text, re.M)}
    assert set(tasks) == {"0", "1"} and tasks["0"] != tasks["1"], text
    assert all("," not in v for v in tasks.values()), text  # one GPU each
    step_gpus = set(re.findall(r"^T\d=\S*:(\S+)$", text, re.M))
    assert len(step_gpus) == 1 and len(step_gpus.pop().split(",")) == 2, text  # the step's: both
