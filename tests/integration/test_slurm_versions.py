"""slurmrestd v0.0.41-v0.0.44's objects from pslurm's records, each version's reply parsed through the
models generated from Slurm 25.11's spec (PyPI's ``slurmrestapi``) with no field its spec has not: the
states a job and a node go through (running on two nodes, killed by a signal, an array task, no time
limit, a drained node), the accounting records, and the replies whose structure changed between versions."""

from __future__ import annotations

import pytest

from pslurm.controller.rest import slurmshapes
from pslurm.controller.rest.slurm_routes import VERSIONS, update_changes
from pslurm.core.assoc import Account, Assoc, Associations, User
from pslurm.core.confmodel import PartitionConfig
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import NodeStatus
from pslurm.core.states import JobReason, JobState, NodeState
from tests.slurm_models import check

pytest.importorskip("slurmrestapi")
GPU = (GresRequest("gpu", None, 2),)


def jobs() -> list[JobRecord]:
    spec = JobSpec(name="train", user="ana", uid=1000, gid=1000, workdir="/home/ana", gres=GPU, ntasks=2,
                   mem_mb=4000, comment="c", submit_line="psbatch train.sh")
    return [
        JobRecord(job_id=5, spec=spec, state=JobState.RUNNING, submit_time=100.5, start_time=101.25, node="n1",
                  nodes=("n1", "n2"), partition="gpu", time_limit=3600, priority=4294, eligible_time=100.5),
        JobRecord(job_id=6, spec=spec, state=JobState.CANCELLED, submit_time=100, start_time=110, end_time=120.9,
                  exit_signal=9, partition="gpu", time_limit=None, array_job_id=6, array_task_id=0),
        JobRecord(job_id=7, spec=spec, state=JobState.PENDING, reason=JobReason.DEPENDENCY, hold="user",
                  partition="gpu", start_estimate=200.0),
        JobRecord(job_id=8, spec=spec, state=JobState.FAILED, exit_code=3, submit_time=1, start_time=2, end_time=3),
    ]


@pytest.mark.parametrize("version", VERSIONS, ids=lambda v: v.name)
def test_every_object_is_its_versions_shape(version: slurmshapes.Json) -> None:
    v, meta = version.name, {"meta": slurmshapes.meta(version.name, "c")}
    now = slurmshapes.no_val(1000)
    check(v, "OpenapiJobInfoResp", {**meta, "jobs": [version.shape("job_info", slurmshapes.job_info(j))
                                                     for j in jobs()], "last_backfill": now, "last_update": now})
    check(v, "OpenapiSlurmdbdJobsResp", {**meta, "jobs": [version.shape("db_job", slurmshapes.db_job(j, "c"))
                                                          for j in jobs()]})
    nodes = [NodeStatus("n1", "127.0.0.1", 7000, 8, 16000, GPU, NodeState.UP, drain=True, reason="fan",
                        alloc_gpus=(1,), display_state="drng", reason_user="root", reason_time=5.5,
                        features=("a100",), last_heartbeat=9.9, partitions=("gpu",)), NodeStatus("n2")]
    check(v, "OpenapiNodesResp", {**meta, "nodes": [version.shape("node", slurmshapes.node(n)) for n in nodes],
                                  "last_update": now})
    parts = [PartitionConfig("gpu", ("n1", "n2"), default=True, max_time=None, default_time=90, max_nodes=2)]
    check(v, "OpenapiPartitionResp", {**meta, "partitions": [slurmshapes.partition(p, 16) for p in parts],
                                      "last_update": now})
    ping = slurmshapes.ping({"name": "ctl0", "role": "backup", "mode": "standby"}, "h")
    check(v, "OpenapiPingArrayResp", {**meta, "pings": [version.shape("ping", ping)]})
    snap = Associations(accounts={"root": Account("root"), "ml": Account("ml", "machine learning", "lab")},
                        users={"ana": User("ana", "ml", "Operator")},
                        assocs=(Assoc("root", id=1), Assoc("ml", parent="root", id=2), Assoc("ml", "ana", id=3)))
    check(v, "OpenapiAccountsResp", {**meta, "accounts": slurmshapes.accounts(snap, "c")})
    check(v, "OpenapiAssocsResp", {**meta, "associations": slurmshapes.associations(snap, "c")})
    check(v, "OpenapiUsersResp", {**meta, "users": slurmshapes.users(snap, "c")})
    check(v, "OpenapiJobSubmitResponse", {**meta, **version.submitted(5)})
    check(v, "OpenapiJobPostResponse", {**meta, **version.updated(5, ["Job 5: Access/permission denied"])})
    check(v, "OpenapiResp" if v == "v0.0.41" else "OpenapiKillJobResp", {**meta, **version.killed([5], [])})


def test_the_versions_differ_where_their_specs_do() -> None:
    v41, v42, v43, v44 = (next(v for v in VERSIONS if v.name == f"v0.0.4{i}") for i in range(1, 5))
    assert "result" in v41.submitted(1) and "result" not in v44.submitted(1)
    assert v41.killed([1], []) == {} and v42.killed([1], [])["status"][0]["job_id"]["number"] == 1
    job = slurmshapes.job_info(jobs()[0])
    assert "submit_line" not in v43.shape("job_info", job) and v44.shape("job_info", job)["submit_line"]
    assert "stdout_expanded" not in v42.shape("job_info", job) and "stdout_expanded" in v43.shape("job_info", job)
    ping = slurmshapes.ping({"name": "ctl0", "role": "primary"}, "h")
    assert "responding" not in v41.shape("ping", ping) and v42.shape("ping", ping)["primary"] is True


def test_an_update_is_scontrol_updates_changes() -> None:
    assert update_changes({"name": "x", "time_limit": {"set": True, "infinite": False, "number": 30},
                           "priority": {"set": False, "infinite": False, "number": 0}, "hold": True}) == \
        ({"name": "x", "time_limit": "30"}, "hold")
    assert update_changes({"time_limit": {"set": True, "infinite": True, "number": 0}, "nice": 5, "hold": False}) == \
        ({"time_limit": "UNLIMITED", "nice": 5}, "release")
