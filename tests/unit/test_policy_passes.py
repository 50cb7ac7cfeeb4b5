"""The main pass (on every change: no reservations) against the backfill pass (every bf_interval)."""

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.controller.policy import INF, Limits, NodeView, PendingJob, RunningJob, Snapshot, plan
from pslurm.core.gres import GresRequest

TYPES = [None, "a100", "h100"]


def node(name, gpus, cpus=8, parts=("gpu",), available=True, all_gpus=None):
    return NodeView(name, frozenset(parts), cpus, 1000, tuple(gpus), available, tuple(all_gpus or gpus))


def job(job_id, gpus=0, type_=None, cpus=1, part="gpu", prio=0, limit=None, user="", array=None, only=None):
    gres = (GresRequest("gpu", type_, gpus),) if gpus else ()
    array_id, throttle = array or (None, None)
    return PendingJob(job_id, part, cpus, 0, gres, prio, limit, user, array_id, throttle, allowed_nodes=only)


def order(j):
    return (-j.priority, j.job_id)


def test_main_pass_keeps_priority_order_where_backfill_would_jump_it():
    # c000 and c001 have 1 of their 2 GPUs free, until t=10 and t=20. Job 1 (priority, 2 GPUs) waits;
    # job 2 (short) fits now and ends before t=10, so backfill starts it; the main pass leaves it (Priority).
    two = [(0, None), (1, None)]
    nodes = [node("c000", [(1, None)], all_gpus=two), node("c001", [(1, None)], all_gpus=two)]
    snap = Snapshot([job(1, 2, prio=5, limit=60), job(2, 1, limit=5)], nodes, now=0,
                    running=[RunningJob(9, "c000", 1, 0, (0,), 10.0), RunningJob(8, "c001", 1, 0, (0,), 20.0)])
    main = plan(snap, backfill=False)
    assert main.placements == [] and main.reasons == {1: "Resources", 2: "Priority"} and main.estimates == {}
    full = plan(snap)
    assert [p.job_id for p in full.placements] == [2] and full.estimates == {1: 10.0}
    assert full.reserved_on == {1: "c000"}


def test_main_pass_starts_what_competes_for_no_blocked_job():
    # job 1 wants 2 h100s (none free): it claims c000 alone, the one node with h100s. Jobs 2 (an a100) and
    # 3 (any GPU) start on c001 (Slurm would close the whole partition); job 4 (2 GPUs) could use c000: Priority.
    nodes = [node("c000", [], all_gpus=[(0, "h100"), (1, "h100")]), node("c001", [(0, "a100"), (1, "a100")])]
    jobs = [job(1, 2, "h100", prio=9), job(2, 1, "a100"), job(3, 1), job(4, 2)]
    main = plan(Snapshot(jobs, nodes, now=0), backfill=False)
    assert [(p.job_id, p.node) for p in main.placements] == [(2, "c001"), (3, "c001")]
    assert main.reasons == {1: "Resources", 4: "Priority"}


def test_main_pass_other_partitions_and_named_nodes_go_on():
    nodes = [node("c000", [], parts=("a",), all_gpus=[(0, None)]), node("c001", [(0, None)], parts=("b",)),
             node("c002", [(0, None)], parts=("a",))]
    jobs = [job(1, 1, part="a", prio=9, only=frozenset({"c000"})), job(2, 1, part="b"), job(3, 1, part="a")]
    main = plan(Snapshot(jobs, nodes, now=0), backfill=False)
    # job 1 may only run on c000: only c000 is claimed, so job 3 of its partition starts on c002
    assert sorted((p.job_id, p.node) for p in main.placements) == [(2, "c001"), (3, "c002")]


def test_main_pass_blocks_a_long_queue_cheaply_and_still_reports_static_reasons():
    nodes = [node("c000", [])]
    jobs = [job(i, 1) for i in range(1, 2001)] + [replace(job(5000, 1), hold="user")]
    main = plan(Snapshot(jobs, nodes, now=0), backfill=False)
    assert main.reasons[1] == "Resources" and main.reasons[2000] == "Priority" and main.reasons[5000] == "JobHeldUser"


gpu_lists = st.lists(st.sampled_from(TYPES), min_size=0, max_size=4)
nodes_st = st.lists(st.tuples(gpu_lists, st.integers(1, 8), st.booleans(), st.lists(st.integers(1, 50), max_size=4),
                              st.booleans(), st.booleans()),
                    min_size=1, max_size=5)
jobs_st = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(TYPES), st.integers(1, 4),
                             st.sampled_from(["gpu", "cpu"]), st.integers(0, 5), st.sampled_from([None, 5, 20, 60]),
                             st.sampled_from([None, (1, 1), (2, 2)]),
                             st.sampled_from([None, None, frozenset({"c000"}), frozenset({"c001", "c002"})]),
                             st.sampled_from(["u", "v"])),
                   max_size=20)


