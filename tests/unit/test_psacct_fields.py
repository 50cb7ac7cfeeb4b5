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
