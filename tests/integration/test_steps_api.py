"""Job steps and psalloc's relinquish over the user API, through the client library (pslurm.client.api),
against psctld and psd as processes: create (busy unless overlapping), list, wait, output, cancel,
the listing's steps, relinquish, and the OpenAPI description."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator

import pytest

from pslurm.client import InvalidRequest, NotFound, StepBusy
from pslurm.client.api import Api as Client
from pslurm.core import restjson
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobSpec
from tests.conftest import wait_for, wait_until_one_node_idle
from tests.integration.test_rest_api import Api as Procs


@pytest.fixture(scope="module")
def procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Procs]:
    found = Procs(tmp_path_factory.mktemp("steps"))
    try:
        wait_until_one_node_idle(found.call)
        yield found
    finally:
        found.close()


@pytest.fixture
def client(procs: Procs) -> Iterator[Client]:
    with Client.load(procs.conf) as api:
        yield api


def allocation(client: Client, **kw: object) -> int:
    values: dict[str, object] = dict(name="alloc", user="me", uid=os.getuid(), gid=os.getgid(), workdir="/tmp",
                                     script=None, allocation=True, ntasks=2, time_limit=300)
    values.update(kw)
    job_id = client.submit(restjson.spec_to_json(JobSpec(**values)))  # type: ignore[arg-type]
    for job in client.wait(job_id):
        if job["job_state"] == ["RUNNING"]:
            return job_id
        assert job["job_state"] == ["PENDING"], job
    raise AssertionError("the allocation never ran")


def state(client: Client, job_id: int) -> str:
    [job] = client.jobs(job_ids=[job_id], include_finished=True)
    return str(job["job_state"][0])


def test_steps_in_an_allocation_and_its_relinquish(client: Client) -> None:
    job = allocation(client)
    first = client.create_step(job, {"argv": ["/bin/sh", "-c", "echo hi; sleep 2"], "ntasks": 1})
    assert (first["step_id"], first["nodes"], first["ntasks"], first["name"]) == (0, "c000", 1, "sh")
    with pytest.raises(StepBusy, match="Requested nodes are busy"):
        client.create_step(job, {"argv": ["true"]})
    second = client.create_step(job, {"argv": ["/bin/true"], "overlap": True})
    assert second["step_id"] == 1
    ended = list(client.wait_step(job, 0))
    assert ended[0]["state"] == "RUNNING" and ended[-1]["state"] == "COMPLETED", ended
    wait_for(lambda: client.steps(job)[1]["state"] != "RUNNING", timeout=15)
    assert [s["step_id"] for s in client.steps(job)] == [0, 1]
    third = client.create_step(job, {"argv": ["sleep", "60"]})  # no longer busy
    client.cancel_step(job, third["step_id"])
    wait_for(lambda: client.steps(job)[2]["state"] == "CANCELLED", timeout=15)
    with pytest.raises(InvalidRequest, match="Job/step already completing or completed"):
        client.cancel_step(job, third["step_id"])
    with pytest.raises(NotFound, match="Invalid job id specified"):
        client.cancel_step(job, 99)
    client.relinquish(job, 0)
    wait_for(lambda: state(client, job) == "COMPLETED", timeout=15)
    with pytest.raises(InvalidRequest, match="Job/step already completing or completed"):
        client.create_step(job, {"argv": ["true"]})
    [listed] = client.jobs(job_ids=[job], include_finished=True, steps=True)
    assert [(s["step_id"], s["name"], s["state"]) for s in listed["pslurm"]["steps"]] == [
        (0, "sh", "COMPLETED"), (1, "true", "COMPLETED"), (2, "sleep", "CANCELLED")]
    [plain] = client.jobs(job_ids=[job], include_finished=True)
    assert "steps" not in plain["pslurm"]


def test_a_steps_output_comes_through_the_controller(client: Client) -> None:
    job = allocation(client)
    step = client.create_step(job, {"argv": ["/bin/sh", "-c", "echo out; echo err >&2"], "ntasks": 1})
    out, err = b"", b""
    for line in client.output(job, step["step_id"]):
        out += base64.b64decode(line.get("stdout") or "")
        err += base64.b64decode(line.get("stderr") or "")
        if line.get("done"):
            break
    assert (out, err) == (b"out\n", b"err\n")
    client.relinquish(job, 3)
    wait_for(lambda: state(client, job) == "FAILED", timeout=15)
    [record] = client.jobs(job_ids=[job], include_finished=True)
    assert JobInfo(record).exit_code == 3  # the command's, as salloc's


def test_a_steps_tasks_default_to_the_jobs(client: Client) -> None:
    job = allocation(client)  # -n 2
    step = client.create_step(job, {"argv": ["/bin/sh", "-c", "echo $SLURM_PROCID"], "label": True})
    assert step["ntasks"] == 2
    out = b""
    for line in client.output(job, step["step_id"]):
        out += base64.b64decode(line.get("stdout") or "")
        if line.get("done"):
            break
    assert sorted(out.decode().splitlines()) == ["0: 0", "1: 1"]
    client.relinquish(job)


def test_relinquish_is_for_allocations_and_steps_for_running_jobs(client: Client, procs: Procs) -> None:
    batch = client.submit(restjson.spec_to_json(procs.spec(name="held")))  # held: pending
    with pytest.raises(InvalidRequest, match="not an allocation"):
        client.relinquish(batch)
    with pytest.raises(InvalidRequest, match="Job/step already completing or completed"):
        client.create_step(batch, {"argv": ["true"]})
    with pytest.raises(NotFound):
        client.create_step(999999, {"argv": ["true"]})
    with pytest.raises(InvalidRequest, match="No command given"):
        client.create_step(batch, {"argv": []})
    client.cancel([batch])
    paths = procs.call("GET", "/openapi/v3")[1]["paths"]
    assert {"/pslurm/v1/job/{job_id}/steps", "/pslurm/v1/job/{job_id}/step/{step_id}",
            "/pslurm/v1/job/{job_id}/step/{step_id}/wait", "/pslurm/v1/job/{job_id}/relinquish"} <= set(paths)
