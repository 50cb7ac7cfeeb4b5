"""1000 concurrent submits to a real controller over gRPC, some malformed, on SQLite and PostgreSQL:
every good one is stored, every bad one fails alone with its own one-line error and no SQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from pslurm.auth.credential import create_key, load_key
from pslurm.auth.transport import signed_metadata
from pslurm.cluster.local import free_ports
from pslurm.controller.app import serve
from pslurm.controller.store import Store
from pslurm.core import convert
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobSpec
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

SUBMITS = 1000


@pytest.fixture
def controller(tmp_path: Path, db_url: str) -> Iterator[tuple[pb_grpc.ControllerStub, bytes, str]]:
    port = free_ports(1)[0]
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"""ClusterName=burst
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
DatabaseURL={db_url}
StateSaveLocation={tmp_path}
NodeName=c000 NodeAddr=127.0.0.1 Port={free_ports(1)[0]} CPUs=8 RealMemory=1000 Gres=gpu:2
PartitionName=gpu Nodes=c000 Default=YES
""")
    create_key(str(tmp_path / "pslurm.key"))
    ready, stop = threading.Event(), threading.Event()
    server = threading.Thread(target=serve, args=(str(conf), ready, stop), daemon=True)
    server.start()
    assert ready.wait(30)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield pb_grpc.ControllerStub(channel), load_key(str(tmp_path / "pslurm.key")), db_url
    finally:
        channel.close()
        stop.set()
        server.join(30)


def request(i: int) -> tuple[pb.SubmitRequest, str | None]:
    """The i-th submit; every 20th is malformed, in one of the ways a raw client could send.
    Returns it and the start of the error it must get (None: it must be accepted)."""
    spec = JobSpec(name=f"j{i}", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   gres=(GresRequest("gpu", None, 1),))
    msg = convert.spec_to_pb(spec)
    if i % 20 != 7:
        return pb.SubmitRequest(spec=msg), None
    kind = (i // 20) % 4
    if kind == 0:
        msg.gres[0].count = -1
        return pb.SubmitRequest(spec=msg), "Invalid generic resource (gres) specification"
    if kind == 1:
        msg.workdir = "/tmp\x00/x"
        return pb.SubmitRequest(spec=msg), "Invalid job request: the working directory contains a NUL byte"
    if kind == 2:
        msg.cpus_per_task = 2**31 - 1  # no node has that many: and its product would not fit a column
        msg.ntasks = 2**31 - 1
        return pb.SubmitRequest(spec=msg), ""
    msg.name = "x" * 300
    return pb.SubmitRequest(spec=msg), "Invalid job request: the job name is longer than 256 characters"


def test_good_submits_all_succeed_beside_bad_ones(controller: tuple[pb_grpc.ControllerStub, bytes, str]):
    stub, key, db_url = controller
    outcomes: dict[int, object] = {}

    def submit(i: int) -> None:
        req, _ = request(i)
        try:
            outcomes[i] = stub.SubmitJob(req, metadata=signed_metadata(key), timeout=60).job_id
        except grpc.RpcError as exc:
            outcomes[i] = exc

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(submit, range(SUBMITS)))
    good = {i: v for i, v in outcomes.items() if request(i)[1] is None}
    bad = {i: v for i, v in outcomes.items() if request(i)[1] is not None}
    assert len(good) == SUBMITS - SUBMITS // 20 and all(isinstance(v, int) for v in good.values()), \
        [v for v in good.values() if not isinstance(v, int)][:3]
    assert len(set(good.values())) == len(good)
    for i, error in bad.items():
        assert isinstance(error, grpc.RpcError), f"submit {i} was accepted"
        details = error.details()
        assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "\n" not in details and details.startswith(request(i)[1] or ""), details
        assert not any(word in details for word in ("SELECT", "INSERT", "UPDATE", "[SQL", "sqlite", "psycopg"))
    store = Store(db_url)
    try:
        assert store.count_jobs() == len(good)
    finally:
        store.close()
