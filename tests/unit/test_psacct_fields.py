"""psacct's fields as sacct 22.05 prints them, from records and from the API's JSON views alike."""

from __future__ import annotations

import json

from pslurm.cli.psacct import FIELDS, account_fields, parse_fields, render
from pslurm.core import restjson
from pslurm.core.gres import GresRequest
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobReason, JobState
from pslurm.core.timefmt import format_duration, format_slurm_duration, format_timestamp

SPEC = JobSpec(name="train", user="ana", uid=1000, gid=100, workdir="/w", partition="gpu", ntasks=2,
               cpus_per_task=2, mem_mb=4000, gres=(GresRequest("gpu", None, 2),), account="lab", time_limit=93784)
NOW = 200000.0


def view(record: JobRecord) -> JobInfo:
    return JobInfo(json.loads(json.dumps(restjson.job_to_json(record))))


def records() -> list[JobRecord]:
    task = JobRecord(job_id=7, spec=SPEC, state=JobState.COMPLETED, reason=JobReason.NONE, submit_time=1000.0,
                     start_time=1000.0, end_time=1001.0, node="c000", partition="gpu", time_limit=93784,
                     array_job_id=3, array_task_id=0)
    pending = JobRecord(job_id=8, spec=JobSpec(name="wait", user="ana", uid=1000, gid=100, workdir="/"),
                        state=JobState.PENDING, reason=JobReason.PRIORITY, submit_time=1000.0, partition="gpu")
    running = JobRecord(job_id=9, spec=SPEC, state=JobState.RUNNING, reason=JobReason.NONE, submit_time=1000.0,
                        start_time=NOW - 93784, node="c001", partition="gpu", time_limit=None)
    return [task, pending, running]


def values(job: JobRecord | JobInfo, spec: str) -> list[str]:
    fields = account_fields(NOW)
    return [fields[key](job) for _, key, _ in parse_fields(spec, list(fields))]  # type: ignore[arg-type]


ALL = ("JobID,JobIDRaw,JobName,Partition,Account,State,ExitCode,Elapsed,CPUTime,Timelimit,Submit,Start,End,"
       "NodeList,AllocTRES,ReqTRES,ReqMem,MaxRSS,NTasks,AllocCPUS")


def test_sacct_values_for_an_array_task_a_pending_and_a_running_job() -> None:
    task, pending, running = (view(r) for r in records())
    assert values(task, ALL) == [  # TRES by name, as sacct; NTasks on a step's line only
        "3_0", "7", "train", "gpu", "lab", "COMPLETED", "0:0", "00:00:01", "00:00:04", "1-02:03:04",
        format_timestamp(1000.0), format_timestamp(1000.0), format_timestamp(1001.0), "c000",
        "billing=4,cpu=4,gres/gpu=2,mem=4000M,node=1", "billing=4,cpu=4,gres/gpu=2,mem=4000M,node=1", "4000M", "",
        "", "4"]
    assert values(pending, ALL) == [  # a waiting job's CPUs are those it asks, as sacct's AllocCPUS
        "8", "8", "wait", "gpu", "", "PENDING", "0:0", "00:00:00", "00:00:00", "Partition_Limit",
        format_timestamp(1000.0), "Unknown", "Unknown", "None assigned", "", "billing=1,cpu=1,node=1", "0", "", "",
        "1"]
    assert values(running, "Elapsed,CPUTime,Timelimit,End") == ["1-02:03:04", "4-08:12:16", "UNLIMITED", "Unknown"]


def test_headers_are_sacct_spellings_with_its_default_widths() -> None:
    fields = account_fields(NOW)
    cols = parse_fields("jobid,jobidraw,elapsed,timelimit,nodelist,ntasks,exitcode,submit,maxrss%4", list(fields))
    assert [(h, w) for h, _, w in cols] == [("JobID", -12), ("JobIDRaw", -12), ("Elapsed", 10), ("Timelimit", 10),
                                            ("NodeList", 15), ("NTasks", 8), ("ExitCode", 8), ("Submit", 19),
                                            ("MaxRSS", 4)]
    assert set(FIELDS) <= set(fields) and set(fields) <= set(FIELDS)  # one table: every field has both


