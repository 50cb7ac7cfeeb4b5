"""psacct's step lines (J.batch from the job's record, J.0... from the listing's pslurm.steps) and
pscancel's J.S."""

from __future__ import annotations

import pytest

from pslurm.cli import psacct, pscancel
from pslurm.core import restjson
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState


def job(state: JobState = JobState.COMPLETED, max_rss: bool = False, **kw: object) -> JobInfo:
    values: dict[str, object] = dict(name="train", user="ana", uid=1000, gid=1000, workdir="/w", script="#!/bin/sh\n",
                                     account="lab", ntasks=2)
    values.update(kw)
    record = JobRecord(12, JobSpec(**values), state, submit_time=100.0, start_time=110.0,  # type: ignore[arg-type]
                       end_time=170.0, node="c000", exit_code=0, partition="gpu",
                       max_rss_kb=51200 if max_rss else None)
    data = restjson.job_to_json(record)
    data["pslurm"]["steps"] = [
        {"job_id": 12, "step_id": 0, "name": "hostname", "state": "COMPLETED", "nodes": "c000", "ntasks": 2,
         "cpus": 2, "start_time": 120.0, "end_time": 125.0, "exit_code": 0, "exit_signal": 0},
        {"job_id": 12, "step_id": 1, "name": "python", "state": "FAILED", "nodes": "c000", "ntasks": 1,
         "cpus": 1, "start_time": 130.0, "end_time": 160.0, "exit_code": 3, "exit_signal": 0}]
    return JobInfo(data)


def table(rows: list[object], fmt: str) -> list[str]:
    fields = psacct.account_fields(200.0)
    return psacct.render(rows, psacct.parse_fields(fmt, list(fields)), fields, False, "|", False)


def test_a_batch_jobs_lines_are_its_own_then_batch_then_its_steps():
    lines = table(psacct.with_steps([job()]),
                  "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode,Elapsed,NTasks,NodeList,User")
    assert lines == ["12|train|gpu|lab|2|COMPLETED|0:0|00:01:00||c000|ana",  # NTasks: a step's only
                     "12.batch|batch||lab|2|COMPLETED|0:0|00:01:00|1|c000|",
                     "12.0|hostname||lab|2|COMPLETED|0:0|00:00:05|2|c000|",
                     "12.1|python||lab|1|FAILED|3:0|00:00:30|1|c000|"]


def test_an_allocation_has_no_batch_line_and_a_timed_out_jobs_batch_step_is_cancelled():
    ids = [line.split("|")[0] for line in table(psacct.with_steps([job(script=None, allocation=True)]), "JobID")]
    assert ids == ["12", "12.0", "12.1"]
    states = table(psacct.with_steps([job(JobState.TIMEOUT)]), "JobID,State")
    assert states[:2] == ["12|TIMEOUT", "12.batch|CANCELLED"]
    assert table(psacct.with_steps([job(JobState.PENDING)])[:1], "JobID") == ["12"]


def test_pscancel_prints_scancels_line_for_a_step_it_could_not_cancel(capsys):
    from pslurm.client.errors import NotFound

    class Api:
        def cancel_step(self, job_id: int, step_id: int, signal: int) -> None:
            raise NotFound("Invalid job id specified", remote=True)

    from pslurm.core.jobids import parse_job_id

    assert pscancel._cancel_step(Api(), parse_job_id("14.0"), 0) == [  # type: ignore[arg-type]
        "Kill job error on job step id 14.0: Invalid job id specified"]  # scancel's words for a step


def test_pscancel_reads_a_steps_number_only(capsys):
    with pytest.raises(SystemExit) as exited:  # scancel 22.05: 14.batch is no id it takes (nothing is sent)
        pscancel.main(["14.batch"])
    assert exited.value.code == 1
    assert capsys.readouterr().err == f"{pscancel.PROG}: error: Invalid job id 14.batch\n"


def test_maxrss_is_the_batch_steps_only_in_kib_as_sacct_prints_it():
    measured = job(max_rss=True)
    assert table(psacct.with_steps([measured]), "JobID,MaxRSS") == ["12|", "12.batch|51200K", "12.0|", "12.1|"]
    assert table(psacct.with_steps([job()]), "JobID,MaxRSS") == ["12|", "12.batch|", "12.0|", "12.1|"]
    assert psacct._job_json(measured, 200.0)["max_rss_kb"] == 51200  # --json=pslurm: a number
    assert psacct._job_json(job(), 200.0)["max_rss_kb"] is None


def test_sacct_json_has_the_batch_steps_maxrss_in_bytes():
    from pslurm.cli import slurmjson

    batch, first, _ = psacct.step_lines(job(max_rss=True), job(max_rss=True).own["steps"])
    assert slurmjson.step_json(job(), batch, 200.0)["tres"]["requested"]["max"] == [
        {"type": "mem", "name": None, "id": 2, "count": 51200 * 1024}]
    assert slurmjson.step_json(job(), first, 200.0)["tres"]["requested"]["max"] == []
