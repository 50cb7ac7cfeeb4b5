"""A pending job's age counts from when it became eligible (not held, dependencies met), as in Slurm."""

from __future__ import annotations

from pslurm.auth.credential import Identity
from pslurm.controller.app import assemble
from pslurm.controller.store import Store
from pslurm.core.config import parse_slurm_conf
from pslurm.core.jobspec import JobSpec

CONF = ("PriorityWeightAge=1000\nPriorityMaxAge=0:16:40\n"
        "NodeName=c000 CPUs=4 RealMemory=1000\nPartitionName=p Nodes=c000 Default=YES\n")  # c000 never comes up


def test_age_counts_from_eligibility_not_from_submit(tmp_path):
    now = [1000.0]
    store = Store(f"sqlite:///{tmp_path}/e.db")
    store.migrate()
    parts = assemble(parse_slurm_conf(CONF), store, agents=None, clock=lambda: now[0])  # type: ignore[arg-type]
    jobs, scheduler = parts.jobs, parts.scheduler
    spec = JobSpec(name="e", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\n")
    ready = jobs.submit(spec, Identity(0, 0))
    held = jobs.submit(JobSpec(**{**vars(spec), "hold": True}), Identity(0, 0))
    scheduler.schedule()
    assert store.get_job(ready).eligible_time == 1000.0 and store.get_job(held).eligible_time is None
    now[0] = 1500.0
    scheduler.schedule()
    ages = {q.job_id: f.age for q, f, _ in scheduler.priorities()}
    assert ages == {ready: 0.5, held: 0.0}  # 500 s of 1000 eligible; the held job has not begun to age
    assert jobs.update_job(str(held), 0, "release") == []
    scheduler.schedule()
    now[0] = 1600.0
    ages = {q.job_id: f.age for q, f, _ in scheduler.priorities()}
    assert ages == {ready: 0.6, held: 0.1}  # released at 1500: 100 s of age, not 600
    assert store.get_job(held).eligible_time == 1500.0
    store.close()
