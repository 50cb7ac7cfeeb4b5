"""An array's request is stored once (job_specs), on SQLite and PostgreSQL; a task updated on its own
keeps its change as its overrides; migration 0012 moves the requests of an older store."""

from __future__ import annotations

import json
import pathlib

from alembic import command
from alembic.config import Config
from sqlalchemy import func, select, text

from pslurm.controller.store import Store, queries
from pslurm.controller.store.schema import job_specs, jobs
from pslurm.core.jobspec import JobSpec, spec_to_dict
from pslurm.core.states import JobState

SCRIPT = "#!/bin/sh\n" + "# padding\n" * 10_000  # 100 kB


def spec(**kw: object) -> JobSpec:
    values: dict[str, object] = dict(name="big", user="alice", uid=1000, gid=1000, workdir="/tmp", script=SCRIPT,
                                     environment={"PATH": "/bin", "X": "y" * 1000})
    values.update(kw)
    return JobSpec(**values)  # type: ignore[arg-type]


def stored_bytes(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.sum(func.length(job_specs.c.spec)))).scalar() or 0) + int(
            conn.execute(select(func.sum(func.length(jobs.c.spec)))).scalar() or 0)


def test_an_array_holds_its_request_once_and_its_tasks_share_it(store):
    array = store.submit(spec(), "gpu", 60, 1.0, array_ids=range(200))
    assert stored_bytes(store) < 2 * len(SCRIPT)  # one copy, not 200
    found = store.get_jobs(job_ids=[array])
    assert len(found) == 200 and all(j.spec.script == SCRIPT for j in found)
    assert len({id(j.spec) for j in found}) == 1  # read and decoded once: one JobSpec for the lot
    assert store.get_job(array + 7).spec == spec()


def test_a_task_updated_on_its_own_keeps_the_change_and_the_others_do_not_see_it(store):
    array = store.submit(spec(), "gpu", 60, 1.0, array_ids=range(5))
    task = array + 2
    assert store.update_fields(task, JobState.PENDING, 0, 2.0, "update", {"time_limit": 120},
                               {"time_limit": 120, "name": "mine"})
    assert store.update_fields(task, JobState.PENDING, 0, 3.0, "update", {}, {"comment": "c"})
    one = store.get_job(task)
    assert (one.spec.time_limit, one.spec.name, one.spec.comment, one.time_limit) == (120, "mine", "c", 120)
    assert one.spec.script == SCRIPT
    others = [j for j in store.get_jobs(job_ids=[array]) if j.job_id != task]
    assert {(j.spec.name, j.spec.time_limit, j.spec.comment, j.time_limit) for j in others} == {("big", None, "", 60)}
    assert stored_bytes(store) < 2 * len(SCRIPT)  # the update copied nothing shared


def test_migration_0012_moves_each_request_once_and_keeps_a_tasks_own_changes(db_url):
    cfg = Config()
    cfg.set_main_option("script_location", str(pathlib.Path(queries.__file__).parent / "migrations"))
    store = Store(db_url)
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0011")  # the revision before job_specs
    shared = json.dumps(spec_to_dict(spec()))
    changed = json.dumps({**spec_to_dict(spec()), "name": "renamed", "time_limit": 300})
    with store.engine.begin() as conn:  # what 0011 wrote: an array of 3 (its task 1 renamed) and a job of its own
        for job_id, array, task, text_ in ((1, 1, 0, shared), (2, 1, 1, changed), (3, 1, 2, shared),
                                          (4, None, None, json.dumps(spec_to_dict(spec(name="solo"))))):
            conn.execute(text(
                "INSERT INTO jobs (job_id, name, user_name, uid, partition, state, reason, submit_time, cpus, mem_mb,"
                " gres, gpu_indices, exit_code, exit_signal, cancel_requested, spec, array_job_id, array_task_id)"
                " VALUES (:j, 'big', 'alice', 1000, 'gpu', 'PENDING', 'None', 1.0, 1, 0, '', '', 0, 0, false, :s,"
                " :a, :t)"), {"j": job_id, "s": text_, "a": array, "t": task})
        if conn.dialect.name == "postgresql":  # as if the sequence had drawn them
            conn.execute(text("SELECT setval(pg_get_serial_sequence('jobs', 'job_id'), 4)"))
    store.migrate()
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(job_specs)).scalar() == 2
        assert conn.execute(select(func.max(func.length(jobs.c.spec)))).scalar() == 0
    names = {j.job_id: (j.spec.name, j.spec.time_limit, j.spec.script) for j in store.get_jobs(include_finished=True)}
    assert names == {1: ("big", None, SCRIPT), 2: ("renamed", 300, SCRIPT), 3: ("big", None, SCRIPT),
                     4: ("solo", None, SCRIPT)}
    assert store.submit(spec(), "gpu", None, 2.0) == 5  # new requests get ids after the moved ones
    assert store.get_job(5).spec == spec()
    store.close()
