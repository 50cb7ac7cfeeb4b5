"""The scheduling policy on synthetic snapshots."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.controller.policy import (
    UNLIMITED,
    Limits,
    NodeView,
    PendingJob,
    RunningJob,
    Snapshot,
    pick_gpus,
    plan,
)
from pslurm.core.gres import GresRequest

TYPES = [None, "a100", "h100"]


def node(name, gpus, cpus=8, mem=1000, parts=("gpu",), available=True, all_gpus=None):
    return NodeView(name, frozenset(parts), cpus, mem, tuple(gpus), available, tuple(all_gpus or ()))


def job(job_id, gpus=0, type_=None, cpus=1, mem=0, part="gpu", prio=0, limit=None, user="", array=None,
        dep="satisfied", hold=""):
    gres = (GresRequest("gpu", type_, gpus),) if gpus else ()
    array_id, throttle = array or (None, None)
    return PendingJob(job_id, part, cpus, mem, gres, prio, limit, user, array_id, throttle, dep, hold)


def test_nine_one_gpu_jobs_on_four_two_gpu_nodes_start_eight():
    nodes = [node(f"c{i:03d}", [(0, None), (1, None)]) for i in range(4)]
    result = plan(Snapshot([job(i, 1) for i in range(1, 10)], nodes, now=0))
    pairs = {(p.node, p.gpu_indices) for p in result.placements}
    assert len(result.placements) == 8 and len(pairs) == 8
    assert result.reasons == {9: "Resources"}


def test_a_job_that_fits_nowhere_does_not_block_the_queue():
    nodes = [node("c000", [(0, None)])]
    result = plan(Snapshot([job(1, 2), job(2, 1)], nodes, now=0))
    assert [p.job_id for p in result.placements] == [2]
    assert result.reasons == {1: "Resources"} and result.estimates == {}


def running(job_id, node_name, gpus, end, cpus=1, user="", array=None):
    return RunningJob(job_id, node_name, cpus, 0, tuple(gpus), end, user, array)


def test_priority_order_then_job_id():
    nodes = [node("c000", [(0, None)])]
    result = plan(Snapshot([job(1, 1), job(2, 1, prio=10), job(3, 1, prio=10)], nodes, now=0))
    assert [p.job_id for p in result.placements] == [2]
    assert result.reasons == {3: "Resources", 1: "Priority"}


def test_backfill_starts_a_short_job_that_ends_before_the_reservation():
    # c000: 2 GPUs, one busy until t=100. Job 1 (2 GPUs) is reserved at t=100.
    nodes = [node("c000", [(1, None)], all_gpus=[(0, None), (1, None)])]
    snap = Snapshot([job(1, 2, limit=50, prio=10), job(2, 1, limit=100), job(3, 1, limit=101)], nodes, now=0,
                    running=[running(9, "c000", [0], 100)])
    result = plan(snap)
    assert [p.job_id for p in result.placements] == [2]  # ends at 100: does not delay job 1
    assert result.estimates == {1: 100, 3: 150}  # job 3 goes after job 1
    snap = Snapshot([job(1, 2, limit=50, prio=10), job(3, 1, limit=101)], nodes, now=0,
                    running=[running(9, "c000", [0], 100)])
    result = plan(snap)
    assert result.placements == [] and result.reasons == {1: "Resources", 3: "Priority"}


def test_backfill_uses_other_nodes_freely():
    nodes = [node("c000", [(1, None)], all_gpus=[(0, None), (1, None)]), node("c001", [(0, None)])]
    snap = Snapshot([job(1, 2, limit=50, prio=10), job(2, 1)], nodes, now=0,
                    running=[running(9, "c000", [0], 100)])
    result = plan(snap)
    assert [(p.job_id, p.node) for p in result.placements] == [(2, "c001")]


def test_unlimited_jobs_are_planned_as_a_year():
    nodes = [node("c000", [(1, None)], all_gpus=[(0, None), (1, None)])]
    snap = Snapshot([job(1, 2, prio=10), job(2, 1)], nodes, now=0, running=[running(9, "c000", [0], None)])
    result = plan(snap)
    assert result.placements == [] and result.estimates == {1: UNLIMITED}


def test_held_dependent_and_limited_jobs_wait_with_slurms_reasons():
    nodes = [node("c000", [(0, None), (1, None)])]
    jobs = [job(1, 1, hold="user"), job(2, 1, hold="admin"), job(3, 1, dep="waiting"), job(4, 1, dep="never"),
            job(5, 1, limit=100, part="gpu")]
    result = plan(Snapshot(jobs, nodes, now=0, partition_max_time={"gpu": 60}))
    assert result.placements == []
    assert result.reasons == {1: "JobHeldUser", 2: "JobHeldAdmin", 3: "Dependency", 4: "DependencyNeverSatisfied",
                              5: "PartitionTimeLimit"}


def test_array_throttle_and_user_limits():
    nodes = [node(f"c{i}", [(0, None), (1, None)]) for i in range(4)]
    tasks = [job(i, 1, array=(1, 2)) for i in range(1, 6)]
    result = plan(Snapshot(tasks, nodes, now=0, running=[running(99, "c0", [0], None, array=1)]))
    assert [p.job_id for p in result.placements] == [1]
    assert all(result.reasons[i] == "JobArrayTaskLimit" for i in range(2, 6))
    jobs = [job(i, 2, user="ann") for i in range(1, 5)]
    result = plan(Snapshot(jobs, nodes, now=0, limits=Limits(max_gpus_per_user=4)))
    assert [p.job_id for p in result.placements] == [1, 2]
    assert result.reasons == {3: "QOSMaxGRESPerUser", 4: "QOSMaxGRESPerUser"}
    result = plan(Snapshot(jobs, nodes, now=0, limits=Limits(max_jobs_per_user=1)))
    assert [p.job_id for p in result.placements] == [1]
    assert result.reasons[2] == "QOSMaxJobsPerUserLimit"


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
nodes_st = st.lists(st.tuples(gpu_lists, st.integers(1, 8), st.booleans(), st.lists(st.integers(1, 50), max_size=4)),
                    min_size=1, max_size=5)
jobs_st = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(TYPES), st.integers(1, 4),
                             st.sampled_from(["gpu", "cpu"]), st.integers(0, 5), st.integers(1, 60),
                             st.sampled_from(["satisfied", "satisfied", "waiting", "never"]),
                             st.sampled_from([None, (1, 1), (2, 2)]),
                             st.sampled_from([None, None, frozenset({"c000"}), frozenset({"c001", "c002"})])),
                   max_size=20)


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_invariants(node_specs, job_specs):
    nodes, runs = [], []
    rid = 1000
    for i, (types, cpus, in_cpu, ends) in enumerate(node_specs):
        parts = ("gpu", "cpu") if in_cpu else ("gpu",)
        inventory = [(k, t) for k, t in enumerate(types)]
        busy = inventory[: len(ends)]
        for (index, _), end in zip(busy, ends, strict=False):
            runs.append(running(rid, f"c{i:03d}", [index], float(end)))
            rid += 1
        nodes.append(node(f"c{i:03d}", inventory[len(busy):], cpus=cpus + len(busy), parts=parts,
                          all_gpus=inventory))
    jobs = [replace(job(i + 1, g, t, c, part=p, prio=pr, limit=lim, dep=d, array=a), allowed_nodes=only)
            for i, (g, t, c, p, pr, lim, d, a, only) in enumerate(job_specs)]
    result = plan(Snapshot(jobs, nodes, now=0, running=runs))
    by_node = {n.name: n for n in nodes}
    by_job = {j.job_id: j for j in jobs}
    used: set[tuple[str, int]] = set()
    cpus_used: dict[str, int] = {}
    for p in result.placements:
        j, n = by_job[p.job_id], by_node[p.node]
        # no GPU is ever handed out twice, and only free GPUs are handed out
        for index in p.gpu_indices:
            assert (p.node, index) not in used
            used.add((p.node, index))
        types = dict(n.free_gpus)
        assert len(p.gpu_indices) == j.gres[0].count if j.gres else not p.gpu_indices
        assert all(index in types for index in p.gpu_indices)
        if j.gres and j.gres[0].type:
            assert all(types[i] == j.gres[0].type for i in p.gpu_indices)
        assert j.partition in n.partitions
        assert j.allowed_nodes is None or n.name in j.allowed_nodes  # -w / -x hold
        cpus_used[p.node] = cpus_used.get(p.node, 0) + j.cpus
        assert cpus_used[p.node] <= n.free_cpus
        # a dependency never starts early
        assert j.dependency == "satisfied"
    # throttles hold: at most one running task of array 1 (%1), two of array... per its own limit
    started = {p.job_id for p in result.placements}
    per_array: dict[int, int] = {}
    for j in jobs:
        if j.job_id in started and j.array_job_id is not None:
            per_array[j.array_job_id] = per_array.get(j.array_job_id, 0) + 1
            assert per_array[j.array_job_id] <= j.array_max_running
    for j in jobs:
        if j.job_id not in started:
            assert j.job_id in result.reasons
    # backfill never delays a reservation: replaying the plan with the started jobs as running ones,
    # every reserved job still finds its start no later than its estimate
    if result.estimates:
        now_running = list(runs) + [running(p.job_id, p.node, p.gpu_indices, float(by_job[p.job_id].time_limit),
                                            cpus=by_job[p.job_id].cpus) for p in result.placements]
        free = {n.name: [g for g in n.free_gpus if (n.name, g[0]) not in used] for n in nodes}
        after = [NodeView(n.name, n.partitions, n.free_cpus - cpus_used.get(n.name, 0), n.free_mem_mb,
                          tuple(free[n.name]), n.available, n.gpus) for n in nodes]
        reserved = [j for j in jobs if j.job_id in result.estimates]
        replay = plan(Snapshot(reserved, after, now=0, running=now_running))
        for j in reserved:
            assert replay.estimates.get(j.job_id, 0) <= result.estimates[j.job_id] + 1e-6


def test_an_untyped_job_does_not_backfill_onto_a_typed_gpu_a_reservation_needs():
    # GPUs: 0 untyped, 1-2 h100. Job 4 takes 0 and 1 until t=1; job 5 (2 x h100) is reserved at t=1.
    # Job 3 (any one GPU for 2 s) could only get GPU 2, an h100 that job 5 needs at t=1: it must wait.
    gpus = [(0, None), (1, "h100"), (2, "h100")]
    nodes = [node("c000", gpus, cpus=4, all_gpus=gpus)]
    jobs = [job(3, 1, limit=2), job(4, 2, prio=1, limit=1), job(5, 2, "h100", prio=1, limit=1)]
    result = plan(Snapshot(jobs, nodes, now=0))
    assert [(p.job_id, p.gpu_indices) for p in result.placements] == [(4, (0, 1))]
    assert result.estimates[5] == 1.0 and result.reasons[3] == "Priority"


def test_nodelist_places_only_on_the_named_node_and_says_when_it_is_unavailable():
    nodes = [node("c000", [(0, None)]), node("c001", [(0, None)]), node("c002", [(0, None)], available=False)]
    jobs = [replace(job(i, 1), allowed_nodes=frozenset({name}))
            for i, name in ((1, "c001"), (2, "c001"), (3, "c002"), (4, "c000"))]
    result = plan(Snapshot(jobs, nodes, now=0))
    assert sorted((p.job_id, p.node) for p in result.placements) == [(1, "c001"), (4, "c000")]
    assert result.reasons[2] in ("Resources", "Priority") and result.reasons[3] == "ReqNodeNotAvail"


def test_a_named_node_is_found_beyond_the_scan_limit():
    nodes = [node(f"c{i:04d}", [(0, None)], cpus=0) for i in range(600)]  # busy CPUs: none fits
    nodes.append(node("c9999", [(0, None)]))
    result = plan(Snapshot([replace(job(1, 1), allowed_nodes=frozenset({"c9999"}))], nodes, now=0))
    assert [(p.job_id, p.node) for p in result.placements] == [(1, "c9999")]
