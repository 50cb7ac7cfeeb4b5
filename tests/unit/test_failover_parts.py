"""The standby controller's parts without a cluster: SlurmctldHost= lines in both configurations, which
line a psctld is, the refusal of SQLite, the lease keeper's three ways to end, ping's answer, and the
agent's and the client's way through the controllers in order (real sockets, servers that refuse,
stand by or answer)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest

from pslurm.auth.credential import create_key
from pslurm.client import ControllerUnreachable
from pslurm.client.api import Api
from pslurm.cluster.local import free_ports
from pslurm.controller import failover
from pslurm.controller.store import LeaseLost, LeaseState
from pslurm.core.clientconf import read_client_conf
from pslurm.core.config import ConfigError, parse_slurm_conf, render_slurm_conf
from pslurm.nodeagent.controllers import FailoverStub, controller_stub
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

THREE = """ClusterName=c
SlurmctldHost=head0(10.0.0.1)
SlurmctldHost=head1
SlurmctldHost=head2(10.0.0.3)
SlurmctldTimeout=20
"""


def test_every_slurmctld_host_line_is_read_in_order_by_daemons_and_clients(tmp_path: Path) -> None:
    cfg = parse_slurm_conf(THREE, "pslurm.conf")
    assert cfg.controller_hosts == (("head0", "10.0.0.1"), ("head1", "head1"), ("head2", "10.0.0.3"))
    assert cfg.slurmctld_timeout == 20 and parse_slurm_conf("", "x").slurmctld_timeout == 10
    again = parse_slurm_conf(render_slurm_conf(cfg), "pslurm.conf")
    assert (again.controller_hosts, again.slurmctld_timeout) == (cfg.controller_hosts, 20)
    path = tmp_path / "pslurm.conf"
    path.write_text(THREE)
    client = read_client_conf(str(path))
    assert (client.controller_hosts, client.slurmctld_timeout) == (cfg.controller_hosts, 20)


def test_which_line_a_controller_is(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_slurm_conf(THREE, "pslurm.conf")
    assert failover.this_controller(cfg, "head2") == failover.Me(2, "head2", "10.0.0.3")
    monkeypatch.setattr(failover.socket, "gethostname", lambda: "head1.lab.example")
    assert failover.this_controller(cfg) == failover.Me(1, "head1", "head1")
    monkeypatch.setattr(failover.socket, "gethostname", lambda: "login0")
    with pytest.raises(ConfigError, match=r"this host \(login0\) is none of the SlurmctldHost= lines \(head0, "
                                          r"head1, head2\): start psctld with --host NAME"):
        failover.this_controller(cfg)
    with pytest.raises(ConfigError, match="--host head9 is none of"):
        failover.this_controller(cfg, "head9")
    single = parse_slurm_conf("SlurmctldHost=localhost\n", "x")
    assert failover.this_controller(single) == failover.Me(0, "localhost", "127.0.0.1")
    assert [failover.Me(i, "x", "y").role(n) for i, n in ((0, 2), (1, 2), (1, 3), (2, 3))] == \
        ["primary", "backup", "backup1", "backup2"]


def test_several_controllers_on_sqlite_are_refused_with_the_reason() -> None:
    cfg = parse_slurm_conf(THREE, "pslurm.conf")
    with pytest.raises(ConfigError, match="3 SlurmctldHost= lines need a database every controller reaches.*"
                                          "SQLite is one controller's file"):
        failover.require_shared_database(cfg, "sqlite:////var/spool/pslurm/pslurm.db")
    failover.require_shared_database(cfg, "postgresql+psycopg://db/pslurm")
    failover.require_shared_database(parse_slurm_conf("", "x"), "sqlite:///x.db")  # one controller: fine


class FakeLease:
    """A lease whose renewals answer as told: a handover name, LeaseLost, or a hang."""

    def __init__(self, answer: Any, period: float = 1.0) -> None:
        self.name, self.period, self.answer = "ctl0", period, answer
        self.renewals = 0

    def renew(self) -> str:
        self.renewals += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer == "hang":
            time.sleep(60)
        return str(self.answer)

    def state(self) -> LeaseState:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return LeaseState("ctl1", 7, 3.0, "")


def keep(lease: FakeLease, timeout: float = 2.0) -> tuple[failover.LeaseKeeper, float]:
    end = threading.Event()
    keeper = failover.LeaseKeeper(lease, timeout, end)  # type: ignore[arg-type]
    started = time.monotonic()
    keeper.start()
    assert end.wait(10)
    keeper.join()
    return keeper, time.monotonic() - started


def test_the_keeper_ends_service_when_the_lease_is_lost_handed_over_or_unanswered() -> None:
    lost, _ = keep(FakeLease(LeaseLost("ctl0 no longer holds the controller lease")))
    assert lost.why == "ctl0 no longer holds the controller lease" and not lost.handover
    asked, _ = keep(FakeLease("ctl1"))
    assert asked.handover and asked.why == "ctl1 asked for control (takeover)"
    # a renewal that never answers: service ends on the keeper's own clock, within the lease's period
    hung, took = keep(FakeLease("hang", period=1.0), timeout=2.0)
    assert hung.why.startswith("the database did not answer a renewal") and took < 1.0 + 0.5
    kept = FakeLease("")
    end = threading.Event()
    keeper = failover.LeaseKeeper(kept, 0.5, end)  # type: ignore[arg-type]
    keeper.start()
    assert not end.wait(0.6) and kept.renewals >= 2  # renewed, nothing asked: it serves on
    end.set()
    keeper.join()


def test_ping_says_who_is_active_and_whether_the_database_answers() -> None:
    cfg = parse_slurm_conf("SlurmctldHost=ctl0(127.0.0.1)\nSlurmctldHost=ctl1(127.0.0.2)\n", "x")
    role = failover.Role(cfg, failover.Me(0, "ctl0", "127.0.0.1"), FakeLease(""), frozenset({0}))  # type: ignore[arg-type]
    reply = role.ping()
    assert {k: reply[k] for k in ("name", "role", "mode", "active", "database")} == \
        {"name": "ctl0", "role": "primary", "mode": "standby", "active": "ctl1", "database": "ok"}
    assert abs(reply["time"] - time.time()) < 5
    down = failover.Role(cfg, failover.Me(1, "ctl1", "127.0.0.2"), FakeLease(OSError("refused")),  # type: ignore[arg-type]
                         frozenset({0}))
    assert down.ping()["database"] == "unreachable: OSError" and down.ping()["role"] == "backup"


# -- the client, through the controllers in order --------------------------------------------------


class Answering(BaseHTTPRequestHandler):
    """Answers every request with the server's ``status`` (503: standing by) and its name."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer()

    def _answer(self) -> None:
        server: Any = self.server
        server.seen.append(self.path)
        if server.status == 503:
            body = {"errors": [{"error": f"psctld {server.name} is in standby mode"}]}
        else:
            body = {"job_id": 42, "jobs": [], "name": server.name, "mode": "active", "errors": []}
        data = json.dumps(body).encode()
        self.send_response(server.status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def common_port() -> int:
    """A port free on 127.0.0.1, .2 and .3 alike (every controller listens on the same RestPort)."""
    for _ in range(50):
        port = free_ports(1)[0]
        try:
            for addr in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
                socket.create_server((addr, port)).close()
            return port
        except OSError:
            continue
    raise AssertionError("no common free port")


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """ctl0 on 127.0.0.1 not running, ctl1 on .2 standing by (503), ctl2 on .3 active."""
    port = common_port()
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"SlurmctldHost=ctl0(127.0.0.1)\nSlurmctldHost=ctl1(127.0.0.2)\nSlurmctldHost=ctl2(127.0.0.3)\n"
                    f"RestPort={port}\nSlurmctldTimeout=2\n")
    create_key(str(tmp_path / "pslurm.key"))
    servers = {}
    for name, addr, status in (("ctl1", "127.0.0.2", 503), ("ctl2", "127.0.0.3", 200)):
        server: Any = ThreadingHTTPServer((addr, port), Answering)
        server.name, server.status, server.seen = name, status, []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[name] = server
    yield conf, servers
    for server in servers.values():
        server.shutdown()
        server.server_close()


