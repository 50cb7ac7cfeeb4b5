"""pscontrol update JobId=: scontrol's words and the update rules (pslurm.core.jobupdate, pure), who
may change what through the job service (a real SQLite store and fake agents), and the store's
guarded update."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.controller.jobs import JobService
from pslurm.controller.store import Store
from pslurm.core.config import ClusterConfig, parse_slurm_conf
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.jobupdate import UpdateError, checked_changes, new_time_limit, parse_job_update, update_values
from pslurm.core.states import JobState
from tests.conftest import store_with_nodes

CONF = ("NodeName=c[000-001] NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000 Gres=gpu:2\n"
        "PartitionName=p Nodes=c[000-001] Default=YES MaxTime=1:00:00 DefaultTime=10:00\n"
        "PartitionName=short Nodes=c001 MaxTime=5:00\n"
        "PartitionName=closed Nodes=c000 State=DRAIN\n"
        "AccountName=lab1 Users=ana,root\nAccountName=lab2 Users=ana\n")
ANA = 1000


# -- the words --------------------------------------------------------------------------------


def test_the_words_become_the_changes_as_scontrol_reads_them() -> None:
    assert parse_job_update(["JobId=14", "TimeLimit=30"]) == ("14", {"time_limit": "30"})
    assert parse_job_update(["jobid=14_3", "timel=+1:00:00", "Part=short", "JobName=x", "A=lab2"]) == (
        "14_3", {"time_limit": "+1:00:00", "partition": "short", "name": "x", "account": "lab2"})
    assert parse_job_update(["JobId=14", "TimeLimit+=5"])[1] == {"time_limit": "+5"}
    assert parse_job_update(["JobId=14", "TimeLimit-=5"])[1] == {"time_limit": "-5"}
    assert parse_job_update(["JobId", "14", "Name", "two words"]) == ("14", {"name": "two words"})
    assert parse_job_update(["JobId=14", "Nice"])[1] == {"nice": 100}  # a bare Nice: 100, as scontrol
    assert parse_job_update(["JobId=14", "Nice=-5", "Priority=7"])[1] == {"nice": -5, "priority": 7}
    assert parse_job_update(["JobId=14", "NumTasks=2", "MinMemoryNode=2G", "Comment=hi"])[1] == {
        "num_tasks": 2, "min_memory_node": 2048, "comment": "hi"}
    assert parse_job_update(["JobId=14", "Account="])[1] == {"account": ""}
    assert parse_job_update(["JobId=14", "NumNodes=1-2", "ReqNodeList=c001", "ExcNodeList=c002", "Features=a100",
                             "Gres=gpu:1", "Dependency=afterok:3", "QOS=normal", "WorkDir=/tmp", "StdOut=o",
                             "StdErr=e", "CPUsPerTask=2", "MinMemoryCPU=1G", "Requeue=0", "MailType=end,fail",
                             "MailUser=ana", "ArrayTaskThrottle=3"])[1] == {
        "num_nodes": "1-2", "req_nodes": "c001", "exc_nodes": "c002", "features": "a100", "gres": "gpu:1",
        "dependency": "afterok:3", "qos": "normal", "workdir": "/tmp", "stdout": "o", "stderr": "e",
        "cpus_per_task": 2, "min_memory_cpu": 1024, "requeue": 0, "mail_type": "END,FAIL", "mail_user": "ana",
        "throttle": 3}
    assert parse_job_update(["JobId=14", "NodeList=c000", "TresPerNode=gpu:2", "Dep=", "Dead=uts2000000000"])[1] == {
        "req_nodes": "c000", "gres": "gpu:2", "dependency": "", "deadline": 2000000000.0}
    start = parse_job_update(["JobId=14", "StartTime=2001-01-01"])[1]["begin_time"]  # a past start: now
    assert isinstance(start, float) and start > 1.7e9


@pytest.mark.parametrize("words, lines, prefixed", [
    (["JobId=14", "Frobnicate=1"], ("Update of this parameter is not supported: Frobnicate=1", "Request aborted"),
     False),
    (["JobId=14", "Licenses=matlab"],
     ("Update of this parameter is not supported: Licenses=matlab", "Request aborted"), False),
    (["JobId=14", "CPUsPerTask=two"], ("Invalid CPUsPerTask value: two",), True),
    (["JobId=14", "MinMemoryCPU=lots"], ("Invalid MinMemoryCPU value: lots",), True),
    (["JobId=14", "Requeue=yes"], ("Invalid Requeue value: yes",), True),
    (["JobId=14", "ArrayTaskThrottle=-1"], ("Invalid ArrayTaskThrottle value",), True),
    (["JobId=14", "MailType=SOMETIMES"], ("Invalid MailType value: SOMETIMES",), True),
    (["JobId=14", "StartTime=soonish"], ("Invalid time specification (pos=0): soonish",), True),
    (["JobId=14", "TimeLimit=bogus"], ("Invalid TimeLimit value",), True),
    (["JobId=14", "TimeLimit=+UNLIMITED"], ("Invalid TimeLimit value",), True),
    (["JobId=14", "TimeLimit+=+5"], ("Invalid syntax, variations of +=- are not accepted.",), True),
    (["JobId=14", "Name+=x"], ("Option Name+=x does not accept [+|-]= syntax",), True),
    (["JobId=14", "Priority=high"], ("Invalid Priority value: high",), True),
    (["JobId=14", "Nice=99999999999"], ("Nice value out of range (+/- 2147483645). Value ignored",), True),
    (["JobId=14", "NumTasks=x"], ("Invalid NumTasks value: x",), True),
    (["JobId=14", "MinMemoryNode=lots"], ("Invalid MinMemoryNode value: lots",), True),
    (["JobId=14"], ("No changes specified",), False),
    (["TimeLimit=5"], ("No job ID specified",), True),
    (["JobId=14", "TimeLimit"], ("Invalid input: TimeLimit", "Request aborted"), False),
])
def test_words_scontrol_refuses_are_refused_in_its_words(words: list[str], lines: tuple[str, ...],
                                                         prefixed: bool) -> None:
    with pytest.raises(UpdateError) as caught:
        parse_job_update(words)
    assert (caught.value.lines, caught.value.prefixed) == (lines, prefixed)


def test_a_time_limit_change_against_the_limit_in_force() -> None:
    assert new_time_limit("30", 600) == 1800
    assert new_time_limit("UNLIMITED", 600) is None and new_time_limit("0", 600) is None
    assert new_time_limit("+30", 600) == 2400 and new_time_limit("-5", 600) == 300
    assert new_time_limit("0:05", None) == 5  # seconds: pslurm keeps them
    with pytest.raises(ValueError, match=r"^TimeLimit decrement larger than current time limit \(20:00 > 10:00\)$"):
        new_time_limit("-20", 600)
    with pytest.raises(ValueError, match="^Cannot increment/decrement TimeLimit when set to UNLIMITED.$"):
        new_time_limit("+5", None)


def test_a_raw_clients_changes_are_checked() -> None:
    assert checked_changes({"time_limit": 90, "name": "x", "partition": None}) == {"time_limit": "1:30", "name": "x"}
    for bad, why in (({"time_limit": "soon"}, "Invalid TimeLimit value"), ({"nice": "5"}, "nice is an integer"),
                     ({"name": 5}, "name is a string"), ({"state": "RUNNING"}, "not supported: state"),
                     ({"name": "a\nb"}, "line break"), ({"num_tasks": -1}, "Invalid NumTasks value: -1")):
        with pytest.raises(ValueError, match=why):
            checked_changes(bad)


# -- the rules, without a store -----------------------------------------------------------------


def _record(state: JobState = JobState.PENDING, **kw: object) -> JobRecord:
    spec = JobSpec(name="j", user="ana", uid=ANA, gid=ANA, workdir="/tmp", script="#!/bin/sh\n", account="lab1",
                   time_limit=600, **kw)  # type: ignore[arg-type]
    return JobRecord(job_id=14, spec=spec, state=state, partition="p", time_limit=600)


def test_the_rules_readmit_only_what_changes_where_a_job_may_run() -> None:
    config = parse_slurm_conf(CONF)
    asked: list[JobSpec] = []

    def readmit(spec: JobSpec) -> int | None:
        asked.append(spec)
        return 300

    own, request, detail = update_values(_record(), {"name": "x", "time_limit": "20"}, ANA, False, config,
                                         readmit)
    assert asked == [] and detail == "update TimeLimit=20:00 JobName=x"
    assert (own, request) == ({"time_limit": 1200}, {"time_limit": 1200, "name": "x"})  # the store's columns follow
    own, _, detail = update_values(_record(), {"partition": "short", "time_limit": "4"}, 0, True, config,
                                       readmit)
    assert [(s.partition, s.time_limit) for s in asked] == [("short", 240)]  # the limit asked goes with it
    assert own == {"partition": "short", "time_limit": 300}  # the one in force: admission's
    assert detail == "update Partition=short TimeLimit=5:00"


@pytest.mark.parametrize("job, changes, uid, why", [
    (_record(), {"name": "x"}, ANA + 1, "Invalid user id"),  # another user's job, before anything else
    (_record(JobState.COMPLETED), {"name": "x"}, ANA, "Job has already finished"),
    (_record(JobState.RUNNING), {"partition": "short"}, ANA, "Job is no longer pending execution"),
    (_record(), {"partition": "nowhere", "priority": 5}, ANA, "Invalid partition name specified"),  # first check first
    (_record(), {"priority": 5}, ANA, "Access/permission denied"),
    (_record(), {"time_limit": "2:00:00"}, ANA, "Access/permission denied"),  # over the partition's MaxTime
    (_record(), {"name": "n" * 257}, ANA, "Invalid job request: the job name is longer than 256 characters"),
])
def test_the_rules_refuse_in_slurmctlds_order_and_words(job: JobRecord, changes: dict[str, object], uid: int,
                                                         why: str) -> None:
    with pytest.raises(SpecError, match=f"^{why}$"):
        update_values(job, changes, uid, False, parse_slurm_conf(CONF), lambda spec: pytest.fail("readmitted"))


# -- the job service --------------------------------------------------------------------------


class Agents:
    def __init__(self) -> None:
        self.limits: list[tuple[str, int, int, int | None]] = []

    def launch_async(self, target: str, job: JobRecord, on_error) -> None:  # type: ignore[no-untyped-def]
        pass

    def signal(self, target: str, job_id: int, signal: int) -> None:
        pass

    def set_time_limit(self, target: str, job_id: int, restarts: int, time_limit: int | None) -> None:
        self.limits.append((target, job_id, restarts, time_limit))


@pytest.fixture
def config() -> ClusterConfig:
    return parse_slurm_conf(CONF)


@pytest.fixture
def store(tmp_path: Path, config: ClusterConfig):  # type: ignore[no-untyped-def]
    s = store_with_nodes(tmp_path / "update.db", config)
    yield s
    s.close()


@pytest.fixture
def service(config: ClusterConfig, store: Store) -> tuple[JobService, Agents]:
    agents = Agents()
    return JobService(config, store, agents, lambda: None, lambda: 1000.0, operators=frozenset({0})), agents


def submit(store: Store, *, uid: int = ANA, partition: str = "p", time_limit: int | None = 600,
           array: tuple[int, ...] = (), **kw: object) -> int:
    values: dict[str, object] = dict(name="j", user="ana" if uid == ANA else "root", uid=uid, gid=uid, workdir="/tmp",
                                     script="#!/bin/sh\ntrue\n", account="lab1", time_limit=time_limit)
    values.update(kw)
    return store.submit(JobSpec(**values), partition, time_limit, 900.0, array_ids=array)  # type: ignore[arg-type]


def start(store: Store, job_id: int) -> None:
    assert store.start_jobs([(job_id, "c000", (0,))], 950.0) == [job_id]


def test_a_pending_jobs_limit_partition_and_name_change_at_once_with_one_event(service, store) -> None:
    jobs, _ = service
    job_id = submit(store)
    assert jobs.update_job(str(job_id), ANA, changes={"time_limit": "4:00", "partition": "short",
                                                      "name": "renamed", "account": "lab2"}) == []
    job = store.get_job(job_id)
    assert (job.time_limit, job.partition, job.spec.name, job.spec.account) == (240, "short", "renamed", "lab2")
    assert (job.spec.time_limit, job.spec.partition) == (240, "short")  # the stored request kept in step
    light = store.get_jobs(job_ids=[job_id], light=True)[0]
    assert (light.spec.name, light.spec.account, light.partition) == ("renamed", "lab2", "short")
    [event] = [e for e in store.events(job_id) if e.op == "update"]
    assert (event.from_state, event.to_state) == (JobState.PENDING, JobState.PENDING)
    assert event.detail == "update Partition=short Account=lab2 TimeLimit=4:00 JobName=renamed"


def test_a_partition_change_is_admitted_as_at_submit_and_nothing_changes_on_refusal(service, store) -> None:
    jobs, _ = service
    job_id = submit(store)
    before = store.get_job(job_id)
    for partition, why in (("nope", "Invalid partition name specified"),
                           ("closed", "Partition closed is DRAIN: it accepts no new jobs"),
                           ("short", "Requested time limit is invalid (missing or exceeds some limit)")):
        assert jobs.update_job(str(job_id), ANA, changes={"partition": partition, "name": "x"}) == [
            f"{why} for job {job_id}"]
    assert jobs.update_job(str(job_id), ANA, changes={"num_tasks": 9}) == [
        f"Requested node configuration is not available for job {job_id}"]
    assert jobs.update_job(str(job_id), ANA, changes={"num_tasks": 0}) == [
        f"Task count specification invalid for job {job_id}"]
    after = store.get_job(job_id)
    assert (after.partition, after.spec.name, after.spec.ntasks, after.time_limit) == (
        before.partition, before.spec.name, before.spec.ntasks, before.time_limit)
    assert [e.op for e in store.events(job_id)] == ["submit"]


def test_a_job_that_asked_no_limit_takes_the_new_partitions_default(service, store) -> None:
    jobs, _ = service
    job_id = submit(store, time_limit=None)
    assert jobs.update_job(str(job_id), ANA, changes={"partition": "short", "num_tasks": 2,
                                                      "min_memory_node": 500}) == []
    job = store.get_job(job_id)
    assert (job.partition, job.time_limit, job.spec.ntasks, job.spec.mem_mb) == ("short", 300, 2, 500)
    assert store.queue(job_ids=[job_id])[0].cpus == 2


def test_who_may_change_a_time_limit(service, store) -> None:
    jobs, agents = service
    pending, running = submit(store), submit(store)
    start(store, running)
    # a user lowers a running job's limit; the agent hears of it
    assert jobs.update_job(str(running), ANA, changes={"time_limit": "-5"}) == []
    assert store.get_job(running).time_limit == 300
    assert agents.limits == [("127.0.0.1:7000", running, 0, 300)]
    # ... but may not raise it; an operator may, past the partition's MaxTime too
    assert jobs.update_job(str(running), ANA, changes={"time_limit": "+1"}) == [
        f"Access/permission denied for job {running}"]
    assert jobs.update_job(str(running), 0, changes={"time_limit": "2:00:00"}) == []
    assert store.get_job(running).time_limit == 7200 and agents.limits[-1][-1] == 7200
    # a user raises a pending job's limit up to its partition's MaxTime, no further
    assert jobs.update_job(str(pending), ANA, changes={"time_limit": "1:00:00"}) == []
    assert jobs.update_job(str(pending), ANA, changes={"time_limit": "UNLIMITED"}) == [
        f"Access/permission denied for job {pending}"]
    assert store.get_job(pending).time_limit == 3600
    assert jobs.update_job(str(pending), ANA, changes={"time_limit": "60"}) == []  # the same: nothing to do
    assert len([e for e in store.events(pending) if e.op == "update"]) == 1


def test_refusals_in_slurms_words(service, store) -> None:
    jobs, _ = service
    running, mine, done = submit(store), submit(store, uid=0), submit(store)
    start(store, running)
    start(store, done)
    store.finish(done, "c000", 0, JobState.COMPLETED, 0, 0, 960.0)
    assert jobs.update_job(str(running), ANA, changes={"partition": "short"}) == [
        f"Job is no longer pending execution for job {running}"]
    assert jobs.update_job(str(running), ANA, changes={"partition": "p"}) == []  # its own: nothing to do
    assert jobs.update_job(str(running), ANA, changes={"account": "lab1"}) == [
        f"Job is no longer pending execution for job {running}"]
    assert jobs.update_job(str(mine), ANA, changes={"name": "x"}) == [f"Invalid user id for job {mine}"]
    assert jobs.update_job(str(done), ANA, changes={"name": "x"}) == [f"Job has already finished for job {done}"]
    assert jobs.update_job("999999", ANA, changes={"name": "x"}) == ["Invalid job id specified for job 999999"]
    assert jobs.update_job("999999_3", ANA, changes={"name": "x"}) == ["999999_3: Invalid job id specified"]
    assert jobs.update_job(str(mine), ANA, changes={"priority": 5}) == [f"Invalid user id for job {mine}"]
    assert jobs.update_job(str(mine), 0, changes={"nice": -5, "priority": 5}) == []
    pending = submit(store)
    assert jobs.update_job(str(pending), ANA, changes={"priority": 5}) == [
        f"Access/permission denied for job {pending}"]
    assert jobs.update_job(str(pending), ANA, changes={"nice": -1}) == [f"Access/permission denied for job {pending}"]
    assert jobs.update_job(str(pending), ANA, changes={"account": "lab9"}) == [
        f"Invalid account or account/partition combination specified for job {pending}"]
    with pytest.raises(SpecError, match="No changes specified"):
        jobs.update_job(str(pending), ANA, changes={})
    assert jobs.update_job(str(running), ANA, changes={"name": "still-mine", "comment": "a note"}) == []  # any time
    job = store.get_job(running)
    assert (job.spec.name, job.spec.comment) == ("still-mine", "a note")
    assert store.get_jobs(job_ids=[running], light=True)[0].spec.comment == "a note"


def test_an_account_change_goes_back_to_the_default_with_an_empty_name(service, store) -> None:
    jobs, _ = service
    job_id = submit(store, account="lab2")
    assert jobs.update_job(str(job_id), ANA, changes={"account": ""}) == []
    assert store.get_job(job_id).spec.account == "lab1"
    assert jobs.update_job(str(job_id), ANA, changes={"account": "LAB2"}) == []  # names are lower case
    assert store.get_job(job_id).spec.account == "lab2"


def test_array_tasks_as_scontrol_reports_them(service, store) -> None:
    jobs, _ = service
    first = submit(store, array=(0, 1, 2, 3))
    tasks = {t.array_task_id: t.job_id for t in store.get_jobs(job_ids=[first])}
    start(store, tasks[1])
    assert jobs.update_job(f"{first}_2", ANA, changes={"partition": "nope"}) == [
        f"{first}_2: Invalid partition name specified"]
    assert jobs.update_job(str(first), ANA, changes={"partition": "short", "time_limit": "2:00"}) == [
        f"{first}_0,2-3: No error", f"{first}_1: Job is no longer pending execution"]
    assert {t.array_task_id: t.partition for t in store.get_jobs(job_ids=[first])} == {
        0: "short", 1: "p", 2: "short", 3: "short"}
    assert jobs.update_job(f"{first}_[2-3]", ANA, changes={"time_limit": "+1"}) == []  # each its own limit
    assert store.get_job(tasks[3]).time_limit == 180 and store.get_job(tasks[0]).time_limit == 120


def test_priority_and_nice_through_the_old_arguments(service, store) -> None:
    jobs, _ = service
    job_id = submit(store)
    assert jobs.update_job(str(job_id), 0, priority=5000, nice=3) == []
    job = store.get_job(job_id)
    assert (job.priority, job.spec.nice) == (5000, 3)
    assert jobs.update_job(str(job_id), 0, "hold") == []  # an action alone: as before
    assert store.get_job(job_id).hold == "admin"


def test_the_store_writes_nothing_once_the_job_left_the_state_that_was_read(store) -> None:
    job_id = submit(store)
    start(store, job_id)
    assert not store.update_fields(job_id, JobState.PENDING, 0, 1000.0, "update Partition=short",
                                   {"partition": "short"}, {"partition": "short"})
    assert store.get_job(job_id).partition == "p" and [e.op for e in store.events(job_id)] == ["submit", "start"]
    with pytest.raises(ValueError, match="updatable"):
        store.update_fields(job_id, JobState.RUNNING, 0, 1000.0, "", {"state": "PENDING"}, {})


def test_a_job_that_started_meanwhile_is_checked_again(service, store, monkeypatch) -> None:
    jobs, _ = service
    job_id = submit(store)
    read = store.jobs_with_ids

    def racing(*args, **kw):  # type: ignore[no-untyped-def]
        found = read(*args, **kw)
        start(store, job_id)  # the scheduler starts it between the service's read and its write
        return found

    monkeypatch.setattr(store, "jobs_with_ids", racing)
    assert jobs.update_job(str(job_id), ANA, changes={"num_tasks": 2}) == [
        f"Job is no longer pending execution for job {job_id}"]
    assert store.get_job(job_id).spec.ntasks == 1


def test_a_pending_jobs_request_changes_where_the_scheduler_reads_it(service, store) -> None:
    jobs, _ = service
    job_id = submit(store, ntasks=2)
    assert jobs.update_job(str(job_id), ANA, changes={
        "num_nodes": "2", "req_nodes": "c[000-001]", "exc_nodes": "", "gres": "gpu:1", "cpus_per_task": 2,
        "min_memory_cpu": 100, "dependency": "", "qos": "Normal", "begin_time": 5000.0, "deadline": 9000.0,
        "workdir": "/var/tmp", "stdout": "o.%j", "stderr": "e.%j", "requeue": 0, "mail_type": "END",
        "mail_user": "ana"}) == []
    spec = store.get_job(job_id).spec
    assert (spec.num_nodes, spec.nodelist, spec.cpus_per_task, spec.mem_per_cpu_mb, spec.mem_mb) == (
        2, "c[000-001]", 2, 100, 0)
    assert (spec.workdir, spec.stdout, spec.stderr, spec.mail_type, spec.mail_user, spec.qos) == (
        "/var/tmp", "o.%j", "e.%j", "END", "ana", "normal")
    assert (spec.begin_time, spec.deadline, str(spec.gres[0])) == (5000.0, 9000.0, "gpu:1")
    queued = store.queue(job_ids=[job_id])[0]
    assert (queued.num_nodes, queued.req_nodes, queued.begin_time, queued.deadline) == (2, "c[000-001]", 5000.0, 9000.0)
    assert (queued.cpus, queued.node_cpus, str(queued.gres[0])) == (4, (2, 2), "gpu:1")  # a task of 2 CPUs a node
    assert store.get_job(job_id).requeue is False
    [event] = [e for e in store.events(job_id) if e.op == "update"]
    assert "num_nodes=2" in event.detail and "nodelist=c[000-001]" in event.detail
    # the same values again: nothing to write
    assert jobs.update_job(str(job_id), ANA, changes={"req_nodes": "c[000-001]", "qos": "normal"}) == []
    assert len([e for e in store.events(job_id) if e.op == "update"]) == 1


def test_request_changes_are_admitted_as_at_submit_all_or_nothing(service, store) -> None:
    jobs, _ = service
    job_id, done = submit(store), submit(store)
    start(store, done)
    store.finish(done, "c000", 0, JobState.COMPLETED, 0, 0, 960.0)
    for changes, why in (
            ({"features": "a100", "name": "x"}, "Invalid feature specification"),
            ({"req_nodes": "c009"}, "Invalid node name specified: c009"),
            ({"gres": "gpu:9"}, "Requested node configuration is not available"),
            ({"gres": "gpu:x:y:z"}, "Invalid generic resource (gres) specification"),
            ({"num_nodes": "3"}, "Node count specification invalid: the partition has 2 usable node(s), the job "
                                 "asks 3"),
            ({"num_nodes": "2-1"}, "Node count specification invalid"),
            ({"qos": "high"}, "Invalid qos specification"),
            ({"dependency": "afterok:999999"}, "Job dependency problem: no job 999999"),
            ({"dependency": "whenever:1"}, None)):
        lines = jobs.update_job(str(job_id), ANA, changes=changes)
        assert len(lines) == 1 and lines[0].endswith(f" for job {job_id}"), (changes, lines)
        if why is not None:
            assert lines[0] == f"{why} for job {job_id}"
    assert jobs.update_job(str(job_id), ANA, changes={"dependency": f"afterany:{done}"}) == []
    assert store.queue(job_ids=[job_id])[0].dependency == f"afterany:{done}"
    spec = store.get_job(job_id).spec
    assert (spec.name, spec.constraint, spec.nodelist, spec.gres, spec.num_nodes) == ("j", "", "", (), 1)


def test_a_running_jobs_request_stays_but_for_requeue_and_mail(service, store) -> None:
    jobs, _ = service
    running = submit(store)
    start(store, running)
    assert jobs.update_job(str(running), ANA, changes={"num_nodes": "2"}) == [
        f"Requested operation not supported on this system for job {running}"]
    for changes in ({"req_nodes": "c001"}, {"workdir": "/"}, {"cpus_per_task": 2}, {"begin_time": 5000.0},
                    {"dependency": "afterok:1"}, {"gres": "gpu:1"}):
        assert jobs.update_job(str(running), ANA, changes=changes) == [
            f"Job is no longer pending execution for job {running}"], changes
    assert jobs.update_job(str(running), ANA, changes={"requeue": 1, "mail_type": "BEGIN,END",
                                                       "mail_user": "ana"}) == []
    job = store.get_job(running)
    assert (job.requeue, job.spec.mail_type, job.spec.mail_user) == (True, "BEGIN,END", "ana")


def test_an_arrays_throttle_on_each_task(service, store) -> None:
    jobs, _ = service
    spec = JobSpec(name="j", user="ana", uid=ANA, gid=ANA, workdir="/tmp", script="#!/bin/sh\n", array="0-2")
    first = store.submit(spec, "p", 600, 900.0, array_ids=(0, 1, 2))
    assert jobs.update_job(str(first), ANA, changes={"throttle": 1}) == []
    tasks = store.get_jobs(job_ids=[first])
    assert {t.spec.array for t in tasks} == {"0-2%1"}
    assert {q.array_max_running for q in store.queue(job_ids=[t.job_id for t in tasks])} == {1}
    assert jobs.update_job(str(first), ANA, changes={"throttle": 0}) == []
    assert {t.spec.array for t in store.get_jobs(job_ids=[first])} == {"0-2"}
