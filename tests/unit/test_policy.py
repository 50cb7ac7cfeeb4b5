"""The scheduling policy on synthetic snapshots."""

from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.controller.policy import NodeView, PendingJob, Snapshot, pick_gpus, plan
from pslurm.core.gres import GresRequest

TYPES = [None, "a100", "h100"]


def node(name, gpus, cpus=8, mem=1000, parts=("gpu",), available=True):
    return NodeView(name, frozenset(parts), cpus, mem, tuple(gpus), available)


def job(job_id, gpus=0, type_=None, cpus=1, mem=0, part="gpu"):
    gres = (GresRequest("gpu", type_, gpus),) if gpus else ()
    return PendingJob(job_id, part, cpus, mem, gres)


def test_nine_one_gpu_jobs_on_four_two_gpu_nodes_start_eight():
    nodes = [node(f"c{i:03d}", [(0, None), (1, None)]) for i in range(4)]
    result = plan(Snapshot([job(i, 1) for i in range(1, 10)], nodes, now=0))
    pairs = {(p.node, p.gpu_indices) for p in result.placements}
    assert len(result.placements) == 8 and len(pairs) == 8
    assert result.reasons == {9: "Resources"}


def test_fifo_blocks_later_jobs_in_the_same_partition():
    nodes = [node("c000", [(0, None)])]
    result = plan(Snapshot([job(1, 2), job(2, 1)], nodes, now=0))
    assert result.placements == []
    assert result.reasons == {1: "Resources", 2: "Priority"}


def test_typed_request_lands_only_on_its_type():
    nodes = [node("c000", [(0, "v100")]), node("c001", [(0, "a100"), (1, "a100")])]
    result = plan(Snapshot([job(1, 2, "a100")], nodes, now=0))
    assert [(p.node, p.gpu_indices) for p in result.placements] == [("c001", (0, 1))]


def test_draining_node_gets_nothing():
    nodes = [node("c000", [(0, None)], available=False), node("c001", [(0, None)])]
    assert [p.node for p in plan(Snapshot([job(1, 1)], nodes, now=0)).placements] == ["c001"]


def test_cpu_and_memory_are_consumed():
    nodes = [node("c000", [], cpus=2, mem=100)]
    result = plan(Snapshot([job(1, cpus=2), job(2, cpus=1), ], nodes, now=0))
    assert [p.job_id for p in result.placements] == [1]
    result = plan(Snapshot([job(1, mem=60), job(2, mem=60)], nodes, now=0))
    assert [p.job_id for p in result.placements] == [1]


def test_down_partition_holds_its_jobs():
    nodes = [node("c000", [(0, None)])]
    result = plan(Snapshot([job(1, 1)], nodes, now=0, partition_up={"gpu": False}))
    assert result.placements == [] and result.reasons == {1: "PartitionDown"}


def test_pick_gpus_serves_typed_items_first():
    free = [(0, "a100"), (1, "v100")]
    assert pick_gpus(free, [GresRequest("gpu", None, 1), GresRequest("gpu", "a100", 1)]) == (0, 1)
    assert pick_gpus(free, [GresRequest("gpu", "h100", 1)]) is None


gpu_lists = st.lists(st.sampled_from(TYPES), min_size=0, max_size=4)
nodes_st = st.lists(st.tuples(gpu_lists, st.integers(1, 8), st.booleans()), min_size=1, max_size=5)
jobs_st = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(TYPES), st.integers(1, 4),
                             st.sampled_from(["gpu", "cpu"])), max_size=20)


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_invariants(node_specs, job_specs):
    nodes = []
    for i, (types, cpus, in_cpu) in enumerate(node_specs):
        parts = ("gpu", "cpu") if in_cpu else ("gpu",)
        nodes.append(node(f"c{i:03d}", [(k, t) for k, t in enumerate(types)], cpus=cpus, parts=parts))
    jobs = [job(i + 1, g, t, c, part=p) for i, (g, t, c, p) in enumerate(job_specs)]
    result = plan(Snapshot(jobs, nodes, now=0))
    by_node = {n.name: n for n in nodes}
    by_job = {j.job_id: j for j in jobs}
    used: set[tuple[str, int]] = set()
    cpus_used: dict[str, int] = {}
    for p in result.placements:
        j, n = by_job[p.job_id], by_node[p.node]
        # no GPU is ever handed out twice
        for index in p.gpu_indices:
            assert (p.node, index) not in used
            used.add((p.node, index))
        # a job is placed only where the GPUs it asked for are, of its type, in its partition
        types = dict(n.free_gpus)
        assert len(p.gpu_indices) == j.gres[0].count if j.gres else not p.gpu_indices
        assert all(index in types for index in p.gpu_indices)
        if j.gres and j.gres[0].type:
            assert all(types[i] == j.gres[0].type for i in p.gpu_indices)
        assert j.partition in n.partitions
        cpus_used[p.node] = cpus_used.get(p.node, 0) + j.cpus
        assert cpus_used[p.node] <= n.free_cpus
    # FIFO inside a partition: a job starts only if every earlier job of its partition started
    started = {p.job_id for p in result.placements}
    for j in jobs:
        if j.job_id in started:
            assert all(e.job_id in started for e in jobs if e.partition == j.partition and e.job_id < j.job_id)
        else:
            assert result.reasons[j.job_id] in ("Resources", "Priority")
