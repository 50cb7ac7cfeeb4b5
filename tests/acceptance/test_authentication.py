"""Every request is authenticated: a cluster started by root, and a user (nobody) who cannot read its key."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pslurm.core.config import load_cluster_config
from pslurm.core.convert import spec_to_pb
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
    config = load_cluster_config(str(cluster.conf))
    node = next(iter(config.nodes.values()))
    return (pb_grpc.ControllerStub(grpc.insecure_channel(config.controller_target)),
            pb_grpc.NodeAgentStub(grpc.insecure_channel(f"{node.addr}:{node.port}")))


def refused(call, code: grpc.StatusCode) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    return str(err.value.details())


def test_requests_without_a_good_credential_are_refused(public):
    controller, agent = stubs(public)
    bare = refused(lambda: controller.GetCluster(pb.Empty(), timeout=5), grpc.StatusCode.UNAUTHENTICATED)
    assert bare == "authentication failed: request carries no credential"
    forged = (("x-pslurm-cred", "p1.0.0.9999999999.00.deadbeef"),)  # root, signed with no key at all
    assert "not signed with this cluster's key" in refused(
        lambda: controller.GetCluster(pb.Empty(), metadata=forged, timeout=5), grpc.StatusCode.UNAUTHENTICATED)
    # a root agent runs a job as whoever it names: nobody may reach it but the controller
    refused(lambda: agent.LaunchJob(pb.LaunchRequest(), timeout=5), grpc.StatusCode.UNAUTHENTICATED)


def test_a_user_is_who_the_kernel_says_and_may_touch_only_their_own(public, tmp_path):
    controller, agent = stubs(public)
    socket_path = load_cluster_config(str(public.conf)).auth_socket_path

    def nobody() -> tuple[tuple[str, str]]:  # a credential is good for one call: a new one for each
        return (("x-pslurm-cred", ask_credential_as(NOBODY, NOBODY, socket_path)),)

    shared = Path(tempfile.mkdtemp(prefix="pslurm-nobody-"))
    shared.chmod(0o777)
    try:
        def spec_for(uid: int, user: str) -> pb.SubmitRequest:
            spec = build_spec(JobOptions(output=str(shared / "out")), user=user, uid=uid, gid=NOBODY,
                              cwd=str(shared), environ={"PATH": "/usr/bin:/bin"}, script="#!/bin/sh\nid -u\n",
                              default_name="whoami")
            return pb.SubmitRequest(spec=spec_to_pb(spec))

        # a job for root, sent by nobody: refused, nothing stored
        denied = refused(lambda: controller.SubmitJob(spec_for(0, "root"), metadata=nobody(), timeout=5),
                         grpc.StatusCode.PERMISSION_DENIED)
        assert denied == ("Access/permission denied: the job is for uid 0 gid 65534, "
                          "the request comes from uid 65534 gid 65534")
        # nobody's own job runs as nobody
        job = controller.SubmitJob(spec_for(NOBODY, "nobody"), metadata=nobody(), timeout=5).job_id
        wait_for(lambda: (shared / "out").exists() and (shared / "out").read_text().strip() == str(NOBODY))
        # root's job may not be cancelled by nobody; root (the CLI here) may cancel it
        mine = public.run("psbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 60", cwd=tmp_path,
                          check=True).stdout.strip()
        reply = controller.CancelJobs(pb.CancelRequest(job_ids=[int(mine)]), metadata=nobody(), timeout=5)
        assert list(reply.errors) == [f"Kill job error on job id {mine}: Access/permission denied"]
        assert public.run("pscancel", mine).returncode == 0
        # node messages and node updates come only from root (or the user the daemons run as)
        assert "only from an agent" in refused(
            lambda: controller.Heartbeat(pb.HeartbeatRequest(name="c000"), metadata=nobody(), timeout=5),
            grpc.StatusCode.PERMISSION_DENIED)
        refused(lambda: controller.UpdateNode(pb.UpdateNodeRequest(name="c000", state="DRAIN", reason="x"),
                                              metadata=nobody(), timeout=5), grpc.StatusCode.PERMISSION_DENIED)
        assert "only from the controller" in refused(
            lambda: agent.LaunchJob(pb.LaunchRequest(job=pb.Job(job_id=job)), metadata=nobody(), timeout=5),
            grpc.StatusCode.PERMISSION_DENIED)
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
