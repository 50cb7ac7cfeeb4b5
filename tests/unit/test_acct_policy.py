"""Association and QOS limits (issue 34): the pure checks of controller/acct_policy.py, each limit with
Slurm 22.05's reason, inheritance down the account tree, the QOS overriding the association, and the
pass holding a job back with the reason (policy.plan)."""

from __future__ import annotations

import pytest

from pslurm.controller.acct_policy import (
    REASONS,
    AcctUsage,
    SubmitCounts,
    acct_limits,
    enforcement,
    job_tres,
    submit_counts,
)
from pslurm.controller.policy import NodeView, PendingJob, RunningJob, Snapshot, plan
from pslurm.core.assoc import Assoc, Associations, Qos
from pslurm.core.gres import GresRequest

# root <- lab <- (ana's association 3; sub <- bo's association 5)
ROOT, LAB, ANA, SUB, BO = 1, 2, 3, 4, 5


def tree(lab: dict[str, object] | None = None, ana: dict[str, object] | None = None,
         sub: dict[str, object] | None = None, qos: dict[str, object] | None = None) -> Associations:
    assocs = (Assoc("root", id=ROOT), Assoc("lab", parent="root", id=LAB, **(lab or {})),  # type: ignore[arg-type]
              Assoc("lab", "ana", id=ANA, **(ana or {})),  # type: ignore[arg-type]
              Assoc("sub", parent="lab", id=SUB, **(sub or {})),  # type: ignore[arg-type]
              Assoc("sub", "bo", id=BO))
    return Associations({}, {}, assocs, {"normal": Qos("normal", **(qos or {}))})  # type: ignore[arg-type]


def over(snap: Associations, assoc: int, tres: tuple[int, int, int, int], time_limit: int | None = 60,
         running: list[tuple[int, str, tuple[int, int, int, int]]] = ()) -> str | None:  # type: ignore[assignment]
    usage = AcctUsage(acct_limits(snap))
    for a, user, held in running:
        usage.add(a, "normal", user, held)
    return usage.over(assoc, "normal", "ana" if assoc == ANA else "bo", tres, time_limit)


GPU1 = job_tres(1, 0, 1, 1)


def test_no_limit_set_leaves_the_pass_alone() -> None:
    assert not acct_limits(tree()).active
    assert acct_limits(tree(lab={"grp_tres": "gres/gpu=1"})).active


def test_grp_tres_counts_the_account_and_everything_under_it() -> None:
    snap = tree(lab={"grp_tres": "gres/gpu=1"})
    assert over(snap, ANA, GPU1) is None
    assert over(snap, ANA, GPU1, running=[(ANA, "ana", GPU1)]) == "AssocGrpGRES"
    assert over(snap, BO, GPU1, running=[(ANA, "ana", GPU1)]) == "AssocGrpGRES"  # a sub-account's user too
    assert over(snap, ANA, job_tres(4, 0, 1, 0), running=[(ANA, "ana", GPU1)]) is None  # asks no GPU
    assert over(snap, ANA, job_tres(1, 0, 1, 2)) == "AssocGrpGRES"  # alone over it
    cpu = tree(sub={"grp_tres": "cpu=4,mem=1G,node=1"})
    assert over(cpu, BO, job_tres(3, 0, 1, 0), running=[(BO, "bo", job_tres(2, 0, 1, 0))]) == "AssocGrpCpuLimit"
    assert over(cpu, BO, job_tres(1, 2048, 1, 0)) == "AssocGrpMemLimit"
    assert over(cpu, BO, job_tres(1, 0, 1, 0), running=[(BO, "bo", job_tres(1, 0, 1, 0))]) == "AssocGrpNodeLimit"
    assert over(cpu, ANA, job_tres(8, 0, 2, 0)) is None  # ana is not under sub


def test_grp_jobs_and_max_jobs() -> None:
    snap = tree(lab={"grp_jobs": 1})
    assert over(snap, ANA, GPU1) is None
    assert over(snap, BO, GPU1, running=[(ANA, "ana", GPU1)]) == "AssocGrpJobsLimit"
    per_user = tree(lab={"max_jobs": 1})  # a Max limit is inherited: each user's association has it
    assert over(per_user, BO, GPU1, running=[(ANA, "ana", GPU1)]) is None
    assert over(per_user, ANA, GPU1, running=[(ANA, "ana", GPU1)]) == "AssocMaxJobsLimit"


def test_max_wall_is_inherited_unless_set_lower_down() -> None:
    snap = tree(lab={"max_wall": 600})
    assert over(snap, BO, GPU1, time_limit=3600) == "AssocMaxWallDurationPerJobLimit"  # two levels down
    assert over(snap, BO, GPU1, time_limit=None) == "AssocMaxWallDurationPerJobLimit"  # UNLIMITED
    assert over(snap, BO, GPU1, time_limit=600) is None
    lower = tree(lab={"max_wall": 600}, sub={"max_wall": 7200})
    assert over(lower, BO, GPU1, time_limit=3600) is None  # sub's own limit, not lab's
    assert over(lower, ANA, GPU1, time_limit=3600) == "AssocMaxWallDurationPerJobLimit"
    assert acct_limits(lower).wall(BO, "normal") == 7200 and acct_limits(lower).wall(ANA, "normal") == 600


