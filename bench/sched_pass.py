"""One scheduling pass (``pslurm.controller.policy.plan``) as the queue grows: the curve; and the same
passes against another revision's policy: same plans, and the times side by side.

    python bench/sched_pass.py [--pending 1000,10000,100000] [--nodes 1000] [--repeat 7] [--shared 0,0.3]
                               [--kind main,backfill] [--against REV] [--seeds 5] [--random N] [--profile]

Synthetic snapshots as in ``scheduler_bench.py`` (1/2/4/8-GPU jobs, throttled arrays, dependencies,
time limits from 10 minutes to a day; 1000 nodes of 8 GPUs, 90 % busy with running jobs of known
ends, so most jobs wait and the first ``bf_max_job_test`` of them get reservations: backfill);
``--shared F`` makes that fraction of the jobs ask a share of one GPU (and of the running one-GPU
jobs, GPUs shared by 1-3 jobs), a comma list for several workloads. Each size is planned
``--repeat`` times after a warm-up; prints min / median / max of wall time and of the process's CPU
time (the machine may be shared: CPU time is the steadier figure).
``--kind`` picks the passes timed: ``main`` (``plan(snap, backfill=False)``: the pass run on every
change, no reservations) and ``backfill`` (the pass run every bf_interval); both by default.

``--against REV`` (a git revision: ``main``, ``HEAD~3``) loads that revision's policy modules
(``pslurm/controller/{policy,sharing_policy,...}.py``, whichever it has) beside the working tree's,
plans every snapshot of every seed of ``--seeds`` (a comma list) with both, and checks that the
plans are the same: every start (job, nodes, GPUs), every reason, every reservation (time and
nodes). The timing runs alternate the two (this tree first, then the other, then the other way
round) so that a machine's load falls on both alike. Exits 1 when a plan differs.
``--random N`` with ``--against`` also plans N small random snapshots that use every feature the
synthetic workload leaves out (typed GPUs, multi-node jobs with per-node shares and -w, --exclusive,
-w/-x, shares of every kind and type, GPUs the view does not list, holds, dependencies, begin times,
partition states and MaxTime, per-user limits, array throttles, zero and missing time limits, a
small bf_max_job_test) with both revisions, both passes each.
``--profile`` prints cProfile's top functions for the largest size, for each kind.
Figures are measured, never asserted.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scheduler_bench import GPUS_PER_NODE, synthetic_snapshot  # noqa: E402

from pslurm.controller.policy import (  # noqa: E402
    Limits,
    NodeView,
    PendingJob,
    Plan,
    RunningJob,
    SharedGpu,
    Snapshot,
    plan,
)
from pslurm.core.gres import GresRequest  # noqa: E402
from pslurm.core.sharing import GpuShare  # noqa: E402

POLICY_MODULES = ("policy", "sharing_policy", "multinode_policy", "nodemodel", "snapshot")  # any a revision has


def timed(fn: Callable[[Snapshot], Plan], snap: Snapshot, repeat: int) -> tuple[list[float], list[float], Plan]:
    result = fn(snap)  # warm-up
    walls, cpus = [], []
    for _ in range(repeat):
        result, wall, cpu = once(fn, snap)
        walls.append(wall)
        cpus.append(cpu)
    return walls, cpus, result


def once(fn: Callable[[Snapshot], Plan], snap: Snapshot) -> tuple[Plan, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    result = fn(snap)
    return result, time.perf_counter() - w0, time.process_time() - c0


def spread(values: list[float]) -> str:
    return f"{min(values) * 1000:.1f} / {statistics.median(values) * 1000:.1f} / {max(values) * 1000:.1f} ms"


def load_revision(rev: str, into: Path) -> Any:
    """``rev``'s policy modules as the package ``policy_at_rev`` (their imports of each other rewritten
    to it), and its ``policy`` module. Everything else they import is this tree's."""
    package = into / "policy_at_rev"
    package.mkdir()
    (package / "__init__.py").write_text("")
    found = []
    for name in POLICY_MODULES:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:pslurm/controller/{name}.py"],
                               capture_output=True, text=True)
        if shown.returncode == 0:
            found.append((name, shown.stdout))
    if not any(name == "policy" for name, _ in found):
        sys.exit(f"sched_pass: no pslurm/controller/policy.py at {rev}")
    for name, text in found:
        for other, _ in found:
            text = text.replace(f"pslurm.controller.{other} ", f"policy_at_rev.{other} ")
            text = text.replace(f"pslurm.controller.{other}\n", f"policy_at_rev.{other}\n")
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, str(into))
    return importlib.import_module("policy_at_rev.policy")


