"""The node model of a scheduling pass: what a node has free now, and its timeline.

A node's resources are a vector: (CPUs, memory, GPUs, GPUs of each type the node has), so that a
job's request (:meth:`NodeTimeline.need`) and what the node has free compare item by item
(:func:`fits`). A node's future is a step function of that vector: what is free now, plus what
running jobs release at their expected ends, less what reservations hold from their start to their
end, each an event (:meth:`NodeTimeline.add_event`). The queries a pass asks of it: the first time
it has N GPUs free (:meth:`~NodeTimeline.first_time_with`, a lower bound), the earliest time a
request is free for a duration (:meth:`~NodeTimeline.earliest`), and whether it is free
throughout an interval (:meth:`~NodeTimeline.fits_during`).

The whole-GPU pass (:mod:`pslurm.controller.policy`), multi-node placement
(:mod:`pslurm.controller.multinode_policy`) and GPU sharing (:mod:`pslurm.controller.sharing_policy`)
all work on these nodes; this module imports none of them.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import defaultdict
from collections.abc import Callable, Sequence

from pslurm.controller.snapshot import NodeView, PendingJob
from pslurm.core.gres import GresRequest

INF = math.inf
Vector = tuple[float, ...]
GpuAsk = tuple[int, tuple[tuple[str, int], ...]]  # a job's GPU count and its count of each type
Inventory = tuple[tuple[int, str | None], ...]  # a node's GPUs: (index, type)
Shape = tuple[dict[int, str | None], dict[str, int]]  # an inventory's GPU types, and each type's vector slot
Bounds = list[tuple[float, int]]  # a heap of (lower bound on a start, node)


def fits(avail: Vector, need: Vector) -> bool:
    """Whether ``avail`` holds ``need``, item by item."""
    for a, n in zip(avail, need, strict=False):
        if a < n:
            return False
    return True


def pick_gpus(free: Sequence[tuple[int, str | None]], gres: Sequence[GresRequest]) -> tuple[int, ...] | None:
    """GPU indices from ``free`` that satisfy ``gres``, or None. Typed requests are served first,
    so that an untyped one does not take the only GPU of a type another item needs."""
    taken: list[int] = []
    remaining = list(free)
    for req in sorted((g for g in gres if g.name == "gpu"), key=lambda g: g.type is None):
        matches = [gpu for gpu in remaining if req.type is None or gpu[1] == req.type][: req.count]
        if len(matches) < req.count:
            return None
        taken.extend(index for index, _ in matches)
        remaining = [gpu for gpu in remaining if gpu not in matches]
    return tuple(sorted(taken))


def _time(point: tuple[float, Vector]) -> float:
    return point[0]


class NodeTimeline:
    """One node during a pass: what is free now (``cpus``, ``mem``, ``free`` GPUs, which starts of
    the pass take), and its future as events (releases and reservations)."""

    __slots__ = ("view", "name", "parts", "cpus", "mem", "free", "slots", "types", "events", "_steps", "now",
                 "reserved", "unknown")

    def __init__(self, view: NodeView, now: float, shapes: dict[Inventory, Shape] | None = None) -> None:
        """``shapes``: the GPU inventories seen so far (a pass's nodes mostly share a few), to share
        their type maps; read only."""
        self.view = view
        self.name = view.name
        self.parts = view.partitions
        self.cpus = view.free_cpus
        self.mem = view.free_mem_mb
        self.free = list(view.free_gpus)
        inventory = view.gpus or view.free_gpus
        shape = None if shapes is None else shapes.get(inventory)
        if shape is None:
            shape = (dict(inventory), {t: i for i, t in enumerate(sorted({t for _, t in inventory if t is not None}))})
            if shapes is not None:
                shapes[inventory] = shape
        self.types, self.slots = shape  # each GPU's type; each type's place in a vector
        self.events: list[tuple[float, Vector]] = []
        self._steps: list[tuple[float, Vector]] | None = None
        self.now = now
        self.reserved = False  # a reservation holds some of it: a start here must delay none
        self.unknown = 0  # GPUs running jobs hold that the view does not list (no inventory given): any type

    def vector(self, cpus: int, mem: int, gpus: Sequence[int]) -> Vector:
        """CPUs, memory and the GPUs of these indices as this node's vector."""
        per = [0] * len(self.slots)
        for index in gpus:
            t = self.types.get(index)
            if t is not None:
                per[self.slots[t]] += 1
        return (cpus, mem, len(gpus), *per)

    def free_vector(self) -> Vector:
        return self.vector(self.cpus, self.mem, [i for i, _ in self.free])

    def whole(self) -> Vector:
        """The whole node as a vector: what an --exclusive job holds."""
        view = self.view
        return self.vector(view.total_cpus or view.free_cpus, view.total_mem_mb or view.free_mem_mb,
                           [i for i, _ in view.gpus or view.free_gpus])

    def idle(self) -> bool:
        """Nothing runs here, nor was started here in this pass: an --exclusive job may start."""
        view = self.view
        return (self.cpus == (view.total_cpus or view.free_cpus) and self.mem == (view.total_mem_mb or view.free_mem_mb)
                and len(self.free) == len(view.gpus or view.free_gpus) and not self.unknown)

    def need(self, job: PendingJob) -> Vector | None:
        """The job's request as this node's vector; None when the node lacks a GPU type it asks."""
        per = [0] * len(self.slots)
        total = 0
        for g in job.gres:
            if g.name != "gpu":
                continue
            total += g.count
            if g.type is not None:
                slot = self.slots.get(g.type)
                if slot is None:
                    return None
                per[slot] += g.count
        need = (job.cpus, job.mem_mb, total, *per)
        if job.exclusive:  # the whole node, which must hold what it asks
            whole = self.whole()
            return whole if fits(whole, need) else None
        return need

    def add_event(self, time: float, delta: Vector) -> None:
        """From ``time`` on, ``delta`` more is free (less, where negative); nothing before now."""
        self.events.append((max(time, self.now + 1e-3), delta))
        self._steps = None

    def steps(self) -> list[tuple[float, Vector]]:
        """(time, what is free from then on), from now, one point per distinct event time."""
        if self._steps is None:
            cur = list(self.free_vector())
            pts = [(self.now, tuple(cur))]
            for time, delta in sorted(self.events, key=lambda e: e[0]):
                for i, d in enumerate(delta):
                    cur[i] += d
                if time <= pts[-1][0]:
                    pts[-1] = (pts[-1][0], tuple(cur))
                else:
                    pts.append((time, tuple(cur)))
            self._steps = pts
        return self._steps

    def first_time_with(self, gpus: int) -> float:
        """The first time this node has ``gpus`` GPUs free: a lower bound on any start needing them."""
        for time, avail in self.steps():
            if avail[2] >= gpus:
                return time
        return INF

    def earliest(self, need: Vector, duration: float, stop: float = INF, after: float | None = None) -> float:
        """The earliest time (from ``after``, else now; before ``stop``) from which ``need`` is free for
        ``duration``, or INF. The candidates are ``after`` and the times at which what is free changes."""
        pts = self.steps()
        n = len(pts)
        if after is None:
            i, start = 0, pts[0][0]
        else:
            i, start = max(0, bisect.bisect_right(pts, after, key=_time) - 1), after
        while True:
            if start >= stop:
                return INF
            end = start + duration
            bad = -1
            k = i
            while k < n and (k == i or pts[k][0] < end):
                if not fits(pts[k][1], need):
                    bad = k
                    break
                k += 1
            if bad < 0:
                return start
            i = bad + 1  # every start up to pts[bad] would cover pts[bad], which does not fit
            if i >= n:
                return INF
            start = pts[i][0]

    def fits_during(self, need: Vector, start: float, end: float) -> bool:
        """Whether ``need`` is free on this node throughout [start, end) (at ``start`` at least)."""
        pts = self.steps()
        k = max(0, bisect.bisect_right(pts, start, key=_time) - 1)  # the step in effect at start
        n = len(pts)
        while k < n:
            if not fits(pts[k][1], need):
                return False
            k += 1
            if k < n and pts[k][0] >= end:
                break
        return True


def gpu_ask(job: PendingJob) -> GpuAsk:
    """The job's GPU count and its typed counts: what a node's inventory must hold to ever run it."""
    typed: dict[str, int] = defaultdict(int)
    total = 0
    for g in job.gres:
        if g.name == "gpu":
            total += g.count
            if g.type is not None:
                typed[g.type] += g.count
    return total, tuple(sorted(typed.items()))


def could_use(node: NodeTimeline, job: PendingJob, ask: GpuAsk) -> bool:
    """Whether ``job`` could ever run on ``node`` (partition, -w/-x, GPU inventory): the nodes it competes for."""
    if not node.view.available or job.partition not in node.parts:
        return False
    if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
        return False
    total, typed = ask
    if len(node.types) + node.unknown < total:
        return False
    return all(sum(1 for t in node.types.values() if t == kind) + node.unknown >= count for kind, count in typed)


def earliest_start(heap: Bounds, nodes: Sequence[NodeTimeline], gpus: int,
                   start_on: Callable[[int, float, float], tuple[float, Vector] | None]
                   ) -> tuple[float, int, Vector] | None:
    """The earliest start among the nodes of ``heap``, given every start and reservation so far:
    (start, node, what it holds there), or None. ``start_on(i, bound, stop)``: the earliest start on
    node ``i`` (no earlier than ``bound``, before ``stop``) and what it holds, or None.

    ``heap`` holds (lower bound, node) pairs: the first time the node has ``gpus`` GPUs free. Bounds
    only grow during a pass (starts and reservations take resources, nothing gives them back), so a
    stale bound is still a bound: pop the smallest, tighten it if it grew, and stop when no bound left
    can beat the best start found. The heap is kept for the pass's next reservations."""
    best: tuple[float, int, Vector] | None = None
    held: Bounds = []
    while heap and (best is None or heap[0][0] < best[0]):
        bound, i = heapq.heappop(heap)
        tighter = nodes[i].first_time_with(gpus)
        if tighter > bound:
            if tighter < INF:
                heapq.heappush(heap, (tighter, i))
            continue
        held.append((bound, i))
        found = start_on(i, bound, best[0] if best is not None else INF)
        if found is not None and found[0] < INF and (best is None or found[0] < best[0]):
            best = (found[0], i, found[1])
            if found[0] <= bound:
                break
    for item in held:
        heapq.heappush(heap, item)
    return best
