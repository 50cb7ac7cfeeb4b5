"""Every text field of a job request has a bound (core/textlimits.py), checked at submit and at update."""

from __future__ import annotations

import dataclasses

import pytest

from pslurm.controller.admission import admit
from pslurm.core.clientconf import ConfigError
from pslurm.core.config import parse_slurm_conf
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.jobupdate import update_values
from pslurm.core.states import JobState
from pslurm.core.textlimits import JOB_TEXT_LIMITS, job_text_limits, text_problem

CONF = ("NodeName=c000 NodeAddr=127.0.0.1 Port=7000 CPUs=4 RealMemory=1000\n"
        "PartitionName=p Nodes=c000 Default=YES MaxTime=1:00:00\n")


def _spec(**kw: object) -> JobSpec:
    values: dict[str, object] = {"name": "j", "user": "ana", "uid": 1000, "gid": 1000, "workdir": "/tmp",
                                 "script": "#!/bin/sh\ntrue\n", **kw}
    return JobSpec(**values)  # type: ignore[arg-type]


def test_every_text_field_of_a_request_has_a_bound() -> None:
    texts = {f.name for f in dataclasses.fields(JobSpec) if f.type in ("str", "str | None")}
    assert texts - {"script"} == set(JOB_TEXT_LIMITS)  # the script's bound is script_problem's (4 MiB)


@pytest.mark.parametrize("field", ["mail_user", "mail_type", "submit_line", "submit_host", "command", "stdout",
                                   "workdir", "comment"])
def test_an_11_mb_field_is_refused_at_submit_in_one_line(field: str) -> None:
    what, most = JOB_TEXT_LIMITS[field]
    with pytest.raises(SpecError, match=f"^Invalid job request: {what} is longer than {most} characters$"):
        admit(_spec(**{field: "x" * (11 << 20)}), parse_slurm_conf(CONF))
    assert text_problem(_spec(**{field: "x" * most})) is None  # as long as the bound is fine


@pytest.mark.parametrize("changes, what", [({"mail_user": "m" * 1025}, "the mail user is longer than 1024"),
                                           ({"comment": "c" * 1025}, "the comment is longer than 1024"),
                                           ({"name": "n" * 257}, "the job name is longer than 256")])
def test_an_update_past_a_bound_is_refused_in_one_line(changes: dict[str, object], what: str) -> None:
    job = JobRecord(job_id=14, spec=_spec(time_limit=600), state=JobState.PENDING, partition="p", time_limit=600)
    with pytest.raises(SpecError, match=f"^Invalid job request: {what} characters$"):
        update_values(job, changes, 1000, False, parse_slurm_conf(CONF), lambda spec: 600)


def test_the_submit_lines_bound_is_pslurm_confs() -> None:
    limits = job_text_limits({"maxsubmitlinesize": "100"})
    assert text_problem(_spec(submit_line="x" * 101), limits) == \
        "Invalid job request: the submit line is longer than 100 characters"
    assert job_text_limits({}) is JOB_TEXT_LIMITS
    with pytest.raises(ConfigError, match="MaxSubmitLineSize=lots"):
        job_text_limits({"MaxSubmitLineSize": "lots"})
