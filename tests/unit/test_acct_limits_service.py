"""Association and QOS limits (issue 34) through the controller's parts on a real store (SQLite and
PostgreSQL): limits set with sacctmgr's words and stored (migration 0017), a submit refused or taken
as Slurm's acct_policy_validate does, a scheduling pass holding a job with Slurm's reason, and an
update admitted as a submit without resetting the limit in force."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from pslurm.auth.credential import Identity
from pslurm.controller.assocs import AssocService
from pslurm.controller.jobs import JobService
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import Store
from pslurm.core.config import ClusterConfig, parse_slurm_conf
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.node import NodeRecord
from pslurm.core.states import NodeState

ROOT = Identity(0, 0)
CONF = """AccountingStorageEnforce=associations,limits,qos
NodeName=c000 CPUs=8 RealMemory=8000 Gres=gpu:2
PartitionName=p Nodes=c000 Default=YES MaxTime=INFINITE
AccountName=lab Users=root
"""
POLICY = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits): "


class Agents:
    def launch_async(self, target: str, job: JobRecord, on_error) -> None:  # type: ignore[no-untyped-def]
        pass

    def set_time_limit(self, target: str, job_id: int, restarts: int, time_limit: int | None) -> None:
        pass


class Health:
    def unreachable(self, node: str, why: str) -> None:
        pass

    def gpu_measured(self, node: str) -> Mapping[int, tuple[int, float]]:
        return {}


@pytest.fixture
def parts(db_url: str) -> Iterator[tuple[ClusterConfig, Store, AssocService, JobService, Scheduler]]:
    cfg = parse_slurm_conf(CONF, "pslurm.conf")
    store = Store(db_url)
    store.migrate()
    store.ensure_nodes([NodeRecord(n.name, n.addr, n.port, n.cpus, n.real_memory, n.gres)
                        for n in cfg.nodes.values()])
    store.set_node_state("c000", NodeState.UP, 1000.0)
    assocs = AssocService(store.assoc, "lab")
    assocs.load_config(cfg)
    jobs = JobService(cfg, store, Agents(), lambda: None, lambda: 1000.0, operators=frozenset({0}))  # type: ignore[arg-type]
    sched = Scheduler(cfg, store, Agents(), Health(), partitions_of=lambda name: frozenset({"p"}),  # type: ignore[arg-type]
                      clock=lambda: 1000.0)
    jobs.associations = sched.associations = assocs.current
    yield cfg, store, assocs, jobs, sched
    store.close()


def mgr(assocs: AssocService, verb: str, entity: str, names: list[str], where: dict[str, str],
        values: dict[str, str]) -> list[str]:
    return assocs.execute(ROOT, verb, entity, names, list(where.items()), list(values.items()), True)


def job(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                                     account="lab")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


def test_limits_are_stored_and_shown_as_sacctmgr_sets_them(parts) -> None:  # type: ignore[no-untyped-def]
    _, _, assocs, _, _ = parts
    lines = mgr(assocs, "add", "account", ["sub"], {}, {"Parent": "lab", "GrpJobs": "2", "MaxTRESPerNode": "cpu=1"})
    assert "  GrpJobs       = 2" in lines and "  MaxTRESPerNode= cpu=1" in lines  # sacctmgr's lines
    mgr(assocs, "modify", "account", ["lab"], {}, {"GrpJobs": "2", "GrpSubmit": "5", "MaxTRESPerNode": "gres/gpu=1",
                                                   "GrpTRES": "cpu=4,mem=2G"})
    lines = mgr(assocs, "add", "qos", ["strict"], {}, {"Flags": "DenyOnLimit", "GrpTRES": "gres/gpu=1",
                                                       "MaxTRES": "cpu=2", "GrpJobs": "3"})
    assert "  Flags                    = DenyOnLimit" in lines
    snap = assocs.current()
    own = snap.account_assoc("lab")
    assert own is not None and (own.grp_jobs, own.grp_submit_jobs, own.max_tres_per_node, own.grp_tres) == (
        2, 5, "gres/gpu=1", "cpu=4,mem=2G")
    strict = snap.qos["strict"]
    assert (strict.flags, strict.grp_tres, strict.max_tres_per_job, strict.grp_jobs) == (
        ("DenyOnLimit",), "gres/gpu=1", "cpu=2", 3) and strict.deny_on_limit
    mgr(assocs, "modify", "account", ["lab"], {}, {"GrpTRES": "cpu=-1", "GrpJobs": "-1"})
    own = assocs.current().account_assoc("lab")
    assert own is not None and (own.grp_tres, own.grp_jobs) == ("mem=2G", None)


def test_submit_pass_and_update_hold_to_the_accounts_limits(parts) -> None:  # type: ignore[no-untyped-def]
    _, store, assocs, jobs, sched = parts
    mgr(assocs, "modify", "account", ["lab"], {}, {"MaxWall": "10", "MaxSubmitJobs": "3"})
    unset = jobs.submit(job(), ROOT)
    assert store.get_job(unset).time_limit == 600  # the account's MaxWall reaches root's association
    over = jobs.submit(job(time_limit=3600), ROOT)  # taken: it waits
    sched.schedule()
    assert store.get_job(over).reason == "AssocMaxWallDurationPerJobLimit"
    assert store.get_job(unset).state.value == "RUNNING"
    jobs.submit(job(hold=True), ROOT)
    with pytest.raises(SpecError, match=f"^{re.escape(POLICY)}AssocMaxSubmitJobLimit$"):
        jobs.submit(job(), ROOT)  # the fourth job: MaxSubmitJobs=3, inherited from the account
    assert store.count_jobs() == 3  # the queue untouched
    # a QOS with DenyOnLimit refuses at submit what would wait
    mgr(assocs, "add", "qos", ["strict"], {}, {"Flags": "DenyOnLimit"})
    mgr(assocs, "modify", "user", ["root"], {"account": "lab"}, {"QOS": "normal,strict", "MaxSubmitJobs": "10"})
    with pytest.raises(SpecError, match=f"^{re.escape(POLICY)}AssocMaxWallDurationPerJobLimit$"):
        jobs.submit(job(qos="strict", time_limit=3600), ROOT)
    # an update is admitted as a submit: the limit in force stays, the QOS is checked
    assert jobs.update_job(str(over), 0, changes={"num_tasks": 2}) == []
    assert store.get_job(over).time_limit == 3600
    assert jobs.update_job(str(over), 0, changes={"qos": "strict"}) == []
    mgr(assocs, "modify", "user", ["root"], {"account": "lab"}, {"QOS": "strict"})
    assert jobs.update_job(str(over), 0, changes={"qos": "normal"}) == [f"Invalid qos specification for job {over}"]
    assert jobs.update_job(str(over), 0, changes={"time_limit": "5"}) == []
    sched.schedule()
    assert store.get_job(over).state.value == "RUNNING"  # within MaxWall now


def test_a_bad_enforce_word_stops_the_controller(tmp_path: Path) -> None:
    from pslurm.core.config import ConfigError

    cfg = parse_slurm_conf(CONF.replace("associations,limits,qos", "limits,bogus"), "pslurm.conf")
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    store.migrate()
    with pytest.raises(ConfigError, match="AccountingStorageEnforce: unknown word 'bogus'"):
        JobService(cfg, store, Agents(), lambda: None, lambda: 1000.0, operators=frozenset({0}))  # type: ignore[arg-type]
    store.close()
