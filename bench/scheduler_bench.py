"""Scheduling at scale (issue #5): one policy pass, the store's queue, psqueue's rendering.

    python bench/scheduler_bench.py [--pending 10000] [--nodes 1000] [--queue 100000] [--pg URL]

1. One scheduling pass (priority order + backfill, pslurm.controller.policy.plan) on a synthetic
   snapshot: --pending jobs (1/2/4/8 GPUs, arrays with throttles, dependencies, time limits) over
   --nodes nodes of 8 GPUs, most of them busy with running jobs of known end times; plus the
   multifactor priority of every pending job (pslurm.controller.priority).
2. Submitting --queue jobs through the store (arrays of 1000 tasks, and single jobs) and draining
   them with the controller's own scheduler passes (agents stubbed: launches are not sent), on
   SQLite and, with --pg or PSLURM_TEST_PG_URL, PostgreSQL.
3. psqueue's listing of a --queue job queue: the listing's JSON (GET /pslurm/v1/jobs, as psctld
   writes it and pslurm.client reads it) and the rendering, in process; then live psqueue processes.

Prints one line per figure; figures are measured, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pslurm.auth.credential import Identity  # noqa: E402
from pslurm.controller.policy import NodeView, PendingJob, RunningJob, SharedGpu, Snapshot, plan  # noqa: E402
from pslurm.core.gres import GresRequest  # noqa: E402
from pslurm.core.sharing import GpuShare  # noqa: E402

GPUS_PER_NODE = 8
GPU_MB = 80 * 1024


def synthetic_snapshot(pending: int, nodes: int, seed: int = 5, busy: float = 0.9, shared: float = 0.0) -> Snapshot:
    """``pending`` jobs over ``nodes`` nodes of 8 GPUs, most of them busy (``busy``: the chance that one
    more running job takes GPUs of a node). With ``shared`` > 0 every GPU can be shared (8 shards, 100
    MPS units, 80 GiB), that fraction of the pending jobs asks a share of one GPU (shard, mps or
    gpumem), and of the running one-GPU jobs that fraction is a GPU shared by 1-3 jobs. The same
    seed gives the same snapshot; ``shared=0`` gives the snapshot this function always gave."""
    rng = random.Random(seed)
    now = 1_000_000.0
    views, running = [], []
    job_id = 10_000_000
    capacity = tuple(SharedGpu(i, "h100", GPU_MB, 8, 100) for i in range(GPUS_PER_NODE)) if shared else ()
    for n in range(nodes):
        name = f"n{n:04d}"
        gpus = [(i, "h100") for i in range(GPUS_PER_NODE)]
        taken = extra_cpus = 0
        while taken < GPUS_PER_NODE and rng.random() < busy:
            size = min(rng.choice([1, 1, 2, 4, 8]), GPUS_PER_NODE - taken)
            job_id += 1
            end = now + rng.uniform(60, 48 * 3600)
            if shared and size == 1 and rng.random() < shared:  # one GPU shared by 1-3 jobs of one kind
                share = _share(rng)
                user = f"u{rng.randrange(50)}"  # one user (one MPS server) per GPU
                for k in range(rng.randint(1, 3)):
                    running.append(RunningJob(job_id + k, name, 2, 0, (taken,), end - k * 600, user, share=share))
                    extra_cpus += 2
                job_id += 3
                taken += 1
                continue
            running.append(RunningJob(job_id, name, size * 4, 0, tuple(range(taken, taken + size)),
                                      end, f"u{rng.randrange(50)}"))
            taken += size
        views.append(NodeView(name, frozenset({"gpu", "all"} if n % 2 else {"gpu"}), 128 - taken * 4 - extra_cpus,
                              1_000_000, tuple(gpus[taken:]), True, tuple(gpus), capacity))
    jobs = []
    next_id = 1
    while len(jobs) < pending:
        kind = rng.random()
        limit = rng.choice([600, 3600, 4 * 3600, 24 * 3600])
        gpus = rng.choice([1, 1, 1, 2, 4, 8])
        user = f"u{rng.randrange(50)}"
        prio = rng.randrange(1, 100_000)
        gres, cpus, share = (GresRequest("gpu", None, gpus),), gpus * 4, None
        if shared and rng.random() < shared:
            share = _share(rng)
            gres, cpus = (GresRequest(share.kind, None, share.amount),), 2
        if kind < 0.2:  # an array of 10-100 tasks, throttled
            count = rng.randrange(10, 100)
            throttle = rng.choice([None, 4, 10])
            for t in range(min(count, pending - len(jobs))):
                jobs.append(PendingJob(next_id + t, "gpu", cpus, 0, gres, prio, limit, user, next_id, throttle,
                                       share=share))
            next_id += count
            continue
        dep = "waiting" if kind < 0.3 else "satisfied"
        jobs.append(PendingJob(next_id, rng.choice(["gpu", "gpu", "all"]), cpus, 0, gres, prio, limit, user, None,
                               None, dep, share=share))
        next_id += 1
    return Snapshot(jobs, views, now, running=running)


def _share(rng: random.Random) -> GpuShare:
    """A share of one GPU: 1-2 of its 8 shards, 10-30 of its 100 MPS units, or 8-20 GB of its memory."""
    kind = rng.choice(["shard", "mps", "gpumem"])
    amount = {"shard": rng.randint(1, 2), "mps": rng.randint(10, 30), "gpumem": rng.randint(8, 20) * 1024}[kind]
    return GpuShare(kind, amount)


def bench_plan(pending: int, nodes: int, repeat: int) -> None:
    snap = synthetic_snapshot(pending, nodes)
    times = []
    result = plan(snap)
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = plan(snap)
        times.append(time.perf_counter() - t0)
    print(f"plan: {pending} pending x {nodes} nodes x {GPUS_PER_NODE} GPUs ({len(snap.running)} running): "
          f"median {statistics.median(times) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms; "
          f"{len(result.placements)} started, {len(result.estimates)} reservations")
    empty = Snapshot(snap.pending, [NodeView(v.name, v.partitions, 128, v.free_mem_mb, v.gpus, True, v.gpus)
                                    for v in snap.nodes], snap.now)
    t0 = time.perf_counter()
    result = plan(empty)
    print(f"plan on an idle cluster: {(time.perf_counter() - t0) * 1000:.1f} ms, {len(result.placements)} started")
    from pslurm.controller import priority as prio
    from pslurm.core.config import SchedulerConfig

    cfg = SchedulerConfig(weight_age=1000, weight_fairshare=10000, weight_jobsize=100, weight_partition=1000)
    usage = {("(null)", f"u{i}"): float(i * 1000) for i in range(50)}
    t0 = time.perf_counter()
    shares = prio.fairshare_factors(usage, usage.keys())
    ctx = prio.PriorityContext(cfg, snap.now, shares, nodes * 8.0 + nodes * 128, {"gpu": 1.0, "all": 1.0})
    for j in snap.pending:
        f = prio.factors(ctx, eligible_time=snap.now - 100, account="", user=j.user, partition=j.partition,
                         cpus=j.cpus, mem_mb=0, gpus=j.gres[0].count, nice=0)
        prio.priority(f, cfg)
    print(f"priority of {pending} pending jobs (multifactor, fair share of 50 users): "
          f"{(time.perf_counter() - t0) * 1000:.1f} ms")


OPERATOR = Identity(0, 0)  # submits for the bench user, as root may


class NoAgents:
    """Launches are not sent: the bench measures the controller and its store, not agents."""

    def launch_async(self, target, job, on_error):  # type: ignore[no-untyped-def]
        pass

    def signal(self, target, job_id, signal):  # type: ignore[no-untyped-def]
        pass


def bench_store(url: str, label: str, queue: int, nodes: int) -> None:
    from pslurm.controller.app import assemble
    from pslurm.controller.store import Store
    from pslurm.core.config import parse_slurm_conf
    from pslurm.core.jobspec import JobSpec
    from pslurm.core.states import JobState, NodeState

    conf = parse_slurm_conf(f"NodeName=n[0000-{nodes - 1:04d}] CPUs=128 RealMemory=1000000 Gres=gpu:{GPUS_PER_NODE}\n"
                            "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE\n")
    store = Store(url)
    store.migrate()
    parts = assemble(conf, store, NoAgents())  # type: ignore[arg-type]
    for name in conf.nodes:
        store.set_node_state(name, NodeState.UP, time.time())
    spec = JobSpec(name="bench", user="bench", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   gres=(GresRequest("gpu", None, 1),), time_limit=3600)
    singles = min(2000, queue // 10)
    t0 = time.perf_counter()
    for _ in range(singles):
        parts.jobs.submit(spec, OPERATOR)
    single_s = time.perf_counter() - t0
    arrays = (queue - singles) // 1000
    from dataclasses import replace

    t0 = time.perf_counter()
    for _ in range(arrays):
        parts.jobs.submit(replace(spec, array="0-999"), OPERATOR)
    array_s = time.perf_counter() - t0
    total = singles + arrays * 1000
    print(f"{label}: submit {singles} single jobs {singles / single_s:.0f} jobs/s; "
          f"{arrays} arrays of 1000 tasks {arrays * 1000 / array_s:.0f} tasks/s ({total} queued)")
    t0 = time.perf_counter()
    store.queue()
    print(f"{label}: reading the {total}-job queue for a pass: {(time.perf_counter() - t0) * 1000:.0f} ms")
    t_sched = t_end = 0.0
    passes = ended = 0
    first_pass = None
    while True:
        t0 = time.perf_counter()
        started = parts.scheduler.schedule()
        elapsed = time.perf_counter() - t0
        first_pass = elapsed if first_pass is None else first_pass
        t_sched += elapsed
        passes += 1
        if not started:
            break
        t0 = time.perf_counter()
        for alloc in store.allocations():
            store.finish(alloc.job_id, alloc.node, 0, JobState.COMPLETED, 0, 0, time.time())
            ended += 1
        t_end += time.perf_counter() - t0
    print(f"{label}: drained {ended} jobs in {passes} passes: scheduling {t_sched:.1f} s "
          f"(first pass, {total} pending: {first_pass:.2f} s; {ended / t_sched:.0f} starts/s), "
          f"ends {t_end:.1f} s ({ended / max(t_end, 1e-9):.0f}/s)")
    store.close()


def bench_psqueue(url: str, queue: int, separate: bool = False) -> None:
    """psqueue's listing (GET /pslurm/v1/jobs) and rendering of a --queue job queue, in process (no HTTP hop):
    arrays of 1000 held tasks, or (``separate``) as many held jobs of their own, each with its own name."""
    import io
    import json
    from dataclasses import replace

    from pslurm.cli import psqueue
    from pslurm.controller.store import Store
    from pslurm.core import restjson
    from pslurm.core.jobinfo import JobInfo, share_specs
    from pslurm.core.jobspec import JobSpec

    store = Store(url)
    store.migrate()
    spec = JobSpec(name="bench", user="bench", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   gres=(GresRequest("gpu", None, 1),), time_limit=3600, array="0-999",
                   environment=dict(os.environ), hold=True)  # held: the live cluster below starts none
    if store.count_active() < queue:
        if separate:
            single = replace(spec, array="")
            for i in range(queue):
                store.submit(replace(single, name=f"bench{i}"), "gpu", 3600, time.time(), requeue=True)
        else:
            for _ in range(queue // 1000):
                store.submit(spec, "gpu", 3600, time.time(), requeue=True, array_ids=tuple(range(1000)))
    what = "separate jobs" if separate else "jobs (100 arrays)"
    for expand in ((False,) if separate else (False, True)):
        t0 = time.perf_counter()
        # the listing as psqueue asks for it: the jobs' own columns; pending array tasks collapsed unless
        # -r (to JSON as psctld writes it, and back to the client library's records, is the wire's share)
        jobs = store.get_jobs(light=True, collapse_arrays=not expand)
        t_store = time.perf_counter() - t0
        t0 = time.perf_counter()
        refs: dict = {}  # psctld's brief listing, as psqueue asks for it
        wire = json.dumps({"jobs": [restjson.job_to_brief_json(j, refs) for j in jobs], "errors": [],
                           "warnings": []}, separators=(",", ":"), ensure_ascii=False).encode()
        t_encode = time.perf_counter() - t0
        t0 = time.perf_counter()
        found = [JobInfo(data) for data in share_specs(json.loads(wire)["jobs"])]  # as psqueue reads it
        t_decode = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = io.StringIO()
        lines = psqueue.render_queue(psqueue.DEFAULT_FORMAT, found, header=True)
        out.write("\n".join(lines))
        t_render = time.perf_counter() - t0
        t0 = time.perf_counter()
        read: dict = {}
        [restjson.job_from_json(data, read) for data in share_specs(json.loads(wire)["jobs"])]
        t_client = time.perf_counter() - t0
        total = t_store + t_encode + t_decode + t_render
        print(f"psqueue{' -r' if expand else ''} on {queue} {what}: store read {t_store * 1000:.0f} ms "
              f"({len(jobs)} rows), to JSON ({len(wire) / 1e6:.2f} MB) {t_encode * 1000:.0f} ms, "
              f"back {t_decode * 1000:.0f} ms, render {t_render * 1000:.0f} ms ({len(lines)} lines); "
              f"{total * 1000:.0f} ms in all (Client.jobs' records instead of the views: {t_client * 1000:.0f} ms)")
    store.close()
    bench_psqueue_live(url, queue, what, expand=not separate)


def bench_psqueue_live(url: str, queue: int, what: str, repeat: int = 10, expand: bool = True) -> None:
    """Cold ``psqueue`` processes against a live controller (``pslurm up`` on that store), whose
    scheduler keeps passing over the held queue meanwhile: the wall time a user waits."""
    import statistics
    import subprocess
    import sys

    bin_dir = os.path.dirname(sys.executable)
    with tempfile.TemporaryDirectory() as state:
        env = {**os.environ, "PSLURM_CONF": f"{state}/pslurm.conf"}
        subprocess.run([f"{bin_dir}/pslurm", "up", "--nodes", "1", "--gpus-per-node", "2", "--state-dir", state,
                        "--db", url], env=env, check=True, capture_output=True)
        try:
            for args, count in ((["psqueue"], repeat), (["psqueue", "-r"], 3))[:2 if expand else 1]:
                times = []
                for _ in range(count):
                    t0 = time.perf_counter()
                    done = subprocess.run([f"{bin_dir}/{args[0]}", *args[1:]], env=env, check=True,
                                          capture_output=True, text=True)
                    times.append(time.perf_counter() - t0)
                print(f"live {' '.join(args)} on {queue} {what}: median {statistics.median(times) * 1000:.0f} ms, "
                      f"max {max(times) * 1000:.0f} ms over {count} ({done.stdout.count(chr(10))} lines)")
        finally:
            subprocess.run([f"{bin_dir}/pslurm", "down", "--state-dir", state], env=env, check=True,
                           capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--queue", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--pg", default=os.environ.get("PSLURM_TEST_PG_URL"))
    parser.add_argument("--skip", default="", help="comma list of: plan, sqlite, pg, psqueue")
    parser.add_argument("--separate", action="store_true",
                        help="psqueue's queue: --queue jobs of their own rather than arrays of 1000 tasks")
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    if "plan" not in skip:
        bench_plan(args.pending, args.nodes, args.repeat)
    with tempfile.TemporaryDirectory() as tmp:
        if "sqlite" not in skip:
            bench_store(f"sqlite:///{tmp}/bench.db", "sqlite", args.queue, args.nodes)
        if "psqueue" not in skip:
            bench_psqueue(f"sqlite:///{tmp}/psqueue.db", args.queue, args.separate)
    if args.pg and "pg" not in skip:
        from sqlalchemy import create_engine, text

        name = f"pslurm_bench_{os.getpid()}"
        admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            bench_store(args.pg.rsplit("/", 1)[0] + "/" + name, "postgresql", args.queue, args.nodes)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            admin.dispose()


if __name__ == "__main__":
    main()
