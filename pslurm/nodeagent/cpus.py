"""A job's CPUs: the cores near its GPUs, and which CPUs of the node it gets (its cpuset with
ConstrainCores=yes, else its affinity)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable

from pslurm.nodeagent.gpus import GpuDevice, format_cpu_list

__all__ = ["affinity_for", "format_cpu_list", "parse_cpu_list", "pick_cpus"]


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``"0-3,8,10-11"`` -> ``(0, 1, 2, 3, 8, 10, 11)`` (cpuset / Cores= syntax); ``""`` -> ``()``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi) if hi else int(lo)
        if last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def affinity_for(devices: list[GpuDevice], indices: Iterable[int]) -> set[int] | None:
    """CPUs close to the allocated GPUs (union of their cores) that this process may use.

    None when no allocated GPU has cores known, or when none of those cores is usable here
    (better unbound than failing the launch).
    """
    wanted = set(indices)
    cores: set[int] = set()
    for d in devices:
        if d.index in wanted and d.cores:
            cores.update(d.cores)
    if not cores:
        return None
    return (cores & os.sched_getaffinity(0)) or None


def pick_cpus(count: int, available: Iterable[int], preferred: Iterable[int] = (),
              busy: Iterable[Iterable[int]] = ()) -> frozenset[int]:
    """``count`` of the ``available`` CPUs for a job (at least one, at most all): those the fewest
    other running jobs (``busy``: their CPU sets) have first, of those the ones near its GPUs
    (``preferred``), then the lowest numbers. Jobs share CPUs only when there are too few."""
    use = Counter(cpu for cpus in busy for cpu in cpus)
    near = set(preferred)
    ranked = sorted(set(available), key=lambda cpu: (use[cpu], cpu not in near, cpu))
    return frozenset(ranked[:max(1, count)])
