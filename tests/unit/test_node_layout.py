"""core/layout.py: a job's share of each node (Slurm's block distribution)."""

from __future__ import annotations

import pytest

from pslurm.core.jobspec import JobSpec
from pslurm.core.layout import NodeNeed, compress_counts, node_layout, tasks_per_node


def _spec(**kw: object) -> JobSpec:
    return JobSpec(name="j", user="u", uid=1000, gid=1000, workdir="/tmp", **kw)  # type: ignore[arg-type]


def test_one_node_is_the_whole_request() -> None:
    assert node_layout(_spec(ntasks=3, cpus_per_task=2, mem_mb=100)) == (NodeNeed(6, 100, 3),)


@pytest.mark.parametrize(("nodes", "ntasks", "expected"), [
    (2, 4, (2, 2)), (3, 4, (2, 1, 1)), (2, 3, (2, 1)), (4, 4, (1, 1, 1, 1)), (2, 1, (1, 1)), (3, 8, (3, 3, 2)),
])
def test_block_distribution(nodes: int, ntasks: int, expected: tuple[int, ...]) -> None:
    assert tasks_per_node(nodes, ntasks) == expected
    assert tuple(n.tasks for n in node_layout(_spec(num_nodes=nodes, ntasks=ntasks))) == expected


def test_ntasks_per_node_wins() -> None:
    layout = node_layout(_spec(num_nodes=3, ntasks=4, ntasks_per_node=2, cpus_per_task=3, mem_mb=512))
    assert layout == (NodeNeed(6, 512, 2),) * 3


def test_cpus_and_memory_per_node() -> None:
    layout = node_layout(_spec(num_nodes=2, ntasks=3, cpus_per_task=4, mem_mb=1000))
    assert [(n.cpus, n.mem_mb) for n in layout] == [(8, 1000), (4, 1000)]


@pytest.mark.parametrize(("counts", "text"), [
    ((2, 2), "2(x2)"), ((2, 1, 1), "2,1(x2)"), ((3,), "3"), ((2, 2, 2, 1), "2(x3),1"), ((1, 2, 1), "1,2,1"),
])
def test_compress_counts(counts: tuple[int, ...], text: str) -> None:
    assert compress_counts(counts) == text
