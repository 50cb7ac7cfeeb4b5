"""Multi-node jobs in the store (SQLite and PostgreSQL): ``start`` writes one ``job_nodes`` row per
node (a single-node job's one too), allocations are per (job, node), runs_on names every node's
jobs, the record carries the nodes in allocation order with their GPUs, a lost non-first node ends
the whole job, and only the first node's end finishes it."""

from __future__ import annotations

import pytest

from pslurm.controller.store import NodeShare, Store
from pslurm.core.jobspec import JobSpec
from pslurm.core.states import InvalidTransition, JobReason, JobState


def _spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="alice", uid=1000, gid=1000, workdir="/w", script="#!/bin/sh\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


def _start_multi(store: Store, now: float = 10.0) -> int:
    job = store.submit(_spec(num_nodes=3, ntasks=5, cpus_per_task=2, mem_mb=100), "p", None, now)
    shares = [NodeShare("c002", (1,), 6, 100), NodeShare("c000", (0, 1), 4, 100), NodeShare("c001", (), 0 + 4, 100)]
    assert store.start_jobs([(job, "c002", (1,))], now, shares={job: shares}) == [job]
    return job


def test_the_queue_carries_the_layout(store):
    job = store.submit(_spec(num_nodes=3, ntasks=5, cpus_per_task=2), "p", None, 1.0)
    single = store.submit(_spec(ntasks=2), "p", None, 1.0)
    queued = {q.job_id: q for q in store.queue()}
    assert (queued[job].num_nodes, queued[job].node_cpus) == (3, (4, 4, 2))
    assert (queued[single].num_nodes, queued[single].node_cpus, queued[single].cpus) == (1, (), 2)
    listed = {j.job_id: j for j in store.get_jobs(light=True)}
    assert listed[job].spec.num_nodes == 3


def test_a_single_node_job_has_one_row(store):
    job = store.submit(_spec(ntasks=2, mem_mb=50), "p", None, 1.0)
    store.start_jobs([(job, "c000", (3,))], 2.0)
    assert [(a.job_id, a.node, a.cpus, a.mem_mb, a.gpu_indices) for a in store.allocations()] == [
        (job, "c000", 2, 50, (3,))]
    record = store.get_job(job)
    assert (record.node, record.nodes, record.node_gpus) == ("c000", ("c000",), ((3,),))
    assert [r.job_id for r in store.runs_on("c000")] == [job]


def test_a_multi_node_job_holds_every_node(store):
    job = _start_multi(store)
    allocs = sorted((a.node, a.cpus, a.mem_mb, a.gpu_indices) for a in store.allocations() if a.job_id == job)
    assert allocs == [("c000", 4, 100, (0, 1)), ("c001", 4, 100, ()), ("c002", 6, 100, (1,))]
    assert len(store.allocations(job_ids=[job])) == 3
    for node in ("c000", "c001", "c002"):
        assert [r.job_id for r in store.runs_on(node)] == [job]
    assert store.runs_on("c003") == []
    for record in (store.get_job(job), store.get_job(job, light=True), store.get_jobs(job_ids=[job])[0],
                   store.get_jobs(job_ids=[job], light=True)[0], store.get_jobs(collapse_arrays=True)[0]):
        assert record.node == "c002" and record.gpu_indices == (1,)
        assert record.nodes == ("c002", "c000", "c001")
        assert record.node_gpus == ((1,), (0, 1), ())


def test_only_the_first_nodes_end_finishes_it(store):
    job = _start_multi(store)
    with pytest.raises(InvalidTransition):
        store.finish(job, "c000", 0, JobState.COMPLETED, 0, 0, 20.0)
    store.finish(job, "c002", 0, JobState.COMPLETED, 0, 0, 20.0)
    assert store.get_job(job).state is JobState.COMPLETED
    assert store.allocations() == [] and store.runs_on("c000") == []
    assert store.get_job(job).nodes == ("c002", "c000", "c001")  # kept for accounting


def test_a_lost_node_ends_the_whole_job(store):
    job = _start_multi(store)
    store.node_lost(job, "c001", 20.0, "node c001 down")
    record = store.get_job(job)
    assert (record.state, record.reason) == (JobState.NODE_FAIL, JobReason.NODE_DOWN)
    with pytest.raises(InvalidTransition):
        other = store.submit(_spec(), "p", None, 1.0)
        store.start_jobs([(other, "c000", ())], 2.0)
        store.node_lost(other, "c001", 20.0, "not its node")


def test_a_requeued_multi_node_job_starts_afresh(store):
    job = store.submit(_spec(num_nodes=2), "p", None, 1.0, requeue=True)
    store.start_jobs([(job, "c000", ())], 2.0, shares={job: [NodeShare("c000", (), 1, 0), NodeShare("c001", (), 1, 0)]})
    store.node_lost(job, "c001", 3.0, "gone")
    record = store.get_job(job)
    assert record.state is JobState.PENDING and record.nodes == ()
    store.start_jobs([(job, "c002", ())], 4.0, shares={job: [NodeShare("c002", (), 1, 0), NodeShare("c003", (), 1, 0)]})
    assert store.get_job(job).nodes == ("c002", "c003")
    assert sorted(a.node for a in store.allocations()) == ["c002", "c003"]


def test_fair_share_counts_every_node(store):
    job = _start_multi(store)
    store.finish(job, "c002", 0, JobState.COMPLETED, 0, 0, 20.0)
    usage = [u for u in store.finished_usage(0.0)[0] if u.job_id == job][0]
    assert (usage.cpus, usage.mem_mb, usage.gpus) == (10, 300, 3)
