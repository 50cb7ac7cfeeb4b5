"""sbatch's --begin, --deadline, --comment, --signal, --test-only and --qos (issue #11, item 4): the
time and signal parsers (as Slurm's parse_time and get_signal_opts, checked against Slurm 22.05), the
request's fields end to end through JSON and the agents' wire, the ``deadline`` lifecycle operation,
admission, and the scheduler with begin times, deadlines and will-run questions."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pslurm.controller.admission import INVALID_QOS, TIME_LIMIT_INVALID, admit
from pslurm.controller.policy import (
    NodeView,
    PendingJob,
    Snapshot,
    deadline_time_limit,
    misses_deadline,
    plan,
)
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.store import Store
from pslurm.core import lifecycle, restjson
from pslurm.core.config import ClusterConfig, parse_slurm_conf
from pslurm.core.gres import GresRequest
from pslurm.core.jobdesc import signal_name, signal_option, spec_values
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.lifecycle import JobFlags
from pslurm.core.states import InvalidTransition, JobReason, JobState
from pslurm.core.timefmt import TimeFormatError, format_timestamp, parse_time
from pslurm.proto import convert
from tests.conftest import store_with_nodes

# Slurm 22.05's answers (scontrol show job's EligibleTime) for --begin given at 15:14:23 on 2026-11-23
NOW = time.mktime((2026, 11, 23, 15, 14, 23, 0, 0, -1))


@pytest.mark.parametrize(("text", "expected"), [
    ("now+60", "2026-11-23T15:15:23"),  # no unit: seconds
    ("now+1hour", "2026-11-23T16:14:23"),
    ("now+2days", "2026-11-25T15:14:23"),
    ("now+1week", "2026-11-30T15:14:23"),
    ("now + 5 minutes", "2026-11-23T15:19:23"),
    ("now-1hour", "2026-11-23T14:14:23"),
    ("now", "2026-11-23T15:14:23"),
    ("16:00", "2026-11-23T16:00:00"),  # later today
    ("1:00:00", "2026-11-24T01:00:00"),  # passed today: tomorrow
    ("23:59:59", "2026-11-23T23:59:59"),
    ("4:00pm", "2026-11-23T16:00:00"),
    ("12:00am", "2026-11-24T00:00:00"),
    ("midnight", "2026-11-24T00:00:00"),
    ("noon", "2026-11-24T12:00:00"),
    ("fika", "2026-11-24T15:00:00"),
    ("teatime", "2026-11-23T16:00:00"),
    ("today", "2026-11-23T00:00:00"),
    ("tomorrow", "2026-11-24T00:00:00"),
    ("2026-11-24T10:00:00", "2026-11-24T10:00:00"),
    ("2026-11-24", "2026-11-24T00:00:00"),
    ("11/24", "2026-11-24T00:00:00"),
    ("1124", "2026-11-24T00:00:00"),
    ("11/22", "2027-11-22T00:00:00"),  # passed this year: next year's
    ("11/24/27-10:30", "2027-11-24T10:30:00"),
    ("2026-02-31", "2026-03-03T00:00:00"),  # mktime's arithmetic, as Slurm's
])
def test_begin_times_as_slurm_reads_them(text: str, expected: str) -> None:
    assert format_timestamp(parse_time(text, NOW)) == expected


@pytest.mark.parametrize(("text", "pos"), [
    ("now+1h", 4), ("now+30min", 5), ("now+", 3), ("bogus", 0), ("elevenses", 0), ("16:00PM", 5), ("4pm", 1),
    ("Today", 1),  # Slurm skips a capital T before it reads words
    ("", 0), ("  ", 0), ("2026-13-01", 5),
])
def test_bad_times_say_where_as_slurm_does(text: str, pos: int) -> None:
    with pytest.raises(TimeFormatError) as err:
        parse_time(text, NOW)
    assert str(err.value) == f"Invalid time specification (pos={pos}): {text}"


def test_epoch_seconds_and_the_range_of_times() -> None:
    assert parse_time("uts1800000000", NOW) == 1800000000.0
    for bad in ("uts12", "uts1800000000x", "now+99999999999999999days"):
        with pytest.raises(TimeFormatError):
            parse_time(bad, NOW)


@pytest.mark.parametrize(("text", "batch", "expected"), [
    ("USR1", True, (signal.SIGUSR1, 60, False, False)),  # 60 s before the limit by default
    ("B:USR1@2", True, (signal.SIGUSR1, 2, True, False)),
    ("sigusr2@90", True, (signal.SIGUSR2, 90, False, False)),
    ("10@5", True, (10, 5, False, False)),
    ("R:TERM", True, (signal.SIGTERM, 60, False, True)),
    ("BR:10@5", True, (10, 5, True, True)),
    ("RB:10@5", True, (10, 5, True, True)),
    ("b:usr1", True, (signal.SIGUSR1, 60, True, False)),
    ("R:USR1@0", False, (signal.SIGUSR1, 0, False, True)),  # srun: R, not B
    ("USR1@", True, (signal.SIGUSR1, 0, False, False)),  # as strtol reads an empty time: 0
])
def test_signal_forms(text: str, batch: bool, expected: tuple[int, int, bool, bool]) -> None:
    assert signal_option(text, batch) == expected


@pytest.mark.parametrize(("text", "batch"), [
    ("FOO", True), ("USR1@x", True), ("USR1@70000", True), ("0", True), ("100", True), ("B", True),
    ("B:USR1", False),  # srun has no B: (sbatch's alone)
    ("USR1@-1", True), ("", True),
])
def test_bad_signals_are_slurms_one_line(text: str, batch: bool) -> None:
    with pytest.raises(SpecError, match=r"^Invalid --signal specification$"):
        signal_option(text, batch)


def test_signal_names_are_slurms() -> None:
    assert signal_name(signal.SIGUSR1) == "USR1" and signal_name(signal.SIGXCPU) == "XCPU"
    assert signal_name(int(signal.SIGSEGV)) == str(int(signal.SIGSEGV))  # not in Slurm's table: its number


def values(**opts: object) -> dict[str, object]:
    return spec_values(opts, user="u", uid=1000, gid=1000, cwd="/tmp", environ={}, script="#!/bin/sh\n", now=NOW)


def test_options_become_the_requests_fields() -> None:
    got = values(begin="now+60", deadline="tomorrow", comment="for the paper", signal="B:USR1@2", qos="normal")
    assert got["begin_time"] == NOW + 60 and format_timestamp(got["deadline"]) == "2026-11-24T00:00:00"
    assert (got["comment"], got["qos"]) == ("for the paper", "normal")
    assert (got["warn_signal"], got["warn_time"], got["warn_batch"], got["warn_reservation"]) == (10, 2, True, False)
    bare = values()
    assert (bare["begin_time"], bare["deadline"], bare["comment"], bare["qos"], bare["warn_signal"]) == (
        None, None, "", "", 0)
    # psrun (interactive): srun's --signal, without B:
    with pytest.raises(SpecError, match="Invalid --signal specification"):
        spec_values({"signal": "B:USR1"}, user="u", uid=1, gid=1, cwd="/", environ={}, argv=("x",), interactive=True)


@pytest.mark.parametrize(("opts", "message"), [
    ({"begin": "now+1h"}, "Invalid --begin specification: now+1h"),
    ({"deadline": "bogus"}, "Invalid --deadline specification: bogus"),
    ({"begin": "now+100", "deadline": "now+50"}, "Incompatible begin and deadline time specification"),
])
def test_bad_times_are_refused_before_anything_is_sent(opts: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError) as err:
        values(**opts)
    assert str(err.value) == message


FULL = JobSpec(name="a", user="ana", uid=1000, gid=100, workdir="/w", script="#!/bin/sh\n", begin_time=NOW + 60,
               deadline=NOW + 3600, comment="a note", qos="normal", warn_signal=10, warn_time=90, warn_batch=True,
               warn_reservation=True)


def test_the_fields_round_trip_in_slurmrestds_names_and_on_the_agents_wire() -> None:
    data = json.loads(json.dumps(restjson.spec_to_json(FULL)))
    assert restjson.spec_from_json(data) == FULL
    assert data["begin_time"] == {"set": True, "infinite": False, "number": NOW + 60}
    assert (data["deadline"], data["comment"], data["qos"]) == (NOW + 3600, "a note", "normal")
    assert data["kill_warning_signal"] == "USR1" and data["kill_warning_delay"]["number"] == 90
    assert data["kill_warning_flags"] == ["BATCH_JOB", "RESERVATION_JOB"]
    bare = JobSpec(name="b", user="bo", uid=1, gid=1, workdir="/")
    assert not {"begin_time", "deadline", "comment", "qos", "kill_warning_signal"} & set(restjson.spec_to_json(bare))
    # a Slurm client's numbers: a signal by number, a deadline of 0 (none)
    slurm = restjson.spec_from_json({**restjson.spec_to_json(bare), "kill_warning_signal": 12, "deadline": 0})
    assert (slurm.warn_signal, slurm.deadline) == (12, None)
    with pytest.raises(SpecError, match="kill_warning_signal"):
        restjson.spec_from_json({**restjson.spec_to_json(bare), "kill_warning_signal": "NOPE"})
    assert convert.spec_from_pb(convert.spec_to_pb(FULL)) == FULL
    assert convert.spec_from_pb(convert.spec_to_pb(bare)) == bare
    assert not convert.spec_to_pb(bare).HasField("qos")  # unset on the wire when not given
    brief = restjson.brief_spec_json(FULL, "gpu")
    assert restjson.spec_from_json(json.loads(json.dumps(brief))) == replace(FULL, partition="gpu")


def test_deadline_is_an_operation_of_pending_jobs() -> None:
    change = lifecycle.deadline(JobFlags(7, JobState.PENDING, hold="user"), 100.0, "cannot end before its deadline")
    assert (change.op, change.from_state, change.to) == ("deadline", JobState.PENDING, JobState.DEADLINE)
    assert change.values == {"start_time": 100.0, "end_time": 100.0, "exit_code": 1, "exit_signal": 0,
                             "reason": JobReason.DEADLINE, "state_desc": ""}
    assert JobState.DEADLINE.short == "DL" and JobState.DEADLINE.is_final and JobReason.DEADLINE.value == "DeadLine"
    assert JobState.parse("dl") is JobState.DEADLINE
    for state in (JobState.RUNNING, JobState.COMPLETING, JobState.COMPLETED):
        with pytest.raises(InvalidTransition):
            lifecycle.deadline(JobFlags(7, state), 100.0, "late")
    started = lifecycle.start(JobFlags(8, JobState.PENDING), "c000", (0,), 5.0, time_limit=55)
    assert started.values["time_limit"] == 55
    assert "time_limit" not in lifecycle.start(JobFlags(8, JobState.PENDING), "c000", (0,), 5.0).values


# -- admission ----------------------------------------------------------------------------------------

CONF = """
ClusterName=t
NodeName=c000 CPUs=8 RealMemory=1000 Gres=gpu:2
PartitionName=gpu Nodes=c000 Default=YES
"""


def spec(**kw: object) -> JobSpec:
    return JobSpec(**{"name": "j", "user": "u", "uid": 1000, "gid": 1000, "workdir": "/tmp",  # type: ignore[arg-type]
                      "script": "#!/bin/sh\n", **kw})


def test_admission_knows_one_qos_and_refuses_a_deadline_already_past() -> None:
    config = parse_slurm_conf(CONF)
    for qos in ("", "normal", "Normal"):
        admit(spec(qos=qos), config)
    with pytest.raises(SpecError) as err:
        admit(spec(qos="high"), config)
    assert str(err.value) == INVALID_QOS == "Invalid qos specification"
    admit(spec(deadline=NOW - 60), config)  # no clock: not checked
    with pytest.raises(SpecError) as err:
        admit(spec(deadline=NOW - 60), config, now=NOW)
    assert str(err.value) == TIME_LIMIT_INVALID  # slurmctld's answer
    admit(spec(deadline=NOW + 30, time_limit=3600), config, now=NOW)  # accepted: a pass ends it DEADLINE


@pytest.mark.parametrize(("kw", "message"), [
    ({"comment": "x" * 1025}, "the comment is longer than 1024 characters"),
    ({"comment": "a\nb"}, "the comment contains a line break"),
    ({"comment": "a\0b"}, "the comment contains a NUL byte"),
    ({"begin_time": float("nan")}, "Invalid --begin specification"),
    ({"deadline": -1.0}, "Invalid --deadline specification"),
    ({"begin_time": NOW + 100, "deadline": NOW + 50}, "Incompatible begin and deadline time specification"),
    ({"warn_signal": 99}, "Invalid --signal specification"),
    ({"warn_signal": 10, "warn_time": 70000}, "Invalid --signal specification"),
])
def test_what_a_raw_client_could_send_is_refused(kw: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        admit(spec(**kw), parse_slurm_conf(CONF))


# -- the policy ---------------------------------------------------------------------------------------


def one_node() -> list[NodeView]:
    return [NodeView("c000", frozenset({"gpu"}), 8, 1000, ((0, None), (1, None)))]


def pending(job_id: int, begin: float | None = None, hold: str = "", dep: str = "satisfied") -> PendingJob:
    return PendingJob(job_id, "gpu", 1, 0, (GresRequest("gpu", None, 1),), dependency=dep, hold=hold, begin_time=begin)


def test_a_job_waits_for_its_begin_time_then_starts() -> None:
    jobs = [pending(1, begin=1060.0), pending(2, begin=1000.0)]
    first = plan(Snapshot(jobs, one_node(), now=1000.0))
    assert [p.job_id for p in first.placements] == [2] and first.reasons == {1: "BeginTime"}
    assert plan(Snapshot(jobs, one_node(), now=1000.0), backfill=False).reasons == {1: "BeginTime"}
    later = plan(Snapshot(jobs, one_node(), now=1060.0))
    assert sorted(p.job_id for p in later.placements) == [1, 2]
    # held and dependency reasons come first, as Slurm's job_independent
    blocked = plan(Snapshot([pending(3, begin=2000.0, hold="user"), pending(4, begin=2000.0, dep="waiting")],
                            one_node(), now=1000.0))
    assert blocked.reasons == {3: "JobHeldUser", 4: "Dependency"}


def test_when_a_deadline_can_no_longer_be_met() -> None:
    assert not misses_deadline(1600.0, 600, None, 1000.0)  # ends exactly at it
    assert misses_deadline(1600.0, 601, None, 1000.0)
    assert misses_deadline(1600.0, 600, 1001.0, 1000.0)  # its begin time counts
    assert not misses_deadline(1060.0, None, None, 1000.0) and misses_deadline(1059.0, None, None, 1000.0)  # a minute
    assert deadline_time_limit(1600.0, None, 1000.0) == 600 and deadline_time_limit(1600.0, 30, 1000.0) == 30


# -- the scheduler --------------------------------------------------------------------------------------

SCHED_CONF = ("NodeName=c000 NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
              "PartitionName=p Nodes=c000 Default=YES\n")


class Agents:
    def __init__(self) -> None:
        self.launched: list[JobRecord] = []

    def launch_async(self, target: str, job: JobRecord, on_error: object) -> None:
        self.launched.append(job)


class Health:
    def unreachable(self, node: str, why: str) -> None:
        pass

    def gpu_measured(self, node: str) -> dict[int, tuple[int, float]]:
        return {}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sched(tmp_path: Path) -> Iterator[tuple[Scheduler, Store, Clock, Agents]]:
    config: ClusterConfig = parse_slurm_conf(SCHED_CONF)
    store = store_with_nodes(tmp_path / "options.db", config, up=["c000"], heartbeat=True)
    clock, agents = Clock(), Agents()
    s = Scheduler(config, store, agents, Health(), partitions_of=lambda name: frozenset({"p"}), clock=clock)
    yield s, store, clock, agents
    store.close()


def submit(store: Store, gpus: int = 1, time_limit: int | None = 600, **kw: object) -> int:
    job = JobSpec(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                  gres=(GresRequest("gpu", None, gpus),), **kw)  # type: ignore[arg-type]
    return store.submit(job, "p", time_limit, 1000.0)


def test_a_begin_time_is_the_jobs_eligible_time_and_it_starts_then(sched) -> None:  # type: ignore[no-untyped-def]
    s, store, clock, agents = sched
    job_id = submit(store, begin_time=1030.0, comment="later", qos="normal")
    assert s.schedule() == 0
    job = store.get_job(job_id)
    assert (job.reason, job.eligible_time) == (JobReason.BEGIN_TIME, 1030.0)
    listed = store.get_jobs([job_id], light=True)[0]  # a listing's columns hold comment and qos
    assert (listed.spec.comment, listed.spec.qos) == ("later", "normal")
    clock.now = 1030.0
    assert s.schedule() == 1
    job = store.get_job(job_id)
    assert job.state is JobState.RUNNING and job.eligible_time == 1030.0 and agents.launched[0].job_id == job_id


def test_a_job_that_cannot_end_before_its_deadline_ends_deadline(sched) -> None:  # type: ignore[no-untyped-def]
    s, store, clock, _ = sched
    blocker = submit(store, gpus=2)
    assert s.schedule() == 1
    late = submit(store, time_limit=60, deadline=1100.0)  # waits for the GPUs; could still make it
    held = submit(store, time_limit=60, deadline=1100.0, hold=True)  # held: its deadline passes all the same
    assert s.schedule() == 0 and store.get_job(late).state is JobState.PENDING
    clock.now = 1041.0  # now + a minute is past 1100
    assert s.schedule() == 0
    for job_id in (late, held):
        job = store.get_job(job_id)
        assert (job.state, job.reason, job.exit_code) == (JobState.DEADLINE, JobReason.DEADLINE, 1)
        assert job.start_time == job.end_time == 1041.0
        assert [e.op for e in store.events(job_id)] == ["submit", "deadline"]
    assert store.get_job(blocker).state is JobState.RUNNING


def test_a_job_with_a_deadline_and_no_time_limit_runs_until_its_deadline(sched) -> None:  # type: ignore[no-untyped-def]
    s, store, clock, agents = sched
    job_id = submit(store, time_limit=None, deadline=1500.0)
    assert s.schedule() == 1
    assert store.get_job(job_id).time_limit == 500 and agents.launched[0].time_limit == 500


def test_will_run_plans_a_job_behind_the_queue_and_stores_nothing(sched) -> None:  # type: ignore[no-untyped-def]
    s, store, clock, _ = sched
    submit(store, gpus=2, time_limit=600)
    assert s.schedule() == 1  # both GPUs busy until 1600
    probe = JobSpec(name="t", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\n",
                    gres=(GresRequest("gpu", None, 1),), ntasks=2)
    before = store.count_jobs()
    found = s.will_run(probe, "p", 300, store.next_job_id())
    assert (found.job_id, found.start_time, found.node_list, found.proc_cnt, found.part_name) == (2, 1600.0, "c000",
                                                                                                   2, "p")
    assert store.count_jobs() == before
    assert s.will_run(replace(probe, begin_time=2000.0), "p", 300, 2).start_time == 2000.0  # not before its begin
    small = replace(probe, gres=())
    assert s.will_run(small, "p", 300, 2).start_time == 1000.0  # CPUs are free now
    s.config.partitions["p"] = replace(s.config.partitions["p"], state="DOWN")
    with pytest.raises(SpecError, match="PartitionDown"):
        s.will_run(probe, "p", 300, 2)