def test_max_tres_per_job_and_per_node() -> None:
    snap = tree(lab={"max_tres_per_job": "gres/gpu=2,cpu=8", "max_tres_per_node": "gres/gpu=1,mem=100"})
    assert over(snap, ANA, job_tres(1, 0, 1, 3)) == "AssocMaxGRESPerJob"
    assert over(snap, ANA, job_tres(9, 0, 2, 0)) == "AssocMaxCpuPerJobLimit"
    assert over(snap, ANA, job_tres(2, 0, 2, 2)) is None  # one GPU on each of two nodes
    assert over(snap, ANA, job_tres(1, 0, 1, 2)) == "AssocMaxGRESPerNode"  # two GPUs on its one node
    assert over(snap, ANA, job_tres(1, 300, 2, 0)) == "AssocMaxMemPerNode"


def test_qos_limits_and_their_reasons() -> None:
    def q(**kw: object) -> Associations:
        return tree(qos=kw)

    assert over(q(max_tres_per_user="gres/gpu=1"), ANA, GPU1, running=[(ANA, "ana", GPU1)]) == "QOSMaxGRESPerUser"
    assert over(q(max_tres_per_user="gres/gpu=1"), ANA, GPU1, running=[(BO, "bo", GPU1)]) is None  # another user
    assert over(q(grp_tres="gres/gpu=1"), ANA, GPU1, running=[(BO, "bo", GPU1)]) == "QOSGrpGRES"
    assert over(q(grp_tres="cpu=2"), ANA, job_tres(3, 0, 1, 0)) == "QOSGrpCpuLimit"
    assert over(q(grp_jobs=1), ANA, GPU1, running=[(BO, "bo", GPU1)]) == "QOSGrpJobsLimit"
    assert over(q(max_jobs_per_user=1), ANA, GPU1, running=[(ANA, "ana", GPU1)]) == "QOSMaxJobsPerUserLimit"
    assert over(q(max_wall=60), ANA, GPU1, time_limit=61) == "QOSMaxWallDurationPerJobLimit"
    assert over(q(max_tres_per_job="gres/gpu=1"), ANA, job_tres(1, 0, 1, 2)) == "QOSMaxGRESPerJob"
    assert over(q(max_tres_per_node="cpu=2"), ANA, job_tres(6, 0, 2, 0)) == "QOSMaxCpuPerNode"


def test_a_qos_limit_overrides_the_associations_of_the_same_kind() -> None:
    snap = tree(lab={"max_wall": 60, "grp_tres": "gres/gpu=1"}, qos={"max_wall": 7200, "grp_tres": "gres/gpu=4"})
    assert over(snap, ANA, GPU1, time_limit=3600) is None  # the QOS's MaxWall, longer, wins
    assert over(snap, ANA, GPU1, running=[(BO, "bo", GPU1)]) is None  # the QOS's GrpTRES for gres/gpu wins
    assert acct_limits(snap).wall(ANA, "normal") == 7200


def test_the_order_of_the_checks_is_slurms() -> None:
    # the QOS's job limits before the association's, job and time limits before TRES ones
    snap = tree(lab={"grp_tres": "gres/gpu=1", "max_wall": 60}, qos={"max_jobs_per_user": 1})
    assert over(snap, ANA, GPU1, time_limit=600, running=[(ANA, "ana", GPU1)]) == "QOSMaxJobsPerUserLimit"
    assert over(snap, BO, GPU1, time_limit=600, running=[(ANA, "ana", GPU1)]) == "AssocMaxWallDurationPerJobLimit"
    assert over(snap, BO, GPU1, time_limit=60, running=[(ANA, "ana", GPU1)]) == "AssocGrpGRES"


