"""Slurm 25.11's REST API (v0.0.41 to v0.0.44) spoken by a client generated from its OpenAPI spec
(PyPI's ``slurmrestapi``), unchanged, with scontrol token's JWT, on a ``pslurm up`` cluster.

For each version every endpoint pslurm serves is called through the generated client (which parses
the reply into its models: types and required fields checked) and once more raw, every field of the
reply checked to be one its version's spec has (tests/slurm_models.py).
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.test_jwt_rest import rest_port, token
from tests.conftest import Cluster
from tests.slurm_models import check, model

slurmrestapi = pytest.importorskip("slurmrestapi")
VERSIONS = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")


class Client:
    """The generated client's two APIs for one version, and its raw replies."""

    def __init__(self, cluster: Cluster, version: str) -> None:
        me = pwd.getpwuid(os.getuid()).pw_name
        config = slurmrestapi.Configuration(host=f"http://127.0.0.1:{rest_port(cluster)}")
        config.api_key["user"], config.api_key["token"] = me, token(cluster, "lifespan=600")
        client = slurmrestapi.ApiClient(config)
        self.slurm, self.db = slurmrestapi.SlurmApi(client), slurmrestapi.SlurmdbApi(client)
        self.version, self.tag = version, version.replace("v", "").replace(".", "")

    def call(self, api: str, name: str, reply: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """``name`` (``get_jobs``) of ``api`` (``slurm`` or ``slurmdb``) through the client, parsed into its
        model; and its raw reply's fields each one that ``reply`` (the model's name) has."""
        method = f"{api}_v{self.tag}_{name}"
        target = self.slurm if api == "slurm" else self.db
        answer = getattr(target, method + "_with_http_info")(*args, **kwargs)  # once: a cancel is no query
        assert answer.status_code == 200 and answer.data is not None and not answer.data.errors, answer
        data: dict[str, Any] = json.loads(answer.raw_data)
        check(self.version, reply, data)
        assert data["meta"]["plugin"]["data_parser"] == f"data_parser/{self.version}"
        return data

    def desc(self, **fields: Any) -> Any:
        return model(self.version, "JobDescMsg").from_dict(fields)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_client_generated_from_slurm_25_11s_spec_works_unchanged(cluster: Cluster, version: str,
                                                                   tmp_path: Path) -> None:
    c = Client(cluster, version)
    [ping] = c.call("slurm", "get_ping", "OpenapiPingArrayResp")["pings"]
    assert ping["pinged"] == "UP"
    stats = c.call("slurm", "get_diag", "OpenapiDiagResp")["statistics"]
    assert stats["jobs_submitted"] >= 0
    nodes = c.call("slurm", "get_nodes", "OpenapiNodesResp")["nodes"]
    assert len(nodes) == 4 and all(n["gres"] == "gpu:2" for n in nodes)
    [part] = c.call("slurm", "get_partitions", "OpenapiPartitionResp")["partitions"]
    assert part["nodes"]["total"] == 4

    desc = c.desc(name=f"gen-{version}", script="#!/bin/sh\nsleep 300\n", hold=True,
                  current_working_directory=str(tmp_path), environment=["PATH=/usr/bin:/bin"],
                  time_limit={"set": True, "infinite": False, "number": 5})
    submit = model(version, "JobSubmitReq")(job=desc)
    job_id = c.call("slurm", "post_job_submit", "OpenapiJobSubmitResponse", submit)["job_id"]
    assert isinstance(job_id, int) and job_id > 0
    [job] = c.call("slurm", "get_job", "OpenapiJobInfoResp", str(job_id))["jobs"]
    assert job["name"] == f"gen-{version}" and job["job_state"] == ["PENDING"] and job["hold"] is True
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 5}
    [listed] = [j for j in c.call("slurm", "get_jobs", "OpenapiJobInfoResp")["jobs"] if j["job_id"] == job_id]
    stable = ("name", "current_working_directory", "group_id", "group_name", "standard_output", "time_limit")
    assert {k: listed[k] for k in stable} == {k: job[k] for k in stable}  # the listing has the whole request
    assert job["current_working_directory"] == str(tmp_path) and job["group_id"] == os.getgid()

    update = c.call("slurm", "post_job", "OpenapiJobPostResponse", str(job_id),
                    c.desc(name=f"renamed-{version}", time_limit={"set": True, "infinite": False, "number": 3}))
    assert update["results"][0]["error_code"] == 0, update
    [job] = c.call("slurm", "get_job", "OpenapiJobInfoResp", str(job_id))["jobs"]
    assert job["name"] == f"renamed-{version}" and job["time_limit"]["number"] == 3

    kill = "OpenapiResp" if version == "v0.0.41" else "OpenapiKillJobResp"
    c.call("slurm", "delete_job", kill, str(job_id))
    [job] = c.call("slurm", "get_job", "OpenapiJobInfoResp", str(job_id))["jobs"]
    assert job["job_state"] == ["CANCELLED"]

    jobs = c.call("slurmdb", "get_jobs", "OpenapiSlurmdbdJobsResp")["jobs"]
    [mine] = [j for j in jobs if j["job_id"] == job_id]
    assert mine["state"]["current"] == ["CANCELLED"] and mine["name"] == f"renamed-{version}"
    assert mine["working_directory"] == str(tmp_path) and mine["time"]["limit"]["number"] == 3
    accounts = c.call("slurmdb", "get_accounts", "OpenapiAccountsResp")["accounts"]
    assert accounts and all(a["name"] and a["organization"] for a in accounts)
    assocs = c.call("slurmdb", "get_associations", "OpenapiAssocsResp")["associations"]
    assert assocs
    users = c.call("slurmdb", "get_users", "OpenapiUsersResp")["users"]
    assert users
