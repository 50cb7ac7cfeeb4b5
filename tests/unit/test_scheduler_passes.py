"""The scheduler's two kinds of pass through the store: main passes leave the backfill pass's notes alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import Store
from pslurm.core.config import ClusterConfig, SchedulerConfig, parse_slurm_conf
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from tests.conftest import store_with_nodes

CONF = ("NodeName=c000 NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "NodeName=c001 NodeAddr=127.0.0.1 Port=7001 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "PartitionName=p Nodes=c[000-001] Default=YES\n")


class Agents:
    def launch_async(self, target: str, job: JobRecord, on_error) -> None:  # type: ignore[no-untyped-def]
        pass


class Health:
    def unreachable(self, node: str, why: str) -> None:
        pass

    def gpu_measured(self, node: str) -> dict[int, tuple[int, float]]:
        return {}


@pytest.fixture
def parts(tmp_path: Path):  # type: ignore[no-untyped-def]
    config: ClusterConfig = parse_slurm_conf(CONF)
    store = store_with_nodes(tmp_path / "passes.db", config, up=["c000", "c001"], heartbeat=True)
    s = Scheduler(config, store, Agents(), Health(), partitions_of=lambda name: frozenset({"p"}),
                  clock=lambda: 1000.0)
    yield s, store
    store.close()


def submit(store: Store, gpus: int) -> int:
    spec = JobSpec(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   gres=(GresRequest("gpu", None, gpus),))
    return store.submit(spec, "p", 600, 1000.0)


def note(store: Store, job_id: int) -> tuple[str, float | None]:
    job = store.get_job(job_id)
    assert job.state is JobState.PENDING
    return str(job.reason.value if hasattr(job.reason, "value") else job.reason), job.start_estimate


def test_main_passes_keep_the_backfill_pass_reasons_and_expected_starts(parts):
    s, store = parts
    submit(store, 2), submit(store, 2)
    assert s.schedule(backfill=False) == 2  # the main pass starts what fits, in order
    big, small = submit(store, 2), submit(store, 1)
    assert s.schedule() == 0  # the backfill pass: reservations, reasons, expected starts
    after_backfill = note(store, big), note(store, small)
    assert after_backfill == (("Resources", 1600.0), ("Priority", 1600.0))
    late = submit(store, 1)
    assert s.schedule(backfill=False) == 0
    assert (note(store, big), note(store, small)) == after_backfill  # not rewritten by a main pass
    assert note(store, late) == ("Priority", None)  # a new job: the main pass's reason, no estimate yet


def test_a_job_waiting_for_jobs_without_a_time_limit_starts_a_year_after_they_started(parts):
    s, store = parts  # slurmctld: an INFINITE limit's end is start + a year, and will-run starts it then
    unlimited = JobSpec(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                        gres=(GresRequest("gpu", None, 2),))
    for _ in range(2):
        store.submit(unlimited, "p", None, 900.0)
    assert s.schedule(backfill=False) == 2  # both nodes' GPUs, until the year is out
    waiting = store.submit(unlimited, "p", None, 1000.0)
    assert s.schedule() == 0
    assert note(store, waiting) == ("Resources", 1000.0 + 365 * 86400)
    other, last = store.submit(unlimited, "p", None, 1000.0), store.submit(unlimited, "p", None, 1000.0)
    s.schedule()
    assert note(store, other) == ("Priority", 1000.0 + 365 * 86400)  # the other node's GPUs
    assert note(store, last) == ("Priority", None)  # behind jobs without a limit, which hold them for good


def test_the_loop_backfills_every_bf_interval_and_runs_main_passes_on_rings():
    s = Scheduler.__new__(Scheduler)  # the loop alone: schedule() records the kind of each pass
    s.sched = SchedulerConfig(bf_interval=1)
    s._wake, s._stopping = threading.Event(), threading.Event()
    s.on_pass = lambda backfill, seconds, started: None  # observe.py's hook: nobody listens here
    passes: list[tuple[float, bool]] = []
    t0 = time.monotonic()
    s.schedule = lambda backfill=True: passes.append((time.monotonic() - t0, backfill)) or 0  # type: ignore
    loop = threading.Thread(target=s.run_loop, daemon=True)
    loop.start()
    for _ in range(25):
        time.sleep(0.1)
        s.reschedule()
    s.stop()
    loop.join(5)
    backfills = [at for at, backfill in passes if backfill]
    assert passes[0][1] and len([p for p in passes if not p[1]]) >= 10  # rings: main passes
    assert 2 <= len(backfills) <= 4  # at 0 s, then about every second
    assert all(b - a >= 0.9 for a, b in zip(backfills, backfills[1:], strict=False))
