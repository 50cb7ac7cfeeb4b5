"""The controller as the cluster grows: 100, 300 and 1000 nodes of 8 GPUs, on the real wire.

    python bench/scale_bench.py [--nodes 100,300,1000] [--rest 20] [--rate 100] [--load 20]
                                [--pending 10000,100000] [--repeat 5] [--arrays 0] [--threads 4]

For each size, ``pslurm up -N N -G 8 --cpus 64 --virtual`` in a temporary state directory (the
agents hosted in a few processes, every registration, heartbeat and launch a real gRPC call to its
node's own port, jobs real processes), then, in turn:

1. at rest: psctld's CPU (from /proc, over ``--rest`` seconds, after a settling pause) and memory
   (RSS); the hosting processes' CPU too;
2. cold ``psqueue`` and ``psinfo`` (a new process each, median of ``--repeat``, output discarded);
3. under load: one client submits trivial jobs (``true``, one CPU) at ``--rate`` a second for
   ``--load`` seconds, paced; psctld's CPU over that window and whether the jobs kept up (all ended
   within 10 s after the last submit);
4. pending: every node gets a one-GPU job that sleeps (real processes), then jobs that need a whole
   node's 8 GPUs are submitted until ``--pending`` (each size in turn; ``--threads`` clients share
   the store's group commits): none can start, so every pass plans them all (the main pass in
   priority order, the backfill pass with its ``bf_max_job_test`` reservations). Per size: the
   main and backfill pass times as psctld's /metrics/scheduler reports them (the mean of the passes
   in a window of ``--rest`` seconds while a trivial job is submitted every half second, which rings
   for main passes, and the last), psctld's CPU and RSS at rest, and the cold commands
   again: ``psqueue`` (one line per separate job: a listing of all of them), ``psinfo``;
5. ``--arrays K``: K held arrays of 1000 tasks (at the first size only, after the load, cancelled
   after): ``psqueue`` (one line per array) and ``psqueue -r`` (one line per task).

Prints a markdown table per size. Figures are measured, never asserted; the machine (2 cores here,
shared) is in them: run it on a quiet machine and say the load average with the figures.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_bench import BIN, daemon_pids, proc_cost  # noqa: E402

from pslurm.auth.credential import Identity, load_key, sign  # noqa: E402
from pslurm.core.config import load_cluster_config  # noqa: E402
from pslurm.core.request import JobOptions, build_spec  # noqa: E402
from pslurm.core.states import JobState  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_over(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Each process's share of one core over the next ``seconds`` (1.0: a whole core)."""
    before = {n: proc_cost(p)[0] for n, p in pids.items()}
    time.sleep(seconds)
    return {n: (proc_cost(p)[0] - before[n]) / seconds for n, p in pids.items()}


