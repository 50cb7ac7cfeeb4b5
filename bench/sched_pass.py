"""One scheduling pass (``pslurm.controller.policy.plan``) as the queue grows: the curve.

    python bench/sched_pass.py [--pending 1000,10000,100000] [--nodes 1000] [--repeat 7] [--compare FILE]
                               [--kind main,backfill] [--profile]

Synthetic snapshots as in ``scheduler_bench.py`` (1/2/4/8-GPU jobs, throttled arrays, dependencies,
time limits from 10 minutes to a day; 1000 nodes of 8 GPUs, 90 % busy with running jobs of known
ends, so most jobs wait and the first ``bf_max_job_test`` of them get reservations: backfill). Each
size is planned ``--repeat`` times after a warm-up; prints min / median / max of wall time and of
the process's CPU time (the machine may be shared: CPU time is the steadier figure).
``--kind`` picks the passes timed: ``main`` (``plan(snap, backfill=False)``: the pass run on every
change, no reservations) and ``backfill`` (the pass run every bf_interval); both by default.
``--compare FILE`` also times another version of policy.py (for instance
``git show HEAD:pslurm/controller/policy.py > /tmp/policy_head.py``) on the same snapshots and checks
that its plan is the backfill pass's (its ``plan`` is called with the kind where it takes ``backfill``).
``--profile`` prints cProfile's top functions for the largest size, for each kind.
Figures are measured, never asserted.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scheduler_bench import GPUS_PER_NODE, synthetic_snapshot  # noqa: E402

from pslurm.controller.policy import Plan, Snapshot, plan  # noqa: E402


def timed(fn: Callable[[Snapshot], Plan], snap: Snapshot, repeat: int) -> tuple[list[float], list[float], Plan]:
    result = fn(snap)  # warm-up
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn(snap)
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return walls, cpus, result


def spread(values: list[float]) -> str:
    return f"{min(values) * 1000:.1f} / {statistics.median(values) * 1000:.1f} / {max(values) * 1000:.1f} ms"


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("policy_compared", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", default="1000,10000,100000")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--compare", default="", help="another policy.py to time on the same snapshots")
    parser.add_argument("--kind", default="main,backfill", help="passes to time: main, backfill or both")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    other = load(args.compare) if args.compare else None
    sizes = [int(x) for x in args.pending.split(",")]
    kinds = [k for k in ("main", "backfill") if k in args.kind.split(",")]
    for pending in sizes:
        snap = synthetic_snapshot(pending, args.nodes)
        for kind in kinds:
            fn = functools.partial(plan, backfill=kind == "backfill")
            walls, cpus, result = timed(fn, snap, args.repeat)
            print(f"{kind} pass: {pending} pending x {args.nodes} nodes x {GPUS_PER_NODE} GPUs "
                  f"({len(snap.running)} running): wall {spread(walls)}, CPU {spread(cpus)} "
                  f"(min / median / max of {args.repeat}); {len(result.placements)} started, "
                  f"{len(result.estimates)} reservations")
            if other is None or (kind == "main" and "backfill" not in inspect.signature(other.plan).parameters):
                continue
            o_fn = other.plan
            if "backfill" in inspect.signature(other.plan).parameters:
                o_fn = functools.partial(other.plan, backfill=kind == "backfill")
            o_snap = other.Snapshot(**{f: getattr(snap, f) for f in snap.__dataclass_fields__})
            o_walls, o_cpus, o_result = timed(o_fn, o_snap, args.repeat)
            same = ([(p.job_id, p.node, p.gpu_indices) for p in o_result.placements] ==
                    [(p.job_id, p.node, p.gpu_indices) for p in result.placements]
                    and o_result.reasons == result.reasons and o_result.estimates == result.estimates)
            print(f"  {args.compare}: wall {spread(o_walls)}, CPU {spread(o_cpus)}; same plan: {same}")
    if args.profile:
        import cProfile
        import pstats

        snap = synthetic_snapshot(sizes[-1], args.nodes)
        for kind in kinds:
            profiler = cProfile.Profile()
            profiler.runcall(plan, snap, backfill=kind == "backfill")
            print(f"-- {kind} pass")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
