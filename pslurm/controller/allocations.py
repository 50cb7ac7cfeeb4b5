"""What running jobs hold on each node, and a node as the scheduling policy sees it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from pslurm.controller.policy import NodeView
from pslurm.controller.store import Allocation
from pslurm.core.node import NodeRecord


@dataclass
class NodeUsage:
    """What active jobs hold on one node, derived from the store's allocations."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: list[int] = field(default_factory=list)
    jobs: int = 0


def usage_by_node(allocations: Sequence[Allocation]) -> dict[str, NodeUsage]:
    usage: dict[str, NodeUsage] = defaultdict(NodeUsage)
    for alloc in allocations:
        used = usage[alloc.node]
        used.cpus += alloc.cpus
        used.mem_mb += alloc.mem_mb
        used.gpus.extend(alloc.gpu_indices)
        used.jobs += 1
    return usage


def node_view(node: NodeRecord, used: NodeUsage, partitions: frozenset[str]) -> NodeView:
    if node.gpus:
        inventory = [(g.index, g.type) for g in node.gpus]
    else:  # not registered yet: the configured Gres, numbered in order
        inventory = []
        for g in node.gres:
            if g.name == "gpu":
                first = len(inventory)  # not inside the generator: extend() grows the list as it goes
                inventory.extend((first + i, g.type) for i in range(g.count))
    busy = set(used.gpus)
    return NodeView(
        name=node.name, partitions=partitions, free_cpus=node.cpus - used.cpus,
        free_mem_mb=node.real_memory - used.mem_mb,
        free_gpus=tuple(g for g in inventory if g[0] not in busy), available=node.available,
        gpus=tuple(inventory),  # the busy GPUs' types too: a typed request's reservation needs them
    )