def cold(env: dict[str, str], cwd: str, repeat: int, *args: str) -> float:
    """Median wall seconds of a command in a new process (one warm-up first), its output discarded."""
    times = []
    for i in range(repeat + 1):
        t0 = time.perf_counter()
        subprocess.run([str(BIN / args[0]), *args[1:]], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def script_spec(cwd: str, command: str, **options: object):  # type: ignore[no-untyped-def]
    return build_spec(JobOptions(output="/dev/null", **options), user="bench", uid=os.getuid(),  # type: ignore[arg-type]
                      gid=os.getgid(), cwd=cwd, environ={"PATH": os.environ["PATH"]},
                      script=f"#!/bin/sh\n{command}\n", default_name="wrap")


def scheduler_metrics(conf: Path) -> dict[str, float]:
    """psctld's /metrics/scheduler as name -> value (times in microseconds, as sdiag's)."""
    config = load_cluster_config(str(conf))
    cred = sign(load_key(config.auth_key_path), Identity(os.getuid(), os.getgid()), time.time())
    conn = http.client.HTTPConnection("127.0.0.1", config.rest_port, timeout=120)
    try:
        conn.request("GET", "/metrics/scheduler", headers={"X-Pslurm-Cred": cred})
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out = {}
    for line in text.splitlines():
        match = re.match(r"^slurm_(\w+)(?:\{[^}]*\})? ([0-9.e+-]+)$", line)
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def pass_times(conf: Path, cwd: str, window: float) -> tuple[str, str]:
    """(main, backfill): the mean pass time over ``window`` seconds and the last, in ms. A trivial
    job is submitted every half second meanwhile: its submit and end ring for main passes (a
    queue that does not change gets backfill passes alone)."""
    from pslurm.client import Client

    a = scheduler_metrics(conf)
    with Client(str(conf), timeout=60) as client:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < window:
            client.submit(script_spec(cwd, "true"))
            time.sleep(0.5)
    b = scheduler_metrics(conf)

    def mean(prefix: str) -> str:
        cycles = b[f"{prefix}_cycle_cnt"] - a[f"{prefix}_cycle_cnt"]
        total = b[f"{prefix}_cycle_tot"] - a[f"{prefix}_cycle_tot"]
        last = b[f"{prefix}_cycle_last"] / 1000
        if not cycles:
            return f"no pass in the window (last {last:.0f} ms)"
        return f"{total / cycles / 1000:.0f} ms mean of {int(cycles)} passes (last {last:.0f} ms)"

    return mean("schedule"), mean("bf")


def submit_many(conf: Path, specs: list, threads: int) -> list[int]:  # type: ignore[type-arg]
    """Submit ``specs`` from ``threads`` clients at once (concurrent submits share group commits)."""
    from pslurm.client import Client

    ids: list[int] = []
    lock = threading.Lock()

    def work(part: list) -> None:  # type: ignore[type-arg]
        with Client(str(conf), timeout=120) as client:
            got = [client.submit(s) for s in part]
        with lock:
            ids.extend(got)

    workers = [threading.Thread(target=work, args=(specs[k::threads],)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return ids


def paced_load(conf: Path, cwd: str, rate: float, seconds: float) -> tuple[int, float]:
    """Submit trivial jobs at ``rate`` a second for ``seconds``; (jobs, seconds after the last submit
    until every one had ended, None when they had not within 10 s)."""
    from pslurm.client import Client

    job = script_spec(cwd, "true")
    with Client(str(conf), timeout=60) as client:
        t0 = time.perf_counter()
        ids = []
        while (now := time.perf_counter() - t0) < seconds:
            ids.append(client.submit(job))
            due = len(ids) / rate
            if due > now:
                time.sleep(due - now)
        done = time.perf_counter()
        while time.perf_counter() - done < 10:
            if not client.jobs(light=True):  # nothing pending, running or completing
                return len(ids), time.perf_counter() - done
            time.sleep(0.2)
    return len(ids), float("nan")


def measure(size: int, args: argparse.Namespace, tmp: str) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    state = Path(tmp) / f"n{size}"
    conf = state / "pslurm.conf"
    env = {**os.environ, "PSLURM_CONF": str(conf)}
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "pslurm"), "up", "--virtual", "-N", str(size), "-G", "8", "--cpus", "64",
                    "--memory", "512000", "--state-dir", str(state)], check=True, capture_output=True)
    rows.append(("bring-up (pslurm up --virtual, to every node idle)", f"{time.perf_counter() - t0:.1f} s"))
    try:
        pids = daemon_pids(state)
        ctld = pids["psctld"]
        time.sleep(5)
        cpu = cpu_over(pids, args.rest)
        hosts = sum(v for n, v in cpu.items() if n != "psctld")
        rows.append(("psctld CPU at rest", f"{100 * cpu['psctld']:.1f} % of a core "
                                           f"(agents' {len(pids) - 1} processes: {100 * hosts:.1f} %)"))
        rows.append(("psctld memory at rest (RSS)", f"{rss_mb(ctld):.0f} MB"))
        rows.append(("cold psqueue / psinfo, empty queue",
                     f"{1000 * cold(env, tmp, args.repeat, 'psqueue'):.0f} / "
                     f"{1000 * cold(env, tmp, args.repeat, 'psinfo'):.0f} ms"))
        before = proc_cost(ctld)[0]
        t1 = time.perf_counter()
        jobs, lag = paced_load(conf, tmp, args.rate, args.load)
        window = time.perf_counter() - t1
        rows.append((f"psctld CPU under {args.rate:.0f} jobs/s ({jobs} trivial jobs)",
                     f"{100 * (proc_cost(ctld)[0] - before) / window:.1f} % of a core; all ended "
                     f"{lag:.1f} s after the last submit; RSS {rss_mb(ctld):.0f} MB"))
        if args.arrays and size == int(args.nodes.split(",")[0]):
            arrays = submit_many(conf, [script_spec(tmp, "true", array="0-999", hold=True)] * args.arrays,
                                 args.threads)
            rows.append((f"{args.arrays} held arrays of 1000 tasks: cold psqueue / psqueue -r (one line per task)",
                         f"{1000 * cold(env, tmp, args.repeat, 'psqueue'):.0f} / "
                         f"{1000 * cold(env, tmp, args.repeat, 'psqueue', '-r'):.0f} ms"))
            for part in range(0, len(arrays), 50):
                subprocess.run([str(BIN / "pscancel"), *map(str, arrays[part:part + 50])], env=env, check=True,
                               capture_output=True)
        # every node one sleeping one-GPU job: the pending jobs below need a whole node and wait
        blockers = submit_many(conf, [script_spec(tmp, "sleep 100000", gres="gpu:1", nodelist=f"c{i:03d}")
                                      for i in range(size)], args.threads)
        deadline = time.time() + 120
        found = _client_jobs(conf, blockers)
        while any(j.state is JobState.PENDING for j in found) and time.time() < deadline:
            time.sleep(1)
            found = _client_jobs(conf, blockers)
        running = sum(j.state is JobState.RUNNING for j in found)
        if running < size:
            rows.append(("nodes with a sleeping one-GPU job (the rest are free for the pending jobs)", f"{running}"))
        pending = 0
        for target in (int(p) for p in args.pending.split(",")):
            t2 = time.perf_counter()
            submit_many(conf, [script_spec(tmp, "true", gres="gpu:8")] * (target - pending), args.threads)
            rate = (target - pending) / (time.perf_counter() - t2)
            pending = target
            time.sleep(5)
            main, backfill = pass_times(conf, tmp, args.rest)
            cpu = cpu_over({"psctld": ctld}, args.rest)
            rows.append((f"{target} pending: submitted (separate jobs, {args.threads} clients)", f"{rate:.0f} jobs/s"))
            rows.append((f"{target} pending: main pass", main))
            rows.append((f"{target} pending: backfill pass", backfill))
            rows.append((f"{target} pending: psctld CPU, RSS", f"{100 * cpu['psctld']:.1f} % of a core, "
                                                              f"{rss_mb(ctld):.0f} MB"))
            rows.append((f"{target} pending: cold psqueue (every job a line) / psinfo",
                         f"{1000 * cold(env, tmp, args.repeat, 'psqueue'):.0f} / "
                         f"{1000 * cold(env, tmp, args.repeat, 'psinfo'):.0f} ms"))
    finally:
        subprocess.run([str(BIN / "pslurm"), "down", "--state-dir", str(state)], capture_output=True)
    return rows


def _client_jobs(conf: Path, ids: list[int]):  # type: ignore[no-untyped-def]
    from pslurm.client import Client

    with Client(str(conf), timeout=120) as client:
        return client.jobs(job_ids=ids, light=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100,300,1000")
    parser.add_argument("--rest", type=float, default=20.0, help="seconds of each CPU and pass-time window")
    parser.add_argument("--rate", type=float, default=100.0, help="jobs a second under load")
    parser.add_argument("--load", type=float, default=20.0, help="seconds of load")
    parser.add_argument("--pending", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--arrays", type=int, default=0)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="pslurm-scale-") as tmp:
        for size in (int(n) for n in args.nodes.split(",")):
            rows = measure(size, args, tmp)
            print(f"\n### {size} nodes x 8 GPUs (load average now {os.getloadavg()[0]:.1f})\n")
            print("| figure | value |\n| --- | --- |")
            for name, value in rows:
                print(f"| {name} | {value} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