def test_a_request_goes_past_a_dead_and_a_standing_by_controller_to_the_active_one(controllers: Any) -> None:
    conf, servers = controllers
    with Api.load(conf) as api:
        assert api.submit({"name": "x"}) == 42
        assert servers["ctl1"].seen == ["/slurm/v0.0.40/job/submit"]  # asked, refused: done nothing
        assert servers["ctl2"].seen == ["/slurm/v0.0.40/job/submit"]
        api.jobs()
        assert servers["ctl1"].seen == ["/slurm/v0.0.40/job/submit"]  # the active one is asked first now
        assert api.ping("127.0.0.3")["name"] == "ctl2"


def test_with_no_controller_serving_the_client_waits_one_and_a_half_timeouts(controllers: Any) -> None:
    conf, servers = controllers
    servers["ctl2"].status = 503  # every controller stands by: none takes over within the wait
    with Api.load(conf) as api:
        started = time.monotonic()
        with pytest.raises(ControllerUnreachable, match="127.0.0.1:6817, 127.0.0.2:6817, 127.0.0.3:6817"):
            api.jobs()
        assert time.monotonic() - started >= 1.5 * 2
        assert len(servers["ctl2"].seen) > 2  # asked again and again meanwhile


def test_one_controller_standing_alone_is_not_waited_for(tmp_path: Path) -> None:
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"SlurmctldHost=localhost\nRestPort={free_ports(1)[0]}\nSlurmctldTimeout=30\n")
    create_key(str(tmp_path / "pslurm.key"))
    with Api.load(conf) as api:
        started = time.monotonic()
        with pytest.raises(ControllerUnreachable):
            api.jobs()
        assert time.monotonic() - started < 5


