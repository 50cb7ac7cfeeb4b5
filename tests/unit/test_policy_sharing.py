"""GPU sharing in the scheduling policy: shards, MPS and GPU memory slices of one GPU (issue #13)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.controller.allocations import NodeUsage, node_view
from pslurm.controller.policy import (
    INF,
    Limits,
    NodeView,
    PendingJob,
    Plan,
    RunningJob,
    SharedGpu,
    Snapshot,
    plan,
)
from pslurm.core.gres import GresRequest
from pslurm.core.node import GpuInfo, NodeRecord
from pslurm.core.sharing import GpuShare
from pslurm.core.states import NodeState

KINDS = ("shard", "mps", "gpumem")


def gpu(index, type_=None, mem=0, shards=0, mps=0, util=0.0):
    return SharedGpu(index, type_, mem, shards, mps, 0, util)


def snode(name, gpus, busy=(), cpus=8, mem=1000, parts=("gpu",), available=True):
    """A node whose every GPU is in ``gpus`` (SharedGpu), those in ``busy`` held by running jobs."""
    inventory = tuple((g.index, g.type) for g in gpus)
    free = tuple(g for g in inventory if g[0] not in busy)
    return NodeView(name, frozenset(parts), cpus, mem, free, available, inventory, tuple(gpus))


def sjob(job_id, kind, amount, type_=None, cpus=1, mem=0, prio=0, limit=None, user="u", part="gpu", only=None):
    return PendingJob(job_id, part, cpus, mem, (GresRequest(kind, type_, amount),), prio, limit, user,
                      allowed_nodes=only, share=GpuShare(kind, amount, type_))


def wjob(job_id, gpus=1, type_=None, cpus=1, mem=0, prio=0, limit=None, user="u", part="gpu", only=None):
    gres = (GresRequest("gpu", type_, gpus),) if gpus else ()
    return PendingJob(job_id, part, cpus, mem, gres, prio, limit, user, allowed_nodes=only)


def srun(job_id, node_name, index, kind, amount, end, user="u", cpus=1, mem=0):
    return RunningJob(job_id, node_name, cpus, mem, (index,), end, user, share=GpuShare(kind, amount))


def wrun(job_id, node_name, indices, end, user="u", cpus=1, mem=0):
    return RunningJob(job_id, node_name, cpus, mem, tuple(indices), end, user)


def placed(result: Plan) -> dict[int, tuple[str, tuple[int, ...]]]:
    return {p.job_id: (p.node, p.gpu_indices) for p in result.placements}


BOTH = pytest.mark.parametrize("backfill", [True, False])


# -- placement: best fit ------------------------------------------------------------------------------


@BOTH
def test_a_share_joins_the_shared_gpu_with_least_room_left_and_a_free_one_only_when_none_fits(backfill):
    # GPU 0 has 2 shards left, GPU 1 has 5, GPU 2 is free
    nodes = [snode("c000", [gpu(0, shards=8), gpu(1, shards=8), gpu(2, shards=8)], busy={0, 1})]
    runs = [srun(90, "c000", 0, "shard", 6, 100.0), srun(91, "c000", 1, "shard", 3, 100.0)]
    for amount, where in ((2, 0), (1, 0), (3, 1), (5, 1), (6, 2)):
        result = plan(Snapshot([sjob(1, "shard", amount)], nodes, now=0, running=runs), backfill=backfill)
        assert placed(result) == {1: ("c000", (where,))}, amount


@BOTH
def test_gpu_memory_goes_to_the_smallest_free_gpu_that_holds_it_after_the_shared_ones(backfill):
    nodes = [snode("c000", [gpu(0, mem=80000), gpu(1, mem=40000), gpu(2, mem=16000)])]
    jobs = [sjob(1, "gpumem", 20000, prio=3), sjob(2, "gpumem", 10000, prio=2), sjob(3, "gpumem", 30000, prio=1),
            sjob(4, "gpumem", 12000)]
    result = plan(Snapshot(jobs, nodes, now=0), backfill=backfill)
    # 1: the smallest GPU it fits (40000); 2: joins it (10000 left there) rather than open the 16000 one;
    # 3: nothing shared has 30000 left: the 80000 GPU; 4: 12000 fits GPU 0's 50000 left and GPU 1's 10000 not
    assert placed(result) == {1: ("c000", (1,)), 2: ("c000", (1,)), 3: ("c000", (0,)), 4: ("c000", (0,))}


@BOTH
def test_ties_go_to_the_less_busy_gpu_then_the_lower_node_and_index(backfill):
    gpus = [gpu(0, shards=4, util=50.0), gpu(1, shards=4, util=10.0)]
    runs = [srun(90, "c000", 0, "shard", 1, 50.0), srun(91, "c000", 1, "shard", 1, 50.0),
            srun(92, "c001", 0, "shard", 1, 50.0), srun(93, "c001", 1, "shard", 1, 50.0)]
    nodes = [snode("c001", gpus, busy={0, 1}), snode("c000", gpus, busy={0, 1})]  # c001 is the lower node index
    result = plan(Snapshot([sjob(1, "shard", 1)], nodes, now=0, running=runs), backfill=backfill)
    assert placed(result) == {1: ("c001", (1,))}
    flat = [gpu(0, shards=4), gpu(1, shards=4)]
    result = plan(Snapshot([sjob(1, "shard", 1)], [snode("c000", flat), snode("c001", flat)], now=0),
                  backfill=backfill)
    assert placed(result) == {1: ("c000", (0,))}  # all free and idle: the first GPU of the first node


# -- the rules of a shared GPU ------------------------------------------------------------------------


@BOTH
def test_shares_never_pass_a_gpus_capacity(backfill):
    nodes = [snode("c000", [gpu(0, shards=4)])]
    jobs = [sjob(i, "shard", 2, limit=10) for i in (1, 2, 3)]
    result = plan(Snapshot(jobs, nodes, now=0), backfill=backfill)
    assert placed(result) == {1: ("c000", (0,)), 2: ("c000", (0,))}
    assert result.reasons == {3: "Resources"}
    if backfill:  # as if it held the whole GPU: from when the last share on it ends
        assert result.estimates == {3: 10.0}


@BOTH
def test_a_gpu_held_whole_is_never_shared(backfill):
    gpus = [gpu(0, shards=4, mps=100, mem=16000), gpu(1, shards=4, mps=100, mem=16000)]
    runs = [wrun(90, "c000", [0], 100.0)]
    result = plan(Snapshot([sjob(1, "shard", 1), sjob(2, "mps", 50), sjob(3, "gpumem", 1000)],
                           [snode("c000", gpus, busy={0})], now=0, running=runs), backfill=backfill)
    assert placed(result) == {1: ("c000", (1,))}  # then GPU 1 is in shard mode: the others wait
    assert result.reasons == {2: "Resources", 3: "Priority"}  # Priority: job 2 of its partition waits first
    runs = [wrun(90, "c000", [0, 1], 100.0)]
    result = plan(Snapshot([sjob(1, "shard", 1)], [snode("c000", gpus, busy={0, 1})], now=0, running=runs),
                  backfill=backfill)
    assert result.placements == [] and result.reasons == {1: "Resources"}


@BOTH
def test_a_shared_gpu_is_never_handed_out_whole(backfill):
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    runs = [srun(90, "c000", 0, "shard", 1, 100.0)]
    nodes = [snode("c000", gpus, busy={0})]
    result = plan(Snapshot([wjob(1, 1, prio=1, limit=50), wjob(2, 2)], nodes, now=0, running=runs), backfill=backfill)
    assert placed(result) == {1: ("c000", (1,))} and result.reasons == {2: "Resources"}
    if backfill:
        assert result.estimates == {2: 100.0}
    # even where a view lists a shared GPU as free, it is not free
    wrong = [replace(nodes[0], free_gpus=nodes[0].gpus)]
    result = plan(Snapshot([wjob(1, 2)], wrong, now=0, running=runs), backfill=backfill)
    assert result.placements == []


@BOTH
def test_a_gpu_is_shared_in_one_mode_at_a_time(backfill):
    gpus = [gpu(0, shards=4, mps=100, mem=16000), gpu(1, shards=4, mps=100, mem=16000)]
    runs = [srun(90, "c000", 0, "shard", 1, 100.0)]
    nodes = [snode("c000", gpus, busy={0})]
    result = plan(Snapshot([sjob(1, "mps", 10, prio=1), sjob(2, "gpumem", 100)], nodes, now=0, running=runs),
                  backfill=backfill)
    assert placed(result) == {1: ("c000", (1,))}  # not GPU 0 (shard mode); then GPU 1 is in mps mode
    assert result.reasons == {2: "Resources"}


@BOTH
def test_an_mps_gpu_serves_one_user_at_a_time_shards_any(backfill):
    gpus = [gpu(0, shards=4, mps=100), gpu(1, shards=4, mps=100)]
    runs = [srun(90, "c000", 0, "mps", 20, 100.0, user="ann")]
    nodes = [snode("c000", gpus, busy={0})]
    result = plan(Snapshot([sjob(1, "mps", 20, user="bob")], nodes, now=0, running=runs), backfill=backfill)
    assert placed(result) == {1: ("c000", (1,))}
    result = plan(Snapshot([sjob(1, "mps", 20, user="ann")], nodes, now=0, running=runs), backfill=backfill)
    assert placed(result) == {1: ("c000", (0,))}
    runs = [srun(90, "c000", 0, "shard", 1, 100.0, user="ann")]
    result = plan(Snapshot([sjob(1, "shard", 1, user="bob")], nodes, now=0, running=runs), backfill=backfill)
    assert placed(result) == {1: ("c000", (0,))}
    # two users' MPS jobs in one pass: the second user's job opens another GPU, a third user's waits
    jobs = [sjob(1, "mps", 10, user="ann", prio=2), sjob(2, "mps", 10, user="bob", prio=1),
            sjob(3, "mps", 10, user="cy")]
    result = plan(Snapshot(jobs, [snode("c000", gpus)], now=0), backfill=backfill)
    assert placed(result) == {1: ("c000", (0,)), 2: ("c000", (1,))} and result.reasons == {3: "Resources"}


@BOTH
def test_gpu_memory_of_unknown_size_takes_no_share_and_claims_nothing(backfill):
    nodes = [snode("c000", [gpu(0), gpu(1, shards=4)])]
    result = plan(Snapshot([sjob(1, "gpumem", 100, prio=5), wjob(2, 1)], nodes, now=0), backfill=backfill)
    assert placed(result) == {2: ("c000", (0,))}
    assert result.reasons == {1: "Resources"} and result.estimates == {}


@BOTH
def test_a_typed_share_lands_only_on_its_type_and_a_share_needs_the_mode_configured(backfill):
    nodes = [snode("c000", [gpu(0, "t4", shards=4), gpu(1, "a100", shards=4), gpu(2, "a100", mps=100)])]
    result = plan(Snapshot([sjob(1, "shard", 1, "a100")], nodes, now=0), backfill=backfill)
    assert placed(result) == {1: ("c000", (1,))}
    result = plan(Snapshot([sjob(1, "mps", 10, "t4")], nodes, now=0), backfill=backfill)
    assert result.placements == [] and result.reasons == {1: "Resources"}


@BOTH
def test_cpus_memory_partition_and_nodelist_must_fit_as_for_any_job(backfill):
    gpus = [gpu(0, shards=4)]
    nodes = [snode("c000", gpus, cpus=2, mem=100), snode("c001", gpus, parts=("cpu",)),
             snode("c002", gpus, available=False), snode("c003", gpus)]
    result = plan(Snapshot([sjob(1, "shard", 1, cpus=4)], nodes, now=0), backfill=backfill)
    assert placed(result) == {1: ("c003", (0,))}
    result = plan(Snapshot([sjob(1, "shard", 1, mem=200)], nodes, now=0), backfill=backfill)
    assert placed(result) == {1: ("c003", (0,))}
    result = plan(Snapshot([sjob(1, "shard", 1, only=frozenset({"c003"}))], nodes[:1] + nodes[3:], now=0),
                  backfill=backfill)
    assert placed(result) == {1: ("c003", (0,))}
    result = plan(Snapshot([sjob(1, "shard", 1, cpus=2, prio=1), sjob(2, "shard", 1, cpus=1)], nodes[:1], now=0),
                  backfill=backfill)
    assert placed(result) == {1: ("c000", (0,))}  # the GPU has room, the node's CPUs do not


@BOTH
def test_a_shared_job_counts_no_whole_gpu_against_limits(backfill):
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    runs = [wrun(90, "c000", [0], 100.0, user="ann"), srun(91, "c000", 1, "shard", 1, 100.0, user="ann")]
    snap = Snapshot([sjob(1, "shard", 1, user="ann", prio=1), wjob(2, 0, user="ann")],
                    [snode("c000", gpus, busy={0, 1})], now=0, running=runs, limits=Limits(max_gpus_per_user=1))
    result = plan(snap, backfill=backfill)
    assert placed(result) == {1: ("c000", (1,)), 2: ("c000", ())}


# -- no starvation: reservations and claims -----------------------------------------------------------


def test_running_shares_keep_their_gpu_busy_until_the_last_one_ends():
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    runs = [srun(90, "c000", 0, "shard", 1, 10.0), srun(91, "c000", 0, "shard", 1, 30.0), wrun(92, "c000", [1], 20.0)]
    result = plan(Snapshot([wjob(1, 2, limit=10)], [snode("c000", gpus, busy={0, 1})], now=0, running=runs))
    assert result.estimates == {1: 30.0}  # not 20: GPU 0 is released once, by the last share on it


def test_a_share_joins_a_gpu_before_a_reservation_only_if_it_ends_by_the_gpus_release():
    # GPU 0 shared until 100, GPU 1 held whole until 50: job 1 (both GPUs) is reserved at 100
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    runs = [srun(90, "c000", 0, "shard", 2, 100.0), wrun(91, "c000", [1], 50.0)]
    nodes = [snode("c000", gpus, busy={0, 1})]
    jobs = [wjob(1, 2, prio=9, limit=100), sjob(2, "shard", 1, limit=80), sjob(3, "shard", 1, limit=150)]
    result = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert result.estimates[1] == 100.0
    assert placed(result) == {2: ("c000", (0,))}  # ends at 80: the GPU is busy until 100 anyway
    assert result.reasons[3] == "Priority"  # would keep GPU 0 past 100
    # no reservation needs the GPU after 100 (job 1 asks one GPU, which GPU 1 gives at 50): job 3 starts
    jobs = [wjob(1, 1, prio=9, limit=100), sjob(3, "shard", 1, limit=150)]
    result = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert result.estimates == {1: 50.0} and placed(result) == {3: ("c000", (0,))}
    # the main pass starts neither: job 1 claims the node
    result = plan(Snapshot([wjob(1, 2, prio=9, limit=100), sjob(2, "shard", 1, limit=80)], nodes, now=0,
                           running=runs), backfill=False)
    assert result.placements == [] and result.reasons == {1: "Resources", 2: "Priority"}


def test_a_share_takes_a_free_gpu_before_a_reservation_only_if_it_ends_by_the_reservation():
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    runs = [wrun(90, "c000", [1], 50.0)]
    nodes = [snode("c000", gpus, busy={1})]
    result = plan(Snapshot([wjob(1, 2, prio=9, limit=10), sjob(2, "shard", 1, limit=40)], nodes, now=0, running=runs))
    assert result.estimates == {1: 50.0} and placed(result) == {2: ("c000", (0,))}
    result = plan(Snapshot([wjob(1, 2, prio=9, limit=10), sjob(2, "shard", 1, limit=60)], nodes, now=0, running=runs))
    assert result.placements == [] and result.reasons[2] == "Priority"
    assert result.estimates == {1: 50.0, 2: 60.0}  # after job 1
    # and a second share joins the first one's GPU, in the same pass, only within its release
    jobs = [wjob(1, 2, prio=9, limit=10), sjob(2, "shard", 1, prio=1, limit=40), sjob(3, "shard", 1, limit=45),
            sjob(4, "shard", 1, limit=30)]
    result = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert placed(result) == {2: ("c000", (0,)), 3: ("c000", (0,)), 4: ("c000", (0,))}
    jobs = [wjob(1, 2, prio=9, limit=10), sjob(2, "shard", 1, prio=1, limit=40), sjob(3, "shard", 1, limit=55)]
    result = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert placed(result) == {2: ("c000", (0,))} and result.reasons[3] == "Priority"


def test_a_waiting_share_reserves_a_whole_gpu_and_holds_back_lower_priority_jobs():
    # GPU 0 full of shards until 10; GPU 1 (no shards) free. Job 1 (shard:2) is reserved at 10 as one GPU.
    gpus = [gpu(0, shards=4), gpu(1)]
    runs = [srun(90, "c000", 0, "shard", 3, 10.0)]
    nodes = [snode("c000", gpus, busy={0})]
    jobs = [sjob(1, "shard", 2, prio=9, limit=10), wjob(2, 1, limit=5), wjob(3, 1, limit=50)]
    result = plan(Snapshot(jobs, nodes, now=0, running=runs))
    assert result.estimates[1] == 10.0 and result.reserved_on == {1: "c000", 3: "c000"}
    assert placed(result) == {2: ("c000", (1,))}  # job 3 ends after 10: with job 1's GPU it would take two
    # the main pass: job 1 claims c000 (its GPU 0 could hold 2 shards): job 2 waits there
    result = plan(Snapshot(jobs, nodes, now=0, running=runs), backfill=False)
    assert result.placements == [] and result.reasons == {1: "Resources", 2: "Priority", 3: "Priority"}


def test_a_share_that_ends_later_moves_its_gpus_release_for_the_reservations_after_it():
    # GPU 1 held whole until 200. Job 1 opens GPU 0 until 40, job 2 joins it until 100 (no reservation yet):
    # job 3 (one GPU) is reserved when GPU 0 is free, at 100, not 40
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    jobs = [sjob(1, "shard", 1, prio=3, limit=40), sjob(2, "shard", 1, prio=2, limit=100), wjob(3, 1, prio=1, limit=10)]
    result = plan(Snapshot(jobs, [snode("c000", gpus, busy={1})], now=0, running=[wrun(90, "c000", [1], 200.0)]))
    assert placed(result) == {1: ("c000", (0,)), 2: ("c000", (0,))} and result.estimates == {3: 100.0}


def test_a_waiting_share_is_reserved_when_the_gpu_a_whole_job_just_took_is_released():
    jobs = [wjob(1, 1, prio=2, limit=30), sjob(2, "shard", 1, prio=1, limit=10)]
    result = plan(Snapshot(jobs, [snode("c000", [gpu(0, shards=4), gpu(1)])], now=0))
    assert placed(result) == {1: ("c000", (0,))} and result.estimates == {2: 30.0}  # GPU 1 cannot hold shards


def test_a_waiting_whole_gpu_job_claims_its_nodes_against_shares_in_the_main_pass():
    gpus = [gpu(0, shards=4), gpu(1, shards=4)]
    nodes = [snode("c000", gpus, busy={1}), snode("c001", [gpu(0, shards=4)], busy={0})]
    runs = [wrun(90, "c000", [1], 50.0), srun(91, "c001", 0, "shard", 1, 50.0)]
    jobs = [wjob(1, 2, prio=9, limit=10)] + [sjob(i, "shard", 1, limit=5) for i in range(2, 200)]
    main = plan(Snapshot(jobs, nodes, now=0, running=runs), backfill=False)
    # c000 is claimed; c001 (one GPU) is not job 1's: the shares go there, up to its 3 shards left
    assert placed(main) == {2: ("c001", (0,)), 3: ("c001", (0,)), 4: ("c001", (0,))}
    assert main.reasons[1] == "Resources" and all(main.reasons[i] == "Priority" for i in range(5, 200))
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))  # backfill: the short ones fill c000's GPU 0 too
    assert {p.node for p in full.placements} == {"c000", "c001"} and full.estimates[1] == 50.0


def test_a_share_no_gpu_could_ever_hold_claims_no_node():
    nodes = [snode("c000", [gpu(0, shards=4)])]
    main = plan(Snapshot([sjob(1, "shard", 8, prio=9), sjob(2, "shard", 1)], nodes, now=0), backfill=False)
    assert placed(main) == {2: ("c000", (0,))} and main.reasons == {1: "Resources"}


# -- node views ---------------------------------------------------------------------------------------


def test_a_node_view_lists_every_gpu_with_its_capacity_and_what_was_measured():
    record = NodeRecord("c000", "127.0.0.1", 7000, 8, 1000, state=NodeState.UP,
                        gpus=(GpuInfo(0, type="a100", memory_mb=40960, shards=4, mps=100),
                              GpuInfo(1, type="a100", memory_mb=None)))
    view = node_view(record, NodeUsage(gpus=[0, 0]), frozenset({"gpu"}), {0: (1200, 35.0)})
    assert view.free_gpus == ((1, "a100"),)  # GPU 0 is shared by two jobs: busy for whole-GPU jobs
    assert view.shared_gpus == (SharedGpu(0, "a100", 40960, 4, 100, 1200, 35.0), SharedGpu(1, "a100", 0, 0, 0, 0, 0.0))
    assert node_view(record, NodeUsage(), frozenset({"gpu"})).shared_gpus[0].util == 0.0


def test_a_node_view_of_an_unregistered_node_splits_configured_shards_and_mps_evenly():
    gres = (GresRequest("gpu", None, 3), GresRequest("shard", None, 8), GresRequest("mps", None, 200))
    view = node_view(NodeRecord("c000", "h", 1, 8, 1000, gres=gres), NodeUsage(), frozenset({"gpu"}))
    assert [(g.index, g.shards, g.mps, g.memory_mb) for g in view.shared_gpus] == [
        (0, 3, 67, 0), (1, 3, 67, 0), (2, 2, 66, 0)]  # the remainder to the first GPUs, memory unknown
    gres = (GresRequest("gpu", "a100", 2), GresRequest("gpu", "t4", 1), GresRequest("shard", "a100", 5))
    view = node_view(NodeRecord("c000", "h", 1, 8, 1000, gres=gres), NodeUsage(), frozenset({"gpu"}))
    assert [(g.index, g.type, g.shards) for g in view.shared_gpus] == [(0, "a100", 3), (1, "a100", 2), (2, "t4", 0)]


# -- properties on random snapshots -------------------------------------------------------------------

TYPES = [None, "a100"]
gpu_st = st.tuples(st.sampled_from(TYPES), st.sampled_from([0, 16000, 40000, 40000]), st.sampled_from([0, 4, 8, 8]),
                   st.sampled_from([0, 100, 100]), st.sampled_from([0.0, 30.0, 80.0]),
                   # its state: free, held whole, or shared in a mode by up to 3 jobs (amount, user, end)
                   st.sampled_from(["free", "free", "whole", "shard", "mps", "gpumem"]),
                   st.lists(st.tuples(st.integers(1, 4), st.sampled_from(["u", "v"]), st.integers(1, 60)),
                            min_size=1, max_size=3),
                   st.integers(1, 60))
nodes_st = st.lists(st.tuples(st.lists(gpu_st, min_size=1, max_size=4), st.integers(0, 16), st.booleans(),
                              st.sampled_from([True, True, True, False])), min_size=1, max_size=4)
share_st = st.one_of(st.tuples(st.just("shard"), st.integers(1, 5)), st.tuples(st.just("mps"), st.integers(5, 80)),
                     st.tuples(st.just("gpumem"), st.sampled_from([1000, 8000, 16000, 30000])))
jobs_st = st.lists(st.tuples(st.one_of(st.integers(0, 2), share_st), st.sampled_from(TYPES), st.integers(1, 4),
                             st.sampled_from([0, 0, 100, 400]), st.sampled_from(["gpu", "cpu"]), st.integers(0, 4),
                             st.sampled_from([None, 5, 20, 60]), st.sampled_from(["u", "v", "w"]),
                             st.sampled_from([None, None, frozenset({"c000"}), frozenset({"c001", "c002"})])),
                   max_size=16)


def amount_scale(kind: str) -> int:
    return {"shard": 1, "mps": 20, "gpumem": 4000}[kind]


def cap(g: SharedGpu, kind: str) -> int:
    return {"shard": g.shards, "mps": g.mps, "gpumem": g.memory_mb}[kind]


def build(node_specs, job_specs):
    """Random nodes, with running whole and shared jobs consistent with the rules, and pending jobs."""
    nodes, runs = [], []
    rid = 1000
    for i, (gpu_specs, spare_cpus, in_cpu, up) in enumerate(node_specs):
        name = f"c{i:03d}"
        gpus, busy, used_cpus = [], set(), 0
        for k, (t, mem, shards, mps, util, state, shares, end) in enumerate(gpu_specs):
            g = SharedGpu(k, t, mem, shards, mps, 0, util)
            gpus.append(g)
            if state == "whole":
                runs.append(wrun(rid, name, [k], float(end)))
                rid, used_cpus = rid + 1, used_cpus + 1
                busy.add(k)
            elif state != "free" and cap(g, state) > 0:
                total, first_user = 0, shares[0][1]
                for amount, user, share_end in shares:
                    amount *= amount_scale(state)
                    if total + amount > cap(g, state):
                        break
                    total += amount
                    runs.append(srun(rid, name, k, state, amount, float(share_end),
                                     user=first_user if state == "mps" else user))
                    rid, used_cpus = rid + 1, used_cpus + 1
                    busy.add(k)
        view = snode(name, gpus, busy=busy, cpus=spare_cpus, parts=("gpu", "cpu") if in_cpu else ("gpu",),
                     available=up)
        nodes.append(view)
    jobs = []
    for i, (ask, t, cpus, mem, part, prio, limit, user, only) in enumerate(job_specs):
        if isinstance(ask, int):
            jobs.append(wjob(i + 1, ask, t, cpus, mem, prio, limit, user, part, only))
        else:
            jobs.append(sjob(i + 1, ask[0], ask[1], t, cpus, mem, prio, limit, user, part, only))
    return nodes, runs, jobs


@dataclass
class GpuState:
    mode: str | None = None  # None, "whole" or a share kind
    used: int = 0
    users: frozenset[str] = frozenset()


def gpu_states(nodes, runs):
    states = {(n.name, g.index): GpuState() for n in nodes for g in n.shared_gpus}
    for r in runs:
        for index in r.gpu_indices:
            s = states[(r.node, index)]
            if r.share is None:
                s.mode = "whole"
            else:
                s.mode, s.used, s.users = r.share.kind, s.used + r.share.amount, s.users | {r.user}
    return states


def order(j):
    return (-j.priority, j.job_id)


def could_use(n: NodeView, j: PendingJob) -> bool:
    """Independently of the policy: whether ``j`` could ever run on ``n``."""
    if not (n.available and j.partition in n.partitions and (j.allowed_nodes is None or n.name in j.allowed_nodes)):
        return False
    if j.share is not None:
        s = j.share
        return any(cap(g, s.kind) >= s.amount and (s.type is None or g.type == s.type) for g in n.shared_gpus)
    inventory = [t for _, t in n.gpus]
    return (len(inventory) >= sum(g.count for g in j.gres)
            and all(inventory.count(g.type) >= g.count for g in j.gres if g.type is not None))


def takes(n: NodeView, g: SharedGpu, s: GpuState, j: PendingJob, cpus_left: int, mem_left: int) -> bool:
    """Independently of the policy: whether GPU ``g`` (in state ``s``) could take share job ``j`` now."""
    share = j.share
    assert share is not None
    return (n.available and j.partition in n.partitions and (j.allowed_nodes is None or n.name in j.allowed_nodes)
            and (share.type is None or g.type == share.type) and cpus_left >= j.cpus and mem_left >= j.mem_mb
            and s.mode in (None, share.kind) and s.used + share.amount <= cap(g, share.kind)
            and (share.kind != "mps" or s.users <= {j.user}))


def check_plan(nodes, runs, jobs, result: Plan, backfill: bool) -> None:
    by_job, by_node = {j.job_id: j for j in jobs}, {n.name: n for n in nodes}
    index_of = {n.name: i for i, n in enumerate(nodes)}
    states = gpu_states(nodes, runs)
    cpus = {n.name: n.free_cpus for n in nodes}
    mem = {n.name: n.free_mem_mb for n in nodes}
    waiting = [j for j in jobs if result.reasons.get(j.job_id) in ("Resources", "Priority")]
    for p in result.placements:
        j, n = by_job[p.job_id], by_node[p.node]
        assert j.partition in n.partitions and n.available and (j.allowed_nodes is None or n.name in j.allowed_nodes)
        cpus[n.name] -= j.cpus
        mem[n.name] -= j.mem_mb
        assert cpus[n.name] >= 0 and mem[n.name] >= 0
        # blocked: nodes a higher-priority waiting job could use (main pass), nodes with a reservation (backfill)
        blocked = ({m.name for m in nodes for h in waiting if order(h) < order(j) and could_use(m, h)}
                   if not backfill else set(result.reserved_on.values()))
        if not backfill:
            assert n.name not in blocked  # the main pass never starts a job where a higher one waits
        if j.share is None:
            assert len(p.gpu_indices) == sum(g.count for g in j.gres)
            for index in p.gpu_indices:
                s = states[(n.name, index)]
                assert s.mode is None, (p, s)  # free: neither held whole nor shared, nor placed twice
                s.mode = "whole"
            continue
        share = j.share
        (index,) = p.gpu_indices
        g = next(g for g in n.shared_gpus if g.index == index)
        s = states[(n.name, index)]
        assert takes(n, g, s, j, cpus[n.name] + j.cpus, mem[n.name] + j.mem_mb), (p, s, g)
        # best fit: no GPU that could take it (on a node nothing blocks) is better than the one it got
        def rank(m: NodeView, h: SharedGpu, t: GpuState, share: GpuShare = share):
            room = cap(h, share.kind) - t.used - share.amount  # free GPUs after shared ones, then best fit
            return (t.mode is None, room, h.util, index_of[m.name], h.index)

        mine = rank(n, g, s)
        for m in nodes:
            if m.name in blocked:
                continue
            for h in m.shared_gpus:
                t = states[(m.name, h.index)]
                left_cpus = cpus[m.name] + (j.cpus if m.name == n.name else 0)
                left_mem = mem[m.name] + (j.mem_mb if m.name == n.name else 0)
                if takes(m, h, t, j, left_cpus, left_mem):
                    assert rank(m, h, t) >= mine, (p, m.name, h, t)
        s.mode, s.used, s.users = share.kind, s.used + share.amount, s.users | {j.user}
    # after the pass: every GPU in one mode, within its capacity, one user in mps mode
    for (name, index), s in states.items():
        g = next(g for g in by_node[name].shared_gpus if g.index == index)
        if s.mode in KINDS:
            assert s.used <= cap(g, s.mode)
            assert s.mode != "mps" or len(s.users) <= 1


@settings(max_examples=400, deadline=None)
@given(nodes_st, jobs_st, st.booleans())
def test_no_gpu_is_oversubscribed_mixed_or_placed_twice_and_shares_go_best_fit(node_specs, job_specs, backfill):
    nodes, runs, jobs = build(node_specs, job_specs)
    result = plan(Snapshot(jobs, nodes, now=0, running=runs), backfill=backfill)
    check_plan(nodes, runs, jobs, result, backfill)
    for j in jobs:
        assert j.job_id in result.reasons or j.job_id in {p.job_id for p in result.placements}


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_both_passes_agree_until_the_first_job_that_waits_for_resources(node_specs, job_specs):
    nodes, runs, jobs = build(node_specs, job_specs)
    snap = Snapshot(jobs, nodes, now=0, running=runs)
    main, full = placed(plan(snap, backfill=False)), placed(plan(snap))
    reasons = plan(snap, backfill=False).reasons
    first = min((order(j) for j in jobs if reasons.get(j.job_id) in ("Resources", "Priority")), default=None)
    for j in jobs:
        if first is None or order(j) < first:
            assert main.get(j.job_id) == full.get(j.job_id), j


@settings(max_examples=300, deadline=None)
@given(nodes_st, jobs_st)
def test_backfill_starts_and_reservations_all_fit_together_at_every_moment(node_specs, job_specs):
    """A shared GPU counts as one whole GPU until the last share on it ends; a waiting share reserves one
    GPU. With that, what runs, what starts and what is reserved never pass a node's CPUs, memory and GPUs."""
    nodes, runs, jobs = build(node_specs, job_specs)
    full = plan(Snapshot(jobs, nodes, now=0, running=runs))
    by_job = {j.job_id: j for j in jobs}
    for n in nodes:
        types = dict(n.gpus)
        capacity = {"cpu": n.free_cpus, "mem": n.free_mem_mb, "gpu": len(n.gpus)}
        for t in types.values():
            if t is not None:
                capacity[t] = capacity.get(t, 0) + 1
        held: list[tuple[float, float, dict[str, int]]] = []
        release: dict[int, float] = {}  # a shared GPU: until its last share ends
        for r in runs:
            if r.node == n.name:
                capacity["cpu"] += r.cpus
                end = INF if r.end_time is None else r.end_time
                held.append((0.0, end, {"cpu": r.cpus}))
                if r.share is not None:
                    release[r.gpu_indices[0]] = max(release.get(r.gpu_indices[0], 0.0), end)
                else:
                    held.append((0.0, end, gpu_vector(r.gpu_indices, types)))
        for p in full.placements:
            if p.node == n.name:
                j = by_job[p.job_id]
                end = INF if j.time_limit is None else float(j.time_limit)
                held.append((0.0, end, {"cpu": j.cpus, "mem": j.mem_mb}))
                if j.share is not None:
                    release[p.gpu_indices[0]] = max(release.get(p.gpu_indices[0], 0.0), end)
                else:
                    held.append((0.0, end, gpu_vector(p.gpu_indices, types)))
        held.extend((0.0, end, gpu_vector([index], types)) for index, end in release.items())
        starts = [0.0]
        for h_id, where in full.reserved_on.items():
            if where == n.name:
                h, at = by_job[h_id], full.estimates[h_id]
                end = INF if h.time_limit is None else at + h.time_limit
                vec = {"cpu": h.cpus, "mem": h.mem_mb}
                if h.share is not None:
                    vec["gpu"] = 1
                    if h.share.type is not None:
                        vec[h.share.type] = 1
                else:
                    for g in h.gres:
                        vec["gpu"] = vec.get("gpu", 0) + g.count
                        if g.type is not None:
                            vec[g.type] = vec.get(g.type, 0) + g.count
                held.append((at, end, vec))
                starts.append(at)
        for at in starts:  # what is held grows only when a reservation begins
            used: dict[str, int] = {}
            for begin, end, vec in held:
                if begin <= at < end:
                    for k, v in vec.items():
                        used[k] = used.get(k, 0) + v
            assert all(v <= capacity.get(k, 0) for k, v in used.items()), (n.name, at, used, capacity)


