"""A store upgrades in place (docs/operations.md, Upgrading), on SQLite and PostgreSQL.

Each previous release creates and fills a store with its own code (its tree from git, in a
subprocess), and the current code, as psctld does when it starts, migrates it and reads back every
job, step, node, account and association as that release read them. A store a newer release migrated
refuses this psctld in one line. Each release adds its commit to PREVIOUS_RELEASES.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from sqlalchemy import text

from pslurm.controller.store import Store
from pslurm.controller.store.revisions import StoreTooNew, known_heads
from pslurm.core.states import JobState
from tests.integration.upgrade_store import NOW, dump

REPO = Path(__file__).resolve().parents[2]
FILL = Path(__file__).with_name("upgrade_store.py")

PREVIOUS_RELEASES = [  # (release, its git commit): every release a store may come from
    ("0.3.0", "f364fd3"),  # wave 3
]

# What a job, step and association must still say after the upgrade (a release may add fields, not lose these)
KEPT = {
    "jobs": {"job_id", "state", "partition", "reason", "exit_code", "nodes", "hold",
             "array_job_id", "array_task_id", "submit_time", "start_time", "end_time", "spec"},
    "steps": {"job_id", "step_id", "name", "state", "exit_code", "nodes"},
    "assocs": {"account", "user", "partition", "parent", "fairshare", "max_jobs", "max_submit_jobs", "max_wall"},
}


def release_tree(commit: str, into: Path) -> Path:
    """The ``pslurm`` package of ``commit``, unpacked under ``into`` (skip when this clone lacks it)."""
    found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    if found.returncode != 0:
        why = f"commit {commit} is not in this clone (shallow?): fetch the full history to test upgrades from it"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    tree = into / commit
    if not (tree / "pslurm").is_dir():
        archive = into / f"{commit}.tar"
        subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), commit, "pslurm"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
    return tree


def fill_with(tree: Path, url: str) -> dict:
    """Create and fill the store at ``url`` with the release in ``tree``; what that release reads back."""
    env = {**os.environ, "PYTHONPATH": str(tree)}  # ahead of the installed (current) pslurm
    out = subprocess.run([sys.executable, str(FILL), "fill", url], env=env, cwd=tree, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before = json.loads(out.stdout)
    assert before.pop("pslurm").startswith(str(tree)), "the previous release's code was not the one run"
    return before


def shared(a: object, b: object) -> tuple[object, object]:
    """``a`` and ``b`` with only the keys both have, at every depth: what both releases know of a row."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = a.keys() & b.keys()
        pairs = {k: shared(a[k], b[k]) for k in keys}
        return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
    return a, b


def assert_kept(before: dict, after: dict) -> None:
    """Every row the old release stored is there, each field both releases have unchanged."""
    for section, rows in before.items():
        assert sorted(after[section]) == sorted(rows), section
        for key, old in rows.items():
            new = after[section][key]
            missing = KEPT.get(section, set()) - new.keys()
            assert not missing, (section, key, missing)
            was, now = shared(old, new)
            assert now == was, (section, key)


@pytest.mark.parametrize("release,commit", PREVIOUS_RELEASES, ids=[r for r, _ in PREVIOUS_RELEASES])
def test_a_previous_releases_store_upgrades_in_place_with_every_job(release, commit, db_url, tmp_path_factory):
    before = fill_with(release_tree(commit, tmp_path_factory.getbasetemp()), db_url)
    states = {j["spec"]["name"]: (j["state"], j["hold"]) for j in before["jobs"].values()}
    assert {s for s, _ in states.values()} >= {"PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED"}
    assert states["held"][1] and len(before["steps"]) == 2 and len(before["assocs"]) >= 4
    assert any(j["array_task_id"] is not None for j in before["jobs"].values())

    store = Store(db_url)  # as psctld starts
    store.migrate()
    try:
        assert_kept(before, dump(store))
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == list(known_heads())
        # and the upgraded store runs on: the running job ends, a new job takes the next id
        running = next(int(k) for k, j in before["jobs"].items() if j["spec"]["name"] == "running")
        store.finish(running, "c000", 0, JobState.COMPLETED, 0, 0, NOW + 10)
        assert store.get_job(running).state is JobState.COMPLETED
        assert store.submit(store.get_job(running).spec, "gpu", 600, NOW + 11) == max(map(int, before["jobs"])) + 1
    finally:
        store.close()


def newer_store(url: str) -> None:
    """A store as a newer release leaves it: migrated to a revision this code does not have."""
    store = Store(url)
    store.migrate()
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()


def test_a_newer_releases_store_is_refused_and_left_as_it_was(db_url):
    newer_store(db_url)
    store = Store(db_url)
    try:
        with pytest.raises(StoreTooNew) as caught:
            store.migrate()
        assert str(caught.value) == (f"the store is at revision 9999, newer than this psctld knows "
                                     f"({', '.join(known_heads())}): upgrade psctld")
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "9999"
    finally:
        store.close()


def test_psctld_on_a_newer_store_exits_with_one_line(tmp_path):
    (tmp_path / "pslurm.conf").write_text(f"""ClusterName=upg
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=1
StateSaveLocation={tmp_path}
NodeName=c000 NodeAddr=127.0.0.1 Port=2 CPUs=2 RealMemory=1000
PartitionName=debug Nodes=c000 Default=YES
""")
    newer_store(f"sqlite:///{tmp_path / 'pslurm.db'}")
    (tmp_path / "pslurm.db").chmod(0o600)
    out = subprocess.run([sys.executable, "-m", "pslurm.controller.app", "-f", str(tmp_path / "pslurm.conf")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    heads = ", ".join(known_heads())
    assert out.stderr.splitlines()[-1] == (f"psctld: error: the store is at revision 9999, newer than this psctld "
                                           f"knows ({heads}): upgrade psctld")
    assert "Traceback" not in out.stderr
