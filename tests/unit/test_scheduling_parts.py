"""Arrays, dependencies, multifactor priority and fair share, scheduling keys: pure parts of issue #5."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.controller import priority as prio
from pslurm.core.arrays import format_ranges, parse_array, parse_job_selector
from pslurm.core.config import ConfigError, SchedulerConfig, parse_slurm_conf, scheduler_config
from pslurm.core.dependency import DepStatus, Ref, RefJob, describe, evaluate, parse_dependency
from pslurm.core.jobspec import SpecError
from pslurm.core.states import JobState


@pytest.mark.parametrize("text,ids,throttle", [
    ("0-3", (0, 1, 2, 3), None), ("1,3,5-7", (1, 3, 5, 6, 7), None), ("0-15:4", (0, 4, 8, 12), None),
    ("0-9%2", tuple(range(10)), 2), ("7", (7,), None), ("0-3%0", (0, 1, 2, 3), None),
])
def test_parse_array(text, ids, throttle):
    assert parse_array(text) == (ids, throttle)


@pytest.mark.parametrize("text", ["", "a", "3-1", "0-3%x", "0-4:0", "1,,2", "0-1001"])
def test_bad_arrays_are_refused(text):
    with pytest.raises(SpecError):
        parse_array(text)


@given(st.sets(st.integers(0, 300), min_size=1))
def test_format_ranges_round_trips(ids):
    assert parse_array(format_ranges(ids), max_array_size=10**6)[0] == tuple(sorted(ids))


def test_task_selectors():
    assert parse_job_selector("14") == (14, None)
    assert parse_job_selector("14_3") == (14, (3,))
    assert parse_job_selector("14_[5-7,9]") == (14, (5, 6, 7, 9))
    with pytest.raises(SpecError):
        parse_job_selector("14_x")


def ref_job(job_id, state, started=None, task=None):
    return RefJob(job_id, state, state is not JobState.PENDING if started is None else started, task)


def test_dependency_kinds():
    done, failed, running = JobState.COMPLETED, JobState.FAILED, JobState.RUNNING
    cases = [
        ("afterok:1", done, DepStatus.SATISFIED), ("afterok:1", failed, DepStatus.NEVER),
        ("afterok:1", running, DepStatus.WAITING), ("afternotok:1", failed, DepStatus.SATISFIED),
        ("afternotok:1", done, DepStatus.NEVER), ("afterany:1", failed, DepStatus.SATISFIED),
        ("after:1", running, DepStatus.SATISFIED), ("after:1", JobState.PENDING, DepStatus.WAITING),
    ]
    for text, state, expected in cases:
        assert evaluate(parse_dependency(text), {Ref(1): [ref_job(1, state)]}) is expected, (text, state)


def test_and_or_arrays_aftercorr_and_singleton():
    jobs = {Ref(1): [ref_job(1, JobState.COMPLETED)], Ref(2): [ref_job(2, JobState.FAILED)]}
    assert evaluate(parse_dependency("afterok:1,afterok:2"), jobs) is DepStatus.NEVER
    assert evaluate(parse_dependency("afterok:1?afterok:2"), jobs) is DepStatus.SATISFIED
    assert evaluate(parse_dependency("afterok:1:2"), jobs) is DepStatus.NEVER
    assert evaluate(parse_dependency("afterok:3"), jobs) is DepStatus.NEVER  # unknown job
    array = [ref_job(10, JobState.COMPLETED, task=0), ref_job(11, JobState.RUNNING, task=1)]
    assert evaluate(parse_dependency("afterok:10"), {Ref(10): array}) is DepStatus.WAITING
    corr = parse_dependency("aftercorr:10")
    assert evaluate(corr, {Ref(10): array}, own_task_id=0) is DepStatus.SATISFIED
    assert evaluate(corr, {Ref(10): array}, own_task_id=1) is DepStatus.WAITING
    single = parse_dependency("singleton")
    assert evaluate(single, {}, singleton_clear=False) is DepStatus.WAITING
    assert evaluate(single, {}) is DepStatus.SATISFIED
    assert describe("afterok:1", DepStatus.WAITING) == "afterok:1(unfulfilled)"
    assert describe("afterok:1?afterany:2", DepStatus.NEVER) == "afterok:1(failed)?afterany:2(failed)"
    for bad in ("afterok", "before:1", "afterok:x", "afterok:1,afterany:2?after:3", "singleton:3"):
        with pytest.raises(SpecError):
            parse_dependency(bad)


def test_fair_share_favours_the_lighter_user_and_account():
    usage = {("a", "heavy"): 900.0, ("a", "light"): 100.0}
    shares = prio.fairshare_factors(usage, [("b", "new")])
    assert shares[("b", "new")] > shares[("a", "light")] > shares[("a", "heavy")]
    assert shares[("b", "new")] == 1.0
    assert prio.fairshare_factors({}, [("x", "u")]) == {("x", "u"): 1.0}


def test_usage_decays_with_the_half_life():
    assert prio.decay(8.0, 20.0, 10.0) == pytest.approx(2.0)
    assert prio.run_usage(2.0, 0, 10, 10, 0) == 20.0
    decayed = prio.run_usage(2.0, 0, 10, 10, 5.0)
    assert 0 < decayed < 20.0
    assert prio.billing_rate((("cpu", 1.0), ("gres/gpu", 10.0), ("mem", 0.5)), 4, 2048, 2) == 4 + 20 + 1


def test_multifactor_priority():
    cfg = SchedulerConfig(weight_age=1000, weight_fairshare=2000, weight_jobsize=100, weight_partition=500,
                          max_age=100)
    ctx = prio.PriorityContext(cfg, 1000.0, {("(null)", "u"): 0.5}, 100.0, {"p": 1.0})
    f = prio.factors(ctx, eligible_time=950.0, account="", user="u", partition="p", cpus=10, mem_mb=0, gpus=0,
                     nice=10)
    assert (f.age, f.fairshare, f.jobsize, f.partition) == (0.5, 0.5, 0.1, 1.0)
    assert prio.priority(f, cfg) == 500 + 1000 + 10 + 500 - 10
    not_yet = prio.factors(ctx, eligible_time=None, account="", user="u", partition="p", cpus=10, mem_mb=0, gpus=0,
                           nice=0)
    assert not_yet.age == 0.0  # held, or waiting on a dependency: its age has not begun


def test_scheduler_keys():
    cfg = parse_slurm_conf("PriorityWeightAge=10\nPriorityDecayHalfLife=1-0\nTRESBillingWeights=CPU=0.5,GRES/gpu=4\n"
                           "MaxTRESPerUser=gres/gpu=4\nMaxJobsPerUser=3\nMaxSubmitJobsPerUser=9\nMaxJobCount=50\n"
                           "SchedulerParameters=bf_max_job_test=20\nEnforcePartLimits=NO\nJobRequeue=0\n"
                           "NodeName=c0 Gres=gpu:2\n"
                           "PartitionName=p Nodes=c0 MaxNodes=1 PriorityJobFactor=5 AllowGroups=a,b\n")
    s = scheduler_config(cfg)
    assert (s.weight_age, s.decay_half_life, s.max_gpus_per_user, s.max_jobs_per_user) == (10, 86400, 4, 3)
    assert (s.max_submit_jobs_per_user, s.max_job_count, s.bf_max_job_test) == (9, 50, 20)
    assert s.billing_weights == (("cpu", 0.5), ("gres/gpu", 4.0))
    assert not s.enforce_part_limits and not s.job_requeue
    part = cfg.partitions["p"]
    assert (part.max_nodes, part.priority_job_factor, part.allow_groups) == (1, 5, ("a", "b"))
    with pytest.raises(ConfigError):
        scheduler_config(parse_slurm_conf("MaxTRESPerUser=mem=4\n"))


def test_bf_interval_is_read_with_slurms_range():
    assert scheduler_config(parse_slurm_conf("NodeName=c0\n")).bf_interval == 1  # pslurm's default (Slurm's: 30)
    conf = parse_slurm_conf("SchedulerParameters=bf_max_job_test=20,bf_interval=30\nNodeName=c0\n")
    assert (scheduler_config(conf).bf_interval, scheduler_config(conf).bf_max_job_test) == (30, 20)
    assert scheduler_config(parse_slurm_conf("SchedulerParameters=bf_interval=-1\n")).bf_interval == -1
    for bad in ("0", "10801", "x", ""):
        with pytest.raises(ConfigError):
            scheduler_config(parse_slurm_conf(f"SchedulerParameters=bf_interval={bad}\n"))


def test_without_weights_a_priority_is_zero_less_nice_as_the_scheduler_assumes():
    cfg = SchedulerConfig()
    assert not prio.weighted(cfg) and prio.weighted(SchedulerConfig(weight_age=1))
    for nice in (-50, 0, 7):
        f = prio.Factors(age=1.0, fairshare=0.5, jobsize=0.3, partition=1.0, qos=0.0, nice=nice)
        assert prio.priority(f, cfg) == max(0, -nice)


def test_a_node_view_numbers_configured_gpus_in_order_and_keeps_the_busy_ones_types() -> None:
    from pslurm.controller.allocations import NodeUsage, node_view
    from pslurm.core.gres import GresRequest
    from pslurm.core.node import NodeRecord

    unregistered = NodeRecord("c000", "127.0.0.1", 7000, 8, 1000,
                              gres=(GresRequest("gpu", "a100", 2), GresRequest("gpu", "t4", 1)))
    view = node_view(unregistered, NodeUsage(gpus=[1]), frozenset({"gpu"}))
    assert view.gpus == ((0, "a100"), (1, "a100"), (2, "t4"))  # 0, 1, 2: not 0, 2 (the list grew while it was read)
    assert view.free_gpus == ((0, "a100"), (2, "t4"))  # the busy a100 is still in the inventory, with its type