# -- the agent, through the controllers in order ----------------------------------------------------


class Controller(pb_grpc.ControllerServicer):
    def __init__(self, name: str) -> None:
        self.name, self.beats = name, 0

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatReply:  # noqa: N802
        self.beats += 1
        return pb.HeartbeatReply()


def test_the_agent_calls_the_first_controller_that_answers_and_stays_with_it() -> None:
    port = common_port()
    cfg = parse_slurm_conf(f"SlurmctldHost=ctl0(127.0.0.1)\nSlurmctldHost=ctl1(127.0.0.2)\nSlurmctldPort={port}\n",
                           "x")
    stub = controller_stub(cfg)
    assert isinstance(stub, FailoverStub) and stub.targets == [f"127.0.0.1:{port}", f"127.0.0.2:{port}"]
    backup = Controller("ctl1")
    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb_grpc.add_ControllerServicer_to_server(backup, server)
    server.add_insecure_port(f"127.0.0.2:{port}")
    server.start()
    try:
        stub.Heartbeat(pb.HeartbeatRequest(name="c000"), timeout=5)
        stub.Heartbeat(pb.HeartbeatRequest(name="c000"), timeout=5)
        assert backup.beats == 2
    finally:
        server.stop(None)
    with pytest.raises(grpc.RpcError) as caught:  # none answers: the last one's status
        stub.Heartbeat(pb.HeartbeatRequest(name="c000"), timeout=5)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    alone = controller_stub(parse_slurm_conf("SlurmctldHost=localhost\n", "x"))
    assert isinstance(alone, pb_grpc.ControllerStub)


def test_a_node_removed_from_the_configuration_is_no_longer_listed(tmp_path: Path) -> None:
    from pslurm.controller.monitor import NodeMonitor
    from pslurm.controller.store import Store

    two = ("SlurmctldHost=localhost\nNodeName=c[000-001] CPUs=2 RealMemory=100\n"
           "PartitionName=p Nodes=c[000-001] Default=YES\n")
    one = "SlurmctldHost=localhost\nNodeName=c000 CPUs=2 RealMemory=100\nPartitionName=p Nodes=c000 Default=YES\n"
    store = Store(f"sqlite:///{tmp_path}/store.db")
    store.migrate()
    try:
        assert [s.node.name for s in NodeMonitor(parse_slurm_conf(two, "x"), store, lambda: None, time.time).nodes()] \
            == ["c000", "c001"]
        assert [s.node.name for s in NodeMonitor(parse_slurm_conf(one, "x"), store, lambda: None, time.time).nodes()] \
            == ["c000"]
    finally:
        store.close()