def gpu_vector(indices, types) -> dict[str, int]:
    out = {"gpu": len(indices)}
    for index in indices:
        t = types.get(index)
        if t is not None:
            out[t] = out.get(t, 0) + 1
    return out


# -- no starvation: a simulation ----------------------------------------------------------------------

stream_st = st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3), st.integers(1, 30),
                               st.one_of(st.just(1.0), st.floats(0.1, 1.0)),  # ends at its limit, or before
                               st.sampled_from(["u", "v"]), st.sampled_from(["shard", "shard", "mps"])),
                     min_size=10, max_size=60)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 3), stream_st, st.lists(st.booleans(), min_size=1, max_size=50), st.booleans(),
       st.integers(0, 10))
def test_a_whole_gpu_job_starts_by_its_first_estimate_under_a_stream_of_shares(gpus, stream, kinds, other, arrives):
    """A high-priority job asking every GPU of c000 against a stream of small shared jobs (shards, or MPS
    of two users), driven pass after pass (main or backfill) to the next end or arrival: it starts, and no
    later than its first backfill estimate (jobs end at or before their limits, which only makes it earlier)."""
    shared = [gpu(k, shards=4, mps=100) for k in range(gpus)]
    views = [("c000", shared)] + ([("c001", [gpu(0, shards=4, mps=100)])] if other else [])
    big = wjob(1, gpus, prio=100, limit=20, cpus=1)
    arrivals: list[tuple[float, PendingJob]] = [(float(arrives), big)]
    t = 0.0
    for k, (gap, amount, limit, _, user, kind) in enumerate(stream):
        arrivals.append((t, sjob(100 + k, kind, amount * (1 if kind == "shard" else 20), limit=limit, user=user)))
        t += gap
    runs: list[tuple[RunningJob, float]] = []  # (as the scheduler sees it, when it really ends)
    actual = {100 + k: max(1, math.floor(limit * frac)) for k, (_, _, limit, frac, _, _) in enumerate(stream)}
    actual[1] = 20
    now, first, started = 0.0, None, None
    pending: dict[int, PendingJob] = {}
    done: set[int] = set()
    for step in range(2000):
        runs = [(r, end) for r, end in runs if end > now]
        for at, j in arrivals:
            if at <= now and j.job_id not in pending and j.job_id not in done:
                pending[j.job_id] = j
        nodes = []
        for name, gs in views:
            busy = {i for r, _ in runs if r.node == name for i in r.gpu_indices}
            nodes.append(snode(name, gs, busy=busy, cpus=64 - sum(r.cpus for r, _ in runs if r.node == name)))
        backfill = step == 0 or kinds[step % len(kinds)]
        result = plan(Snapshot(list(pending.values()), nodes, now=now, running=[r for r, _ in runs]), backfill=backfill)
        if backfill and first is None and 1 in result.estimates:
            first = result.estimates[1]
        for p in result.placements:
            j = pending.pop(p.job_id)
            done.add(j.job_id)
            limit = float(j.time_limit)  # every job here has one
            runs.append((RunningJob(j.job_id, p.node, j.cpus, j.mem_mb, p.gpu_indices, now + limit, j.user,
                                    share=j.share), now + actual[j.job_id]))
            if j.job_id == 1:
                started = now
        if started is not None:
            break
        later = [end for _, end in runs if end > now] + [at for at, _ in arrivals if at > now]
        assert later, "nothing left to happen and the big job has not started"
        now = min(later)
    assert started is not None
    assert first is None or started <= first + 1e-9, (started, first)

