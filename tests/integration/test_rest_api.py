"""psctld's HTTP/JSON API, spoken directly with the standard library: slurmrestd's shapes, errors
with their one-line messages and statuses, credentials checked before a body is read, bodies
bounded, other users' secrets kept out, the OpenAPI description, and hundreds of waiting clients
held without a thread each. A controller and one agent as real processes."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pslurm.auth.credential import Identity, create_key, load_key, sign
from pslurm.auth.transport import MAX_REQUEST_BYTES
from pslurm.cluster.local import free_ports
from pslurm.controller.rest.routes import ROUTES
from pslurm.core import restjson
from pslurm.core.jobspec import JobSpec
from tests.conftest import first_error, wait_until_one_node_idle

NOBODY = 65534
WAITERS = 200


class Api:
    """psctld and psd (node c000) as processes, and requests to the API as this process or as nobody."""

    def __init__(self, root: Path, extra_conf: str = "") -> None:
        self.root = root
        ctld, agent, self.port = free_ports(3)
        self.conf = root / "pslurm.conf"
        self.conf.write_text(f"""ClusterName=rest{os.getpid()}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
RestPort={self.port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmdTimeout=10
KillWait=1
NodeName=c000 NodeAddr=127.0.0.1 Port={agent} CPUs=4 RealMemory=1000
PartitionName=debug Nodes=c000 Default=YES
{extra_conf}""")
        create_key(str(root / "pslurm.key"))
        self.key = load_key(str(root / "pslurm.key"))
        self.procs = [self._start("pslurm.controller.app", "psctld"), self._start("pslurm.nodeagent.app", "psd",
                                                                                  "-N", "c000")]

    def _start(self, module: str, name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.root / f"{name}.log", "ab") as log:
            return subprocess.Popen([sys.executable, "-m", module, "-f", str(self.conf), *args], stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def psctld_pid(self) -> int:
        return self.procs[0].pid

    def credential(self, uid: int | None = None) -> str:
        who = Identity(os.getuid(), os.getgid()) if uid is None else Identity(uid, uid)
        return sign(self.key, who, time.time())

    def call(self, method: str, path: str, body: Any = None, uid: int | None = None,
             credential: str | None = None) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {"X-Pslurm-Cred": credential or self.credential(uid), "Content-Type": "application/json"}
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            reply = conn.getresponse()
            return reply.status, json.loads(reply.read())
        finally:
            conn.close()

    def spec(self, **fields: Any) -> JobSpec:
        values: dict[str, Any] = dict(name="t", user="me", uid=os.getuid(), gid=os.getgid(), workdir="/tmp",
                                      script="#!/bin/sh\nsleep 60\n", stdout="/dev/null", hold=True,
                                      environment={"SECRET": "s3cret", "PATH": "/usr/bin:/bin"})
        values.update(fields)
        return JobSpec(**values)

    def submit(self, spec: JobSpec, uid: int | None = None) -> int:
        status, reply = self.call("POST", "/slurm/v0.0.40/job/submit", {"job": restjson.spec_to_json(spec)}, uid)
        assert status == 200 and reply["errors"] == [], reply
        return int(reply["job_id"])

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    found = Api(tmp_path_factory.mktemp("rest"))
    try:
        wait_until_one_node_idle(found.call)
        yield found
    finally:
        found.close()


def test_submit_list_get_and_cancel_in_slurmrestds_shapes(api: Api) -> None:
    job_id = api.submit(api.spec(name="shape"))
    status, reply = api.call("GET", f"/slurm/v0.0.40/job/{job_id}")
    assert status == 200 and reply["errors"] == [] and reply["warnings"] == []
    [job] = reply["jobs"]
    assert job["job_id"] == job_id and job["name"] == "shape" and job["job_state"] == ["PENDING"]
    assert job["partition"] == "debug" and job["user_id"] == os.getuid() and job["submit_time"]["set"]
    assert restjson.job_from_json(job).spec.environment["SECRET"] == "s3cret"
    status, listing = api.call("GET", "/slurm/v0.0.40/jobs")
    assert status == 200 and job_id in [j["job_id"] for j in listing["jobs"]]
    status, mine = api.call("GET", f"/pslurm/v1/jobs?job_id={job_id}&state=PD&light=1")
    assert status == 200 and [j["job_id"] for j in mine["jobs"]] == [job_id]
    assert "script" not in mine["jobs"][0]["pslurm"]["job"]
    status, parts = api.call("GET", "/slurm/v0.0.40/partitions")
    assert status == 200 and [p["name"] for p in parts["partitions"]] == ["debug"]
    assert parts["partitions"][0]["flags"] == ["DEFAULT"]
    status, done = api.call("DELETE", f"/slurm/v0.0.40/job/{job_id}")
    assert status == 200 and done["errors"] == []
    status, again = api.call("DELETE", f"/slurm/v0.0.40/job/{job_id}")
    assert status == 409 and first_error(again) == (f"Kill job error on job id {job_id}: "
                                                    "Job/step already completing or completed")
    status, gone = api.call("GET", f"/slurm/v0.0.40/job/{job_id}")
    assert gone["jobs"][0]["job_state"] == ["CANCELLED"]


def test_errors_carry_the_one_line_messages_and_their_statuses(api: Api) -> None:
    status, reply = api.call("POST", "/slurm/v0.0.40/job/submit", {"job": restjson.spec_to_json(
        api.spec(partition="nopart"))})
    assert status == 400 and "nopart" in first_error(reply) and "\n" not in first_error(reply)
    status, reply = api.call("GET", "/slurm/v0.0.40/job/999999")
    assert status == 404 and first_error(reply) == "Invalid job id specified: 999999"
    status, reply = api.call("DELETE", "/slurm/v0.0.40/job/999999")
    assert status == 404 and first_error(reply) == "Kill job error on job id 999999: Invalid job id specified"
    status, reply = api.call("POST", "/pslurm/v1/jobs/cancel", {"job_specs": ["999999_[5-9]"]})
    assert status == 200 and reply["job_errors"] == ["Kill job error on job id 999999_[5-9]: Invalid job id specified"]
    status, reply = api.call("GET", "/pslurm/v1/jobs?state=bogus")
    assert status == 400 and first_error(reply) == "Invalid job state specified: bogus"
    status, reply = api.call("POST", "/slurm/v0.0.40/node/zz", {"state": ["DRAIN"], "reason": "x"})
    assert status == 404 and first_error(reply) == "Invalid node name specified: zz"
    status, reply = api.call("POST", "/slurm/v0.0.40/node/c000", {"state": ["DRAIN"], "reason": "x"}, uid=NOBODY)
    assert status == 403 and first_error(reply).startswith("Access/permission denied")
    status, reply = api.call("POST", "/slurm/v0.0.40/job/submit", {"job": restjson.spec_to_json(api.spec())},
                             uid=NOBODY)
    assert status == 403 and first_error(reply).startswith("Access/permission denied: the job is for uid")
    status, reply = api.call("POST", "/pslurm/v1/job/update", {"job": "abc", "action": "hold"})
    assert status == 400 and "\n" not in first_error(reply)


def test_a_bad_or_reused_credential_is_refused_before_the_body_is_read(api: Api) -> None:
    status, reply = api.call("GET", "/pslurm/v1/cluster", credential="p2.api.0.0.1.x.forged")
    assert status == 401
    assert first_error(reply) == "authentication failed: credential not signed with this cluster's key"
    used = api.credential()
    assert api.call("GET", "/pslurm/v1/cluster", credential=used)[0] == 200
    status, reply = api.call("GET", "/pslurm/v1/cluster", credential=used)
    assert status == 401 and first_error(reply) == ("authentication failed: credential already used "
                                                    "(credentials are single-use)")
    # a head that announces a body, and no body: the refusal comes at once, without waiting for it
    with socket.create_connection(("127.0.0.1", api.port), timeout=5) as sock:
        sock.sendall(b"POST /slurm/v0.0.40/job/submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000000\r\nX-Pslurm-Cred: bogus\r\n\r\n")
        head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 401 ") and b"authentication failed" in head
    with socket.create_connection(("127.0.0.1", api.port), timeout=5) as sock:  # no credential at all
        sock.sendall(b"GET /slurm/v0.0.40/jobs HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 401 ")


def test_an_oversized_body_is_refused(api: Api) -> None:
    with socket.create_connection(("127.0.0.1", api.port), timeout=5) as sock:
        sock.sendall(f"POST /slurm/v0.0.40/job/submit HTTP/1.1\r\nHost: x\r\nContent-Length: {MAX_REQUEST_BYTES + 1}"
                     f"\r\nX-Pslurm-Cred: {api.credential()}\r\n\r\n".encode())
        head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 413 ") and b"request too large" in head
    # a chunked body that grows past the bound is cut off as it is read
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    try:
        piece = b" " * (1024 * 1024)
        conn.request("POST", "/slurm/v0.0.40/job/submit", body=iter([piece] * 13),
                     headers={"X-Pslurm-Cred": api.credential(), "Transfer-Encoding": "chunked"},
                     encode_chunked=True)
        reply = conn.getresponse()
        assert reply.status == 413 and "request too large" in first_error(json.loads(reply.read()))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server may close before the whole body is sent: refused either way
    finally:
        conn.close()
    assert api.call("GET", "/pslurm/v1/cluster")[0] == 200  # still serving


def test_another_user_sees_no_environment_and_no_script(api: Api) -> None:
    mine = api.submit(api.spec(name="private"))
    status, reply = api.call("GET", f"/pslurm/v1/jobs?job_id={mine}", uid=NOBODY)
    [theirs] = reply["jobs"]
    spec = restjson.job_from_json(theirs).spec
    assert status == 200 and spec.environment == {} and spec.script is None and spec.name == "private"
    assert "s3cret" not in json.dumps(reply)
    assert "s3cret" in json.dumps(api.call("GET", f"/pslurm/v1/jobs?job_id={mine}")[1])  # the owner sees it
    status, reply = api.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": [mine]}, uid=NOBODY)
    assert reply["job_errors"] == [f"Kill job error on job id {mine}: Access/permission denied"]
    status, reply = api.call("GET", f"/pslurm/v1/job/{mine}/output", uid=NOBODY)
    assert status == 403 and first_error(reply) == f"Access/permission denied: job {mine} is not yours"
    api.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": [mine]})


def test_the_openapi_description_lists_every_route(api: Api) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)  # no credential needed
    try:
        conn.request("GET", "/openapi/v3")
        reply = conn.getresponse()
        doc = json.loads(reply.read())
    finally:
        conn.close()
    assert reply.status == 200 and doc["openapi"].startswith("3.")
    listed = {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
    assert listed == {(r.method, r.path) for r in ROUTES}
    assert doc["components"]["securitySchemes"]["pslurm_cred"]["name"] == "X-Pslurm-Cred"


def threads_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_hundreds_of_waiters_are_held_without_a_thread_each(api: Api) -> None:
    job_id = api.submit(api.spec(name="awaited"))
    before = threads_of(api.psctld_pid)
    socks = []
    try:
        for _ in range(WAITERS):
            sock = socket.create_connection(("127.0.0.1", api.port), timeout=30)
            sock.sendall(f"GET /pslurm/v1/job/{job_id}/wait HTTP/1.1\r\nHost: x\r\n"
                         f"X-Pslurm-Cred: {api.credential()}\r\n\r\n".encode())
            socks.append((sock, sock.makefile("rb")))
        for _, reader in socks:  # every waiter has its first update: all are waiting now
            assert reader.readline().startswith(b"HTTP/1.1 200 ")
            while reader.readline() not in (b"\r\n", b""):
                pass
            reader.readline()  # the chunk's size
            assert json.loads(reader.readline())["job"]["job_state"] == ["PENDING"]
        during = threads_of(api.psctld_pid)
        assert during - before < 20, (before, during)
        assert api.call("DELETE", f"/slurm/v0.0.40/job/{job_id}")[0] == 200
        ended = 0
        for _, reader in socks:
            for line in iter(reader.readline, b""):
                if b"job_state" in line:
                    assert json.loads(line)["job"]["job_state"] == ["CANCELLED"]
                    ended += 1
                    break
        assert ended == WAITERS
    finally:
        for sock, reader in socks:
            reader.close()
            sock.close()