def test_submit_limits_refuse_and_deny_on_limit_refuses_what_would_wait() -> None:
    snap = tree(lab={"grp_submit_jobs": 2}, ana={"max_submit_jobs": 1})
    limits = acct_limits(snap)
    counts = submit_counts(limits, [(BO, "normal", "bo", 1)])
    assert limits.submit_refusal(ANA, "normal", "ana", GPU1, 60, counts) is None
    assert limits.submit_refusal(ANA, "normal", "ana", GPU1, 60, counts, count=2) == "AssocGrpSubmitJobsLimit"
    counts = submit_counts(limits, [(ANA, "normal", "ana", 1)])
    assert limits.submit_refusal(ANA, "normal", "ana", GPU1, 60, counts) == "AssocMaxSubmitJobLimit"
    per_user = acct_limits(tree(qos={"max_submit_jobs_per_user": 1}))
    assert per_user.submit_refusal(ANA, "normal", "ana", GPU1, 60, SubmitCounts(qos_user={("normal", "ana"): 1})) \
        == "QOSMaxSubmitJobPerUserLimit"
    walled = acct_limits(tree(lab={"max_wall": 60}))
    assert walled.submit_refusal(ANA, "normal", "ana", GPU1, 600, SubmitCounts()) is None  # it will wait
    deny = acct_limits(tree(lab={"max_wall": 60, "grp_tres": "gres/gpu=1"}, qos={"flags": ("DenyOnLimit",)}))
    assert deny.submit_refusal(ANA, "normal", "ana", GPU1, 600, SubmitCounts()) == "AssocMaxWallDurationPerJobLimit"
    assert deny.submit_refusal(ANA, "normal", "ana", job_tres(1, 0, 1, 2), 60, SubmitCounts()) == "AssocGrpGRES"
    assert deny.submit_refusal(ANA, "normal", "ana", GPU1, 60, SubmitCounts()) is None


def test_accounting_storage_enforce_is_read_as_slurm_reads_it() -> None:
    assert enforcement("limits") == {"associations", "limits"}
    assert enforcement("associations,limits,qos") == {"associations", "limits", "qos"}
    assert enforcement("safe") == {"associations", "limits", "safe"}
    assert enforcement("associations") == {"associations"} and enforcement("0") == frozenset()
    assert enforcement(None) == {"associations", "limits", "qos"}
    with pytest.raises(ValueError, match="bogus"):
        enforcement("limits,bogus")


def _node(name: str, gpus: int = 4) -> NodeView:
    return NodeView(name, frozenset({"p"}), 16, 64000, tuple((i, None) for i in range(gpus)))


def test_the_pass_holds_a_job_back_with_its_reason_and_counts_its_own_starts() -> None:
    limits = acct_limits(tree(lab={"grp_tres": "gres/gpu=1"}))
    gpu = (GresRequest("gpu", None, 1),)
    pending = [PendingJob(10, "p", 1, 0, gpu, 10, 60, "ana", assoc_id=ANA, qos="normal"),
               PendingJob(11, "p", 1, 0, gpu, 5, 60, "bo", assoc_id=BO, qos="normal"),
               PendingJob(12, "p", 1, 0, (), 1, 60, "bo", assoc_id=BO, qos="normal")]
    for backfill in (False, True):
        decided = plan(Snapshot(pending, [_node("c0")], 1000.0, acct=limits), backfill=backfill)
        assert [p.job_id for p in decided.placements] == [10, 12]  # 11 would pass lab's one GPU
        assert decided.reasons[11] == "AssocGrpGRES"
    running = [RunningJob(9, "c0", 1, 0, (0,), None, "ana", assoc_id=ANA, qos="normal")]
    decided = plan(Snapshot(pending, [_node("c0")], 1000.0, running=running, acct=limits))
    assert [p.job_id for p in decided.placements] == [12] and decided.reasons[10] == "AssocGrpGRES"
    # a multi-node job's rows are one job: GrpJobs=2 lets one more start
    jobs = acct_limits(tree(lab={"grp_jobs": 2}))
    two_rows = [RunningJob(9, n, 1, 0, (), None, "ana", assoc_id=ANA, qos="normal") for n in ("c0", "c1")]
    decided = plan(Snapshot(pending, [_node("c0"), _node("c1")], 1000.0, running=two_rows, acct=jobs))
    assert [p.job_id for p in decided.placements] == [10] and decided.reasons[11] == "AssocGrpJobsLimit"


def test_every_reason_the_limits_give_is_one_the_store_keeps() -> None:
    from pslurm.core.states import JobReason

    given = [n for names in REASONS.values() for n in names] + [
        "AssocGrpJobsLimit", "AssocMaxJobsLimit", "AssocMaxWallDurationPerJobLimit", "QOSGrpJobsLimit",
        "QOSMaxJobsPerUserLimit", "QOSMaxWallDurationPerJobLimit"]
    assert [JobReason.parse(n).value for n in given] == given  # an unknown word would come back as None


def test_sacctmgrs_words_for_the_limits() -> None:
    from pslurm.core.acctmgr import canonical_key, merge_tres

    assert canonical_key("MaxSubmitJobs") == "maxsubmitjobs"  # not MaxSubmitJobsPerUser cut short
    assert canonical_key("MaxSubmitJobsPU") == "maxsubmitjobsperuser" and canonical_key("GrpJ") == "grpjobs"
    assert canonical_key("MaxTRESPerNode") == "maxtrespernode" and canonical_key("GrpSubmit") == "grpsubmitjobs"
    assert merge_tres("cpu=4,mem=2G", "cpu=-1,gres/gpu=2") == "mem=2G,gres/gpu=2"
    assert merge_tres("", "gres/gpu=-1") == ""
