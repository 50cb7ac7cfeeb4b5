"""Waiters on a job (the API's wait stream, psrun) hear of their own job's changes from the store, not of
every change in the cluster."""

from __future__ import annotations

import threading
import time

from pslurm.auth.credential import Identity
from pslurm.controller.app import assemble
from pslurm.controller.store import Store
from pslurm.core.config import parse_slurm_conf
from pslurm.core.jobspec import JobSpec
from pslurm.core.states import JobState
from tests.conftest import wait_for

CONF = "NodeName=c000 CPUs=4 RealMemory=1000\nPartitionName=p Nodes=c000 Default=YES\n"
ROOT = Identity(0, 0)


def test_a_waiter_wakes_for_its_own_job_at_once_and_for_nobody_elses(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/w.db")
    store.migrate()
    parts = assemble(parse_slurm_conf(CONF), store, agents=None)  # type: ignore[arg-type]  # no launches here
    watch = parts.watch
    spec = JobSpec(name="w", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\n")
    mine, other = parts.jobs.submit(spec, ROOT), parts.jobs.submit(spec, ROOT)
    seen: list[tuple[JobState, float]] = []
    waiter = threading.Thread(target=lambda: seen.extend((j.state, time.monotonic())
                                                         for j in watch.wait(mine)))
    waiter.start()
    wait_for(lambda: len(seen) == 1)
    for _ in range(20):  # another job's changes: no wake-up for this waiter
        store.update_pending({other: ("Priority", 0, None, None)})
        store.update_pending({other: ("Resources", 0, None, None)})
    assert watch._versions[mine] == 0 and other not in watch._versions
    changed = time.monotonic()
    store.start_jobs([(mine, "c000", ())], now=1.0)
    wait_for(lambda: len(seen) == 2)
    assert seen[-1][1] - changed < 0.5  # told at once, not found by the once-a-second re-read
    store.finish(mine, "c000", 0, JobState.COMPLETED, 0, 0, 2.0)
    waiter.join(5)
    assert [state for state, _ in seen] == [JobState.PENDING, JobState.RUNNING, JobState.COMPLETED]
    assert not watch._watched and not watch._versions  # nothing kept once the wait ends
    store.close()
