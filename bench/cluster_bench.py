"""End-to-end figures for a local 4-node x 2-GPU cluster (issue #2's targets).

    python bench/cluster_bench.py [--jobs 1000] [--gpu-jobs 200] [--repeat 20]

Starts its own cluster with `pslurm up` in a temporary state directory, prints one line per
figure, and stops the cluster. Figures are measured, never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def cli(env: dict[str, str], *args: str, cwd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], env=env, cwd=cwd, capture_output=True, text=True,
                          check=True)


def median_wall(env: dict[str, str], cwd: str, repeat: int, *args: str) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        cli(env, *args, cwd=cwd)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def client(conf: Path):  # type: ignore[no-untyped-def]
    """The client library on this cluster, as its owner (who can read the key)."""
    from pslurm.client import Client

    return Client(str(conf))


def throughput(conf: Path, cwd: str, count: int, gres: str) -> tuple[float, float]:
    """Submit ``count`` trivial jobs through the client library from one client, wait until all ended.
    Returns (jobs/s end to end, submit rate)."""
    from pslurm.core.request import JobOptions, build_spec
    from pslurm.core.states import JobState

    controller = client(conf)
    spec = build_spec(JobOptions(gres=gres or None, output="/dev/null"), user="bench", uid=os.getuid(),
                      gid=os.getgid(), cwd=cwd, environ={"PATH": os.environ["PATH"]},
                      script="#!/bin/sh\ntrue\n", default_name="wrap")
    t0 = time.perf_counter()
    ids = [controller.submit(spec) for _ in range(count)]
    submitted = time.perf_counter() - t0
    last = max(ids)
    # Poll cheaply (one job, then the light active list) so the bench does not load the controller.
    while (job := controller.job(last)) is None or job.state is not JobState.COMPLETED:
        time.sleep(0.02)
    while controller.jobs(light=True):
        time.sleep(0.02)
    elapsed = time.perf_counter() - t0
    failed = controller.jobs(job_ids=ids, states=[JobState.FAILED, JobState.NODE_FAIL])
    assert not failed, f"{len(failed)} jobs failed"
    return count / elapsed, count / submitted


def submit_to_start(env: dict[str, str], conf: Path, cwd: str, repeat: int) -> float:
    """Controller-recorded start_time - submit_time of a batch job on an idle cluster."""
    from pslurm.core.states import JobState

    controller = client(conf)
    delays = []
    for _ in range(repeat):
        job_id = int(cli(env, "psbatch", "--parsable", "-o", "/dev/null", "--wrap", "true", cwd=cwd).stdout)
        while True:
            job = controller.job(job_id)
            if job is not None and job.start_time is not None and job.state in (JobState.COMPLETED, JobState.FAILED):
                break
            time.sleep(0.01)
        delays.append(job.start_time - job.submit_time)
    return statistics.median(delays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--gpu-jobs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pslurm-bench-") as tmp:
        state = Path(tmp) / "cluster"
        subprocess.run([str(BIN / "pslurm"), "up", "--state-dir", str(state)], check=True, capture_output=True)
        env = {**os.environ, "PSLURM_CONF": str(state / "pslurm.conf")}
        try:
            conf = state / "pslurm.conf"
            print(f"cold psbatch --wrap true (median of {args.repeat}): "
                  f"{1000 * median_wall(env, tmp, args.repeat, 'psbatch', '-o', '/dev/null', '--wrap', 'true'):.0f} ms")
            queue_ms = 1000 * median_wall(env, tmp, args.repeat, "psqueue")
            print(f"cold psqueue (median of {args.repeat}): {queue_ms:.0f} ms")
            run_ms = 1000 * median_wall(env, tmp, args.repeat, "psrun", "true")
            print(f"psrun true (median of {args.repeat}): {run_ms:.0f} ms")
            print(f"batch submit-to-start (median of {args.repeat}): "
                  f"{1000 * submit_to_start(env, conf, tmp, args.repeat):.1f} ms")
            rate, submit_rate = throughput(conf, tmp, args.jobs, "")
            print(f"{args.jobs} trivial jobs end to end: {rate:.0f} jobs/s (submitted at {submit_rate:.0f}/s)")
            rate, submit_rate = throughput(conf, tmp, args.gpu_jobs, "gpu:1")
            print(f"{args.gpu_jobs} one-GPU jobs on 8 GPUs end to end: {rate:.0f} jobs/s "
                  f"(submitted at {submit_rate:.0f}/s)")
        finally:
            subprocess.run([str(BIN / "pslurm"), "down", "--state-dir", str(state)], capture_output=True)


if __name__ == "__main__":
    main()
