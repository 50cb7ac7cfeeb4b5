"""1000 concurrent submits to a real controller through pslurm.client (its HTTP/JSON API), some
malformed, on SQLite and PostgreSQL: every good one is stored, every bad one fails alone with its
own one-line error and no SQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from pslurm.auth.credential import create_key
from pslurm.client import Client, ClientError, InvalidRequest
from pslurm.cluster.local import free_ports
from pslurm.controller.app import serve
from pslurm.controller.store import Store
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobSpec

SUBMITS = 1000


@pytest.fixture
def controller(tmp_path: Path, db_url: str) -> Iterator[tuple[Client, str]]:
    port, agent_port, rest_port = free_ports(3)
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"""ClusterName=burst
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
RestPort={rest_port}
DatabaseURL={db_url}
StateSaveLocation={tmp_path}
NodeName=c000 NodeAddr=127.0.0.1 Port={agent_port} CPUs=8 RealMemory=1000 Gres=gpu:2
PartitionName=gpu Nodes=c000 Default=YES
""")
    create_key(str(tmp_path / "pslurm.key"))
    ready, stop = threading.Event(), threading.Event()
    server = threading.Thread(target=serve, args=(str(conf), ready, stop), daemon=True)
    server.start()
    assert ready.wait(30)
    client = Client(conf, timeout=60)
    try:
        yield client, db_url
    finally:
        client.close()
        stop.set()
        server.join(30)


def request(i: int) -> tuple[JobSpec, str | None]:
    """The i-th submit; every 20th is malformed, in one of the ways a raw client could send.
    Returns it and the start of the error it must get (None: it must be accepted)."""
    spec = JobSpec(name=f"j{i}", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n",
                   gres=(GresRequest("gpu", None, 1),))
    if i % 20 != 7:
        return spec, None
    kind = (i // 20) % 4
    if kind == 0:
        return replace(spec, gres=(GresRequest("gpu", None, -1),)), "Invalid generic resource (gres) specification"
    if kind == 1:
        return (replace(spec, workdir="/tmp\x00/x"),
                "Invalid job request: the working directory contains a NUL byte")
    if kind == 2:  # no node has that many: and its product would not fit a column
        return replace(spec, cpus_per_task=2**31 - 1, ntasks=2**31 - 1), ""
    return replace(spec, name="x" * 300), "Invalid job request: the job name is longer than 256 characters"


def test_good_submits_all_succeed_beside_bad_ones(controller: tuple[Client, str]):
    client, db_url = controller
    outcomes: dict[int, object] = {}

    def submit(i: int) -> None:
        spec, _ = request(i)
        try:
            outcomes[i] = client.submit(spec)
        except ClientError as exc:
            outcomes[i] = exc

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(submit, range(SUBMITS)))
    good = {i: v for i, v in outcomes.items() if request(i)[1] is None}
    bad = {i: v for i, v in outcomes.items() if request(i)[1] is not None}
    assert len(good) == SUBMITS - SUBMITS // 20 and all(isinstance(v, int) for v in good.values()), \
        [v for v in good.values() if not isinstance(v, int)][:3]
    assert len(set(good.values())) == len(good)
    for i, error in bad.items():
        assert isinstance(error, InvalidRequest) and error.remote, f"submit {i}: {error!r}"
        details = str(error)
        assert "\n" not in details and details.startswith(request(i)[1] or ""), details
        assert not any(word in details for word in ("SELECT", "INSERT", "UPDATE", "[SQL", "sqlite", "psycopg"))
    store = Store(db_url)
    try:
        assert store.count_jobs() == len(good)
    finally:
        store.close()
