"""Containment and trust: secrets in files only their owner reads, a private state directory, other
users' jobs without their environment and script, and the wire: unauthenticated requests refused
before they are read (the user API over HTTP, the agents' gRPC), single-use credentials, message
sizes, and psrun's streams bounded so that a flood of them never keeps a node from launching jobs.
A controller and one agent as real processes."""

from __future__ import annotations

import errno
import http.client
import json
import os
import shutil
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from pslurm.auth.credential import API, CONTROLLER, TTL, Identity, create_key, load_key, node_audience, sign
from pslurm.auth.secretfiles import write_private
from pslurm.auth.transport import MAX_REQUEST_BYTES, METADATA_KEY
from pslurm.client import Client, ClientError
from pslurm.cluster.local import free_ports
from pslurm.core import restjson
from pslurm.core.config import load_cluster_config
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.request import JobOptions, build_spec
from pslurm.core.states import JobState
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc
from tests.conftest import ask_credential_as, cli, first_error, run_as, wait_for, wait_until_one_node_idle

NOBODY = 65534
C000 = node_audience("c000")  # the audience of the test cluster's one agent
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another user (nobody) needs root")
BIG = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
CRED_HEADER = "X-Pslurm-Cred"


def conf_text(root: Path, controller_port: int, agent_port: int, extra: str = "",
              state: str = "state", spool: str = "spool") -> str:
    return f"""ClusterName=wire{os.getpid()}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={controller_port}
RestPort={free_ports(1)[0]}
StateSaveLocation={root}/{state}
SlurmdSpoolDir={root}/{spool}
SlurmdTimeout=10
KillWait=1
{extra}NodeName=c000 NodeAddr=127.0.0.1 Port={agent_port} CPUs=4 RealMemory=1000
PartitionName=debug Nodes=c000 Default=YES
"""


