"""The scheduling policy: a pure function from a snapshot of the cluster to placements.

No I/O and no clock: the controller's scheduler loop takes the snapshot, calls :func:`plan`,
and commits each placement with a compare-and-set. Tests drive :func:`plan` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pslurm.core.gres import GresRequest


@dataclass(frozen=True)
class NodeView:
    """A node as the scheduler sees it: what is free now, and which GPUs those are."""

    name: str
    partitions: frozenset[str]
    free_cpus: int
    free_mem_mb: int
    free_gpus: tuple[tuple[int, str | None], ...]  # (node GPU index, type), in index order
    available: bool = True  # UP and not draining


@dataclass(frozen=True)
class PendingJob:
    """A pending job as the scheduler sees it."""

    job_id: int
    partition: str
    cpus: int
    mem_mb: int
    gres: tuple[GresRequest, ...]


@dataclass(frozen=True)
class Snapshot:
    pending: Sequence[PendingJob]  # in the order they should be considered (priority, then id)
    nodes: Sequence[NodeView]
    now: float
    partition_up: dict[str, bool] = field(default_factory=dict)  # missing: up


@dataclass(frozen=True)
class Placement:
    job_id: int
    node: str
    gpu_indices: tuple[int, ...]


@dataclass
class Plan:
    placements: list[Placement]
    reasons: dict[int, str]  # why each job left pending waits, in Slurm's words


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


def plan(snapshot: Snapshot) -> Plan:
    """FIFO inside each partition: jobs start in order while they fit; the first that does not
    fit blocks the ones behind it in its partition (reason Resources, then Priority). A job is
    placed on the first node of its partition with the CPUs, memory and GPUs it asks."""
    free = {n.name: n for n in snapshot.nodes}
    blocked: set[str] = set()
    placements: list[Placement] = []
    reasons: dict[int, str] = {}
    for job in snapshot.pending:
        if not snapshot.partition_up.get(job.partition, True):
            reasons[job.job_id] = "PartitionDown"
            continue
        if job.partition in blocked:
            reasons[job.job_id] = "Priority"
            continue
        for node in snapshot.nodes:
            view = free[node.name]
            if not view.available or job.partition not in view.partitions:
                continue
            if view.free_cpus < job.cpus or view.free_mem_mb < job.mem_mb:
                continue
            gpus = pick_gpus(view.free_gpus, job.gres)
            if gpus is None:
                continue
            placements.append(Placement(job.job_id, node.name, gpus))
            free[node.name] = NodeView(
                view.name, view.partitions, view.free_cpus - job.cpus, view.free_mem_mb - job.mem_mb,
                tuple(g for g in view.free_gpus if g[0] not in gpus), view.available)
            break
        else:
            reasons[job.job_id] = "Resources"
            blocked.add(job.partition)
    return Plan(placements, reasons)
