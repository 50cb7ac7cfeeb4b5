"""One scheduling pass with association and QOS limits set, against the same pass without: what
``AccountingStorageEnforce=limits`` costs the policy (controller/acct_policy.py).

    python bench/acct_limits_pass.py [--pending 10000] [--nodes 1000] [--repeat 5] [--accounts 20]

The synthetic snapshot of ``scheduler_bench.py`` (as ``sched_pass.py``'s), its jobs and running jobs
spread over ``--accounts`` accounts of 5 users each under root, every account with a GrpTRES on GPUs
and CPUs and a MaxWall, every user association a MaxJobs, the QOS a MaxTRESPerUser: every job is
checked against five levels of limits (``--gpus``: loose by default, so that the limits hold no job
and every job is checked and placed; 400 holds most). Prints min / median / max CPU time of each pass, both kinds,
and how many jobs the limits hold back. Figures are measured, never asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scheduler_bench import synthetic_snapshot  # noqa: E402

from pslurm.controller.acct_policy import acct_limits  # noqa: E402
from pslurm.controller.policy import Snapshot, plan  # noqa: E402
from pslurm.core.assoc import Assoc, Associations, Qos  # noqa: E402


def limited(snap: Snapshot, accounts: int, gpus: int) -> Snapshot:
    """``snap`` with every job charged to one of ``accounts`` x 5 user associations, limits set (``gpus``:
    each account's GrpTRES on GPUs, each user's MaxTRESPerUser a tenth of it)."""
    assocs = [Assoc("root", id=1)]
    for a in range(accounts):
        assocs.append(Assoc(f"a{a}", parent="root", id=len(assocs) + 1, grp_tres=f"gres/gpu={gpus},cpu={gpus * 10}",
                            max_wall=86400))
        for u in range(5):
            assocs.append(Assoc(f"a{a}", f"u{a}_{u}", id=len(assocs) + 1, max_jobs=max(1, gpus // 5)))
    users = [a for a in assocs if a.user]
    qos = {"normal": Qos("normal", max_tres_per_user=f"gres/gpu={max(1, gpus // 10)}")}
    limits = acct_limits(Associations({}, {}, tuple(assocs), qos))

    def charged(job: Any, i: int) -> Any:
        a = users[i % len(users)]
        return dataclasses.replace(job, user=a.user, assoc_id=a.id, qos="normal")

    return dataclasses.replace(snap, pending=[charged(j, i) for i, j in enumerate(snap.pending)],
                               running=[charged(r, i) for i, r in enumerate(snap.running)], acct=limits)


def cpu_times(snap: Snapshot, backfill: bool, repeat: int) -> list[float]:
    plan(snap, backfill=backfill)  # warm-up
    out = []
    for _ in range(repeat):
        c0 = time.process_time()
        plan(snap, backfill=backfill)
        out.append(time.process_time() - c0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--accounts", type=int, default=20)
    parser.add_argument("--gpus", type=int, default=100000, help="each account's GrpTRES=gres/gpu (400: most held)")
    args = parser.parse_args()
    base = synthetic_snapshot(args.pending, args.nodes, seed=5)
    with_limits = limited(base, args.accounts, args.gpus)
    for backfill in (False, True):
        kind = "backfill" if backfill else "main"
        for name, snap in (("no limits", base), ("limits", with_limits)):
            times = cpu_times(snap, backfill, args.repeat)
            held = sum(1 for r in plan(snap, backfill=backfill).reasons.values()
                       if r.startswith(("Assoc", "QOS")))
            print(f"{kind} pass, {args.pending} pending x {args.nodes} nodes, {name}: CPU "
                  f"{min(times) * 1000:.1f} / {statistics.median(times) * 1000:.1f} / {max(times) * 1000:.1f} ms"
                  f" (min / median / max), {held} held by a limit")


if __name__ == "__main__":
    main()
