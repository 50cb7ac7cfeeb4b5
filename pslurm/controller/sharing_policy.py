"""GPU sharing in the scheduling pass: where a job that asks a share of one GPU starts, and what
it claims and reserves. A part of :func:`pslurm.controller.policy.plan`, taken only when a job has a
share (``PendingJob.share``, ``RunningJob.share``): the whole-GPU path never comes here.

A GPU is free, held whole, or shared in one mode (shard, mps or gpumem, :mod:`pslurm.core.sharing`);
the sum of its shares never passes its capacity in that mode, and an mps GPU serves one user's jobs
at a time (one MPS server per user). A share goes to the GPU already shared in its mode that has the
least room left after placing it (best fit), ties to the lower measured utilisation, then the lower
node and GPU index; to a free GPU (best fit again) only when no shared GPU takes it, so that whole
GPUs stay whole for whole-GPU jobs.

For everything else a shared GPU is busy: its index is not in the node's free GPUs, and the backfill
pass sees it released when the last job sharing it is expected to end. A shared job starts on a node
with a reservation only if it delays none: joining a shared GPU needs only CPUs and memory while it
ends no later than the GPU's release, and one more GPU from the release to its end if it ends later;
taking a free GPU needs that GPU from now to its end. A shared job that cannot start reserves (in
backfill) as if it held one whole GPU, from no earlier than one of the node's GPUs able to hold it
could take it (conservative: it is seen as free only once all its shares have ended), and claims (in
the main pass) each node with a GPU whose capacity in its mode could ever hold it.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

from pslurm.controller.nodemodel import INF, Bounds, NodeTimeline, Vector, earliest_start
from pslurm.controller.snapshot import PendingJob, RunningJob, SharedGpu
from pslurm.core.sharing import GpuShare

_Key = tuple[float, float, int, int]  # (room or capacity, utilisation, node, GPU index): best first
CLAMP = 1e-3  # as NodeTimeline.add_event: nothing is released before now + CLAMP
_MODE = {"shard": 0, "mps": 1, "gpumem": 2}  # a share kind's place in Sharing._top


def hold_running(nodes: Mapping[str, NodeTimeline], runs: Sequence[RunningJob], unlimited_end: float,
                 backfill: bool) -> None:
    """Account the running shared jobs ``runs`` on their nodes: each one's CPUs and memory until it
    ends, and each GPU they share until the last of them ends (so it is busy once, not once a job)."""
    release: dict[tuple[str, int], float] = {}
    for r in runs:
        node = nodes.get(r.node)
        if node is None:
            continue
        end = unlimited_end if r.end_time is None else r.end_time
        if backfill:
            node.add_event(end, node.vector(r.cpus, r.mem_mb, ()))
        for index in r.gpu_indices:
            release[(r.node, index)] = max(release.get((r.node, index), end), end)
    for (name, index), end in release.items():
        node = nodes[name]
        if index not in node.types:
            node.unknown += 1
        if any(i == index for i, _ in node.free):  # a held GPU is never free, whatever the view says
            node.free = [g for g in node.free if g[0] != index]
        if backfill:
            node.add_event(end, node.vector(0, 0, (index,)))


class _Gpu:
    """One GPU's sharing state during a pass."""

    __slots__ = ("node", "index", "type", "caps", "util", "mode", "used", "users", "release")

    def __init__(self, node: int, index: int, type_: str | None, caps: dict[str, int], util: float) -> None:
        self.node = node
        self.index = index
        self.type = type_
        self.caps = caps
        self.util = util
        self.mode: str | None = None  # None: not shared; a share kind; "": shared in two modes (a bad view)
        self.used = 0
        self.users: set[str] = set()
        self.release = 0.0  # when the last job sharing it is expected to end

    def key(self) -> _Key:
        room = self.caps.get(self.mode or "", 0) - self.used
        return (room, self.util, self.node, self.index)


