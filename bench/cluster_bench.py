"""End-to-end figures for a local 4-node x 2-GPU cluster (issue #2's targets).

    python bench/cluster_bench.py [--jobs 1000] [--gpu-jobs 200] [--array 1000] [--repeat 20]
                                  [--only cli,start,jobs,gpu,array] [--py-spy PATH] [--py-spy-out PREFIX]

Starts its own cluster with `pslurm up` in a temporary state directory, prints one line per
figure, and stops the cluster. Figures are measured, never asserted. With the throughput figures
it prints what the daemons spent meanwhile (CPU per job, context switches per job, threads), read
from /proc; ``--py-spy PATH`` also records psctld (and one agent) with py-spy during the trivial
jobs' run and writes their collapsed stacks to PREFIX-psctld.txt and PREFIX-psd.txt.
"""

from __future__ import annotations

import argparse
import os
import signal
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
    assert not failed, f"{len(failed)} jobs failed, e.g. " + "; ".join(
        f"{j.job_id} {j.state.name} {j.reason} {j.system_comment!r} exit {j.exit_code}" for j in failed[:3])
    return count / elapsed, count / submitted


def daemon_pids(state: Path) -> dict[str, int]:
    """The cluster's daemons by name (pid files), and each agent's job runner as ``<agent>-runner``
    (a child of the agent that forks its jobs' processes: its CPU is the agent's)."""
    pids = {p.stem: int(p.read_text()) for p in sorted((state / "run").glob("*.pid"))}
    agents = {pid: name for name, pid in pids.items() if name != "psctld"}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            runner = parent in agents and b"pslurm.nodeagent.runner" in (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if runner:
            pids[f"{agents[parent]}-runner"] = int(entry.name)
    return pids


def proc_cost(pid: int) -> tuple[float, int, int]:
    """(CPU seconds, context switches summed over its threads, threads) of a live process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    switches = threads = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
        except OSError:
            continue  # the thread ended meanwhile
        threads += 1
    return cpu, switches, threads


class DaemonCost:
    """What the daemons spent between two reads: CPU and context switches, per job."""

    def __init__(self, state: Path) -> None:
        self.pids = daemon_pids(state)
        self.before = {name: proc_cost(pid) for name, pid in self.pids.items()}

    def report(self, jobs: int) -> str:
        after = {name: proc_cost(pid) for name, pid in self.pids.items()}
        ctl = [after["psctld"][i] - self.before["psctld"][i] for i in range(2)]
        agents = [sum(after[n][i] - self.before[n][i] for n in after if n != "psctld") for i in range(2)]
        return (f"psctld {1000 * ctl[0] / jobs:.2f} ms CPU and {ctl[1] / jobs:.0f} switches per job "
                f"({after['psctld'][2]} threads); agents together {1000 * agents[0] / jobs:.2f} ms CPU and "
                f"{agents[1] / jobs:.0f} switches per job")


def py_spy(path: str, out: str, pid: int, name: str) -> subprocess.Popen[bytes]:
    out = f"{out}-{name}.txt"  # collapsed stacks of samples holding the GIL: where the CPU goes
    return subprocess.Popen([path, "record", "--pid", str(pid), "--rate", "250", "--format", "raw", "--gil",
                             "--nonblocking", "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def spy_on(path: str, out: str, pids: dict[str, int], figure: str) -> list[subprocess.Popen[bytes]]:
    """py-spy on psctld and one agent during a figure (none without ``path``)."""
    if not path:
        return []
    agent = next(p for n, p in pids.items() if n != "psctld")
    return [py_spy(path, out + figure, pids["psctld"], "psctld"), py_spy(path, out + figure, agent, "psd")]


def stop_spies(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
        spy.wait()


def array_throughput(conf: Path, cwd: str, count: int) -> tuple[float, float]:
    """One array of ``count`` trivial tasks: (tasks/s from submit to the last task's start, tasks/s end to end)."""
    from pslurm.core.request import JobOptions, build_spec
    from pslurm.core.states import JobState

    controller = client(conf)
    spec = build_spec(JobOptions(output="/dev/null", array=f"0-{count - 1}"), user="bench", uid=os.getuid(),
                      gid=os.getgid(), cwd=cwd, environ={"PATH": os.environ["PATH"]},
                      script="#!/bin/sh\ntrue\n", default_name="wrap")
    t0 = time.perf_counter()
    array_id = controller.submit(spec)
    # Poll cheaply, as for single jobs: the last task (it starts last), then squeue's default view
    # (pending tasks as one row). Listing all 1000 tasks every 20 ms cost the controller more CPU
    # than the tasks themselves: the figure was the bench's own load.
    last = max(j.job_id for j in controller.jobs(job_ids=[array_id], light=True, include_finished=True))
    while (job := controller.job(last)) is None or not job.state.is_final:
        time.sleep(0.02)
    while controller.jobs(light=True, collapse_arrays=True):
        time.sleep(0.02)
    elapsed = time.perf_counter() - t0
    tasks = controller.jobs(job_ids=[array_id], include_finished=True)
    assert len(tasks) == count and all(t.state is JobState.COMPLETED for t in tasks), "tasks failed"
    first_submit = min(t.submit_time for t in tasks)
    last_start = max(t.start_time for t in tasks if t.start_time is not None)
    return count / (last_start - first_submit), count / elapsed


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
    parser.add_argument("--array", type=int, default=1000, help="tasks of the array figure")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--only", default="cli,start,jobs,gpu,array", help="comma list of figures to measure")
    parser.add_argument("--py-spy", default="",
                        help="py-spy's path: record the daemons during the jobs and array figures")
    parser.add_argument("--py-spy-out", default="/tmp/pslurm-bench", help="where its stacks go (-psctld.txt, -psd.txt)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="pslurm-bench-") as tmp:
        state = Path(tmp) / "cluster"
        subprocess.run([str(BIN / "pslurm"), "up", "--state-dir", str(state)], check=True, capture_output=True)
        env = {**os.environ, "PSLURM_CONF": str(state / "pslurm.conf")}
        try:
            conf = state / "pslurm.conf"
            if "cli" in only:
                print(f"cold psbatch --wrap true (median of {args.repeat}): "
                      f"{1000 * median_wall(env, tmp, args.repeat, 'psbatch', '-o', '/dev/null', '--wrap', 'true'):.0f}"
                      " ms")
                queue_ms = 1000 * median_wall(env, tmp, args.repeat, "psqueue")
                print(f"cold psqueue (median of {args.repeat}): {queue_ms:.0f} ms")
                run_ms = 1000 * median_wall(env, tmp, args.repeat, "psrun", "true")
                print(f"psrun true (median of {args.repeat}): {run_ms:.0f} ms")
            if "start" in only:
                print(f"batch submit-to-start (median of {args.repeat}): "
                      f"{1000 * submit_to_start(env, conf, tmp, args.repeat):.1f} ms")
            if "jobs" in only:
                cost = DaemonCost(state)
                spies = spy_on(args.py_spy, args.py_spy_out, cost.pids, "")
                rate, submit_rate = throughput(conf, tmp, args.jobs, "")
                stop_spies(spies)
                print(f"{args.jobs} trivial jobs end to end: {rate:.0f} jobs/s (submitted at {submit_rate:.0f}/s); "
                      f"{cost.report(args.jobs)}")
            if "gpu" in only:
                cost = DaemonCost(state)
                rate, submit_rate = throughput(conf, tmp, args.gpu_jobs, "gpu:1")
                print(f"{args.gpu_jobs} one-GPU jobs on 8 GPUs end to end: {rate:.0f} jobs/s "
                      f"(submitted at {submit_rate:.0f}/s); {cost.report(args.gpu_jobs)}")
            if "array" in only:
                cost = DaemonCost(state)
                spies = spy_on(args.py_spy, args.py_spy_out, cost.pids, "-array")
                scheduled, rate = array_throughput(conf, tmp, args.array)
                stop_spies(spies)
                print(f"array of {args.array} trivial tasks: {scheduled:.0f} tasks/s scheduled (submit to the last "
                      f"start), {rate:.0f} tasks/s end to end; {cost.report(args.array)}")
        finally:
            subprocess.run([str(BIN / "pslurm"), "down", "--state-dir", str(state)], capture_output=True)


if __name__ == "__main__":
    main()