def start(module: str, conf: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", module, "-f", str(conf), *args], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Cluster:
    """psctld and psd for node c000, in a directory every user can reach (as a real /etc/pslurm is).
    Users' requests go to psctld's HTTP/JSON API; the daemons' own RPCs (gRPC) to its controller port
    and to the agent."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.controller_port, self.agent_port = free_ports(2)
        self.conf = root / "pslurm.conf"
        self.conf.write_text(conf_text(root, self.controller_port, self.agent_port))
        self.rest_port = load_cluster_config(str(self.conf)).rest_port
        create_key(str(root / "pslurm.key"))
        self.key = load_key(str(root / "pslurm.key"))
        self.state = root / "state"
        # left open by an older pslurm: psctld makes them private at start
        self.state.mkdir(mode=0o755)
        (self.state / "pslurm.db").touch(mode=0o644)
        self.psctld = start("pslurm.controller.app", self.conf, root / "psctld.log")
        self.psd = start("pslurm.nodeagent.app", self.conf, root / "psd.log", "-N", "c000")
        self.controller_channel = grpc.insecure_channel(f"127.0.0.1:{self.controller_port}", options=BIG)
        self.agent_channel = grpc.insecure_channel(f"127.0.0.1:{self.agent_port}")
        self.controller = pb_grpc.ControllerStub(self.controller_channel)  # the agents' side of psctld
        self.agent = pb_grpc.NodeAgentStub(self.agent_channel)

    def me(self, audience: str = API) -> str:
        """A fresh credential for this process (an operator: it runs the daemons), for ``audience``."""
        return sign(self.key, Identity(os.getuid(), os.getgid()), time.time(), audience=audience)

    def nobody(self, audience: str = API) -> str:
        """A fresh credential for nobody (the credential socket gives nobody the API's; one for an agent
        only the key's holder could sign: the agent's own bounds are tried with it)."""
        return sign(self.key, Identity(NOBODY, NOBODY), time.time(), audience=audience)

    def nobody_asking(self) -> str:
        """nobody's credential as nobody gets it: from the credential socket (served by a root psctld)."""
        if os.geteuid() != 0:
            return self.nobody()
        return ask_credential_as(NOBODY, NOBODY, str(self.root / "pslurm.sock"))

    @staticmethod
    def metadata(credential: str) -> tuple[tuple[str, str], ...]:
        """A credential as a gRPC call carries it."""
        return ((METADATA_KEY, credential),)

    def call(self, method: str, path: str, body: Any = None, credential: str | None = None,
             raw: bytes | None = None) -> tuple[int, dict[str, Any]]:
        """One request to the user API; ``credential``: this process's (a fresh one) unless given."""
        conn = http.client.HTTPConnection("127.0.0.1", self.rest_port, timeout=60)
        try:
            headers = {CRED_HEADER: credential or self.me(), "Content-Type": "application/json"}
            if raw is None and body is not None:  # UTF-8 as it is, not \u-escaped: what was sent is what is stored
                raw = json.dumps(body, ensure_ascii=False).encode()
            conn.request(method, path, body=raw, headers=headers)
            reply = conn.getresponse()
            return reply.status, json.loads(reply.read())
        finally:
            conn.close()

    def spec(self, uid: int = -1, hold: bool = True, argv: tuple[str, ...] = (), interactive: bool = False,
             environ: dict[str, str] | None = None, script: str | None = "#!/bin/sh\ntrue\n") -> JobSpec:
        uid = os.getuid() if uid < 0 else uid
        return build_spec(JobOptions(output="/dev/null", hold=hold or None), user="nobody" if uid == NOBODY else "me",
                          uid=uid, gid=NOBODY if uid == NOBODY else os.getgid(), cwd="/tmp",
                          environ=environ if environ is not None else {"PATH": "/usr/bin:/bin"},
                          script=None if argv else script, argv=argv, default_name="t", interactive=interactive)

    def submit(self, spec: JobSpec, credential: str | None = None) -> int:
        status, reply = self.call("POST", "/slurm/v0.0.40/job/submit", {"job": restjson.spec_to_json(spec)},
                                  credential)
        assert status == 200 and reply["errors"] == [], reply
        return int(reply["job_id"])

    def jobs(self, job_ids: list[int], credential: str | None = None) -> dict[int, JobRecord]:
        status, reply = self.call("GET", f"/pslurm/v1/jobs?job_id={','.join(map(str, job_ids))}&include_finished=1",
                                  credential=credential)
        assert status == 200, reply
        return {j.job_id: j for j in (restjson.job_from_json(data) for data in reply["jobs"])}

    def job(self, job_id: int) -> JobRecord:
        return self.jobs([job_id])[job_id]

    def cancel(self, *job_ids: int) -> None:
        status, reply = self.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": list(job_ids)})
        assert status == 200 and reply["job_errors"] == [], reply

    def rss_kb(self) -> int:
        for line in Path(f"/proc/{self.psctld.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def close(self) -> None:
        self.controller_channel.close()
        self.agent_channel.close()
        stop(self.psd, self.psctld)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    where = Path(tempfile.mkdtemp(prefix="pslurm-wire-"))
    where.chmod(0o755)
    found = Cluster(where)
    try:
        wait_until_one_node_idle(found.call)
        yield found
    finally:
        found.close()
        shutil.rmtree(where)


def open_errno(path: Path) -> int:
    try:
        os.close(os.open(path, os.O_RDWR))
    except OSError as exc:
        return exc.errno or -1
    return 0


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


# -- the state directory -----------------------------------------------------------------------------


def test_the_state_directory_and_the_database_are_the_controllers_alone(cluster: Cluster) -> None:
    cluster.submit(cluster.spec())  # a write: the -wal and -shm files exist
    db = cluster.state / "pslurm.db"
    files = [p for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()]
    assert db in files and Path(f"{db}-shm") in files
    assert stat.S_IMODE(cluster.state.stat().st_mode) == 0o700  # was 0755
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o600 for p in files}  # was 0644
    if os.geteuid() == 0:
        for path in files:  # nobody can neither read every job's script nor lock the store
            assert int(run_as(NOBODY, NOBODY, lambda path=path: open_errno(path))) == errno.EACCES  # type: ignore[misc]


# -- the wire ---------------------------------------------------------------------------------------


def http_status_of_garbage(port: int, size: int, credential: str | None) -> int:
    """A submit with a garbage body, declared in full and sent in part (at most 64 KiB): the status
    of the reply, which comes without the rest of the body ever being sent."""
    body = os.urandom(min(size, 64 * 1024))
    head = f"POST /slurm/v0.0.40/job/submit HTTP/1.1\r\nHost: x\r\nContent-Length: {size}\r\n"
    if credential is not None:
        head += f"{CRED_HEADER}: {credential}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        try:
            sock.sendall(head.encode() + b"\r\n" + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed before the part was sent: the reply is there to read
        reply = sock.makefile("rb").readline()
    return int(reply.split()[1])


def test_unauthenticated_garbage_is_refused_unread_and_costs_no_memory(cluster: Cluster) -> None:
    """The agents' gRPC port and the users' HTTP port both: garbage without a good credential is
    refused before it is parsed, and a flood of it leaves psctld as big as it was."""
    raw = cluster.controller_channel.unary_unary("/pslurm.Controller/RegisterNode", request_serializer=None,
                                                 response_deserializer=None)
    forged = "p2.api.0.0.9999999999.00.deadbeef"

    def size_of(i: int) -> int:
        return 4 * 1024 * 1024 if i % 100 == 0 else int.from_bytes(os.urandom(3)) % (256 * 1024)

    def flood(count: int) -> tuple[list[grpc.StatusCode], list[int]]:
        codes = []
        futures = []
        for i in range(count):
            futures.append(raw.future(os.urandom(size_of(i)), metadata=cluster.metadata(forged) if i % 2 else None,
                                      timeout=30))
            if len(futures) == 16:
                codes += [code_of(f.result) for f in futures]
                futures = []
        codes += [code_of(f.result) for f in futures]
        statuses = [http_status_of_garbage(cluster.rest_port, size_of(i), forged if i % 2 else None)
                    for i in range(count)]
        return codes, statuses

    flood(100)  # warm up: threads and buffers that stay
    log_before = (cluster.root / "psctld.log").stat().st_size
    before = cluster.rss_kb()
    codes, statuses = flood(1000)
    after = cluster.rss_kb()
    print(f"\npsctld RSS before/after 1000 unauthenticated garbage requests on each port: {before} kB / {after} kB")
    assert set(codes) == {grpc.StatusCode.UNAUTHENTICATED} and len(codes) == 1000
    assert set(statuses) == {401} and len(statuses) == 1000
    assert after - before < 16 * 1024, f"psctld grew from {before} kB to {after} kB"
    log = (cluster.root / "psctld.log").read_text()[log_before:]
    assert "deserializ" not in log.lower() and "Traceback" not in log
    assert cluster.call("GET", "/pslurm/v1/cluster")[1]["nodes"]  # still serving


def test_a_credential_is_good_for_one_call_and_not_after_it_expires(cluster: Cluster) -> None:
    captured = cluster.me()
    status, reply = cluster.call("GET", "/pslurm/v1/cluster", credential=captured)
    assert status == 200 and reply["nodes"]
    status, replayed = cluster.call("GET", "/pslurm/v1/cluster", credential=captured)
    assert status == 401
    assert first_error(replayed) == "authentication failed: credential already used (credentials are single-use)"
    at_agent = cluster.metadata(cluster.me(C000))  # the agent keeps its own record
    assert cluster.agent.SignalJob(pb.SignalRequest(job_id=999999), metadata=at_agent, timeout=5) == pb.Empty()
    assert code_of(lambda: cluster.agent.SignalJob(pb.SignalRequest(job_id=999999), metadata=at_agent,
                                                   timeout=5)) == grpc.StatusCode.UNAUTHENTICATED
    expired = sign(cluster.key, Identity(os.getuid(), os.getgid()), time.time() - TTL - 5)
    status, late = cluster.call("GET", "/pslurm/v1/cluster", credential=expired)
    assert (status, first_error(late)) == (401, "authentication failed: credential expired")
    late_for_ctld = sign(cluster.key, Identity(os.getuid(), os.getgid()), time.time() - TTL - 5, audience=CONTROLLER)
    with pytest.raises(grpc.RpcError) as late_rpc:  # and so is an agent's message to the controller
        cluster.controller.Heartbeat(pb.HeartbeatRequest(name="c000"), metadata=cluster.metadata(late_for_ctld),
                                     timeout=5)
    assert late_rpc.value.details() == "authentication failed: credential expired"


def test_a_big_job_fits_in_a_message_and_a_bigger_message_is_refused(cluster: Cluster) -> None:
    script = "#!/bin/sh\n" + "#" * (4 * 1024 * 1024 - 64) + "\ntrue\n"  # under max_script_size
    environ = {"PATH": "/usr/bin:/bin", "WIDE": "\U0001f600" * (1024 * 1024 - 64)}  # 1 Mi characters, 4 MiB
    job_id = cluster.submit(cluster.spec(environ=environ, script=script))
    job = cluster.job(job_id)
    assert job.spec.environment["WIDE"] == environ["WIDE"] and job.spec.script == script
    with Client(str(cluster.conf)) as client:  # the client library sends it as UTF-8, not as 12-byte escapes
        same = client.submit(cluster.spec(environ=environ, script=script))
        assert client.job(same).spec.environment["WIDE"] == environ["WIDE"]  # type: ignore[union-attr]
        client.cancel([same])
    # the user API: a body over the bound is refused (413) ...
    status, reply = cluster.call("POST", "/slurm/v0.0.40/job/submit", raw=b" " * (MAX_REQUEST_BYTES + 1))
    assert status == 413 and first_error(reply).startswith("request too large")
    # ... and so is a message over it on the agents' side (gRPC), signed by an operator
    raw = cluster.controller_channel.unary_unary("/pslurm.Controller/JobsEnded", request_serializer=None,
                                                 response_deserializer=None)
    with pytest.raises(grpc.RpcError) as err:
        raw(b"\0" * (13 * 1024 * 1024), metadata=cluster.metadata(cluster.me(CONTROLLER)), timeout=30)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    cluster.cancel(job_id)


def test_another_users_jobs_come_without_environment_and_script(cluster: Cluster) -> None:
    secret_env = {"PATH": "/usr/bin:/bin", "API_TOKEN": "hunter2"}
    batch = cluster.submit(cluster.spec(environ=secret_env, script="#!/bin/sh\necho hunter2\n"))
    command = cluster.submit(cluster.spec(environ=secret_env, argv=("sleep", "1000")))
    theirs = cluster.submit(cluster.spec(uid=NOBODY, environ={"MINE": "1"}), credential=cluster.nobody_asking())

    seen = cluster.jobs([batch, command, theirs], credential=cluster.nobody_asking())
    assert set(seen) == {batch, command, theirs}  # the queue stays visible (squeue)
    for job_id in (batch, command):
        assert seen[job_id].spec.environment == {} and seen[job_id].spec.script is None
    assert seen[command].spec.argv == ("sleep", "1000")  # the command stays: squeue shows it
    assert seen[theirs].spec.environment == {"MINE": "1"}  # one's own job, whole
    assert seen[theirs].spec.script == "#!/bin/sh\ntrue\n"
    status, listing = cluster.call("GET", f"/slurm/v0.0.40/job/{batch}", credential=cluster.nobody_asking())
    assert status == 200 and "hunter2" not in json.dumps(listing)  # slurmrestd's path too
    # a wait's updates, likewise
    conn = http.client.HTTPConnection("127.0.0.1", cluster.rest_port, timeout=30)
    try:
        conn.request("GET", f"/pslurm/v1/job/{batch}/wait", headers={CRED_HEADER: cluster.nobody_asking()})
        reply = conn.getresponse()
        first = json.loads(reply.readline())
    finally:
        conn.close()
    assert reply.status == 200 and first["job"]["job_id"] == batch and "hunter2" not in json.dumps(first)
    operator = cluster.jobs([batch, command, theirs])
    assert operator[batch].spec.environment["API_TOKEN"] == "hunter2"
    assert "hunter2" in (operator[batch].spec.script or "")
    cluster.cancel(batch, command, theirs)


@pytest.mark.parametrize("users", ["one user", "72 users"])
def test_a_flood_of_streams_for_unknown_jobs_does_not_delay_a_launch(cluster: Cluster, users: str) -> None:
    """Streams wait for a launch four at a time per user, sixteen in all; the rest are NOT_FOUND at
    once: launches, and the output of a real psrun job, go through."""
    stop_flood = threading.Event()
    results: list[tuple[grpc.StatusCode, float]] = []
    lock = threading.Lock()

    def stream_unknown(n: int) -> None:
        job_id = 900000 + n
        uid = NOBODY if users == "one user" else 70000 + n
        while not stop_flood.is_set():
            began = time.monotonic()
            metadata = ((METADATA_KEY, sign(cluster.key, Identity(uid, uid), time.time(), audience=C000)),)
            code = code_of(lambda metadata=metadata: list(  # type: ignore[misc]
                cluster.agent.StreamOutput(pb.OutputRequest(job_id=job_id), metadata=metadata, timeout=60)))
            with lock:
                results.append((code, time.monotonic() - began))

    threads = [threading.Thread(target=stream_unknown, args=(n,), daemon=True) for n in range(72)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)  # the flood is on
        began = time.monotonic()
        batch = cluster.submit(cluster.spec(hold=False))
        interactive = cluster.submit(cluster.spec(hold=False, argv=("echo", "through"), interactive=True))
        wait_for(lambda: cluster.job(interactive).state in (JobState.RUNNING, JobState.COMPLETED), timeout=5,
                 interval=0.05)
        chunks = list(cluster.agent.StreamOutput(pb.OutputRequest(job_id=interactive),
                                                 metadata=cluster.metadata(cluster.me(C000)),
                                                 timeout=10))
        wait_for(lambda: cluster.job(batch).state == JobState.COMPLETED, timeout=5, interval=0.05)
        took = time.monotonic() - began
    finally:
        stop_flood.set()
        for thread in threads:
            thread.join(timeout=30)
    assert b"".join(c.stdout for c in chunks) == b"through\n" and chunks[-1].done
    codes = {code for code, _ in results}
    durations = [d for _, d in results]
    print(f"\n{len(results)} streams for unknown jobs, {sorted(c.name for c in codes)}; median "
          f"{statistics.median(durations):.3f} s, longest {max(durations):.2f} s; both jobs done in {took:.2f} s")
    assert took < 5.0
    assert codes <= {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert grpc.StatusCode.NOT_FOUND in codes
    assert statistics.median(durations) < 1.0  # most do not wait at all
    assert max(durations) < 6.0  # LAUNCH_GRACE (2 s) at most, and some slack for a busy machine


def test_an_input_stream_that_never_names_its_job_is_cut_off(cluster: Cluster) -> None:
    def silent() -> Iterator[pb.InputChunk]:
        time.sleep(30)
        yield pb.InputChunk(job_id=1)

    began = time.monotonic()
    at_agent = cluster.metadata(cluster.nobody(C000))
    code = code_of(lambda: cluster.agent.SendInput(silent(), metadata=at_agent, timeout=25))
    assert code == grpc.StatusCode.CANCELLED and time.monotonic() - began < 15  # FIRST_INPUT_WAIT is 10 s


def test_streams_for_a_job_that_is_not_there_answer_not_found(cluster: Cluster) -> None:
    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        list(cluster.agent.StreamOutput(pb.OutputRequest(job_id=987654),
                                        metadata=cluster.metadata(cluster.nobody(C000)), timeout=30))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and time.monotonic() - began < 5
    assert err.value.details() == "Invalid job id specified: no step 987654.0 on node c000"
    with pytest.raises(grpc.RpcError) as err:
        cluster.agent.SendInput(iter([pb.InputChunk(job_id=987654, data=b"x")]),
                                metadata=cluster.metadata(cluster.nobody(C000)), timeout=30)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


# -- secrets: psctld refuses to start -----------------------------------------------------------------


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can reach (pytest's tmp_path is 0700: nothing in it is exposed)."""
    where = Path(tempfile.mkdtemp(prefix="pslurm-secrets-"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where)


def psctld_refusal(conf: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "pslurm.controller.app", "-f", str(conf)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.startswith("psctld: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.strip()


def test_psctld_refuses_a_secret_others_can_read(open_dir: Path) -> None:
    url = "postgresql+psycopg://pslurm:secret@127.0.0.1/pslurm"
    conf = open_dir / "pslurm.conf"
    create_key(str(open_dir / "pslurm.key"))
    controller_port, agent_port = free_ports(2)
    conf.write_text(conf_text(open_dir, controller_port, agent_port, extra=f"DatabaseURL={url}\n"))
    conf.chmod(0o644)
    assert psctld_refusal(conf) == (f"psctld: error: {conf} can be read by other users (mode 0644) and its "
                                    "DatabaseURL holds a password: put the URL in a file only the controller's "
                                    "user can read and name it with DatabaseURLFile=")
    url_file = open_dir / "database.url"
    url_file.write_text(url + "\n")
    url_file.chmod(0o644)
    conf.write_text(conf_text(open_dir, controller_port, agent_port, extra=f"DatabaseURLFile={url_file}\n"))
    assert psctld_refusal(conf) == (f"psctld: error: DatabaseURLFile {url_file} can be read by other users "
                                    f"(mode 0644): chmod 600 {url_file}")
    url_file.chmod(0o600)
    (open_dir / "pslurm.key").chmod(0o644)
    key = open_dir / "pslurm.key"
    assert psctld_refusal(conf) == (f"psctld: error: the cluster key {key} can be read by other users (mode 0644): "
                                    f"chmod 600 {key}")
    assert not (open_dir / "state").exists()  # refused before anything was made


def test_psctld_will_not_take_over_a_shared_directory(open_dir: Path) -> None:
    shared = open_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    conf = open_dir / "pslurm.conf"
    conf.write_text(conf_text(open_dir, *_ports(), state="shared"))
    create_key(str(open_dir / "pslurm.key"))
    assert psctld_refusal(conf) == (f"psctld: error: StateSaveLocation {shared} is a shared directory (mode 1777): "
                                    "give psctld a directory of its own")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


def _ports() -> tuple[int, int]:
    controller_port, agent_port = free_ports(2)
    return controller_port, agent_port


def test_psctld_reads_the_database_url_from_its_file(open_dir: Path, db_url: str) -> None:
    controller_port, agent_port = free_ports(2)
    url_file = open_dir / "database.url"
    write_private(str(url_file), db_url + "\n")
    conf = open_dir / "pslurm.conf"
    # the agent's spool inside the state directory (one host for both): 0711, passable to jobs, not listable
    conf.write_text(conf_text(open_dir, controller_port, agent_port, extra=f"DatabaseURLFile={url_file}\n",
                              spool="state/spool"))
    create_key(str(open_dir / "pslurm.key"))
    psctld = start("pslurm.controller.app", conf, open_dir / "psctld.log")
    client = Client(conf, timeout=10)  # signs with the cluster key beside pslurm.conf
    try:
        def answers() -> bool:
            try:
                return client.cluster().name != ""
            except ClientError:
                return False

        wait_for(answers, timeout=60)
        spec = JobSpec(name="t", user="me", uid=os.getuid(), gid=os.getgid(), workdir="/tmp",
                       script="#!/bin/sh\ntrue\n", hold=True)
        job_id = client.submit(spec)
        assert job_id > 0
        assert stat.S_IMODE((open_dir / "state").stat().st_mode) == 0o711
        log = (open_dir / "psctld.log").read_text()
        if "@" in db_url:  # the URL's password is not logged
            assert db_url not in log
    finally:
        client.close()
        stop(psctld)


def test_pslurm_up_keeps_a_database_password_out_of_pslurm_conf(open_dir: Path, db_url: str) -> None:
    """What `pslurm up` writes passes psctld's check: the URL with its password in a 0600 file."""
    state = open_dir / "cluster"
    up = cli("pslurm", "up", "--nodes", "1", "--gpus-per-node", "0", "--state-dir", str(state), "--db", db_url,
             timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        conf = (state / "pslurm.conf").read_text()
        url_file = state / "database.url"
        if "@" in db_url:  # PostgreSQL, with a password
            assert db_url not in conf and f"DatabaseURLFile={url_file}" in conf
            assert stat.S_IMODE(url_file.stat().st_mode) == 0o600 and url_file.read_text() == db_url + "\n"
        else:
            assert f"DatabaseURL={db_url}" in conf and not url_file.exists()
        assert stat.S_IMODE((state / "ctld").stat().st_mode) == 0o700
        assert stat.S_IMODE((state / "pslurm.key").stat().st_mode) == 0o600
        assert stat.S_IMODE(state.stat().st_mode) & 0o005 == 0o005  # the rest stays open: config, socket, spool
        assert cli("psqueue", env={**os.environ, "PSLURM_CONF": str(state / "pslurm.conf")}).returncode == 0
    finally:
        cli("pslurm", "down", "--state-dir", str(state), timeout=60)


def test_streams_naming_another_users_job_are_refused_before_any_wait(cluster: Cluster) -> None:
    """nobody opens 48 output streams on the agent naming another user's running job, with made-up
    step ids: each is refused at once (ownership before any wait, so none holds a thread), and the
    owner's own psrun job still streams its output."""
    victim = cluster.submit(cluster.spec(hold=False, argv=("sleep", "30"), interactive=True))
    wait_for(lambda: cluster.job(victim).state == JobState.RUNNING, timeout=10, interval=0.05)
    codes: list[grpc.StatusCode] = []

    def attack(step: int) -> None:
        began = time.monotonic()
        code = code_of(lambda: list(cluster.agent.StreamOutput(pb.OutputRequest(job_id=victim, step_id=step),
                                                               metadata=cluster.metadata(cluster.nobody(C000)),
                                                               timeout=60)))
        codes.append(code)
        assert time.monotonic() - began < 10  # no START_WAIT (30 s) for a job that is not theirs

    threads = [threading.Thread(target=attack, args=(step,)) for step in range(1, 49)]
    for thread in threads:
        thread.start()
    try:
        mine = cluster.submit(cluster.spec(hold=False, argv=("echo", "through"), interactive=True))
        wait_for(lambda: cluster.job(mine).state in (JobState.RUNNING, JobState.COMPLETED), timeout=10,
                 interval=0.05)
        chunks = list(cluster.agent.StreamOutput(pb.OutputRequest(job_id=mine),
                                                 metadata=cluster.metadata(cluster.me(C000)), timeout=10))
    finally:
        for thread in threads:
            thread.join(timeout=30)
        cluster.cancel(victim)
    assert b"".join(c.stdout for c in chunks) == b"through\n" and chunks[-1].done
    assert set(codes) == {grpc.StatusCode.PERMISSION_DENIED} and len(codes) == 48
