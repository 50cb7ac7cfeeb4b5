"""Associations (issue 20): the model, sacctmgr's planner, the store and its cache, the limits a job
is held to, and pslurm.conf's lines loaded into the store (the file wins for what it states)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.jwt import TOKEN_HEADER, USER_HEADER, TokenCheck, decode, encode, load_or_create_key
from pslurm.controller.acct_policy import acct_limits
from pslurm.controller.assocs import AssocService, assoc_limits, charge, config_change, submit_refusal
from pslurm.controller.errors import PermissionDenied
from pslurm.controller.store import Store
from pslurm.core.acctmgr import AcctMgrError, canonical_key
from pslurm.core.assoc import INVALID_ACCOUNT, INVALID_QOS, Assoc, Associations, Qos, config_associations, parse_tres
from pslurm.core.config import parse_slurm_conf
from pslurm.core.jobspec import JobSpec, SpecError

CLUSTER = "lab"
ROOT = Identity(0, 0)


def store_at(where: Path | str) -> Store:
    """A migrated store: in the directory ``where``, or at the database URL ``where``."""
    store = Store(where if isinstance(where, str) else f"sqlite:///{where / 'pslurm.db'}")
    store.migrate()
    return store


def service(where: Path | str, conf: str = "") -> AssocService:
    cfg = parse_slurm_conf("NodeName=c000 CPUs=4 RealMemory=1000\nPartitionName=p Nodes=c000 Default=YES\n" + conf)
    found = AssocService(store_at(where).assoc, CLUSTER)
    found.load_config(cfg)
    return found


def run(svc: AssocService, verb: str, entity: str, *words: str, commit: bool = True) -> list[str]:
    names = [w for w in words if "=" not in w]
    pairs = [tuple(w.split("=", 1)) for w in words if "=" in w]
    where, values = ([], pairs) if verb in ("add", "modify") else (pairs, [])  # modify NAMES set K=V
    return svc.execute(ROOT, verb, entity, names, where, values, commit)


def test_keys_are_read_as_sacctmgr_reads_them() -> None:
    assert canonical_key("Fair") == "fairshare" and canonical_key("DefaultAccount") == "defaultaccount"
    assert canonical_key("Acc") == "account" and canonical_key("MaxJobsPU") == "maxjobsperuser"
    assert canonical_key("MaxJ") == "maxjobs" and canonical_key("QOS") == "qos"
    assert canonical_key("Ac") is None  # shorter than sacctmgr's shortest
    assert parse_tres("cpu=8,gres/gpu=2,mem=4G") == {"cpu": 8, "gres/gpu": 2, "mem": 4096}
    with pytest.raises(ValueError):
        parse_tres("gpu")


def test_an_account_added_is_charged_at_once_and_its_users_default_set(tmp_path: Path) -> None:
    svc = service(tmp_path)
    assert not svc.current().enforced  # only root: any -A taken, as before accounts
    lines = run(svc, "add", "account", "Zz_A", "Description=vision lab", "Fairshare=2")
    assert lines[:2] == [" Adding Account(s)", "  zz_a"] and "  Fairshare     = 2" in lines
    assert svc.current().enforced
    with pytest.raises(SpecError, match=INVALID_ACCOUNT):
        svc.current().job_account("ana", "zz_a")  # the cache saw the change: ana has no association
    assert run(svc, "add", "user", "ana", "Account=zz_a")[:2] == [" Adding User(s)", "  ana"]
    snap = svc.current()
    assert snap.job_account("ana", "") == "zz_a" and snap.users["ana"].default_account == "zz_a"
    assert run(svc, "add", "account", "zz_a") == [" Nothing new added."]
    sub = run(svc, "add", "account", "zz_sub", "Parent=zz_a")
    assert "  Parent        = zz_a" in sub and svc.current().parent_of("zz_sub") == "zz_a"
    with pytest.raises(AcctMgrError, match="Parent account 'nope' doesn't exist"):
        run(svc, "add", "account", "zz_x", "Parent=nope")


def test_modify_and_delete_as_sacctmgr_words_them(db_url: str) -> None:  # SQLite and PostgreSQL
    svc = service(db_url, "AccountName=lab1 Users=ana,bo\nAccountName=lab2 Users=bo\n")
    assert run(svc, "modify", "account", "lab1", "Fairshare=5") == [
        " Modified account associations...", f"  C = {CLUSTER:<10} A = lab1 of root"]
    assert svc.current().account_assoc("lab1").fairshare == 5  # type: ignore[union-attr]
    dry = run(svc, "modify", "user", "bo", "DefaultAccount=lab2", commit=False)
    assert dry == [" Modified users...", "  bo"] and svc.current().users["bo"].default_account == "lab1"
    run(svc, "modify", "user", "bo", "DefaultAccount=lab2")
    assert svc.current().default_account("bo") == "lab2"
    with pytest.raises(AcctMgrError, match="aren't associated with new default account 'lab2'"):
        run(svc, "modify", "user", "ana", "DefaultAccount=lab2")
    with pytest.raises(AcctMgrError, match="have this as their default account"):
        run(svc, "delete", "account", "lab2")  # bo's default, and bo has lab1 too
    gone = svc.execute(ROOT, "delete", "user", ["bo"], [("account", "lab2")], [], True)
    assert gone[0] == " Deleting user associations..." and svc.current().default_account("bo") == "lab1"
    assert run(svc, "delete", "account", "lab2") == [" Deleting accounts...", "  lab2"]
    assert run(svc, "delete", "account", "lab2") == [" Nothing deleted"]
    with pytest.raises(PermissionDenied):
        svc.execute(Identity(4321, 4321), "add", "account", ["x"], [], [], True)


def test_qos_limits_and_priority_as_sacctmgr_sets_them(tmp_path: Path) -> None:
    svc = service(tmp_path, "AccountName=lab1 Users=ana\n")
    assert run(svc, "add", "qos", "high", "Priority=100", "MaxWall=1:00:00", "MaxSubmitJobsPerUser=2")[:2] == [
        " Adding QOS(s)", "  high"]
    assert svc.current().qos["high"] == Qos("high", "high", 100, None, 2, "", 3600, ())
    snap = svc.current()
    assoc = snap.job_assoc("ana", "")
    with pytest.raises(SpecError, match=INVALID_QOS):
        snap.job_qos(assoc, "high")  # lab1's association allows normal only
    svc.execute(ROOT, "modify", "user", ["ana"], [], [("qos", "normal,high")], True)
    snap = svc.current()
    spec, found, qos = charge(snap, JobSpec(name="j", user="ana", uid=1, gid=1, workdir="/", argv=("true",),
                                            qos="high"))
    assert (spec.account, qos.name) == ("lab1", "high")
    limits = acct_limits(snap)
    assert assoc_limits(limits, found, qos, None, None) == 3600  # MaxWall is the limit of a job with none
    assert assoc_limits(limits, found, qos, 7200, 7200) == 7200  # taken: the scheduler holds it (acct_policy)
    submit_refusal(limits, found, qos, spec, lambda: [(found.id, "high", "ana", 1)])  # type: ignore[union-attr]
    with pytest.raises(SpecError, match="accounting/QOS policy.*: QOSMaxSubmitJobPerUserLimit"):
        submit_refusal(limits, found, qos, spec, lambda: [(found.id, "high", "ana", 2)])  # type: ignore[union-attr]
    with pytest.raises(AcctMgrError, match="normal is every association's default"):
        run(svc, "delete", "qos", "normal")
    assert run(svc, "delete", "qos", "high") == [" Deleting QOS(s)...", "  high"]
    assert "high" not in svc.current().allowed_qos(svc.current().job_assoc("ana", ""))  # type: ignore[arg-type]


def test_the_files_lines_win_for_what_they_state_and_sacctmgrs_stay(db_url: str) -> None:
    conf = "AccountName=lab1 Users=ana Fairshare=3\nUserName=ana DefaultAccount=lab1\n"
    svc = service(db_url, conf)
    run(svc, "modify", "account", "lab1", "Fairshare=7")
    run(svc, "add", "account", "extra")
    run(svc, "add", "user", "ana", "Account=extra")
    run(svc, "modify", "user", "ana", "DefaultAccount=extra")
    cfg = parse_slurm_conf("NodeName=c000 CPUs=4 RealMemory=1000\nPartitionName=p Nodes=c000 Default=YES\n" + conf)
    svc.load_config(cfg)  # psctld starts again
    snap = svc.current()
    assert snap.account_assoc("lab1").fairshare == 3  # type: ignore[union-attr]  # the file states it
    assert snap.users["ana"].default_account == "lab1"  # UserName= states it
    assert "extra" in snap.user_accounts("ana")  # what sacctmgr added stays
    assert config_change(snap, config_associations(cfg), cfg.default_accounts) == config_change(
        snap, config_associations(cfg), cfg.default_accounts).__class__()  # nothing left to do


def test_a_change_reaches_a_second_reader_through_the_store(tmp_path: Path) -> None:
    svc = service(tmp_path)
    other = AssocService(svc.store, CLUSTER)  # another reader of the same store object
    before = other.current()
    run(svc, "add", "account", "zz_b")
    assert "zz_b" not in before.accounts and "zz_b" in other.current().accounts


def test_a_tree_of_accounts_in_the_fair_share_rows() -> None:
    from pslurm.controller.priority import share_rows

    tree = Associations({}, {}, (Assoc("a", parent="root", fairshare=3, id=2), Assoc("b", parent="root", id=3),
                                 Assoc("a1", parent="a", id=4), Assoc("a1", "ana", id=5), Assoc("b", "bo", id=6)))
    tree = Associations({n: None for n in ("root", "a", "b", "a1")}, {}, tree.assocs)  # type: ignore[misc]
    rows = share_rows({("a1", "ana"): 30.0, ("b", "bo"): 5.0}, (), tree)
    assert [(r.account, r.user, r.depth) for r in rows] == [("a", "", 1), ("a1", "", 2), ("a1", "ana", 3),
                                                           ("b", "", 1), ("b", "bo", 2)]
    by = {(r.account, r.user): r for r in rows}
    assert by[("a", "")].norm_shares == pytest.approx(0.75) and by[("a1", "ana")].norm_shares == pytest.approx(0.75)
    assert by[("a", "")].raw_usage == 30.0  # its sub-account's usage counts for it
    assert by[("b", "bo")].fairshare > by[("a1", "ana")].fairshare  # less usage than its shares' part


def test_usage_charged_to_the_root_account_is_a_user_row_under_the_root() -> None:
    """root's jobs charge the root account (as Slurm's): its user row sits under the root, which has
    no row of its own (a row (root, "") under the root walked itself without end)."""
    from pslurm.controller.priority import share_rows

    for tree in (Associations({}, {}, ()), Associations({"root": None}, {}, ())):  # type: ignore[dict-item]
        rows = share_rows({("root", "root"): 5.0, ("acct", "ana"): 1.0}, [("root", "root")], tree)
        assert [(r.account, r.user, r.depth) for r in rows] == [("root", "root", 1), ("acct", "", 1),
                                                               ("acct", "ana", 2)]


def test_jwt_tokens_are_hs256_and_refused_when_forged_expired_or_for_another(tmp_path: Path) -> None:
    path = tmp_path / "jwt_hs256.key"
    key = load_or_create_key(str(path))
    assert len(key) == 32 and path.stat().st_mode & 0o777 == 0o600 and load_or_create_key(str(path)) == key
    token = encode({"iat": 1, "exp": 100, "sun": "root"}, key)
    assert decode(token, key, 50)["sun"] == "root"
    for bad, now in ((token, 100), (token[:-2] + "xx", 50), (encode({"exp": 100, "sun": "root"}, b"k" * 32), 50),
                     ("a.b", 50)):
        with pytest.raises(AuthError):
            decode(bad, key, now)
    check = TokenCheck(key, clock=lambda: 10.0)
    issued = check.issue("root", 60)
    assert check.admit({TOKEN_HEADER: issued, USER_HEADER: "root"}) == Identity(0, 0)
    with pytest.raises(AuthError, match="token is for user root, not nobody"):
        check.admit({TOKEN_HEADER: issued, USER_HEADER: "nobody"})
    path.chmod(0o644)
    with pytest.raises(AuthError, match="owner only"):
        load_or_create_key(str(path))
    assert os.path.exists(path) and time.time() > 0


def test_a_windows_usage_is_each_run_clipped_to_it(tmp_path: Path) -> None:
    from pslurm.controller.store.usage import job_counts, usage_summary
    from pslurm.core.gres import GresRequest
    from pslurm.core.states import JobState

    store = store_at(tmp_path)
    store.ensure_nodes([])
    spec = JobSpec(name="j", user="ana", uid=1, gid=1, workdir="/", argv=("true",), ntasks=4,
                   gres=(GresRequest("gpu", None, 2),), account="lab1")
    job = store.submit(spec, "p", None, 1000.0)
    assert store.start_jobs([(job, "c000", (0, 1))], 1000.0) == [job]
    store.finish(job, "c000", 0, JobState.COMPLETED, 0, 0, 5000.0)
    found = usage_summary(store, 2000.0, 6000.0, 9000.0)
    assert found["assocs"] == [{"account": "lab1", "user": "ana", "cpu_seconds": 4 * 3000.0,
                                "gpu_seconds": 2 * 3000.0, "mem_mb_seconds": 0.0, "jobs": 0}]  # started before
    assert found["sizes"][0]["cpus"] == 4 and usage_summary(store, 6000.0, 7000.0, 9000.0)["assocs"] == []
    assert job_counts(store, 0.0) == {"submitted": 1, "started": 1, "completed": 1, "canceled": 0, "failed": 0}
