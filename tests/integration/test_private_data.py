"""PrivateData=jobs,usage,users,accounts (controller/privatedata.py) over real HTTP: another user sees
none of root's jobs in any listing, a single one is 403, the dashboard's queue and job page likewise,
their usage and associations are left out, and metrics are the operators'."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until_one_node_idle
from tests.integration.test_metrics_http import get, session
from tests.integration.test_rest_api import NOBODY, Api


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    found = Api(tmp_path_factory.mktemp("private"), extra_conf="PrivateData=jobs,usage,users,accounts\n")
    try:
        wait_until_one_node_idle(found.call)
        yield found
    finally:
        found.close()


def test_another_users_jobs_are_hidden_everywhere(api: Api) -> None:
    job = api.submit(api.spec(name="rootjob", submit_line="psbatch --export=SECRET=s3cret job.sh"))
    mine = api.submit(api.spec(name="nobodyjob", uid=NOBODY, gid=NOBODY, user="nobody"), uid=NOBODY)
    for path in ("/pslurm/v1/jobs", "/pslurm/v1/jobs?include_finished=1", "/slurm/v0.0.40/jobs",
                 "/pslurm/v1/jobs?collapse_arrays=1"):
        status, reply = api.call("GET", path, uid=NOBODY)
        assert status == 200 and [j["job_id"] for j in reply["jobs"]] == [mine], path
        status, reply = api.call("GET", path)  # root: an operator sees both
        assert {job, mine} <= {j["job_id"] for j in reply["jobs"]}, path
    status, reply = api.call("GET", f"/slurm/v0.0.40/job/{job}", uid=NOBODY)
    assert status == 403 and reply["errors"][0]["error"] == "Access/permission denied"
    assert api.call("GET", f"/pslurm/v1/job/{job}/steps", uid=NOBODY)[0] == 403
    assert api.call("GET", f"/pslurm/v1/job/{job}/wait", uid=NOBODY)[0] == 403
    status, reply = api.call("GET", f"/pslurm/v1/efficiency?job_id={job}", uid=NOBODY)
    assert status == 200 and reply["jobs"] == []
    status, reply = api.call("GET", "/pslurm/v1/priorities", uid=NOBODY)
    assert status == 200 and {r["job_id"] for r in reply["jobs"]} <= {mine}
    theirs = session(api, NOBODY)
    status, _, page = get(api, "/dashboard/queue?state=all", theirs)
    assert status == 200 and "rootjob" not in page and "nobodyjob" in page
    status, _, page = get(api, f"/dashboard/job/{job}", theirs)
    assert status == 403 and "rootjob" not in page
    api.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": [job, mine]})


def test_usage_users_accounts_and_metrics_are_hidden(api: Api) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    status, reply = api.call("GET", "/pslurm/v1/shares", uid=NOBODY)
    assert status == 200 and me not in {r["user"] for r in reply["shares"]}
    status, reply = api.call("GET", "/pslurm/v1/assoc", uid=NOBODY)
    assert status == 200 and {u["name"] for u in reply["users"]} <= {"nobody"}
    assert {a["user"] for a in reply["associations"]} <= {"nobody", ""}
    status, reply = api.call("GET", "/pslurm/v1/usage?start=0&end=4000000000", uid=NOBODY)
    assert status == 200 and {r["user"] for r in reply["assocs"]} <= {"nobody"} and reply["sizes"] == []
    status, _, text = get(api, "/metrics/jobs", {"X-Pslurm-Cred": api.credential(NOBODY)})
    assert status == 403 and "PrivateData" in text
    assert get(api, "/metrics/jobs", {"X-Pslurm-Cred": api.credential()})[0] == 200


def test_pslurm_conf_with_a_flag_slurm_lacks_is_refused(tmp_path: Path) -> None:
    from pslurm.controller.privatedata import private_data
    from pslurm.core.clientconf import ConfigError

    assert private_data({"privatedata": "Jobs, usage"}) == {"jobs", "usage"}
    with pytest.raises(ConfigError, match="PrivateData=jobs,secrets: secrets is not one of"):
        private_data({"PrivateData": "jobs,secrets"})


def test_a_submit_line_is_its_owners_and_the_operators_whatever_private_data_says() -> None:
    from pslurm.controller.rest.access import visible_to
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.states import JobState

    spec = JobSpec(name="j", user="ana", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\n",
                   environment={"SECRET": "s"}, submit_line="psbatch --export=SECRET=s --wrap 'echo s'")
    jobs = [JobRecord(job_id=1, spec=spec, state=JobState.PENDING)]
    [seen] = visible_to(1001, {0}, jobs)
    assert (seen.spec.submit_line, seen.spec.environment, seen.spec.script) == ("", {}, None)
    assert visible_to(1000, {0}, jobs)[0].spec.submit_line == spec.submit_line
    assert visible_to(0, {0}, jobs)[0].spec.submit_line == spec.submit_line
