"""Per-GPU usage of a node, as psinfo and pscontrol show it: how each GPU is held (whole, or shared
by shards, MPS or memory slices) and what its agent last measured on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pslurm.controller.store import Allocation
from pslurm.core.node import GpuUsage, NodeRecord
from pslurm.core.sharing import share_of

# measured per GPU index: (memory used MB, utilisation percent), from the node's last heartbeat
Measured = Mapping[int, tuple[int, float]]


def gpu_usage(node: NodeRecord, allocations: Sequence[Allocation], measured: Measured) -> tuple[GpuUsage, ...]:
    """Each GPU the node's agent reported, with what the node's running jobs hold of it."""
    mode: dict[int, str] = {}
    allocated: dict[int, int] = {}
    jobs: dict[int, int] = {}
    for alloc in allocations:
        share = share_of(alloc.gres)
        for index in alloc.gpu_indices:
            mode[index] = share.kind if share is not None else "gpu"
            allocated[index] = allocated.get(index, 0) + (share.amount if share is not None else 1)
            jobs[index] = jobs.get(index, 0) + 1
    out = []
    for gpu in node.gpus:
        i = gpu.index
        how = mode.get(i, "")
        memory = gpu.memory_mb or 0
        capacity = {"gpu": 1, "shard": gpu.shards, "mps": gpu.mps, "gpumem": memory}.get(how, 0)
        promised = allocated.get(i, 0) if how == "gpumem" else (memory if how == "gpu" else 0)
        used, util = measured.get(i, (None, None))
        out.append(GpuUsage(i, how, allocated.get(i, 0), capacity, jobs.get(i, 0), memory, promised, used, util))
    return tuple(out)
