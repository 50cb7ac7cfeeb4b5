"""GPU sharing on a trace-shaped workload: whole GPUs, Slurm shards, and memory-aware packing (issue #13).

    python bench/gpu_sharing.py [--jobs 120] [--seed 13] [--modes whole,shard,mem] [--window 60]
                                [--dry-run] [--no-sim] [--no-cluster] [--show N] [--out PATH]

    e.g. --modes whole,shard,mem,mem@4096,mem-exact

What it measures. One synthetic workload (below) is run three ways, each on a fresh ``pslurm up``
cluster of 4 nodes x 2 simulated GPUs of 16 GiB (32 CPUs a node, so that CPUs do not bind before GPUs):

- ``whole``: every job asks ``--gres=gpu:1``: one job per GPU, as without sharing.
- ``shard``: 8 shards per GPU (gres.conf ``Name=shard Count=16`` per node, Slurm's gres/shard); each
  job asks ``--gres=shard:K`` with K = its requested GPU share (the trace's ``plan_gpu``) in eighths,
  rounded up: what a user asks who knows the share they planned, not the memory they use. Shards
  are only counted: jobs that share a GPU may together use more memory than it has; the bench
  counts those jobs ("oversubscribed": on a real GPU some would have died of out-of-memory).
- ``mem``: every job asks ``--gpu-mem=auto``: the controller sizes its slice from the peak of the
  earlier runs of the same job name (+ GpuMemAutoMargin, 20 %), or gives a first run a whole GPU's
  memory (the default without history), and packs slices best fit. A run that goes past its slice
  is ended OUT_OF_MEMORY; the bench resubmits it at once, as a user would (then ``auto`` finds the
  failed run's measured peak), counts it, and the retry is part of the job's completion time.
  ``mem@MB`` is the same with GpuMemAutoDefault=MB in pslurm.conf: first runs get MB, and the
  ones that need more end OUT_OF_MEMORY within a second and are resubmitted.
- ``mem-exact`` (not in the default list; not from the trace, which records no declared GPU memory):
  ``--gpu-mem=`` the job's real use + 20 % from its first run: the bound auto approaches with history.

Each job is a shell script that writes the MB it "uses" to ``$PSLURM_SIMULATED_GPU_DIR/$$`` (the
agent counts it as GPU memory while that process lives) and sleeps its duration. Jobs arrive as a
seeded Poisson process over ``--window`` seconds (default 60), not all at once: with every job
submitted at t=0 no recurring job would have an earlier run for ``--gpu-mem=auto`` to size it by,
and the trace's jobs arrive continuously. All times come from the cluster's own records (the
client library's job list: submit, start and end, node and GPU index of every run):

- makespan: the first submit to the last end (retries included);
- mean JCT: per job, the end of its last run - the submit of its first;
- GPU memory utilisation: sum over completed runs of (MB used x run time) / (8 GPUs x 16 GiB x makespan);
- GPU-busy utilisation: the time each GPU held at least one job, summed / (8 x makespan).

Unless ``--no-sim``, the same workload also runs through the scheduling policy alone
(``pslurm.controller.policy.plan``, backfill pass, on every arrival and end) in a discrete-event
loop with no processes: what the policy would do with zero launch, poll and report latency. The
output labels every row *measured* (cluster) or *simulated* (policy only). ``--dry-run`` prints the
workload, the commands of each mode, and the simulated rows, and starts no cluster.

The workload (all figures from the Alibaba PAI trace, cluster-trace-gpu-v2020, and its paper:
Qizhen Weng, Wencong Xiao, Yinghao Yu, Wei Wang, Cheng Wang, Jian He, Yong Li, Liping Zhang, Wei Lin,
Yu Ding: "MLaaS in the Wild: Workload Analysis and Scheduling in Large-Scale Heterogeneous GPU
Clusters", USENIX NSDI 2022; data and analysis notebook at github.com/alibaba/clusterdata,
cluster-trace-gpu-v2020/analysis/analysis.ipynb). The raw tables are not reachable from this
machine, so the distributions below were read off the published figures of that notebook (rendered
in the repository's figures/analysis-0*.png, axes measured in pixels); see each constant.
The parts not in the trace are assumptions, marked as such.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import math
import os
import platform
import pwd
import random
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent

NODES = 4
GPUS_PER_NODE = 2
GPU_MB = 16384  # the trace's P100, T4 and V100 have 16 GB (V100M32, 32 GB, runs under 2 % of tasks)
SHARDS_PER_GPU = 8
CPUS_PER_NODE = 32  # CPUs never bind before GPUs here (up to 16 one-CPU jobs per GPU)
TIME_LIMIT = "3:00"  # each job's --time (every duration is far below it)
MARGIN_PCT = 20  # pslurm's GpuMemAutoMargin default, also used for mem-exact
MODES = ("whole", "shard", "mem", "mem-exact")

# -- the trace ---------------------------------------------------------------------------------

# The notebook's headings are the paper's figure numbers.
# Requested GPU share per task (plan_gpu), notebook "Figure 5", bar chart "Proportion of Tasks (%)":
# < 25 %: 14.6, [25, 50) %: 26.2, [50, 100) %: 13.1, 1 GPU: 42.6, > 1 GPU: 2.7.
# Multi-GPU tasks are left out (a share is of one GPU) and the rest renormalised. The notebook's
# "Figure 6" GPU-request CDF shows each bucket is mostly one value (steps at ~10, 25, 50, 100), so a
# bucket is taken as that value: 10 -> 1 shard of 8, 25 -> 2, 50 -> 4, 100 -> 8.
PLAN_GPU = ((10, 14.6), (25, 26.2), (50, 13.1), (100, 42.6))

# GPU memory used per task (avg_gpu_wrk_mem, GB, summed over the task's instances), notebook
# "Figure 6" third panel ("Mem Usage", which plots avg_gpu_wrk_mem): CDF read at these points.
# 17 % of tasks sit at 0 (the trace's CPU-only tasks: 17.8 % have no plan_gpu); renormalised over
# the GPU tasks: (GB, CDF).
# Below 1 GB the figure cannot be read (a vertical step): uniform from 0.25 GB is assumed. The
# figure is of the average, not the peak; a synthetic job's use is constant, so both are the same.
# Above GPU_MB / 1.2 a job is capped there: a 16 GiB GPU holds no more, and an auto slice
# (peak + 20 %) must still fit one GPU.
GPU_MEM_CDF = ((0.25, 0.0), (1.0, 0.687), (1.8, 0.735), (2.6, 0.783), (4.2, 0.831), (6.6, 0.880),
               (10.5, 0.928), (18.5, 0.952), (45.0, 0.988), (100.0, 1.0))
MEM_CAP_MB = int(GPU_MB * 100 / (100 + MARGIN_PCT)) - 256

# Task runtime (s), notebook "Figure 4" left (paper Fig. 4(a), "PAI" curve): (log10 s, CDF).
RUNTIME_CDF = ((1.0, 0.0), (1.5, 0.117), (2.0, 0.266), (2.5, 0.431), (3.0, 0.597), (3.5, 0.745),
               (4.0, 0.867), (4.5, 0.969), (5.0, 0.993), (6.0, 1.0))
# Runtimes span 10 s to days; a run of the bench takes 1-2 minutes. Runtimes between the 5th and 95th
# percentile are kept and mapped log-linearly onto [DUR_MIN, DUR_MAX] s (ratios are compressed, order
# and the shape of the log-distribution kept).
RUNTIME_KEEP = (0.05, 0.95)
DUR_MIN, DUR_MAX = 2.0, 30.0

# Recurring jobs: the paper's Sec. 5.2 ("Predictable Duration for Recurring Tasks") finds "that most
# tasks are recurring, and their instance run-times can be well predicted from past executions"
# (recurrence by the trace's ``group`` tag: same entry script, parameters and data); --gpu-mem=auto
# relies on the same. The paper gives no share this bench could read, so ASSUMED: 65 % of the jobs
# belong to a recurring name with 2-6 runs in the window, the rest run once; runs of one name share
# plan_gpu and, within +-10 %, memory and duration.
RECURRING_SHARE = 0.65
REPEATS = (2, 6)
RUN_JITTER = 0.10


@dataclass
class Job:
    index: int
    name: str
    plan_gpu: int
    mem_mb: int
    duration: float
    arrival: float
    recurring: bool

    @property
    def shards(self) -> int:
        return max(1, math.ceil(self.plan_gpu * SHARDS_PER_GPU / 100))


def _weighted(rng: random.Random, table: tuple[tuple[int, float], ...]) -> int:
    total = sum(w for _, w in table)
    x = rng.random() * total
    for value, w in table:
        x -= w
        if x <= 0:
            return value
    return table[-1][0]


def _inverse(points: tuple[tuple[float, float], ...], u: float) -> float:
    """x where the piecewise-linear CDF through ``points`` (x, F) reaches ``u``."""
    fs = [f for _, f in points]
    k = max(1, bisect.bisect_left(fs, u))
    (x0, f0), (x1, f1) = points[k - 1], points[min(k, len(points) - 1)]
    return x0 if f1 == f0 else x0 + (x1 - x0) * (u - f0) / (f1 - f0)


def sample_memory_mb(rng: random.Random) -> int:
    return min(MEM_CAP_MB, int(1024 * _inverse(GPU_MEM_CDF, rng.random())))


def sample_duration(rng: random.Random) -> float:
    lo, hi = (10 ** _inverse(RUNTIME_CDF, q) for q in RUNTIME_KEEP)
    t = 10 ** _inverse(RUNTIME_CDF, rng.uniform(*RUNTIME_KEEP))
    return DUR_MIN * (DUR_MAX / DUR_MIN) ** (math.log(t / lo) / math.log(hi / lo))


def workload(count: int, seed: int, window: float) -> list[Job]:
    """``count`` jobs: names (recurring or one-off), plan_gpu, memory and duration from the trace's
    distributions, arrivals a Poisson process over ``window`` seconds. Deterministic in ``seed``."""
    rng = random.Random(seed)
    templates: list[tuple[str, int, int, float, int]] = []  # name, plan_gpu, mem, duration, runs
    recurring_left = round(count * RECURRING_SHARE)
    while recurring_left >= REPEATS[0]:
        runs = min(rng.randint(*REPEATS), recurring_left)
        if recurring_left - runs == 1:
            runs += 1
        templates.append((f"pai-r{len(templates):03d}", _weighted(rng, PLAN_GPU), sample_memory_mb(rng),
                          sample_duration(rng), runs))
        recurring_left -= runs
    while sum(t[4] for t in templates) < count:
        templates.append((f"pai-o{len(templates):03d}", _weighted(rng, PLAN_GPU), sample_memory_mb(rng),
                          sample_duration(rng), 1))
    picks = [(name, plan, mem, dur, n > 1) for name, plan, mem, dur, n in templates for _ in range(n)]
    rng.shuffle(picks)
    gaps = [rng.expovariate(1.0) for _ in picks]
    scale = window / sum(gaps[:-1]) if len(gaps) > 1 else 0.0  # the last arrival at ``window``
    jobs, t = [], 0.0
    for i, (name, plan, mem, dur, rec) in enumerate(picks):
        jitter = (lambda: rng.uniform(1 - RUN_JITTER, 1 + RUN_JITTER)) if rec else (lambda: 1.0)
        jobs.append(Job(i, name, plan, min(MEM_CAP_MB, int(mem * jitter())), round(dur * jitter(), 1),
                        round(t, 2), rec))
        t += gaps[i] * scale
    return jobs


def describe(jobs: list[Job]) -> list[str]:
    mems = sorted(j.mem_mb for j in jobs)
    durs = sorted(j.duration for j in jobs)
    q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]  # noqa: E731
    plans: dict[int, int] = defaultdict(int)
    for j in jobs:
        plans[j.plan_gpu] += 1
    names = {j.name for j in jobs}
    return [
        f"{len(jobs)} jobs over {max(j.arrival for j in jobs):.0f} s, {len(names)} names, "
        f"{sum(j.recurring for j in jobs)} runs of recurring names",
        "plan_gpu: " + ", ".join(f"{p}% {n}" for p, n in sorted(plans.items())),
        f"GPU memory used, MB: p10 {q(mems, .1)}, p50 {q(mems, .5)}, p90 {q(mems, .9)}, max {mems[-1]}; "
        f"mean {statistics.mean(mems):.0f}",
        f"duration, s: p10 {q(durs, .1)}, p50 {q(durs, .5)}, p90 {q(durs, .9)}, max {durs[-1]}; "
        f"sum {sum(durs):.0f} (whole GPUs, no sharing: >= {sum(durs) / (NODES * GPUS_PER_NODE):.0f} s of "
        "makespan)",
    ]


# -- requests ----------------------------------------------------------------------------------

def script_of(job: Job) -> str:
    return ("#!/bin/sh\n"
            f"# pslurm gpu_sharing bench: uses {job.mem_mb} MB of GPU memory for {job.duration} s\n"
            f'[ -n "$PSLURM_SIMULATED_GPU_DIR" ] && echo {job.mem_mb} > "$PSLURM_SIMULATED_GPU_DIR/$$"\n'
            f"sleep {job.duration}\n")


def split_mode(mode: str) -> tuple[str, int]:
    """``mem@4096`` -> ("mem", 4096): the mode, and GpuMemAutoDefault (MB) for it (0: the cluster's)."""
    base, _, default = mode.partition("@")
    return base, int(default or 0)


def request_of(job: Job, mode: str, retry: int = 0, last_slice: int = 0) -> dict[str, str]:
    """The job's sbatch options in ``mode`` (retry: the how-manyth resubmission after OUT_OF_MEMORY)."""
    mode = split_mode(mode)[0]
    opts = {"job_name": job.name, "time": TIME_LIMIT, "output": "/dev/null"}
    if mode == "whole":
        opts["gres"] = "gpu:1"
    elif mode == "shard":
        opts["gres"] = f"shard:{job.shards}"
    elif mode == "mem":
        # auto again after a first out-of-memory (the failed run's peak is history now); after a
        # second one a user doubles the slice by hand.
        opts["gpu_mem"] = "auto" if retry < 2 else f"{min(GPU_MB, 2 * last_slice)}M"
    elif mode == "mem-exact":
        opts["gpu_mem"] = f"{min(GPU_MB, math.ceil(job.mem_mb * (100 + MARGIN_PCT) / 100))}M"
    return opts


def psbatch_line(opts: dict[str, str]) -> str:
    flags = " ".join(f"--{k.replace('_', '-')}={shlex.quote(v)}" for k, v in opts.items())
    return f"psbatch {flags} job.sh"


# -- metrics -----------------------------------------------------------------------------------

@dataclass
class Run:
    """One run of a job, as the cluster (or the simulation) recorded it."""

    job: Job
    submit: float
    start: float
    end: float
    node: str
    gpu: int
    state: str
    slice_mb: int = 0  # gpumem slice (mem modes)
    peak_mb: int | None = None  # what the agent measured


@dataclass
class Result:
    mode: str
    source: str  # measured | simulated
    runs: list[Run]
    wall: float = 0.0
    notes: list[str] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        runs = self.runs
        t0 = min(r.submit for r in self.runs)
        makespan = max(r.end for r in runs) - t0
        first: dict[int, float] = {}
        last: dict[int, float] = {}
        for r in runs:
            first[r.job.index] = min(first.get(r.job.index, math.inf), r.submit)
            last[r.job.index] = max(last.get(r.job.index, 0.0), r.end)
        jct = [last[i] - first[i] for i in last]
        done = [r for r in runs if r.state == "COMPLETED"]
        mem_time = sum(r.job.mem_mb * (r.end - r.start) for r in done)
        gpus = NODES * GPUS_PER_NODE
        busy = 0.0
        by_gpu: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        for r in runs:
            by_gpu[(r.node, r.gpu)].append((r.start, r.end))
        for spans in by_gpu.values():
            spans.sort()
            cur_s, cur_e = spans[0]
            for s, e in spans[1:]:
                if s > cur_e:
                    busy += cur_e - cur_s
                    cur_s, cur_e = s, e
                else:
                    cur_e = max(cur_e, e)
            busy += cur_e - cur_s
        waits = [r.start - r.submit for r in runs]
        return {
            "makespan": makespan, "jct": statistics.mean(jct), "jct_p90": sorted(jct)[int(0.9 * (len(jct) - 1))],
            "wait": statistics.mean(waits), "mem_util": mem_time / (gpus * GPU_MB * makespan),
            "busy_util": busy / (gpus * makespan), "oom": sum(r.state == "OUT_OF_MEMORY" for r in self.runs),
            "failed": sum(r.state not in ("COMPLETED", "OUT_OF_MEMORY") for r in self.runs),
            "oversub": oversubscribed(self.runs), "peak_jobs": peak_concurrency(runs),
            "slice_over": _slice_over(done),
        }


def _slice_over(done: list[Run]) -> float:
    """Mean slice / use of the completed runs that had a slice (how much the slices over-reserve)."""
    ratios = [r.slice_mb / r.job.mem_mb for r in done if r.slice_mb and r.job.mem_mb]
    return statistics.mean(ratios) if ratios else math.nan


def oversubscribed(runs: list[Run]) -> int:
    """Runs that at some moment shared a GPU whose summed use passed its memory. Runs ended
    OUT_OF_MEMORY are left out (counted as such): the agent ends them within about a second."""
    hit: set[int] = set()
    by_gpu: dict[tuple[str, int], list[Run]] = defaultdict(list)
    for r in runs:
        if r.state != "OUT_OF_MEMORY":
            by_gpu[(r.node, r.gpu)].append(r)
    for group in by_gpu.values():
        events = sorted({r.start for r in group})
        for t in events:
            live = [r for r in group if r.start <= t < r.end]
            if sum(r.job.mem_mb for r in live) > GPU_MB:
                hit.update(id(r) for r in live)
    return len(hit)


def peak_concurrency(runs: list[Run]) -> int:
    points = sorted([(r.start, 1) for r in runs] + [(r.end, -1) for r in runs])
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best


def table(results: list[Result]) -> list[str]:
    head = ("| mode | figures | makespan | mean JCT | p90 JCT | mean wait | GPU memory util | GPU-busy util "
            "| most jobs at once | OOM (resubmitted) | oversubscribed runs | slice / use |")
    lines = [head, "| " + " | ".join(["---"] * (head.count("|") - 1)) + " |"]
    for res in results:
        m = res.metrics()
        over = "" if math.isnan(m["slice_over"]) else f"{m['slice_over']:.2f}x"
        lines.append(f"| {res.mode} | {res.source} | {m['makespan']:.1f} s | {m['jct']:.1f} s | {m['jct_p90']:.1f} s "
                     f"| {m['wait']:.1f} s | {100 * m['mem_util']:.1f} % | {100 * m['busy_util']:.1f} % "
                     f"| {m['peak_jobs']} | {m['oom']} | {m['oversub']} | {over} |")
    return lines


# -- the policy alone --------------------------------------------------------------------------

def simulate(jobs: list[Job], mode: str, launch_delay: float = 0.0, oom_delay: float = 1.0) -> Result:
    """The workload through ``policy.plan`` (a backfill pass on every arrival and end), no processes.
    ``--gpu-mem=auto`` as the controller sizes it (the peak of the last 10 ended runs of the name +
    GpuMemAutoMargin, else GpuMemAutoDefault or a whole GPU); a run past its slice ends OUT_OF_MEMORY
    ``oom_delay`` s after its start and is resubmitted then, like the cluster runs."""
    from pslurm.controller.policy import NodeView, PendingJob, RunningJob, SharedGpu, Snapshot, plan
    from pslurm.core.config import SchedulerConfig
    from pslurm.core.gres import GresRequest
    from pslurm.core.sharing import GpuShare

    label = mode
    mode, auto_default = split_mode(mode)
    sched = SchedulerConfig()
    margin, default = sched.gpu_mem_auto_margin, auto_default or sched.gpu_mem_auto_default or GPU_MB
    limit = _seconds(TIME_LIMIT)
    names = [f"c{i:03d}" for i in range(NODES)]
    inventory = tuple((i, None) for i in range(GPUS_PER_NODE))
    capacity = tuple(SharedGpu(i, None, GPU_MB, SHARDS_PER_GPU if mode == "shard" else 0, 0)
                     for i in range(GPUS_PER_NODE))
    history: dict[str, list[tuple[float, int]]] = defaultdict(list)  # name -> (end, peak) of ended runs
    arrivals = sorted(jobs, key=lambda j: (j.arrival, j.index))
    pending: dict[int, tuple[Job, int, float, int]] = {}  # sim id -> job, slice MB, submit time, retry
    running: dict[int, tuple[Run, int, float]] = {}  # sim id -> run, retry, end
    runs: list[Run] = []
    next_id, t, ai = 1, 0.0, 0

    def submit(job: Job, now: float, retry: int, last_slice: int) -> None:
        nonlocal next_id
        opts = request_of(job, mode, retry, last_slice)
        slice_mb = 0
        if opts.get("gpu_mem") == "auto":
            peaks = [peak for _, peak in sorted(history[job.name])[-10:]]
            slice_mb = math.ceil(max(peaks) * (100 + margin) / 100) if peaks else default
        elif "gpu_mem" in opts:
            slice_mb = int(opts["gpu_mem"].rstrip("M"))
        pending[next_id] = (job, slice_mb, now, retry)
        next_id += 1

    def request(job: Job, slice_mb: int) -> tuple[tuple[GresRequest, ...], GpuShare | None]:
        if mode == "whole":
            return (GresRequest("gpu", None, 1),), None
        if mode == "shard":
            return (GresRequest("shard", None, job.shards),), GpuShare("shard", job.shards)
        return (GresRequest("gpumem", None, slice_mb),), GpuShare("gpumem", slice_mb)

    while ai < len(arrivals) or pending or running:
        upcoming = [end for _, _, end in running.values()]
        if ai < len(arrivals):
            upcoming.append(arrivals[ai].arrival)
        if not upcoming:
            raise RuntimeError(f"{mode}: {len(pending)} jobs can never start (simulation)")
        t = max(t, min(upcoming))
        for sid, (run, retry, end) in list(running.items()):
            if end <= t:
                del running[sid]
                run.end = end
                history[run.job.name].append((end, run.job.mem_mb))
                if run.state == "OUT_OF_MEMORY":
                    submit(run.job, end, retry + 1, run.slice_mb)
        while ai < len(arrivals) and arrivals[ai].arrival <= t:
            submit(arrivals[ai], arrivals[ai].arrival, 0, 0)
            ai += 1
        busy: dict[str, set[int]] = defaultdict(set)
        cpus: dict[str, int] = defaultdict(int)
        held = []
        for sid, (run, _, _) in running.items():
            busy[run.node].add(run.gpu)
            cpus[run.node] += 1
            held.append(RunningJob(sid, run.node, 1, 0, (run.gpu,), run.start + limit, "bench",
                                   share=request(run.job, run.slice_mb)[1]))
        views = [NodeView(n, frozenset({"gpu"}), CPUS_PER_NODE - cpus[n], 16000,
                          tuple(g for g in inventory if g[0] not in busy[n]), True, inventory, capacity)
                 for n in names]
        waiting = []
        for sid, (job, slice_mb, _, _) in pending.items():
            gres, share = request(job, slice_mb)
            waiting.append(PendingJob(sid, "gpu", 1, 0, gres, 0, limit, "bench", share=share))
        for p in plan(Snapshot(waiting, views, t, running=held), backfill=True).placements:
            job, slice_mb, submitted, retry = pending.pop(p.job_id)
            start = t + launch_delay
            oom = mode.startswith("mem") and job.mem_mb > slice_mb
            run = Run(job, submitted, start, math.inf, p.node, p.gpu_indices[0],
                      "OUT_OF_MEMORY" if oom else "COMPLETED", slice_mb, job.mem_mb)
            running[p.job_id] = (run, retry, start + (oom_delay if oom else job.duration))
            runs.append(run)
    return Result(label, "simulated", runs)


def _seconds(limit: str) -> int:
    parts = [int(x) for x in limit.split(":")]
    return parts[0] * 60 + parts[1] if len(parts) == 2 else parts[0] * 3600 + parts[1] * 60 + parts[2]


# -- the cluster -------------------------------------------------------------------------------

def up_command(state: Path, mode: str) -> list[str]:
    """``pslurm up`` for ``mode``: its --gpu-memory/--shards options where this pslurm has them (and no
    GpuMemAutoDefault is asked), else a pslurm.conf and gres.conf of our own (``--conf``) with
    ``Memory=`` on the GPU lines and ``Name=shard Count=`` per node, as an operator writes them."""
    mode, auto_default = split_mode(mode)
    help_text = subprocess.run([str(BIN / "pslurm"), "up", "--help"], capture_output=True, text=True).stdout
    base = [str(BIN / "pslurm"), "up", "--state-dir", str(state)]
    flags = "--gpu-memory" in help_text and (mode != "shard" or "--shards" in help_text)
    if flags and not auto_default:
        cmd = base + ["--nodes", str(NODES), "--gpus-per-node", str(GPUS_PER_NODE), "--cpus", str(CPUS_PER_NODE),
                      "--gpu-memory", str(GPU_MB)]
        return cmd + (["--shards", str(SHARDS_PER_GPU)] if mode == "shard" else [])
    conf_dir = state.parent / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    names = [f"c{i:03d}" for i in range(NODES)]
    shards = SHARDS_PER_GPU * GPUS_PER_NODE
    gres = f"gpu:{GPUS_PER_NODE}" + (f",shard:{shards}" if mode == "shard" else "")
    lines = [f"ClusterName=gpushare{os.getpid()}", "SlurmdTimeout=10", "KillWait=5"]
    if auto_default:
        lines.append(f"GpuMemAutoDefault={auto_default}M")
    lines += [f"NodeName={n} NodeAddr=127.0.0.1 CPUs={CPUS_PER_NODE} RealMemory=16000 Gres={gres}" for n in names]
    lines.append(f"PartitionName=gpu Nodes={names[0]}-{names[-1]} Default=YES MaxTime=INFINITE State=UP"
                 .replace(f"{names[0]}-{names[-1]}", ",".join(names)))
    (conf_dir / "pslurm.conf").write_text("\n".join(lines) + "\n")
    gres_lines = [f"NodeName={n} Name=gpu Count={GPUS_PER_NODE} Memory={GPU_MB}M" for n in names]
    if mode == "shard":
        gres_lines += [f"NodeName={n} Name=shard Count={shards}" for n in names]
    (conf_dir / "gres.conf").write_text("\n".join(gres_lines) + "\n")
    return base + ["--conf", str(conf_dir / "pslurm.conf")]


def run_cluster(jobs: list[Job], mode: str, poll: float = 0.5, retries: int = 3) -> Result:
    """The workload on a fresh cluster; returns the runs as the cluster recorded them."""
    from pslurm.client import Client
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.request import JobOptions, build_spec

    user = pwd.getpwuid(os.getuid()).pw_name
    with tempfile.TemporaryDirectory(prefix="pslurm-gpushare-") as tmp:
        state = Path(tmp) / "cluster"
        cmd = up_command(state, mode)
        t_up = time.perf_counter()
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            client = Client(str(state / "pslurm.conf"))
            specs: dict[tuple[int, tuple[tuple[str, str], ...]], JobSpec] = {}

            def submit(job: Job, retry: int, last_slice: int) -> int:
                opts = request_of(job, mode, retry, last_slice)
                key = (job.index, tuple(sorted(opts.items())))
                if key not in specs:
                    options = JobOptions(**opts)  # type: ignore[arg-type]
                    specs[key] = build_spec(options, user=user, uid=os.getuid(), gid=os.getgid(), cwd=tmp,
                                            environ={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                            script=script_of(job), default_name=job.name)
                return client.submit(specs[key])

            order = sorted(jobs, key=lambda j: (j.arrival, j.index))
            origin: dict[int, tuple[Job, int]] = {}  # job id -> (job, retry)
            outstanding: set[int] = set()
            records: dict[int, JobRecord] = {}
            t0 = time.time()
            k = 0
            while k < len(order) or outstanding:
                now = time.time() - t0
                while k < len(order) and order[k].arrival <= now:
                    jid = submit(order[k], 0, 0)
                    origin[jid] = (order[k], 0)
                    outstanding.add(jid)
                    k += 1
                if outstanding:
                    for rec in client.jobs(job_ids=sorted(outstanding), include_finished=True, light=True):
                        if not rec.state.is_final:
                            continue
                        outstanding.discard(rec.job_id)
                        records[rec.job_id] = rec
                        job, retry = origin[rec.job_id]
                        if rec.state.value == "OUT_OF_MEMORY" and retry < retries:
                            jid = submit(job, retry + 1, _slice(rec))
                            origin[jid] = (job, retry + 1)
                            outstanding.add(jid)
                wake = order[k].arrival - (time.time() - t0) if k < len(order) else poll
                time.sleep(max(0.0, min(poll, wake)))
            wall = time.perf_counter() - t_up
            # The records once more: ends are final, the agent's measured peaks are in by now.
            final = {r.job_id: r for r in client.jobs(job_ids=sorted(records), include_finished=True, light=True)}
            runs = [Run(origin[i][0], r.submit_time, r.start_time, r.end_time, r.node, r.gpu_indices[0],
                        r.state.value, _slice(r), r.peak_gpu_memory_mb)
                    for i, r in sorted(final.items())
                    if r.start_time is not None and r.end_time is not None and r.node and r.gpu_indices]
            res = Result(mode, "measured", runs, wall)
            if len(runs) < len(final):
                res.notes.append(f"{mode}: {len(final) - len(runs)} runs ended without a start, node or GPU "
                                 "(left out): " + ", ".join(f"{r.job_id} {r.state.value}" for r in final.values()
                                                            if r.start_time is None or not r.gpu_indices))
            off = [r for r in runs if r.peak_mb is not None and abs(r.peak_mb - r.job.mem_mb) > 1]
            unmeasured = sum(r.peak_mb is None for r in runs)
            if off or unmeasured:
                res.notes.append(f"{mode}: the agent's peak differs from the job's use in {len(off)} runs "
                                 f"and is missing in {unmeasured}")
            client.close()
            return res
        finally:
            subprocess.run([str(BIN / "pslurm"), "down", "--state-dir", str(state)], capture_output=True)


def _slice(rec) -> int:  # type: ignore[no-untyped-def]
    return next((g.count for g in rec.spec.gres if g.name == "gpumem"), 0)


# -- main --------------------------------------------------------------------------------------

def machine() -> str:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {os.cpu_count()} CPUs ({cpu or platform.machine()}), {mem:.0f} GiB, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--window", type=float, default=60.0, help="arrivals spread over this many seconds")
    parser.add_argument("--modes", default="whole,shard,mem", help=f"comma list of {', '.join(MODES)}")
    parser.add_argument("--dry-run", action="store_true", help="print the workload, the commands and the "
                        "simulated rows; start no cluster")
    parser.add_argument("--no-sim", action="store_true", help="leave out the policy-only simulation")
    parser.add_argument("--no-cluster", action="store_true", help="only the simulation")
    parser.add_argument("--show", type=int, default=10, help="jobs to list in the output (all: -1)")
    parser.add_argument("--out", default="", help="report file (default bench/results/gpu_sharing-DATE.md; "
                        "none with --dry-run)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m.split("@")[0] not in MODES or not (m.partition("@")[2] or "0").isdigit()]
    if bad:
        parser.error(f"unknown mode(s): {', '.join(bad)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally blocks take the clusters down

    began = time.perf_counter()
    jobs = workload(args.jobs, args.seed, args.window)
    out: list[str] = [f"# GPU sharing on a PAI-shaped workload ({datetime.date.today().isoformat()})", "",
                      f"- machine: {machine()}",
                      f"- command: `python bench/gpu_sharing.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}`",
                      f"- seed {args.seed}; cluster: {NODES} nodes x {GPUS_PER_NODE} simulated GPUs of "
                      f"{GPU_MB} MB, {CPUS_PER_NODE} CPUs a node; {SHARDS_PER_GPU} shards a GPU in shard mode",
                      *[f"- workload: {line}" for line in describe(jobs)],
                      "- trace: Alibaba PAI cluster-trace-gpu-v2020 (Weng et al., \"MLaaS in the Wild\", NSDI '22): "
                      "plan_gpu, GPU memory used and task runtime read off the published analysis notebook's "
                      "Figures 5, 6 and 4; recurring share assumed (see the constants in bench/gpu_sharing.py)",
                      "- modes: whole `--gres=gpu:1`; shard `--gres=shard:K` (K = plan_gpu in eighths); mem "
                      "`--gpu-mem=auto` (first runs: a whole GPU's memory, pslurm's default); mem@MB the same with "
                      "GpuMemAutoDefault=MB; mem-exact `--gpu-mem=` use + 20 % (an oracle, not in the trace)", ""]
    if not args.dry_run and not args.no_cluster:
        with tempfile.TemporaryDirectory(prefix="pslurm-gpushare-") as tmp:
            by_conf = [m for m in modes if "--conf" in up_command(Path(tmp) / m / "cluster", m)]
        flags = [m for m in modes if m not in by_conf]
        if flags:
            out.insert(-1, f"- clusters ({', '.join(flags)}): `pslurm up -N {NODES} -G {GPUS_PER_NODE} --cpus "
                       f"{CPUS_PER_NODE} --gpu-memory {GPU_MB}` (and `--shards {SHARDS_PER_GPU}` for shard)")
        if by_conf:
            out.insert(-1, f"- clusters ({', '.join(by_conf)}): `pslurm up --conf` with a pslurm.conf and gres.conf "
                       f"the bench writes (`Name=gpu Count={GPUS_PER_NODE} Memory={GPU_MB}M`, for shards `Name=shard "
                       f"Count={SHARDS_PER_GPU * GPUS_PER_NODE}` per node, GpuMemAutoDefault= for mem@MB)")
    print("\n".join(out))
    shown = jobs if args.show < 0 else jobs[:args.show]
    print("| # | arrival s | name | plan_gpu | shards | used MB | duration s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for j in shown:
        print(f"| {j.index} | {j.arrival} | {j.name} | {j.plan_gpu} | {j.shards} | {j.mem_mb} | {j.duration} |")
    if len(shown) < len(jobs):
        print(f"| ... {len(jobs) - len(shown)} more |")
    print()
    if args.dry_run:
        example = jobs[0]
        print(f"each job's script, e.g. job 0:\n{script_of(example)}")
        with tempfile.TemporaryDirectory(prefix="pslurm-gpushare-") as tmp:
            for mode in modes:
                cmd = up_command(Path(tmp) / mode / "cluster", mode)
                print(f"{mode}: {' '.join(shlex.quote(c) for c in cmd)}")
                if "--conf" in cmd:
                    for name in ("pslurm.conf", "gres.conf"):
                        text = (Path(cmd[-1]).parent / name).read_text()
                        print(f"  {name}:\n" + "".join(f"    {line}\n" for line in text.splitlines()), end="")
                print(f"  {psbatch_line(request_of(example, mode))}")
        print()

    results: list[Result] = []
    if not args.no_sim:
        for mode in modes:
            results.append(simulate(jobs, mode))
    if not args.dry_run and not args.no_cluster:
        for mode in modes:
            print(f"running {mode} on a fresh cluster ...", flush=True)
            res = run_cluster(jobs, mode)
            print(f"  {mode}: {res.wall:.0f} s from pslurm up to the last end", flush=True)
            results.append(res)
    results.sort(key=lambda r: (modes.index(r.mode), r.source != "measured"))
    lines = table(results)
    notes = [n for r in results for n in r.notes]
    if not args.dry_run and not args.no_cluster:
        notes.append("")
        notes += [f"- {r.mode}: {r.wall:.0f} s on the cluster, pslurm up to the last end" for r in results
                  if r.source == "measured"]
        notes.append(f"- the whole bench: {time.perf_counter() - began:.0f} s")
    legend = ["", "*measured*: on the cluster, from its own records; *simulated*: `policy.plan` alone on the same "
              "workload (a backfill pass at every arrival and end, no launch or report latency). "
              "OOM: runs ended OUT_OF_MEMORY and resubmitted; oversubscribed: runs that at some moment shared a GPU "
              "whose summed use passed its memory (nothing fences shards); slice / use: the mean gpumem slice "
              "over the memory the run used."]
    print("\n".join(lines + legend + notes))
    if not args.dry_run or args.out:
        path = Path(args.out) if args.out else ROOT / "bench" / "results" / \
            f"gpu_sharing-{datetime.date.today().isoformat()}.md"
        path.write_text("\n".join(out + lines + legend + notes) + "\n")
        print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