def build(node_specs, job_specs, hide=False):
    """Nodes (with ``hide``, some listing only their free GPUs, as the controller's views do), running jobs,
    pending jobs."""
    nodes, runs = [], []
    rid = 1000
    for i, (types, cpus, in_cpu, ends, up, free_only) in enumerate(node_specs):
        parts = ("gpu", "cpu") if in_cpu else ("gpu",)
        inventory = list(enumerate(types))
        busy = inventory[: len(ends)]
        for (index, _), end in zip(busy, ends, strict=False):
            runs.append(RunningJob(rid, f"c{i:03d}", 1, 0, (index,), float(end), "u"))
            rid += 1
        view = node(f"c{i:03d}", inventory[len(busy):], cpus=cpus, parts=parts, available=up, all_gpus=inventory)
        nodes.append(replace(view, gpus=()) if hide and free_only else view)
    jobs = [job(i + 1, g, t, c, part=p, prio=pr, limit=lim, user=u, array=a, only=only)
            for i, (g, t, c, p, pr, lim, a, only, u) in enumerate(job_specs)]
    return nodes, runs, jobs


def could_use(n: NodeView, j: PendingJob) -> bool:
    """Independently of the policy: the nodes ``j`` could ever run on (``n`` with its whole inventory)."""
    inventory = [t for _, t in n.gpus]
    ok_types = all(inventory.count(g.type) >= g.count for g in j.gres if g.type is not None)
    return (n.available and j.partition in n.partitions and (j.allowed_nodes is None or n.name in j.allowed_nodes)
            and len(inventory) >= sum(g.count for g in j.gres) and ok_types)


@settings(max_examples=400, deadline=None)
@given(nodes_st, jobs_st, st.booleans())
def test_no_starvation_main_pass_never_jumps_a_reservation(node_specs, job_specs, limited):
    nodes, runs, jobs = build(node_specs, job_specs, hide=True)
    snap = Snapshot(jobs, nodes, now=0, running=runs, limits=Limits(max_jobs_per_user=3) if limited else Limits())
    main, full = plan(snap, backfill=False), plan(snap)
    by_job, by_node = {j.job_id: j for j in jobs}, {n.name: n for n in build(node_specs, job_specs)[0]}
    started = {p.job_id for p in main.placements}
    assert not main.estimates and not main.reserved_on
    waiting = [j for j in jobs if main.reasons.get(j.job_id) in ("Resources", "Priority")]
    for p in main.placements:
        s = by_job[p.job_id]
        # no start on a node a higher-priority job left waiting for resources could use (what "compete" means)
        for h in waiting:
            if order(h) < order(s):
                assert not could_use(by_node[p.node], h), (h, s, p)
        # so none on a node where the backfill pass reserves for a higher-priority job the main pass left waiting
        for h_id, where in full.reserved_on.items():
            h = by_job[h_id]
            if order(h) < order(s) and h_id not in started and main.reasons.get(h_id) in ("Resources", "Priority"):
                assert where != p.node, (h, s, p)
    # until the first job that waits for resources both passes make the same decisions
    first = min((order(j) for j in waiting), default=None)
    for j in jobs:
        if first is None or order(j) < first:
            assert (j.job_id in started) == (j.job_id in {p.job_id for p in full.placements})


def vector(cpus, gpus, types):
    """What a start, a running job or a reservation holds on a node: CPUs, GPUs, and GPUs of each type."""
    out = {"cpu": cpus, "gpu": len(gpus)}
    for t in gpus:
        if t is not None:
            out[t] = out.get(t, 0) + 1
    return out


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_backfill_pass_keeps_priority_order_its_starts_and_reservations_all_fit(node_specs, job_specs):
    """Every start and every reservation fit together at every moment: no backfilled job delays a reservation."""
    nodes, runs, jobs = build(node_specs, job_specs)
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    by_job = {j.job_id: j for j in jobs}
    for n in nodes:
        types = dict(n.gpus)
        capacity = vector(n.free_cpus, [t for _, t in n.gpus], types)
        held = []  # (from, until, vector)
        for r in runs:
            if r.node == n.name:
                capacity["cpu"] += r.cpus
                held.append((0.0, INF if r.end_time is None else r.end_time,
                             vector(r.cpus, [types[i] for i in r.gpu_indices], types)))
        for p in full.placements:
            if p.node == n.name:
                j = by_job[p.job_id]
                held.append((0.0, INF if j.time_limit is None else float(j.time_limit),
                             vector(j.cpus, [types[i] for i in p.gpu_indices], types)))
        starts = [0.0]
        for h_id, where in full.reserved_on.items():
            if where == n.name:
                h = by_job[h_id]
                at = full.estimates[h_id]
                asked = [g.type for g in h.gres for _ in range(g.count)]
                held.append((at, INF if h.time_limit is None else at + h.time_limit, vector(h.cpus, asked, types)))
                starts.append(at)
        # what is held only grows when a reservation begins: checking now and at each one's start checks all time
        for at in starts:
            used: dict[str, int] = {}
            for begin, end, vec in held:
                if begin <= at < end:
                    for k, v in vec.items():
                        used[k] = used.get(k, 0) + v
            assert all(v <= capacity.get(k, 0) for k, v in used.items()), (n.name, at, used, capacity)
