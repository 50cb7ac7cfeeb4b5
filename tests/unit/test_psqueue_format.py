"""psqueue's squeue surface: %L and %b, -O/--Format, -S/--sort, rendered from JobInfo views of the API's JSON."""

from __future__ import annotations

import json

import pytest

from pslurm.cli.jobview import time_left_text
from pslurm.cli.psqueue import job_fields, long_format, render_queue, sort_jobs
from pslurm.core import restjson
from pslurm.core.gres import GresRequest
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobReason, JobState


def view(job_id: int, state: JobState = JobState.PENDING, *, priority: int = 0, partition: str = "gpu",
         gres: tuple[GresRequest, ...] = (), time_limit: int | None = 3600, start: float | None = None,
         end: float | None = None, name: str = "job") -> JobInfo:
    spec = JobSpec(name=name, user="ana", uid=1000, gid=100, workdir="/w", partition=partition, gres=gres)
    record = JobRecord(job_id=job_id, spec=spec, state=state, reason=JobReason.NONE, submit_time=1.0,
                       partition=partition, time_limit=time_limit, priority=priority, start_time=start,
                       end_time=end)
    return JobInfo(json.loads(json.dumps(restjson.job_to_json(record))))


def test_time_left_as_squeue_prints_it() -> None:
    assert time_left_text(view(1)) == "1:00:00"  # pending: the whole limit
    assert time_left_text(view(1, JobState.RUNNING, start=100.0), now=175.0) == "58:45"
    assert time_left_text(view(1, JobState.RUNNING, start=0.0, time_limit=2 * 86400), now=3.0) == "1-23:59:57"
    assert time_left_text(view(1, time_limit=None)) == "UNLIMITED"
    assert time_left_text(view(1, JobState.RUNNING, start=0.0, time_limit=60), now=90.0) == "INVALID"


def test_tres_per_node_in_22_05_form() -> None:
    lines = render_queue("%i %b %L", [view(7, gres=(GresRequest("gpu", None, 1),)),
                                      view(8, gres=(GresRequest("gpu", "a100", 2),)), view(9)], header=True)
    assert lines == ["JOBID TRES_PER_NODE TIME_LEFT", "7 gres:gpu:1 1:00:00", "8 gres:gpu:a100:2 1:00:00",
                     "9 N/A 1:00:00"]


def test_long_format_names_widths_and_suffixes(capsys: pytest.CaptureFixture[str]) -> None:
    fields = job_fields()
    fmt, extra = long_format("JobID,Name:.10,StateCompact:4|,TimeLeft:", fields)
    assert fmt == "%20{_0}%.10{_1}%4{_2}|%{_3}"
    assert [extra[f"_{i}"][0] for i in range(4)] == ["JOBID", "NAME", "ST", "TIME_LEFT"]
    fmt, extra = long_format("JobID,Frobnicate", fields)  # squeue: an error line, the rest printed
    assert fmt == "%20{_0}" and "Invalid job format specification: Frobnicate" in capsys.readouterr().err
    fmt, extra = long_format("JobID:6,Partition:.5,State,TimeLimit:8", fields)
    lines = render_queue(fmt, [view(12)], True, {**fields, **extra})
    assert lines == ["JOBID PARTISTATE               TIME_LIM", "12      gpuPENDING             1:00:00"]


def test_every_long_name_of_squeue_22_05_has_a_field() -> None:
    from tests.conformance.corpus import SQUEUE_FIELDS

    not_job_fields = {"nodes", "resvport", "stepid", "stepname", "stepstate"}  # squeue -s's, or none
    assert {f.lower() for f in SQUEUE_FIELDS} - not_job_fields <= set(job_fields())


def test_sort_keys() -> None:
    a = view(1, JobState.RUNNING, priority=5, start=1.0)
    b = view(2, priority=9)
    c = view(3, priority=7, partition="alpha")
    d = view(4, priority=1)
    ids = lambda jobs: [j.job_id for j in jobs]  # noqa: E731
    fields = job_fields()

    def sort(rows: list[object], spec: str) -> list[int]:
        return ids(sort_jobs(rows, spec, fields, 100.0))  # type: ignore[arg-type]

    assert sort([d, c, b, a], "i") == [1, 2, 3, 4]
    assert sort([a, b, c, d], "-i") == [4, 3, 2, 1]
    assert sort([a, b, c, d], "-t,i") == [1, 2, 3, 4]  # R after PD descending: R first
    assert sort([a, b, c, d], "P,-p") == [3, 2, 1, 4]
    assert sort([a, b, c, d], "P,t,-p") == [3, 2, 4, 1]  # squeue's default: PD before R
    with pytest.raises(ValueError, match="Invalid sort specification: #"):
        sort([a], "#")
