"""What running jobs hold on each node, and a node as the scheduling policy sees it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pslurm.controller.policy import NodeView, SharedGpu
from pslurm.controller.store import Allocation
from pslurm.core.gres import GresRequest
from pslurm.core.node import NodeRecord


@dataclass
class NodeUsage:
    """What active jobs hold on one node, derived from the store's allocations."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: list[int] = field(default_factory=list)
    jobs: int = 0


def usage_by_node(allocations: Sequence[Allocation]) -> dict[str, NodeUsage]:
    """What the allocations hold per node. A shared job's one GPU is in its ``gpu_indices``, so a
    shared GPU counts as busy (and may be listed once per job sharing it)."""
    usage: dict[str, NodeUsage] = defaultdict(NodeUsage)
    for alloc in allocations:
        used = usage[alloc.node]
        used.cpus += alloc.cpus
        used.mem_mb += alloc.mem_mb
        used.gpus.extend(alloc.gpu_indices)
        used.jobs += 1
    return usage


def node_view(node: NodeRecord, used: NodeUsage, partitions: frozenset[str],
              gpu_use: Mapping[int, tuple[int, float]] | None = None) -> NodeView:
    """``node`` as the policy sees it, with ``used`` taken. ``gpu_use``: per GPU index, the memory used
    (MB) and utilisation (%) measured on it, which break ties between GPUs that sharing could use."""
    measured = gpu_use or {}
    if node.gpus:
        inventory = [(g.index, g.type) for g in node.gpus]
        shared = tuple(SharedGpu(g.index, g.type, g.memory_mb or 0, g.shards, g.mps, *measured.get(g.index, (0, 0.0)))
                       for g in node.gpus)
    else:  # not registered yet: the configured Gres, numbered in order
        inventory = []
        for g in node.gres:
            if g.name == "gpu":
                first = len(inventory)  # not inside the generator: extend() grows the list as it goes
                inventory.extend((first + i, g.type) for i in range(g.count))
        shared = configured_shares(inventory, node.gres, measured)
    busy = set(used.gpus)  # a shared job's one GPU too: a shared GPU is never handed out whole
    return NodeView(
        name=node.name, partitions=partitions, free_cpus=node.cpus - used.cpus,
        free_mem_mb=node.real_memory - used.mem_mb,
        free_gpus=tuple(g for g in inventory if g[0] not in busy), available=node.available,
        gpus=tuple(inventory),  # the busy GPUs' types too: a typed request's reservation needs them
        shared_gpus=shared, total_cpus=node.cpus, total_mem_mb=node.real_memory,
    )


class NodeViews:
    """:func:`node_view` kept per node and made again only when what it is made of changed: the
    node's record (the store hands out the same record until the node is written), what is held on
    it, its partitions, its measured GPU use. At 1000 nodes a pass spent most of its snapshot
    remaking the views of nodes nothing had changed on."""

    def __init__(self) -> None:
        self._made: dict[str, tuple[NodeRecord, tuple[int, int, tuple[int, ...]], frozenset[str],
                                    Mapping[int, tuple[int, float]], NodeView]] = {}

    def view(self, node: NodeRecord, used: NodeUsage, partitions: frozenset[str],
             gpu_use: Mapping[int, tuple[int, float]] | None = None) -> NodeView:
        held = (used.cpus, used.mem_mb, tuple(used.gpus))
        measured = gpu_use or {}
        made = self._made.get(node.name)
        if made is not None and made[0] is node and made[1] == held and made[2] == partitions and made[3] == measured:
            return made[4]
        view = node_view(node, used, partitions, measured)
        self._made[node.name] = (node, held, partitions, dict(measured), view)
        return view


def configured_shares(inventory: Sequence[tuple[int, str | None]], gres: Iterable[GresRequest],
                      measured: Mapping[int, tuple[int, float]]) -> tuple[SharedGpu, ...]:
    """The GPUs of a node known only by its configured Gres, with its ``shard:S`` and ``mps:M`` split
    evenly over them (over those of the item's type when it has one), the remainder to the first GPUs:
    Slurm's rule for a gres.conf without File=. Their memory is unknown (0)."""
    units: dict[str, dict[int, int]] = {"shard": defaultdict(int), "mps": defaultdict(int)}
    for item in gres:
        if item.name not in units:
            continue
        over = [index for index, t in inventory if item.type is None or t == item.type]
        if not over:
            continue
        each, extra = divmod(item.count, len(over))
        for k, index in enumerate(over):
            units[item.name][index] += each + (1 if k < extra else 0)
    return tuple(SharedGpu(index, t, 0, units["shard"][index], units["mps"][index], *measured.get(index, (0, 0.0)))
                 for index, t in inventory)
