"""Every request is authenticated: a cluster started by root, and a user (nobody) who cannot read its key."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pslurm.core import restjson
from pslurm.core.config import ClusterConfig, load_cluster_config
from pslurm.core.request import JobOptions, build_spec
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc
from tests.conftest import Cluster, ask_credential_as, cli, local_cluster, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a cluster that serves other users runs as root")
NOBODY = 65534


@pytest.fixture(scope="module")
def public() -> Iterator[Cluster]:
    """A root cluster in a directory other users can reach (its config and credential socket)."""
    where = Path(tempfile.mkdtemp(prefix="pslurm-public-"))
    where.chmod(0o755)
    try:
        with local_cluster(where / "cluster", 1, 1) as found:
            yield found
    finally:
        shutil.rmtree(where)


def stubs(cluster: Cluster) -> tuple[pb_grpc.ControllerStub, pb_grpc.NodeAgentStub]:
    """The daemons' gRPC faces: the controller's for its agents, an agent's for the controller."""
    config = load_cluster_config(str(cluster.conf))
    node = next(iter(config.nodes.values()))
    return (pb_grpc.ControllerStub(grpc.insecure_channel(config.controller_target)),
            pb_grpc.NodeAgentStub(grpc.insecure_channel(f"{node.addr}:{node.port}")))


def refused(call, code: grpc.StatusCode) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    return str(err.value.details())


def request(config: ClusterConfig, method: str, path: str, body: Any = None,
            credential: str | None = None) -> tuple[int, dict[str, Any]]:
    """One request to the user API (HTTP/JSON), with ``credential`` in X-Pslurm-Cred (none: no header)."""
    conn = http.client.HTTPConnection(config.controller_addr, config.rest_port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"}
        if credential is not None:
            headers["X-Pslurm-Cred"] = credential
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


def error(reply: dict[str, Any]) -> str:
    return str(reply["errors"][0]["error"])


def test_requests_without_a_good_credential_are_refused(public):
    config = load_cluster_config(str(public.conf))
    status, bare = request(config, "GET", "/pslurm/v1/cluster")
    assert (status, error(bare)) == (401, "authentication failed: request carries no credential")
    forged = "p2.api.0.0.9999999999.00.deadbeef"  # root, signed with no key at all
    status, reply = request(config, "GET", "/pslurm/v1/cluster", credential=forged)
    assert status == 401 and "not signed with this cluster's key" in error(reply)
    # the agents' side (gRPC): a node message, and a launch (a root agent runs a job as whoever it
    # names: nobody may reach it but the controller)
    controller, agent = stubs(public)
    assert refused(lambda: controller.Heartbeat(pb.HeartbeatRequest(name="c000"), timeout=5),
                   grpc.StatusCode.UNAUTHENTICATED) == "authentication failed: request carries no credential"
    assert "not signed with this cluster's key" in refused(
        lambda: controller.RegisterNode(pb.RegisterRequest(name="c000"), metadata=(("x-pslurm-cred", forged),),
                                        timeout=5), grpc.StatusCode.UNAUTHENTICATED)
    refused(lambda: agent.LaunchJob(pb.LaunchRequest(), timeout=5), grpc.StatusCode.UNAUTHENTICATED)


def test_a_user_is_who_the_kernel_says_and_may_touch_only_their_own(public, tmp_path):
    config = load_cluster_config(str(public.conf))
    controller, agent = stubs(public)

    def nobody() -> str:  # a credential is good for one request: a new one for each
        return ask_credential_as(NOBODY, NOBODY, config.auth_socket_path)

    def as_nobody(method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        return request(config, method, path, body, credential=nobody())

    def metadata() -> tuple[tuple[str, str]]:
        return (("x-pslurm-cred", nobody()),)

    shared = Path(tempfile.mkdtemp(prefix="pslurm-nobody-"))
    shared.chmod(0o777)
    try:
        def job_for(uid: int, user: str) -> dict[str, Any]:
            spec = build_spec(JobOptions(output=str(shared / "out")), user=user, uid=uid, gid=NOBODY,
                              cwd=str(shared), environ={"PATH": "/usr/bin:/bin"}, script="#!/bin/sh\nid -u\n",
                              default_name="whoami")
            return {"job": restjson.spec_to_json(spec)}

        # a job for root, sent by nobody: refused, nothing stored
        status, denied = as_nobody("POST", "/slurm/v0.0.40/job/submit", job_for(0, "root"))
        assert status == 403 and error(denied) == ("Access/permission denied: the job is for uid 0 gid 65534, "
                                                   "the request comes from uid 65534 gid 65534")
        # nobody's own job runs as nobody
        status, reply = as_nobody("POST", "/slurm/v0.0.40/job/submit", job_for(NOBODY, "nobody"))
        assert status == 200, reply
        job = int(reply["job_id"])
        wait_for(lambda: (shared / "out").exists() and (shared / "out").read_text().strip() == str(NOBODY))
        # root's job may not be cancelled by nobody; root (the CLI here) may cancel it
        mine = public.run("psbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 60", cwd=tmp_path,
                          check=True).stdout.strip()
        status, reply = as_nobody("POST", "/pslurm/v1/jobs/cancel", {"job_ids": [int(mine)]})
        assert status == 200 and reply["job_errors"] == [f"Kill job error on job id {mine}: Access/permission denied"]
        status, reply = as_nobody("DELETE", f"/slurm/v0.0.40/job/{mine}")
        assert (status, error(reply)) == (403, f"Kill job error on job id {mine}: Access/permission denied")
        assert public.run("pscancel", mine).returncode == 0
        # node updates come only from root (or the user the daemons run as)
        status, reply = as_nobody("POST", "/slurm/v0.0.40/node/c000", {"state": ["DRAIN"], "reason": "x"})
        assert status == 403 and error(reply).startswith("Access/permission denied")
        # and so do node messages (gRPC): a user's credential is made for the API (the only kind the
        # socket gives), not for the controller's gRPC nor for an agent, where it is refused unspent
        node_messages: list[Callable[[], object]] = [
            lambda: controller.Heartbeat(pb.HeartbeatRequest(name="c000"), metadata=metadata(), timeout=5),
            lambda: controller.RegisterNode(pb.RegisterRequest(name="c000", addr="127.0.0.1", port=1, cpus=1),
                                            metadata=metadata(), timeout=5),
            lambda: controller.JobsEnded(pb.JobsEndedRequest(node="c000"), metadata=metadata(), timeout=5),
        ]
        for call in node_messages:
            assert "credential made for api, not for ctld" in refused(call, grpc.StatusCode.UNAUTHENTICATED)
        assert "credential made for api, not for node-c000" in refused(
            lambda: agent.LaunchJob(pb.LaunchRequest(job=pb.Job(job_id=job)), metadata=metadata(), timeout=5),
            grpc.StatusCode.UNAUTHENTICATED)
    finally:
        shutil.rmtree(shared)


def test_a_user_who_can_get_no_credential_gets_one_line(public, tmp_path):
    conf = tmp_path / "pslurm.conf"
    conf.write_text(public.conf.read_text() + "AuthKey=/nonexistent/pslurm.key\nAuthSocket=/nonexistent/pslurm.sock\n")
    proc = cli("psqueue", env={**os.environ, "PSLURM_CONF": str(conf)})
    assert proc.returncode == 1
    assert proc.stderr == ("psqueue: error: cannot authenticate: cannot read the cluster key /nonexistent/pslurm.key: "
                           "No such file or directory, and no credential service at /nonexistent/pslurm.sock: "
                           "No such file or directory\n")
