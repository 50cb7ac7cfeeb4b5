"""Multi-node jobs in the scheduling policy: N distinct nodes at once, or none; claims; reservations on all N."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.controller.policy import INF, Limits, NodeView, PendingJob, Plan, RunningJob, Snapshot, plan
from pslurm.core.gres import GresRequest

TYPES = [None, "a100", "h100"]


def node(name, free, cpus=8, mem=1000, parts=("gpu",), available=True, all_gpus=None):
    """``free``: free GPU indices (untyped) or (index, type) pairs; ``all_gpus``: the inventory (default: free)."""
    free = tuple(g if isinstance(g, tuple) else (g, None) for g in free)
    inventory = tuple(g if isinstance(g, tuple) else (g, None) for g in (all_gpus if all_gpus is not None else free))
    return NodeView(name, frozenset(parts), cpus, mem, free, available, inventory)


def mjob(job_id, nodes=2, gpus=0, type_=None, cpus=1, mem=0, prio=0, limit=None, user="u", part="gpu", only=None,
         required=None, per_node=()):
    gres = (GresRequest("gpu", type_, gpus),) if gpus else ()
    return PendingJob(job_id, part, cpus, mem, gres, prio, limit, user, allowed_nodes=only, num_nodes=nodes,
                      per_node=per_node, required_nodes=required)


def run(job_id, node_name, gpus, end, cpus=1, mem=0, user="u"):
    return RunningJob(job_id, node_name, cpus, mem, tuple(gpus), end, user)


def hosts(result: Plan) -> dict[int, tuple[str, ...]]:
    return {p.job_id: (p.node, *(n for n, _ in p.more)) for p in result.placements}


def reserved(result: Plan) -> dict[int, tuple[float, tuple[str, ...]]]:
    return {j: (t, (result.reserved_on[j], *result.reserved_more.get(j, ()))) for j, t in result.estimates.items()}


BOTH = pytest.mark.parametrize("backfill", [False, True])


# -- unit cases -------------------------------------------------------------------------------------------------------


@BOTH
def test_a_job_starts_on_n_distinct_nodes_now_with_its_gpus_on_each(backfill):
    nodes = [node("c000", [0]), node("c001", [0, 1]), node("c002", [0, 1])]
    result = plan(Snapshot([mjob(1, nodes=2, gpus=2, cpus=4, mem=500, limit=60)], nodes, now=0), backfill=backfill)
    assert len(result.placements) == 1
    p = result.placements[0]
    assert (p.node, p.gpu_indices, p.more) == ("c001", (0, 1), (("c002", (0, 1)),))
    assert result.reasons == {}


@BOTH
def test_single_node_jobs_keep_an_empty_more(backfill):
    result = plan(Snapshot([mjob(1, nodes=1, gpus=1)], [node("c000", [0])], now=0), backfill=backfill)
    assert [(p.node, p.gpu_indices, p.more) for p in result.placements] == [("c000", (0,), ())]


def test_all_or_none_and_the_backfill_reserves_on_every_node():
    # c000 free; c001 busy until 50: job 1 (2 nodes) starts on neither, now
    nodes = [node("c000", [0, 1]), node("c001", [], all_gpus=[0, 1])]
    runs = [run(90, "c001", [0, 1], 50.0)]
    jobs = [mjob(1, nodes=2, gpus=2, prio=9, limit=100), mjob(2, nodes=1, gpus=1, limit=40),
            mjob(3, nodes=1, gpus=1, limit=60)]
    main = plan(Snapshot(jobs, nodes, now=0, running=runs), backfill=False)
    assert main.placements == [] and main.reasons == {1: "Resources", 2: "Priority", 3: "Priority"}
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert reserved(full)[1] == (50.0, ("c000", "c001"))
    assert hosts(full) == {2: ("c000",)}  # ends at 40, before job 1's start; job 3 would delay it
    assert full.reasons[3] == "Priority" and reserved(full)[3][0] == 150.0


def test_the_main_pass_claims_the_nodes_a_waiting_multi_node_job_could_use():
    # job 1 (2 nodes with h100s): c000 and c001 have them but c001 is busy. c002 (a100s) stays open.
    h100 = [(0, "h100"), (1, "h100")]
    nodes = [node("c000", h100), node("c001", [], all_gpus=h100), node("c002", [(0, "a100")])]
    jobs = [mjob(1, nodes=2, gpus=1, type_="h100", prio=9), mjob(2, nodes=1, gpus=1), mjob(3, nodes=1, gpus=1,
                                                                                           type_="a100")]
    main = plan(Snapshot(jobs, nodes, now=0, running=[run(90, "c001", [0, 1], 10.0)]), backfill=False)
    assert hosts(main) == {2: ("c002",)}  # c000 is claimed: job 2 goes to c002, job 3 then waits behind it
    assert main.reasons == {1: "Resources", 3: "Priority"}  # its partition has a job waiting


@BOTH
def test_too_few_nodes_it_could_ever_use_claim_nothing(backfill):
    nodes = [node("c000", [0]), node("c001", [0], available=False)]
    jobs = [mjob(1, nodes=2, gpus=1, prio=9, limit=10), mjob(2, nodes=1, gpus=1, limit=10)]
    result = plan(Snapshot(jobs, nodes, now=0), backfill=backfill)
    assert hosts(result) == {2: ("c000",)} and result.reasons == {1: "Resources"} and result.estimates == {}


def test_the_reservation_is_at_the_earliest_time_n_nodes_hold_it_for_its_duration():
    # c000 free at 10, c001 at 30, c002 at 20; job 1 (c000 alone, 100 s) is reserved first at 10, so c000 is
    # not free again before 110: job 2 (2 nodes, 30 s) goes on c002 and c001 at 30
    nodes = [node(f"c00{k}", [], all_gpus=[0, 1]) for k in range(3)]
    runs = [run(90, "c000", [0, 1], 10.0), run(91, "c001", [0, 1], 30.0), run(92, "c002", [0, 1], 20.0)]
    jobs = [mjob(1, nodes=1, gpus=2, prio=9, limit=100), mjob(2, nodes=2, gpus=2, prio=5, limit=30)]
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert reserved(full) == {1: (10.0, ("c000",)), 2: (30.0, ("c002", "c001"))}
    # a shorter first job leaves c000 free from 15: job 2 is then reserved at 20 on c000 and c002
    jobs = [mjob(1, nodes=1, gpus=2, prio=9, limit=5), mjob(2, nodes=2, gpus=2, prio=5, limit=30)]
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert reserved(full)[2] == (20.0, ("c000", "c002"))


def test_a_hole_too_short_for_the_job_is_skipped():
    # c000: GPU 0 busy until 10, GPU 1 until 40; job 1 (both, c000 only) is reserved there from 40 to 140, so
    # c000 has one GPU free in [10, 40) only. c001 is free from 20, c002 from 30.
    nodes = [node("c000", [], all_gpus=[0, 1]), node("c001", [], all_gpus=[0]), node("c002", [], all_gpus=[0])]
    runs = [run(90, "c000", [0], 10.0), run(91, "c000", [1], 40.0), run(92, "c001", [0], 20.0),
            run(93, "c002", [0], 30.0)]
    jobs = [mjob(1, nodes=1, gpus=2, prio=9, limit=100, only=frozenset({"c000"})), mjob(2, nodes=2, gpus=1, limit=30)]
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert reserved(full) == {1: (40.0, ("c000",)), 2: (30.0, ("c001", "c002"))}  # [20, 50) does not fit on c000
    jobs[1] = mjob(2, nodes=2, gpus=1, limit=20)
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert reserved(full)[2] == (20.0, ("c000", "c001"))  # [20, 40) does


def test_uneven_shares_go_largest_first_to_the_nodes_that_hold_them():
    nodes = [node("c000", [], cpus=4), node("c001", [], cpus=8), node("c002", [], cpus=2)]
    job = mjob(1, nodes=2, cpus=6, per_node=((6, 0), (2, 0)), limit=10)
    result = plan(Snapshot([job], nodes, now=0))
    assert hosts(result) == {1: ("c001", "c000")}  # the first share (6 CPUs) on c001, the second on c000
    result = plan(Snapshot([job], [node("c000", [], cpus=4), node("c001", [], cpus=5)], now=0))
    assert result.placements == [] and result.estimates == {}  # no node ever holds 6 CPUs


@BOTH
def test_nodes_named_with_w_are_all_among_its_nodes(backfill):
    nodes = [node(f"c00{k}", [0]) for k in range(4)]
    job = mjob(1, nodes=3, gpus=1, required=frozenset({"c003", "c002"}))
    result = plan(Snapshot([job], nodes, now=0), backfill=backfill)
    assert set(hosts(result)[1]) >= {"c002", "c003"} and len(set(hosts(result)[1])) == 3
    # exactly the nodes it names
    result = plan(Snapshot([mjob(1, nodes=2, gpus=1, required=frozenset({"c001", "c003"}))], nodes, now=0),
                  backfill=backfill)
    assert set(hosts(result)[1]) == {"c001", "c003"}
    # one of them busy: it waits (it does not go elsewhere)
    busy = [node("c000", [0]), node("c001", [], all_gpus=[0]), node("c002", [0]), node("c003", [0])]
    result = plan(Snapshot([replace(job, required_nodes=frozenset({"c001", "c002"}), time_limit=10)], busy, now=0,
                           running=[run(90, "c001", [0], 30.0)]), backfill=backfill)
    assert result.placements == [] and result.reasons == {1: "Resources"}
    if backfill:
        assert reserved(result)[1][0] == 30.0 and {"c001", "c002"} <= set(reserved(result)[1][1])


def test_nodes_named_with_w_that_cannot_be_had():
    nodes = [node(f"c00{k}", [0]) for k in range(3)]
    result = plan(Snapshot([mjob(1, nodes=2, required=frozenset({"c000", "c001", "c002"}))], nodes, now=0))
    assert result.reasons == {1: "BadConstraints"}
    down = [node("c000", [0]), node("c001", [0], available=False), node("c002", [0])]
    result = plan(Snapshot([mjob(1, nodes=2, required=frozenset({"c000", "c001"}))], down, now=0))
    assert result.reasons == {1: "ReqNodeNotAvail"}


def test_a_multi_node_backfill_start_never_delays_a_nodes_reservation():
    # c000 has 1 of 2 GPUs free until 10; job 1 (2 GPUs on c000) is reserved there at 10. Job 2 (2 nodes, 1 GPU
    # each, 20 s) would keep c000's free GPU past 10: it starts on c001 and c002, never on c000
    two = [0, 1]
    nodes = [node("c000", [1], all_gpus=two), node("c001", [0]), node("c002", [0])]
    runs = [run(90, "c000", [0], 10.0)]
    jobs = [mjob(1, nodes=1, gpus=2, prio=9, limit=50, only=frozenset({"c000"})), mjob(2, nodes=2, gpus=1, limit=20)]
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert reserved(full)[1] == (10.0, ("c000",)) and hosts(full) == {2: ("c001", "c002")}
    # without c002 it cannot start without delaying job 1: it is reserved after it
    full = plan(Snapshot(jobs, nodes[:2], now=0, running=runs))
    assert hosts(full) == {} and reserved(full)[2] == (60.0, ("c001", "c000"))
    # a job short enough to end by 10 starts on c000 too
    jobs[1] = mjob(2, nodes=2, gpus=1, limit=10)
    full = plan(Snapshot(jobs, nodes[:2], now=0, running=runs))
    assert hosts(full) == {2: ("c000", "c001")}


def test_limits_count_every_node():
    nodes = [node("c000", [0, 1]), node("c001", [0, 1])]
    job = mjob(1, nodes=2, gpus=2, cpus=2)
    assert plan(Snapshot([job], nodes, now=0, limits=Limits(max_gpus_per_user=3))).reasons == {1: "QOSMaxGRESPerUser"}
    assert plan(Snapshot([job], nodes, now=0, limits=Limits(max_cpus_per_user=3))).reasons == {
        1: "QOSMaxCpuPerUserLimit"}
    assert hosts(plan(Snapshot([job], nodes, now=0, limits=Limits(max_gpus_per_user=4)))) == {1: ("c000", "c001")}


def test_a_multi_node_share_is_refused():
    from pslurm.core.sharing import share_of

    gres = (GresRequest("shard", None, 1),)
    share = share_of(gres)
    job = replace(mjob(1, nodes=2), gres=gres, share=share)
    assert plan(Snapshot([job], [node("c000", [0]), node("c001", [0])], now=0)).reasons == {1: "BadConstraints"}


# -- properties -------------------------------------------------------------------------------------------------------

gpu_lists = st.lists(st.sampled_from(TYPES), min_size=0, max_size=3)
nodes_st = st.lists(st.tuples(gpu_lists, st.integers(1, 8), st.integers(200, 1000), st.booleans(),
                              st.lists(st.integers(1, 50), max_size=3), st.booleans()),
                    min_size=1, max_size=6)
jobs_st = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 2), st.sampled_from(TYPES), st.integers(1, 4),
                             st.sampled_from([0, 100, 300]), st.sampled_from(["gpu", "cpu"]), st.integers(0, 5),
                             st.sampled_from([None, 5, 20, 60]), st.booleans(),
                             st.sampled_from([None, None, frozenset({"c000", "c001", "c002"})]),
                             st.sampled_from([None, None, frozenset({"c001"}), frozenset({"c000", "c002"})])),
                   max_size=14)


def build(node_specs, job_specs):
    nodes, runs = [], []
    rid = 1000
    for i, (types, cpus, mem, in_cpu, ends, up) in enumerate(node_specs):
        parts = ("gpu", "cpu") if in_cpu else ("gpu",)
        inventory = list(enumerate(types))
        busy = inventory[: len(ends)]
        for (index, _), end in zip(busy, ends, strict=False):
            runs.append(RunningJob(rid, f"c{i:03d}", 1, 0, (index,), float(end), "u"))
            rid += 1
        nodes.append(NodeView(f"c{i:03d}", frozenset(parts), cpus, mem, tuple(inventory[len(busy):]), up,
                              tuple(inventory)))
    jobs = []
    for k, (n, g, t, c, m, part, prio, lim, uneven, only, req) in enumerate(job_specs):
        per_node = tuple((c + (1 if x == 0 else 0), m) for x in range(n)) if uneven and n > 1 else ()
        if req is not None and len(req) > n:
            req = None
        jobs.append(mjob(k + 1, nodes=n, gpus=g, type_=t, cpus=c, mem=m, prio=prio, limit=lim, part=part, only=only,
                         required=req, per_node=per_node))
    return nodes, runs, jobs


def shares_of(j: PendingJob) -> tuple[tuple[int, int], ...]:
    return j.per_node or ((j.cpus, j.mem_mb),) * j.num_nodes


def order(j):
    return (-j.priority, j.job_id)


def vec(cpus, mem, gpu_types) -> dict[str, int]:
    out = {"cpu": cpus, "mem": mem, "gpu": len(gpu_types)}
    for t in gpu_types:
        if t is not None:
            out[t] = out.get(t, 0) + 1
    return out


def check_starts(nodes, jobs, result: Plan) -> None:
    """Every start: exactly N distinct nodes it may use, each with its share and GPUs free now; no node
    oversubscribed (CPUs, memory, GPUs) by all the starts together."""
    by_job, by_node = {j.job_id: j for j in jobs}, {n.name: n for n in nodes}
    used_cpu: dict[str, int] = {}
    used_mem: dict[str, int] = {}
    used_gpus: dict[str, list[int]] = {}
    for p in result.placements:
        j = by_job[p.job_id]
        where = [(p.node, p.gpu_indices), *p.more]
        assert len(where) == j.num_nodes and len({w for w, _ in where}) == j.num_nodes, (j, p)
        assert (j.required_nodes or frozenset()) <= {w for w, _ in where}
        for (name, gpus), (c, m) in zip(where, shares_of(j), strict=True):
            n = by_node[name]
            assert n.available and j.partition in n.partitions
            assert j.allowed_nodes is None or name in j.allowed_nodes
            free = dict(n.free_gpus)
            assert all(g in free for g in gpus)
            for g in j.gres:
                assert sum(1 for x in gpus if g.type is None or free[x] == g.type) >= g.count
            assert len(gpus) == sum(g.count for g in j.gres)
            used_cpu[name] = used_cpu.get(name, 0) + c
            used_mem[name] = used_mem.get(name, 0) + m
            used_gpus.setdefault(name, []).extend(gpus)
    for name, n in by_node.items():
        assert used_cpu.get(name, 0) <= n.free_cpus and used_mem.get(name, 0) <= n.free_mem_mb
        assert len(set(used_gpus.get(name, []))) == len(used_gpus.get(name, []))


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st, st.booleans())
def test_n_distinct_nodes_or_none_and_no_node_oversubscribed(node_specs, job_specs, backfill):
    nodes, runs, jobs = build(node_specs, job_specs)
    result = plan(Snapshot(jobs, nodes, now=0, running=runs), backfill=backfill)
    check_starts(nodes, jobs, result)
    for j_id, names in result.reserved_more.items():
        assert len({result.reserved_on[j_id], *names}) == len(names) + 1


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_backfill_starts_and_reservations_multi_node_ones_included_all_fit_at_every_moment(node_specs, job_specs):
    """What runs, what starts and what is reserved (on each of a multi-node job's nodes) never pass a node's
    CPUs, memory and GPUs at any moment: no start or reservation delays a reservation made before it."""
    nodes, runs, jobs = build(node_specs, job_specs)
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    check_starts(nodes, jobs, full)
    by_job = {j.job_id: j for j in jobs}
    for n in nodes:
        types = dict(n.gpus)
        capacity = vec(n.free_cpus, n.free_mem_mb, [t for _, t in n.gpus])
        held: list[tuple[float, float, dict[str, int]]] = []
        for r in runs:
            if r.node == n.name:
                capacity["cpu"] += r.cpus
                held.append((0.0, INF if r.end_time is None else r.end_time,
                             vec(r.cpus, 0, [types[i] for i in r.gpu_indices])))
        for p in full.placements:
            j = by_job[p.job_id]
            for (name, gpus), (c, m) in zip([(p.node, p.gpu_indices), *p.more], shares_of(j), strict=True):
                if name == n.name:
                    held.append((0.0, INF if j.time_limit is None else float(j.time_limit),
                                 vec(c, m, [types[i] for i in gpus])))
        starts = [0.0]
        for h_id, at in full.estimates.items():
            h = by_job[h_id]
            names = (full.reserved_on[h_id], *full.reserved_more.get(h_id, ()))
            assert len(names) == h.num_nodes
            for name, (c, m) in zip(names, shares_of(h), strict=True):
                if name == n.name:
                    asked = [g.type for g in h.gres for _ in range(g.count)]
                    held.append((at, INF if h.time_limit is None else at + h.time_limit, vec(c, m, asked)))
                    starts.append(at)
        for at in starts:  # what is held grows only when a reservation begins
            used: dict[str, int] = {}
            for begin, end, v in held:
                if begin <= at < end:
                    for k, x in v.items():
                        used[k] = used.get(k, 0) + x
            assert all(x <= capacity.get(k, 0) for k, x in used.items()), (n.name, at, used, capacity)


def could_use(n: NodeView, j: PendingJob) -> bool:
    inventory = [t for _, t in n.gpus]
    ok_types = all(inventory.count(g.type) >= g.count for g in j.gres if g.type is not None)
    return (n.available and j.partition in n.partitions and (j.allowed_nodes is None or n.name in j.allowed_nodes)
            and len(inventory) >= sum(g.count for g in j.gres) and ok_types)


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_the_main_pass_starts_nothing_on_a_node_a_waiting_higher_priority_job_could_use(node_specs, job_specs):
    nodes, runs, jobs = build(node_specs, job_specs)
    main = plan(Snapshot(jobs, nodes, now=0, running=runs), backfill=False)
    check_starts(nodes, jobs, main)
    by_job = {j.job_id: j for j in jobs}
    waiting = []
    for j in jobs:
        if main.reasons.get(j.job_id) in ("Resources", "Priority"):
            usable = {n.name for n in nodes if could_use(n, j)}
            if len(usable) >= j.num_nodes and (j.required_nodes or frozenset()) <= usable:
                waiting.append(j)  # one that could never run (too few nodes) claims nothing
    for p in main.placements:
        s = by_job[p.job_id]
        for name in (p.node, *(w for w, _ in p.more)):
            for h in waiting:
                if order(h) < order(s):
                    assert not could_use(next(n for n in nodes if n.name == name), h), (h, s, p)


# -- no starvation: a simulation --------------------------------------------------------------------------------------

stream_st = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 2), st.integers(1, 30),
                               st.one_of(st.just(1.0), st.floats(0.1, 1.0)), st.integers(0, 2)),
                     min_size=10, max_size=60)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 3), st.integers(2, 3), stream_st, st.lists(st.booleans(), min_size=1, max_size=50),
       st.integers(0, 10))
def test_a_two_node_job_starts_by_its_first_estimate_under_a_stream_of_single_node_jobs(count, gpus, stream, kinds,
                                                                                       arrives):
    """A high-priority job asking every GPU of 2 nodes (of ``count``) against a stream of small single-node jobs,
    driven pass after pass (main or backfill) to the next end or arrival: it starts, and no later than its
    first backfill estimate (jobs end at or before their limits, which only makes it earlier)."""
    names = [f"c{k:03d}" for k in range(count)]
    big = mjob(1, nodes=2, gpus=gpus, prio=100, limit=20)
    arrivals: list[tuple[float, PendingJob]] = [(float(arrives), big)]
    t = 0.0
    for k, (gap, g, limit, _, prio) in enumerate(stream):
        arrivals.append((t, mjob(100 + k, nodes=1, gpus=g, limit=limit, prio=prio)))
        t += gap
    actual = {100 + k: max(1, math.floor(limit * frac)) for k, (_, _, limit, frac, _) in enumerate(stream)}
    actual[1] = 20
    runs: list[tuple[RunningJob, float]] = []  # one per (job, node): as the scheduler sees it, when it really ends
    now, first, started = 0.0, None, None
    pending: dict[int, PendingJob] = {}
    done: set[int] = set()
    for step in range(3000):
        runs = [(r, end) for r, end in runs if end > now]
        for at, j in arrivals:
            if at <= now and j.job_id not in pending and j.job_id not in done:
                pending[j.job_id] = j
        nodes = []
        for name in names:
            busy = {i for r, _ in runs if r.node == name for i in r.gpu_indices}
            nodes.append(node(name, [i for i in range(gpus) if i not in busy], cpus=64 - sum(
                r.cpus for r, _ in runs if r.node == name), all_gpus=list(range(gpus))))
        backfill = step == 0 or kinds[step % len(kinds)]
        result = plan(Snapshot(list(pending.values()), nodes, now=now, running=[r for r, _ in runs]), backfill=backfill)
        check_starts(nodes, list(pending.values()), result)
        if backfill and first is None and 1 in result.estimates:
            first = result.estimates[1]
        for p in result.placements:
            j = pending.pop(p.job_id)
            done.add(j.job_id)
            limit = float(j.time_limit)  # every job here has one
            for name, indices in [(p.node, p.gpu_indices), *p.more]:
                runs.append((RunningJob(j.job_id, name, j.cpus, j.mem_mb, indices, now + limit, j.user),
                             now + actual[j.job_id]))
            if j.job_id == 1:
                started = now
        if started is not None:
            break
        later = [end for _, end in runs if end > now] + [at for at, _ in arrivals if at > now]
        assert later, "nothing left to happen and the big job has not started"
        now = min(later)
    assert started is not None
    assert first is None or started <= first + 1e-9, (started, first)
