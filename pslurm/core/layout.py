"""How a job's request spreads over its nodes: :func:`node_layout`.

Slurm's default (block) distribution: ``--ntasks-per-node`` when given, else the ``-n`` tasks spread as
evenly as possible over the ``-N`` nodes, the first nodes taking one more (``-N 3 -n 4``: 2, 1, 1); every
node runs at least one task (``-N 2`` without ``-n``: one per node, as Slurm). CPUs on a node are its tasks
times ``--cpus-per-task``, or ``--cpus-per-gpu`` times its GPUs when that is more; ``--mem`` is per node,
``--mem-per-cpu`` is that times the node's CPUs, ``--mem-per-gpu`` that times its GPUs (:func:`node_memory`).
pslurm allocates ``-N``'s minimum (``max_nodes`` is kept, not used: Slurm may give up to the maximum). The GPU
request (``--gres``) is per node as given.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from typing import NamedTuple, Protocol

    class NodeNeed(NamedTuple):
        """One node's share of a job."""

        cpus: int
        mem_mb: int
        tasks: int

    class _Layout(Protocol):  # a JobSpec, or a JobDesc (the REST view of one)
        num_nodes: int
        ntasks: int
        cpus_per_task: int
        mem_mb: int

        def gpus(self, type_: str | None = None) -> int: ...
else:
    from collections import namedtuple

    NodeNeed = namedtuple("NodeNeed", "cpus mem_mb tasks")
    NodeNeed.__doc__ = "One node's share of a job."


def tasks_per_node(num_nodes: int, ntasks: int, ntasks_per_node: int = 0) -> tuple[int, ...]:
    """Tasks on each of ``num_nodes`` nodes, in block order."""
    nodes = max(1, num_nodes)
    if ntasks_per_node > 0:
        return (ntasks_per_node,) * nodes
    base, extra = divmod(max(ntasks, 1), nodes)
    return tuple(max(1, base + (1 if i < extra else 0)) for i in range(nodes))


def node_cpus(spec: _Layout, tasks: int) -> int:
    """A node's CPUs for ``tasks`` of the job's tasks: tasks times --cpus-per-task, or --cpus-per-gpu
    times the node's GPUs when that is more (as Slurm gives them)."""
    per_gpu = getattr(spec, "cpus_per_gpu", 0) or 0
    return max(tasks * max(1, spec.cpus_per_task), per_gpu * spec.gpus())


def node_memory(spec: _Layout, cpus: int) -> int:
    """A node's memory (MB) for a node of ``cpus`` of the job's CPUs: --mem, else --mem-per-cpu times
    those CPUs, else --mem-per-gpu times the node's GPUs; 0 for none asked."""
    if spec.mem_mb:
        return spec.mem_mb
    per_cpu = getattr(spec, "mem_per_cpu_mb", 0) or 0
    if per_cpu:
        return per_cpu * cpus
    return (getattr(spec, "mem_per_gpu_mb", 0) or 0) * spec.gpus()


def node_layout(spec: _Layout) -> tuple[NodeNeed, ...]:
    """Each node's (cpus, mem_mb, tasks), in the allocation's order."""
    per_node = getattr(spec, "ntasks_per_node", 0) or 0
    needs = []
    for tasks in tasks_per_node(spec.num_nodes, spec.ntasks, per_node):
        cpus = node_cpus(spec, tasks)
        needs.append(NodeNeed(cpus, node_memory(spec, cpus), tasks))
    return tuple(needs)


def node_cpus_text(spec: _Layout) -> str:
    """A multi-node job's CPUs on each node, ``8,4`` (the store's ``jobs.node_cpus``); "" for one node."""
    if spec.num_nodes <= 1:
        return ""
    return ",".join(str(n.cpus) for n in node_layout(spec))


def compress_counts(counts: tuple[int, ...] | list[int]) -> str:
    """Slurm's ``2(x3),1`` form of per-node counts (SLURM_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE)."""
    parts: list[str] = []
    i = 0
    while i < len(counts):
        j = i
        while j + 1 < len(counts) and counts[j + 1] == counts[i]:
            j += 1
        run = j - i + 1
        parts.append(f"{counts[i]}(x{run})" if run > 1 else str(counts[i]))
        i = j + 1
    return ",".join(parts)