def plan_key(p: Any) -> tuple[Any, ...]:
    """Everything a plan decides, comparable across two revisions' classes."""
    starts = [(s.job_id, s.node, s.gpu_indices, getattr(s, "more", ())) for s in p.placements]
    return (starts, p.reasons, p.estimates, p.reserved_on, getattr(p, "reserved_more", {}))


def compare(args: argparse.Namespace, other: Any, sizes: list[int], kinds: list[str],
            workloads: list[float]) -> bool:
    """Plan every snapshot with both revisions: same plans? Then time both, alternating."""
    same_everywhere = True
    for shared in workloads:
        for pending in sizes:
            for seed in [int(s) for s in args.seeds.split(",")]:
                snap = synthetic_snapshot(pending, args.nodes, seed=seed, shared=shared)
                for kind in kinds:
                    backfill = kind == "backfill"
                    mine, theirs = plan(snap, backfill=backfill), other.plan(snap, backfill=backfill)
                    same = plan_key(mine) == plan_key(theirs)
                    same_everywhere &= same
                    print(f"{kind} pass, {pending} pending, {shared:.0%} shared, seed {seed}: "
                          f"{len(mine.placements)} started, {len(mine.estimates)} reservations; "
                          f"same plan as {args.against}: {same}")
            snap = synthetic_snapshot(pending, args.nodes, seed=int(args.seeds.split(",")[0]), shared=shared)
            for kind in kinds:
                fns = [functools.partial(f, backfill=kind == "backfill") for f in (plan, other.plan)]
                for fn in fns:
                    fn(snap)  # warm-up
                cpus: list[list[float]] = [[], []]
                walls: list[list[float]] = [[], []]
                for r in range(args.repeat):
                    for k in ((0, 1) if r % 2 == 0 else (1, 0)):
                        _, wall, cpu = once(fns[k], snap)
                        walls[k].append(wall)
                        cpus[k].append(cpu)
                ratio = statistics.median(cpus[0]) / statistics.median(cpus[1])
                print(f"  {kind} pass, {pending} pending x {args.nodes} nodes x {GPUS_PER_NODE} GPUs, "
                      f"{shared:.0%} shared ({len(snap.running)} running), {args.repeat} runs each, interleaved: "
                      f"this tree CPU {spread(cpus[0])}, wall {spread(walls[0])}; {args.against} CPU "
                      f"{spread(cpus[1])}, wall {spread(walls[1])} (min / median / max); "
                      f"median CPU ratio {ratio:.3f}")
    return same_everywhere


def compare_random(other: Any, count: int) -> bool:
    """``count`` random snapshots (seeds 0 to count-1), both passes, planned by both revisions: same plans?"""
    differ = []
    for seed in range(count):
        snap = random_snapshot(random.Random(seed))
        for backfill in (False, True):
            if plan_key(plan(snap, backfill=backfill)) != plan_key(other.plan(snap, backfill=backfill)):
                differ.append(f"{seed}{'' if backfill else ' (main pass)'}")
    print(f"{count} random snapshots, both passes: {len(differ)} plans differ"
          + (f" (seeds {', '.join(differ[:10])})" if differ else ""))
    return not differ


TYPES = (None, "a100", "h100")


def random_snapshot(rng: random.Random) -> Snapshot:
    """A small snapshot (1-12 nodes, up to 40 pending jobs) with every feature of the policy's input."""
    now = 1000.0
    nodes, running = [], []
    for k in range(rng.randint(1, 12)):
        name = f"c{k:03d}"
        kind = rng.choice(TYPES)
        inventory = tuple((i, kind if rng.random() < 0.8 else rng.choice(TYPES)) for i in range(rng.randint(0, 6)))
        busy = [g for g in inventory if rng.random() < 0.4]
        cpus = rng.randint(4, 32)
        for index, _ in busy:
            end = rng.choice([None, now + rng.randint(-50, 5000)])  # overdue ends too
            share = _random_share(rng, typed=False) if rng.random() < 0.3 else None
            for _ in range(rng.randint(1, 2) if share else 1):
                running.append(RunningJob(len(running) + 10_000, name, 1, rng.randint(0, 100), (index,), end,
                                          rng.choice("uvw"), rng.choice([None, 7]), share))
        if rng.random() < 0.1:  # a GPU the view does not list
            running.append(RunningJob(len(running) + 10_000, name, 1, 0, (99,), now + 300, "u"))
        capacity = tuple(SharedGpu(i, t, rng.choice([0, 16000, 40000]), rng.choice([0, 4, 8]), rng.choice([0, 100]))
                         for i, t in inventory) if rng.random() < 0.6 else ()
        nodes.append(NodeView(name, frozenset(rng.sample(["gpu", "cpu", "all"], rng.randint(1, 2))),
                              max(0, cpus - 2 * len(busy)), 1000, tuple(g for g in inventory if g not in busy),
                              rng.random() < 0.9, inventory, capacity, cpus if rng.random() < 0.7 else 0, 1000))
    names = [v.name for v in nodes]
    pending = [_random_job(rng, j + 1, names, now) for j in range(rng.randint(0, 40))]
    return Snapshot(pending, nodes, now, {}, running,
                    {"cpu": rng.choice(["UP", "UP", "DRAIN", "DOWN", "INACTIVE"])}, {"all": rng.choice([None, 3600])},
                    Limits(rng.choice([0, 0, 3]), rng.choice([0, 0, 4]), rng.choice([0, 0, 20])),
                    rng.choice([0, 2, 500]))