def two_controllers(tmp_path: Path, port: int) -> Path:
    """pslurm.conf (and a key) naming ctl0 on 127.0.0.1 and ctl1 on 127.0.0.2, both on RestPort ``port``."""
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"SlurmctldHost=ctl0(127.0.0.1)\nSlurmctldHost=ctl1(127.0.0.2)\nRestPort={port}\n"
                    "SlurmctldTimeout=2\n")
    create_key(str(tmp_path / "pslurm.key"))
    return conf


def read_request(reader: Any) -> None:
    """One HTTP request off ``reader``: its head, then its Content-Length body."""
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    reader.read(length)


def active(addr: str, port: int) -> Any:
    """An Answering server in the active role at ``addr:port``, serving from a thread."""
    server: Any = ThreadingHTTPServer((addr, port), Answering)
    server.name, server.status, server.seen = "ctl1", 200, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def dying_controller(port: int, reads_another: bool) -> threading.Event:
    """ctl0 on 127.0.0.1: answers one submit (job 41) on a kept-alive connection, then dies, having read
    the next request (``reads_another``: done or not, nobody knows) or not; the event is set once it is gone."""
    listener = socket.create_server(("127.0.0.1", port))
    gone = threading.Event()

    def run() -> None:
        conn, _ = listener.accept()
        reader = conn.makefile("rb")
        read_request(reader)
        conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 14\r\n\r\n{"job_id": 41}')
        if reads_another:
            read_request(reader)
        conn.close()
        listener.close()
        gone.set()

    threading.Thread(target=run, daemon=True).start()
    return gone


def test_a_request_whose_controller_died_under_it_is_never_sent_to_another(tmp_path: Path) -> None:
    """The kept-alive connection to ctl0 dies with it, the submit perhaps done: ControllerUnreachable,
    and ctl1 never sees it (a second copy of the job); a GET may go on to ctl1."""
    port = common_port()
    conf = two_controllers(tmp_path, port)
    dying_controller(port, reads_another=True)
    other = active("127.0.0.2", port)
    try:
        with Api.load(conf) as api:
            assert api.submit({"name": "x"}) == 41
            with pytest.raises(ControllerUnreachable):
                api.submit({"name": "y"})
            assert other.seen == []
            api.jobs()
            assert other.seen == ["/pslurm/v1/jobs"]
    finally:
        other.shutdown()
        other.server_close()


def test_a_kept_alive_connection_closed_while_idle_sends_nothing_and_the_next_controller_answers(
        tmp_path: Path) -> None:
    """ctl0 answers, then dies before the next request: its connection, closed while idle, is seen closed
    before anything is sent on it, so the request goes to ctl1 (it cannot have been done twice)."""
    port = common_port()
    conf = two_controllers(tmp_path, port)
    gone = dying_controller(port, reads_another=False)
    other = active("127.0.0.2", port)
    try:
        with Api.load(conf) as api:
            assert api.submit({"name": "x"}) == 41
            assert gone.wait(5)
            time.sleep(0.1)  # its end reaches us
            assert api.submit({"name": "y"}) == 42
            assert other.seen == ["/slurm/v0.0.40/job/submit"]
    finally:
        other.shutdown()
        other.server_close()


def test_show_config_lists_every_controller_as_scontrol(tmp_path: Path) -> None:
    from pslurm.cli.pscontrol import config_pairs

    path = tmp_path / "pslurm.conf"
    path.write_text(THREE)
    from pslurm.core.config import load_cluster_config

    pairs = dict(config_pairs(load_cluster_config(str(path))))
    assert [pairs[f"SlurmctldHost[{i}]"] for i in range(3)] == ["head0(10.0.0.1)", "head1(head1)", "head2(10.0.0.3)"]
    assert pairs["SlurmctldTimeout"] == "20 sec"
