"""Multi-node jobs in the scheduling pass: where a job that takes several nodes at once starts, and
where the backfill pass reserves it. A part of :func:`pslurm.controller.policy.plan`, taken only for
jobs with ``num_nodes`` > 1 or ``required_nodes`` given.

Each node takes a share, ``per_node[i]`` (CPUs, memory) for the i-th node, the GPU request ``gres``
on every node. The job starts only on N distinct nodes that can each take their share now (partition,
-w/-x, every node of ``required_nodes`` among them, and on a node holding a reservation only where it
delays none), all at once or not at all: the placement's ``node`` takes share 0 and ``more`` the
others, in order. The largest shares are matched first (a block distribution's shares only shrink).
One that cannot start claims the nodes it could use in the main pass, as a single-node job, unless
fewer than N could ever take it (nodes down, :func:`enough_nodes`): then it claims none. The backfill
pass reserves it at the earliest time T at which N nodes each hold their share throughout
[T, T + its limit) (candidates: each node's own earliest start, in increasing order), on all N
(``reserved_on`` the first, ``reserved_more`` the others). A share of a GPU is never multi-node
(BadConstraints).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pslurm.controller.nodemodel import INF, NodeTimeline, Vector, pick_gpus
from pslurm.controller.snapshot import PendingJob

Group = list[tuple[int, tuple[int, ...], int, int]]  # (node, GPUs, cpus, mem_mb) of each share, in share order


def _assign(shares: Sequence[tuple[int, int]], cands: Sequence[tuple[int, tuple[int, ...]]], required: int,
            fits: Callable[[int, tuple[int, ...], tuple[int, int]], bool]) -> Group | None:
    """One candidate node per share (``cands``: (node, GPUs), the ``required`` first ones must all be
    taken), each fitting its share, or None. The largest shares are matched first, each to the first
    candidate that fits it: the shares of a block distribution only shrink, so a node that fits a
    larger share fits every smaller one and this finds a match wherever there is one."""
    n = len(shares)
    order = sorted(range(n), key=lambda k: (-shares[k][0], -shares[k][1]))
    out: list[tuple[int, tuple[int, ...], int, int] | None] = [None] * n
    used: set[int] = set()
    left_required = required
    for pos, k in enumerate(order):
        only_required = left_required >= n - pos  # the slots left are the required nodes'
        for rank, (i, chosen) in enumerate(cands):
            if i in used:
                continue
            if only_required and rank >= required:
                break
            if fits(i, chosen, shares[k]):
                used.add(i)
                out[k] = (i, chosen, *shares[k])
                if rank < required:
                    left_required -= 1
                break
        if out[k] is None:
            return None
    return [o for o in out if o is not None]


def start_many(job: PendingJob, shares: tuple[tuple[int, int], ...], duration: float, nodes: list[NodeTimeline],
               levels: Sequence[dict[int, None]], gpus: int, now: float, by_index: dict[str, int],
               scan_limit: int) -> Group | None:
    """The nodes (with their GPUs and shares, in share order) where a multi-node job starts now, or None:
    distinct available nodes of its partition not claimed (those in ``levels``), allowed by -w/-x, every
    node -w names among them, each with its share and GPUs free now and, where it holds a reservation,
    free for the job's whole duration (a start delays no reservation). Up to ``scan_limit`` nodes are
    tried beyond those -w names."""
    n = len(shares)
    small = (min(c for c, _ in shares), min(m for _, m in shares))

    def fits(i: int, chosen: tuple[int, ...], share: tuple[int, int]) -> bool:
        node = nodes[i]
        if node.cpus < share[0] or node.mem < share[1]:
            return False
        if job.exclusive and not node.idle():
            return False
        if node.reserved:
            need = node.whole() if job.exclusive else node.vector(share[0], share[1], chosen)
            return node.earliest(need, duration, stop=now + 1e-6) == now
        return True

    cands: list[tuple[int, tuple[int, ...]]] = []
    required = sorted(job.required_nodes or ())
    for name in required:
        i = by_index.get(name)
        if i is None:
            return None
        node = nodes[i]
        level = len(node.free)
        if level >= len(levels) or i not in levels[level]:
            return None  # not in its partition, down, or claimed by a higher-priority job
        if job.allowed_nodes is not None and name not in job.allowed_nodes:
            return None
        chosen = pick_gpus(node.free, job.gres)
        if chosen is None or not fits(i, chosen, small):
            return None
        cands.append((i, chosen))
    seen = {i for i, _ in cands}
    tried = 0
    for level in range(gpus, len(levels)):
        for i in levels[level]:
            if i in seen:
                continue
            node = nodes[i]
            if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                continue
            tried += 1
            chosen = pick_gpus(node.free, job.gres)
            if chosen is None or not fits(i, chosen, small):
                continue
            cands.append((i, chosen))
            if len(cands) >= n:
                got = _assign(shares, cands, len(required), fits)
                if got is not None:
                    return got
            if tried >= scan_limit:
                break
        if tried >= scan_limit:
            break
    return _assign(shares, cands, len(required), fits) if len(cands) >= n else None


def enough_nodes(job: PendingJob, shares: tuple[tuple[int, int], ...], mine: Sequence[int],
                 nodes: list[NodeTimeline]) -> bool:
    """Whether the nodes a multi-node job could use (``mine``) are enough: as many as it takes, every
    node -w names among them."""
    names = {nodes[i].name for i in mine}
    return len(mine) >= len(shares) and (job.required_nodes or frozenset()) <= names


def reserve_many(job: PendingJob, shares: tuple[tuple[int, int], ...], duration: float,
                 levels: Sequence[dict[int, None]],
                 nodes: list[NodeTimeline]) -> tuple[float, list[tuple[int, Vector]]] | None:
    """The earliest time T at which N distinct nodes each hold their share of a multi-node job from T
    for its duration, given every start and reservation so far, and what it holds on each (in share
    order), or None. Candidate times: each node's own earliest start for a share, in increasing order;
    at each, the nodes whose earliest start is by then are tested with ``fits_during``."""
    n = len(shares)
    required = job.required_nodes or frozenset()
    kinds = sorted(set(shares))
    base: dict[int, Vector] = {}
    first: list[tuple[float, int]] = []  # (the node's earliest start for any share, node)
    for level in levels:
        for i in level:
            node = nodes[i]
            if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                continue
            need = node.need(job)
            if need is None:
                continue
            base[i] = need
            if job.exclusive:
                e = node.earliest(need, duration)
            else:
                e = min(node.earliest((c, m, *need[2:]), duration) for c, m in kinds)
            if e < INF:
                first.append((e, i))
    first.sort()
    req_idx = [i for _, i in first if nodes[i].name in required]
    if len(req_idx) < len(required) or len(first) < n:
        return None
    start_at = max((e for e, i in first if nodes[i].name in required), default=-INF)
    times = sorted({e for e, _ in first if e >= start_at})
    for t in times:
        end = t + duration

        def fits(i: int, _chosen: tuple[int, ...], share: tuple[int, int], t: float = t, end: float = end) -> bool:
            need = base[i] if job.exclusive else (share[0], share[1], *base[i][2:])
            return nodes[i].fits_during(need, t, end)

        active = req_idx + [i for e, i in first if e <= t and nodes[i].name not in required]
        if len(active) < n:
            continue
        got = _assign(shares, [(i, ()) for i in active], len(req_idx), fits)
        if got is not None:
            return t, [(i, base[i] if job.exclusive else (c, m, *base[i][2:])) for i, _, c, m in got]
    return None
