"""psd --virtual's router: a call goes to the node of the port it was dialled on, once that node's
authenticator admitted its credential (tests/acceptance/test_virtual_cluster.py runs it for real)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from pslurm.auth.credential import Identity, node_audience, sign
from pslurm.auth.credentials import METADATA_KEY
from pslurm.auth.transport import Authenticator
from pslurm.nodeagent.virtual import NoRoute, authority_port, router
from pslurm.proto import pslurm_pb2 as pb

KEY = os.urandom(32)


class Aborted(Exception):
    pass


class Context:
    """What the router reads of a call: its :authority (grpc's call event) and its metadata."""

    def __init__(self, host: bytes, node: str | None) -> None:
        self._rpc_event = SimpleNamespace(call_details=SimpleNamespace(host=host))
        cred = sign(KEY, Identity(0, 0), time.time(), audience=node_audience(node)) if node else "p2.x"
        self._metadata = ((METADATA_KEY, cred),)
        self.code: grpc.StatusCode | None = None

    def invocation_metadata(self) -> Any:
        return self._metadata

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        raise Aborted(details)


class Node:
    def __init__(self, name: str) -> None:
        self.name, self.calls = name, 0

    def SignalJob(self, request: pb.SignalRequest, context: Any) -> pb.Empty:  # noqa: N802
        self.calls += 1
        return pb.Empty()


def test_the_authority_names_the_port() -> None:
    assert authority_port(Context(b"127.0.0.1:7002", None)) == 7002
    assert authority_port(Context(b"[::1]:7003", None)) == 7003
    with pytest.raises(NoRoute):
        authority_port(Context(b"", None))


def test_calls_reach_their_nodes_with_credentials_made_for_them_only() -> None:
    nodes = {7001: Node("c001"), 7002: Node("c002")}
    routes = {port: (Authenticator(KEY, audience=node_audience(n.name)), n) for port, n in nodes.items()}
    servicer = router(routes)
    servicer.SignalJob(pb.SignalRequest(job_id=1), Context(b"127.0.0.1:7002", "c002"))
    assert (nodes[7001].calls, nodes[7002].calls) == (0, 1)
    for context, code in ((Context(b"127.0.0.1:7001", "c002"), grpc.StatusCode.UNAUTHENTICATED),  # c002's
                          (Context(b"127.0.0.1:7009", "c001"), grpc.StatusCode.NOT_FOUND)):
        with pytest.raises(Aborted):
            servicer.SignalJob(pb.SignalRequest(job_id=1), context)
        assert context.code is code
    assert (nodes[7001].calls, nodes[7002].calls) == (0, 1)