def test_table_and_parsable_output() -> None:
    task = records()[0]
    fields = account_fields(NOW)
    cols = parse_fields("JobID,JobIDRaw,Elapsed,State", list(fields))
    assert render([task], cols, fields, True, None, trailing=False) == [
        "JobID        JobIDRaw        Elapsed      State",
        "------------ ------------ ---------- ----------",
        "3_0          7              00:00:01  COMPLETED",
    ]
    assert render([task], cols, fields, True, "|", trailing=True) == ["JobID|JobIDRaw|Elapsed|State|",
                                                                      "3_0|7|00:00:01|COMPLETED|"]
    assert render([task], cols, fields, False, "|", trailing=False) == ["3_0|7|00:00:01|COMPLETED"]
    right = parse_fields("JobID%6,State%-10", list(fields))  # sacct: %N right-aligns, %-N left-aligns
    assert render([task], right, fields, False, None, trailing=False) == ["   3_0 COMPLETED"]


def test_slurm_durations_and_squeue_durations_differ() -> None:
    assert [format_slurm_duration(s) for s in (0, 1, 3700, 93784, None, -5)] == [
        "00:00:00", "00:00:01", "01:01:40", "1-02:03:04", "UNLIMITED", "00:00:00"]
    assert [format_duration(s) for s in (1, 3700, 93784)] == ["0:01", "1:01:40", "1-02:03:04"]  # unchanged


def test_total_cpu_is_the_jobs_cgroup_measure_in_sacct_form() -> None:
    from pslurm.cli.sacct_fields import cpu_time_text

    assert [cpu_time_text(s) for s in (None, 0.0, 0.6625, 59.0, 61.25, 3600.5, 90061.0)] == [
        "00:00:00", "00:00:00", "00:00.662", "00:00:59", "01:01.250", "01:00:00", "1-01:01:01"]
    measured = JobRecord(job_id=11, spec=SPEC, state=JobState.COMPLETED, reason=JobReason.NONE, submit_time=1000.0,
                         start_time=1000.0, end_time=1010.0, node="c000", partition="gpu", total_cpu_seconds=2.5,
                         user_cpu_seconds=2.25, system_cpu_seconds=0.25)
    fields = account_fields(NOW)
    job = view(measured)
    assert job.total_cpu_seconds == 2.5
    assert (fields["totalcpu"](job), fields["usercpu"](job), fields["systemcpu"](job)) == (
        "00:02.500", "00:02.250", "00:00.250")


def test_gpus_asked_for_the_job_are_tres_per_job_not_per_node() -> None:
    from pslurm.cli.jobview import tres_per_job_text, tres_per_node_text
    from pslurm.core.jobdesc import spec_values

    for options, per_node, per_job in (({"gpus": "2", "nodes": "2"}, "N/A", "gres:gpu:2"),
                                       ({"gpus": "a100:1"}, "N/A", "gres:gpu:a100:1"),
                                       ({"gres": "gpu:1"}, "gres:gpu:1", "N/A"),
                                       ({"gpus_per_node": "1"}, "gres:gpu:1", "N/A")):
        values = spec_values(options, user="ana", uid=1000, gid=100, cwd="/w", environ={}, script="#!/bin/sh\n")
        record = JobRecord(job_id=12, spec=JobSpec(**values), state=JobState.PENDING, reason=JobReason.NONE,
                           submit_time=1000.0)
        job = view(record)  # through the API's JSON, as squeue reads it
        assert (tres_per_node_text(job), tres_per_job_text(job)) == (per_node, per_job), options
        assert sum(g.count for g in job.spec.gres) >= 1  # the GPUs are still placed per node
