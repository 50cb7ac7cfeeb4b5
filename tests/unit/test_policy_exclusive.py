"""--exclusive in the policy: whole nodes, only idle ones, nothing else beside it."""

from dataclasses import replace

from pslurm.controller.policy import NodeView, PendingJob, RunningJob, Snapshot, plan
from pslurm.core.gres import GresRequest

GPUS = ((0, None), (1, None))


def node(name: str, cpus: int = 8, mem: int = 1000, gpus: tuple = GPUS, total_cpus: int = 8,
         total_mem: int = 1000) -> NodeView:
    return NodeView(name, frozenset({"gpu"}), cpus, mem, gpus, True, GPUS, total_cpus=total_cpus,
                    total_mem_mb=total_mem)


def job(job_id: int, gpus: int = 0, cpus: int = 1, prio: int = 0, limit: int | None = 100,
        exclusive: bool = False, num_nodes: int = 1) -> PendingJob:
    gres = (GresRequest("gpu", None, gpus),) if gpus else ()
    return PendingJob(job_id, "gpu", cpus, 0, gres, prio, limit, num_nodes=num_nodes, exclusive=exclusive)


def test_an_exclusive_job_takes_an_idle_node_whole() -> None:
    busy = node("c000", cpus=7, gpus=((1, None),))  # one CPU and GPU 0 taken
    for backfill in (False, True):
        result = plan(Snapshot([job(1, exclusive=True), job(2)], [busy, node("c001")], now=0), backfill=backfill)
        placed = {p.job_id: p for p in result.placements}
        assert placed[1].node == "c001" and placed[1].gpu_indices == (0, 1)
        assert placed[2].node == "c000"  # not beside the exclusive job


def test_nothing_starts_beside_an_exclusive_job_started_in_the_same_pass() -> None:
    result = plan(Snapshot([job(1, exclusive=True, prio=9), job(2), job(3, gpus=1)], [node("c000")], now=0))
    assert [p.job_id for p in result.placements] == [1]


def test_an_exclusive_job_waits_for_a_node_with_nothing_on_it() -> None:
    busy = node("c000", cpus=7)
    running = [RunningJob(9, "c000", 1, 0, (), 50.0)]
    result = plan(Snapshot([job(1, exclusive=True)], [busy], running=running, now=0))
    assert result.placements == [] and result.reasons == {1: "Resources"}
    assert result.estimates == {1: 50.0}  # reserved when the node is wholly free
    # the main pass: it claims the node, a lower-priority job does not start there
    result = plan(Snapshot([job(1, exclusive=True, prio=5), job(2)], [busy], running=running, now=0), backfill=False)
    assert result.placements == [] and result.reasons == {1: "Resources", 2: "Priority"}


def test_backfill_keeps_an_exclusive_reservation() -> None:
    busy = node("c000", cpus=7)
    running = [RunningJob(9, "c000", 1, 0, (), 50.0)]
    pending = [job(1, exclusive=True, prio=5), job(2, limit=100), job(3, limit=10)]
    result = plan(Snapshot(pending, [busy], running=running, now=0))
    assert [p.job_id for p in result.placements] == [3]  # ends before the exclusive job's start at 50
    assert result.estimates[1] == 50.0


def test_a_multi_node_exclusive_job_takes_idle_nodes_whole() -> None:
    nodes = [node("c000", cpus=7), node("c001"), node("c002")]
    result = plan(Snapshot([job(1, exclusive=True, num_nodes=2)], nodes, now=0))
    (p,) = result.placements
    assert p.node == "c001" and p.gpu_indices == (0, 1) and p.more == (("c002", (0, 1)),)
    result = plan(Snapshot([replace(job(1, exclusive=True, num_nodes=2), per_node=((1, 0), (1, 0)))],
                           nodes[:2], running=[RunningJob(9, "c000", 1, 0, (), 30.0)], now=0))
    assert result.placements == [] and result.estimates == {1: 30.0}


def test_a_running_exclusive_job_holds_its_node_whole() -> None:
    held = node("c000", cpus=0, mem=0, gpus=())  # its allocation: every CPU, all memory and GPUs
    result = plan(Snapshot([job(1)], [held], running=[RunningJob(9, "c000", 8, 1000, (0, 1), 40.0)], now=0))
    assert result.placements == [] and result.estimates == {1: 40.0}
