"""How psinfo and pscontrol show a node's GPUs in use: Slurm's GresUsed, and pslurm's GpuMem (per
GPU the memory promised to jobs, of its total, and what was measured in use)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pslurm.core.node import GpuUsage


def gres_used(alloc_gpus: Sequence[int], usage: Sequence[GpuUsage]) -> str:
    """``gpu:1(IDX:0),shard:3(IDX:1:3/8)``: whole GPUs as Slurm prints them, then each share kind
    with, per shared GPU, what is held of it."""
    whole = [u.index for u in usage if u.mode == "gpu"] if usage else list(alloc_gpus)
    text = f"gpu:{len(whole)}(IDX:{','.join(map(str, sorted(whole))) or 'N/A'})"
    for kind in ("shard", "mps", "gpumem"):
        shared = [u for u in usage if u.mode == kind]
        if shared:
            held = ",".join(f"{u.index}:{u.allocated}/{u.capacity or '?'}" for u in shared)
            text += f",{kind}:{sum(u.allocated for u in shared)}(IDX:{held})"
    return text


def gpu_mem(usage: Sequence[GpuUsage]) -> str:
    """``0:8192/16384M(used:5000M),1:0/16384M``: per GPU, the memory promised to its jobs (slices,
    or all of it held whole) of its total, and the memory measured in use when measured."""
    parts = []
    for u in usage:
        total = f"{u.memory_mb}M" if u.memory_mb else "?"
        used = f"(used:{u.memory_used_mb}M)" if u.memory_used_mb is not None else ""
        parts.append(f"{u.index}:{u.memory_alloc_mb}/{total}{used}")
    return ",".join(parts) or "(null)"
