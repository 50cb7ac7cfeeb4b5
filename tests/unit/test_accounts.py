"""Accounts in pslurm.conf (pslurm.core.accounts): their lines, each user's default, -A at submit, and
the fair-share factor over accounts with their Fairshare= shares."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pslurm.auth.credential import Identity
from pslurm.controller import priority as prio
from pslurm.controller.jobs import JobService
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import Store
from pslurm.core.accounts import INVALID_ACCOUNT
from pslurm.core.assoc import config_associations
from pslurm.core.config import AccountConfig, ClusterConfig, ConfigError, parse_slurm_conf, render_slurm_conf
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.states import JobState
from tests.conftest import store_with_nodes

NODES = ("NodeName=c[000-001] NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
         "PartitionName=p Nodes=c[000-001] Default=YES\n")
ACCOUNTS = ("AccountName=Lab1 Users=ana,bo Fairshare=2 Description='vision lab'\n"
            "AccountName=lab2 Users=bo,root\n"
            "AccountName=general Users=ALL\n"
            "UserName=bo DefaultAccount=lab2\n")


def conf(text: str = ACCOUNTS) -> ClusterConfig:
    return parse_slurm_conf(NODES + text, "pslurm.conf")


def test_account_lines_are_read_and_written_back() -> None:
    cfg = conf()
    assert cfg.accounts == {
        "lab1": AccountConfig("lab1", ("ana", "bo"), False, 2, "vision lab"),
        "lab2": AccountConfig("lab2", ("bo", "root"), False, 1, ""),
        "general": AccountConfig("general", (), True, 1, ""),
    }
    assert cfg.default_accounts == {"bo": "lab2"} and cfg.extra == {}
    assert replace(parse_slurm_conf(render_slurm_conf(cfg)), path=cfg.path) == cfg
    assert parse_slurm_conf(NODES).accounts == {}  # none: accounts are not checked


@pytest.mark.parametrize("text, why", [
    ("AccountName=a\nAccountName=A\n", "pslurm.conf:4: account a is defined twice"),
    ("AccountName=a Fairshare=0\n", "pslurm.conf:3: AccountName=a: Fairshare=0: expected a whole number"),
    ("AccountName=a Parent=root\n", "pslurm.conf:3: AccountName=a: unknown key parent"),
    ("AccountName=a,b\n", "pslurm.conf:3: AccountName=a,b: expected a name"),
    ("AccountName=a Users=ana\nUserName=bo DefaultAccount=a\n",
     "pslurm.conf:4: UserName=bo: DefaultAccount=a: bo is not one of its Users="),
    ("UserName=bo DefaultAccount=nope\n", "pslurm.conf:3: UserName=bo: DefaultAccount=nope: no AccountName=nope line"),
    ("UserName=bo\n", "pslurm.conf:3: UserName=bo: expected UserName=NAME DefaultAccount=ACCOUNT"),
])
def test_bad_account_lines_are_refused_with_their_line(text: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        conf(text)
    assert str(caught.value).startswith(why)


def test_each_users_default_account() -> None:
    snap = config_associations(conf())
    assert snap.default_account("bo") == "lab2"  # UserName= says so
    assert snap.default_account("ana") == "lab1"  # the first account that lists her
    assert snap.default_account("cy") == "general"  # Users=ALL
    assert snap.user_accounts("bo") == ["lab1", "lab2", "general"]
    closed = conf("AccountName=lab1 Users=ana\n")
    assert config_associations(closed).default_account("cy") is None
    assert config_associations(conf("")).default_account("cy") == ""


def test_the_account_a_job_charges() -> None:
    snap = config_associations(conf())
    assert snap.job_account("ana", "") == "lab1"
    assert snap.job_account("ana", "LAB1") == "lab1"  # sacctmgr's names are lower case
    assert snap.job_account("cy", "general") == "general"
    for user, asked in (("ana", "lab2"), ("ana", "nope")):
        with pytest.raises(SpecError, match=f"^{INVALID_ACCOUNT}$"):
            snap.job_account(user, asked)
    with pytest.raises(SpecError, match=INVALID_ACCOUNT):
        config_associations(conf("AccountName=lab1 Users=ana\n")).job_account("cy", "")  # no account at all
    assert config_associations(conf("")).job_account("cy", "whatever") == "whatever"  # none configured: as before


# -- at submit ----------------------------------------------------------------------------------


class Agents:
    def launch_async(self, target: str, job: JobRecord, on_error) -> None:  # type: ignore[no-untyped-def]
        pass

    def signal(self, target: str, job_id: int, signal: int) -> None:
        pass

    def set_time_limit(self, target: str, job_id: int, restarts: int, time_limit: int | None) -> None:
        pass


def store_for(tmp_path: Path, cfg: ClusterConfig) -> Store:
    return store_with_nodes(tmp_path / "accounts.db", cfg)


def root_job(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n")
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


def test_submit_fills_in_the_default_account_and_refuses_a_foreign_one(tmp_path: Path) -> None:
    cfg = conf()
    store = store_for(tmp_path, cfg)
    jobs = JobService(cfg, store, Agents(), lambda: None, lambda: 1000.0, operators=frozenset({0}))
    job_id = jobs.submit(root_job(), Identity(0, 0))
    assert store.get_job(job_id).spec.account == "lab2"
    assert store.get_jobs(job_ids=[job_id], light=True)[0].spec.account == "lab2"
    with pytest.raises(SpecError, match=f"^{INVALID_ACCOUNT}$"):
        jobs.submit(root_job(account="lab1"), Identity(0, 0))
    assert store.count_jobs() == 1  # the queue untouched
    store.close()


# -- fair share -----------------------------------------------------------------------------------


def test_fair_share_over_accounts_with_their_shares() -> None:
    usage = {("lab1", "ana"): 50.0, ("lab2", "bo"): 50.0}
    equal = prio.fairshare_factors(usage, [])
    assert equal[("lab1", "ana")] == pytest.approx(equal[("lab2", "bo")]) == pytest.approx(0.5)
    weighted = prio.fairshare_factors(usage, [], {"lab1": 3, "lab2": 1})
    assert weighted[("lab1", "ana")] == pytest.approx(2 ** (-0.5 / 0.75))  # the same usage on 3 times the shares
    assert weighted[("lab2", "bo")] == pytest.approx(2 ** (-0.5 / 0.25))
    # a configured account nobody used yet still holds its shares, and its users split theirs
    idle = prio.fairshare_factors(usage, [("lab3", "cy")], {"lab1": 1, "lab2": 1, "lab3": 2},
                                  {"lab1": ("ana", "dan")})
    assert idle[("lab3", "cy")] == 1.0 and ("lab1", "dan") in idle
    assert idle[("lab1", "ana")] < idle[("lab1", "dan")] < 1.0  # dan pays for his account's usage too


def test_the_scheduler_favours_the_account_that_used_less(tmp_path: Path) -> None:
    cfg = parse_slurm_conf(NODES + "PriorityWeightFairshare=10000\nPriorityDecayHalfLife=0\n"
                                   "AccountName=heavy Users=root\nAccountName=light Users=root\n")
    store = store_for(tmp_path, cfg)
    used = store.submit(root_job(account="heavy"), "p", None, 900.0)
    assert store.start_jobs([(used, "c000", (0,))], 900.0) == [used]
    store.finish(used, "c000", 0, JobState.COMPLETED, 0, 0, 990.0)
    heavy = store.submit(root_job(account="heavy"), "p", None, 995.0)
    light = store.submit(root_job(account="light"), "p", None, 995.0)
    sched = Scheduler(cfg, store, Agents(), None, partitions_of=lambda name: frozenset({"p"}),  # type: ignore[arg-type]
                      clock=lambda: 1000.0)
    found = {q.job_id: (f.fairshare, value) for q, f, value in sched.priorities()}
    assert found[light] == (1.0, 10000)
    assert found[heavy][0] == pytest.approx(0.25) and found[heavy][1] == 2500  # U=1 on half the shares
    store.close()