def _random_job(rng: random.Random, job_id: int, names: list[str], now: float) -> PendingJob:
    share = _random_share(rng, typed=True) if rng.random() < 0.25 else None
    gres = tuple(GresRequest("gpu", rng.choice(TYPES), 1) for _ in range(rng.choice([0, 1, 1, 2, 3])))
    if share is not None:
        gres = (GresRequest(share.kind, share.type, share.amount),)
    num_nodes = rng.choice([1, 1, 1, 2, 3])
    per_node = ()
    if num_nodes > 1 and rng.random() < 0.5:  # a block distribution's shares: largest first
        per_node = tuple(sorted(((rng.randint(1, 8), rng.randint(0, 100)) for _ in range(num_nodes)), reverse=True))

    def some(most: int) -> frozenset[str]:
        return frozenset(rng.sample(names, min(len(names), rng.randint(1, most))))

    return PendingJob(job_id, rng.choice(["gpu", "cpu", "all"]), rng.randint(1, 8), rng.randint(0, 200), gres,
                      rng.randint(0, 5), rng.choice([None, 0, 60, 600, 3600]), rng.choice("uvwx"),
                      rng.choice([None, 7, 8]), rng.choice([None, 1, 2]),
                      rng.choice(["satisfied"] * 20 + ["waiting", "never"]), rng.choice([""] * 30 + ["user", "admin"]),
                      some(4) if rng.random() < 0.2 else None, share,
                      rng.choice([None] * 8 + [now + 10, now - 10]), num_nodes, per_node,
                      some(2) if rng.random() < 0.15 else None, rng.random() < 0.15)


def _random_share(rng: random.Random, typed: bool) -> GpuShare:
    kind = rng.choice(["shard", "mps", "gpumem"])
    amount = {"shard": rng.randint(1, 5), "mps": rng.randint(10, 80), "gpumem": rng.randint(1, 20) * 1000}[kind]
    return GpuShare(kind, amount, rng.choice(TYPES) if typed and kind == "shard" else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", default="1000,10000,100000")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--shared", default="0", help="fractions of jobs asking a share of a GPU, a comma list")
    parser.add_argument("--against", default="", help="a git revision whose policy plans the same snapshots")
    parser.add_argument("--seeds", default="5", help="the snapshots' seeds (comma list) for --against")
    parser.add_argument("--random", type=int, default=0, help="with --against: this many small random snapshots too")
    parser.add_argument("--kind", default="main,backfill", help="passes to time: main, backfill or both")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    sizes = [int(x) for x in args.pending.split(",")]
    kinds = [k for k in ("main", "backfill") if k in args.kind.split(",")]
    workloads = [float(x) for x in args.shared.split(",")]
    if args.against:
        with tempfile.TemporaryDirectory() as tmp:
            other = load_revision(args.against, Path(tmp))
            same = compare_random(other, args.random) if args.random else True
            same &= compare(args, other, sizes, kinds, workloads)
        print(f"same plans as {args.against} everywhere: {same}")
        sys.exit(0 if same else 1)
    for shared in workloads:
        for pending in sizes:
            snap = synthetic_snapshot(pending, args.nodes, shared=shared)
            for kind in kinds:
                fn = functools.partial(plan, backfill=kind == "backfill")
                walls, cpus, result = timed(fn, snap, args.repeat)
                print(f"{kind} pass: {pending} pending x {args.nodes} nodes x {GPUS_PER_NODE} GPUs, {shared:.0%} "
                      f"shared ({len(snap.running)} running): wall {spread(walls)}, CPU {spread(cpus)} "
                      f"(min / median / max of {args.repeat}); {len(result.placements)} started, "
                      f"{len(result.estimates)} reservations")
    if args.profile:
        import cProfile
        import pstats

        snap = synthetic_snapshot(sizes[-1], args.nodes, shared=workloads[-1])
        for kind in kinds:
            profiler = cProfile.Profile()
            profiler.runcall(plan, snap, backfill=kind == "backfill")
            print(f"-- {kind} pass")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