class Sharing:
    """The shared GPUs of a pass and where shares go. Made when the first pending shared job comes,
    from the nodes as they are then (whole-GPU starts of the pass included) and the running shared jobs.
    It keeps a state only for the GPUs that are shared or free (with some capacity to share): the others
    are held whole for the whole pass."""

    def __init__(self, nodes: Sequence[NodeTimeline], runs: Sequence[RunningJob], now: float, unlimited_end: float,
                 scan_limit: int, taken: Sequence[tuple[int, tuple[int, ...], float]]) -> None:
        """``runs``: every running job; ``taken``: the whole-GPU starts of the pass as (node, GPU indices,
        expected end), a list the pass goes on appending to."""
        self.nodes = nodes
        self.now = now
        self.scan_limit = scan_limit
        self.taken = taken
        self._seen = 0  # how much of ``taken`` is in ``held``
        self.held: dict[tuple[int, int], float] = {}  # a GPU held whole: until when
        self.gpus: dict[tuple[int, int], _Gpu] = {}
        self._top: dict[int, tuple[int, int, int]] = {}  # see _could_hold
        index_of = {n.name: i for i, n in enumerate(nodes)}
        for r in runs:
            at = index_of.get(r.node)
            if at is None:
                continue
            if r.share is None:
                for index in r.gpu_indices:
                    self.held[(at, index)] = unlimited_end if r.end_time is None else r.end_time
                continue
            for index in r.gpu_indices:  # one GPU; a GPU without capacity (not in the view) takes no more
                g = self.gpus.get((at, index)) or self._state(at, index)
                g.mode = r.share.kind if g.mode in (None, r.share.kind) else ""
                g.used += r.share.amount
                g.users.add(r.user)
                end = unlimited_end if r.end_time is None else r.end_time
                g.release = max(g.release, end, now + CLAMP)
        # per (kind, partition), best first: GPUs shared in that kind by room left, free ones by capacity
        self.shared: dict[tuple[str, str], list[_Key]] = defaultdict(list)
        self.idle: dict[tuple[str, str], list[_Key]] = defaultdict(list)
        for g in self.gpus.values():
            node = nodes[g.node]
            if g.mode and node.view.available:
                for p in node.parts:
                    self.shared[(g.mode, p)].append(g.key())
        for i, node in enumerate(nodes):
            if not node.free or not node.view.shared_gpus or not node.view.available:
                continue
            free = {f[0] for f in node.free}
            for sg in node.view.shared_gpus:
                if sg.index in free and (sg.shards or sg.mps or sg.memory_mb) and (i, sg.index) not in self.gpus:
                    g = self._state(i, sg.index, sg)
                    for kind, cap in g.caps.items():
                        if cap > 0:
                            for p in node.parts:
                                self.idle[(kind, p)].append((cap, g.util, i, g.index))
        for lst in (*self.shared.values(), *self.idle.values()):
            lst.sort()

    def _state(self, i: int, index: int, sg: SharedGpu | None = None) -> _Gpu:
        """A new state for GPU ``index`` of node ``i``, with its capacity from the node's view."""
        node = self.nodes[i]
        if sg is None:
            sg = next((g for g in node.view.shared_gpus if g.index == index), None)
        caps = {} if sg is None else _caps(sg)
        g = _Gpu(i, index, node.types.get(index, None if sg is None else sg.type), caps,
                 0.0 if sg is None else sg.util)
        self.gpus[(i, index)] = g
        return g

    def _could_hold(self, i: int, share: GpuShare) -> bool:
        """Whether a GPU of node ``i`` could ever hold ``share`` (its capacity in the mode, its type)."""
        top = self._top.get(i)
        if top is None:  # the node's largest capacity per mode, whatever the type
            gpus = self.nodes[i].view.shared_gpus
            top = self._top[i] = (max(g.shards for g in gpus), max(g.mps for g in gpus),
                                  max(g.memory_mb for g in gpus))
        if top[_MODE[share.kind]] < share.amount:
            return False
        if share.type is None:
            return True
        types = self.nodes[i].types
        return any(_caps(g).get(share.kind, 0) >= share.amount and types.get(g.index, g.type) == share.type
                   for g in self.nodes[i].view.shared_gpus)

    def find(self, job: PendingJob, share: GpuShare, duration: float, claimed: Collection[int]) -> _Gpu | None:
        """The GPU where ``job`` starts now, or None: best fit among the GPUs shared in its mode,
        else among the free ones (each list tried up to the scan limit)."""
        end = self.now + duration
        for lists in (self.shared, self.idle):
            lst = lists.get((share.kind, job.partition))
            if not lst:
                continue
            tried = 0
            k = bisect_left(lst, (share.amount,))  # the first with room (or capacity) for it
            while k < len(lst) and tried < self.scan_limit:
                _, _, i, index = lst[k]
                g = self.gpus[(i, index)]
                node = self.nodes[i]
                if lists is self.idle and (g.mode is not None or not any(f[0] == index for f in node.free)):
                    del lst[k]  # taken this pass (shared, or held whole): gone for good
                    continue
                k += 1
                if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                    continue  # -w / -x: not counted as tried, as for whole GPUs
                tried += 1
                if self._fits(job, share, g, node, end, duration, claimed):
                    return g
        return None

    def _fits(self, job: PendingJob, share: GpuShare, g: _Gpu, node: NodeTimeline, end: float, duration: float,
              claimed: Collection[int]) -> bool:
        if g.node in claimed or (share.type is not None and g.type != share.type):
            return False
        if node.cpus < job.cpus or node.mem < job.mem_mb:
            return False
        if g.mode == "mps" and g.users and g.users != {job.user}:
            return False  # one MPS server per user on a GPU: another user's jobs wait
        if not node.reserved:
            return True
        # a reservation on the node: start only if it is delayed by nothing this job holds
        now = self.now
        with_gpu = node.vector(job.cpus, job.mem_mb, (g.index,))
        if g.mode is None:  # a free GPU: held from now to the job's end
            return node.earliest(with_gpu, duration, stop=now + 1e-6) == now
        base = node.vector(job.cpus, job.mem_mb, ())
        if end <= g.release:  # the GPU is busy until then anyway
            return node.fits_during(base, now, end)
        return node.fits_during(base, now, g.release) and node.fits_during(with_gpu, g.release, end)

    def start(self, job: PendingJob, share: GpuShare, g: _Gpu, duration: float, backfill: bool) -> None:
        """Account ``job`` started on ``g`` now: the node's CPUs and memory, the GPU's share and release."""
        node = self.nodes[g.node]
        end = self.now + duration
        node.cpus -= job.cpus
        node.mem -= job.mem_mb
        gpu = node.vector(0, 0, (g.index,))
        if g.mode is None:  # a free GPU becomes shared: busy for whole-GPU jobs until its last share ends
            node.free = [f for f in node.free if f[0] != g.index]
            g.mode = share.kind
            g.release = max(end, self.now + CLAMP)
            if backfill:
                node.add_event(end, gpu)
        else:
            for p in node.parts:
                lst = self.shared[(share.kind, p)]
                del lst[bisect_left(lst, g.key())]
            if end > g.release:  # it now ends later: move the GPU's release to this job's end
                if backfill:
                    node.add_event(g.release, tuple(-x for x in gpu))
                    node.add_event(end, gpu)
                g.release = end
        g.used += share.amount
        g.users.add(job.user)
        if backfill:
            node.add_event(end, node.vector(job.cpus, job.mem_mb, ()))
        for p in node.parts:
            insort(self.shared[(share.kind, p)], g.key())

    def could_use(self, job: PendingJob, share: GpuShare) -> list[int]:
        """The nodes ``job`` could ever run on (partition, -w/-x, a GPU with the capacity and type)."""
        mine = []
        for i, node in enumerate(self.nodes):
            if not node.view.shared_gpus or not node.view.available or job.partition not in node.parts:
                continue
            if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                continue
            if self._could_hold(i, share):
                mine.append(i)
        return mine

    def reserve(self, job: PendingJob, share: GpuShare, duration: float, heap: Bounds
                ) -> tuple[float, int, Vector] | None:
        """Where and when ``job`` can start earliest, given every reservation so far: (start, node, what it
        holds), or None. It holds its CPUs and memory and one whole GPU (of its type, or of the one type
        of the node's GPUs able to hold it), from no earlier than one of those GPUs could take it.
        ``heap``: the partition's bounds for one GPU, walked as whole-GPU reservations walk theirs
        (:func:`~pslurm.controller.nodemodel.earliest_start`)."""
        self._note_taken()

        def start_on(i: int, bound: float, stop: float) -> tuple[float, Vector] | None:
            node = self.nodes[i]
            if job.partition not in node.parts or not node.view.shared_gpus or not self._could_hold(i, share):
                return None
            if job.allowed_nodes is not None and node.name not in job.allowed_nodes:
                return None
            capable = [(sg.index, node.types.get(sg.index, sg.type)) for sg in node.view.shared_gpus
                       if _caps(sg).get(share.kind, 0) >= share.amount]
            capable = [(index, type_) for index, type_ in capable if share.type is None or type_ == share.type]
            free = {f[0] for f in node.free}
            at = max(bound, min(self._free_at(i, index, job, share, free) for index, _ in capable))
            if at == INF or at >= stop:
                return None
            types = {type_ for _, type_ in capable}
            kind = share.type if share.type is not None else (next(iter(types)) if len(types) == 1 else None)
            per = [0] * len(node.slots)
            if kind is not None and kind in node.slots:
                per[node.slots[kind]] = 1
            need = (job.cpus, job.mem_mb, 1, *per)
            if duration <= 0:  # a zero-second limit (only a raw API request has one): held for no time, from at
                return at, need
            return node.earliest(need, duration, stop, after=at), need

        return earliest_start(heap, self.nodes, 1, start_on)

    def _free_at(self, i: int, index: int, job: PendingJob, share: GpuShare, free: Collection[int]) -> float:
        """When GPU ``index`` of node ``i`` could first take ``job``'s share, reservations aside (``free``:
        the node's free GPUs)."""
        g = self.gpus.get((i, index))
        if g is None or g.mode is None:
            if index in free:
                return self.now
            return self.held.get((i, index), INF)  # held whole (INF: by what, the view does not say)
        room = g.caps.get(g.mode, 0) - g.used
        if g.mode == share.kind and room >= share.amount and (g.mode != "mps" or g.users <= {job.user}):
            return self.now  # it has room now: what keeps the job out is CPUs, memory or a reservation
        return g.release  # when its shares have all ended

    def _note_taken(self) -> None:
        while self._seen < len(self.taken):
            i, indices, end = self.taken[self._seen]
            self._seen += 1
            for index in indices:
                self.held[(i, index)] = end


def _caps(sg: SharedGpu) -> dict[str, int]:
    """What ``sg`` offers in each mode: shards, MPS units, MB of memory (0: none)."""
    return {"shard": sg.shards, "mps": sg.mps, "gpumem": sg.memory_mb}
