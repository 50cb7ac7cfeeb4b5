"""What one user may take of the user API (controller/rest/server.py, controller/limits.py): idle,
half-sent and slow requests are cut at the read timeout, connections past the limit take the place of
idle ones, one user's requests and streams in flight are bounded (429, Slurm's words) while another
user's go through, and rl_*'s token bucket. A controller and one agent as real processes, with small
limits set in pslurm.conf."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator

import pytest

from tests.integration.test_rest_api import NOBODY, Api

OTHER = 65533  # another unprivileged user
LIMITS = ("SlurmctldParameters=conmgr_read_timeout=2,conmgr_max_connections=40,rl_enable,rl_bucket_size=200,"
          "rl_refill_rate=50\nMaxRequestsPerUser=2\nMaxStreamsPerUser=3\n")


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    from tests.conftest import wait_until_one_node_idle

    found = Api(tmp_path_factory.mktemp("limits"), LIMITS)
    try:
        wait_until_one_node_idle(found.call)
        yield found
    finally:
        found.close()


def connect(api: Api) -> socket.socket:
    return socket.create_connection(("127.0.0.1", api.port), timeout=30)


def closed_within(sock: socket.socket, seconds: float) -> bytes | None:
    """What the server sent before it closed the connection, or None when it is still open."""
    sock.settimeout(seconds)
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:  # closed with what we sent unread
        pass
    return got


def test_idle_half_sent_and_trickling_requests_are_cut_at_the_read_timeout(limited: Api) -> None:
    idle, half, trickle = connect(limited), connect(limited), connect(limited)
    half.sendall(b"GET /pslurm/v1/cluster HTTP/1.1\r\nHost: x\r\n")  # the head never ends
    trickle.sendall(b"G")
    for _ in range(4):  # a byte a second: every byte in time, the head never
        time.sleep(1)
        try:
            trickle.sendall(b"E")
        except OSError:
            break
    assert closed_within(idle, 10) is not None and closed_within(half, 10) is not None
    assert closed_within(trickle, 10) is not None


def test_a_body_that_does_not_come_is_408_and_the_user_can_go_on(limited: Api) -> None:
    slow = connect(limited)
    slow.sendall(b"POST /slurm/v0.0.40/job/submit HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\nX-Pslurm-Cred: " + limited.credential(NOBODY).encode() + b"\r\n\r\n{\"job\"")
    reply = closed_within(slow, 15)
    assert reply is not None and reply.startswith(b"HTTP/1.1 408") and b"request timeout" in reply
    assert limited.call("GET", "/pslurm/v1/cluster", uid=NOBODY)[0] == 200


def test_the_dashboards_login_is_bounded_as_the_api(limited: Api) -> None:
    """A login body past the form's bound is 413 at once, a chunked one 411, one that does not
    come 408 at the read timeout; each closes its connection."""
    head = b"POST /dashboard/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    big = connect(limited)
    big.sendall(head + b"Content-Length: 12582912\r\n\r\ntoken=")
    reply = closed_within(big, 5)
    assert reply is not None and reply.startswith(b"HTTP/1.1 413")
    chunked = connect(limited)
    chunked.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n7\r\ntoken=x\r\n")
    reply = closed_within(chunked, 5)
    assert reply is not None and reply.startswith(b"HTTP/1.1 411")
    slow = connect(limited)
    slow.sendall(head + b"Content-Length: 100\r\n\r\ntoken=")
    reply = closed_within(slow, 15)
    assert reply is not None and reply.startswith(b"HTTP/1.1 408")


def test_past_the_connection_limit_the_idle_make_room_and_requests_go_through(limited: Api) -> None:
    flood = [connect(limited) for _ in range(120)]  # three times the limit, none sends a whole request
    for sock in flood:
        sock.sendall(b"GET / HTTP/1.1\r\n")
    began = time.monotonic()
    for _ in range(5):
        assert limited.call("GET", "/pslurm/v1/cluster", uid=OTHER)[0] == 200
    took = time.monotonic() - began
    still_open = sum(closed_within(sock, 0.01) is None for sock in flood)
    print(f"\n120 half-sent connections: {still_open} still open, 5 requests of another user in {took:.3f} s")
    assert still_open <= 40
    for sock in flood:
        sock.close()


def test_one_users_requests_in_flight_are_bounded_and_anothers_go_through(limited: Api) -> None:
    held = []
    for _ in range(2):  # two of nobody's submits in flight: their bodies trickle
        sock = connect(limited)
        sock.sendall(b"POST /slurm/v0.0.40/job/submit HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
                     b"X-Pslurm-Cred: " + limited.credential(NOBODY).encode() + b"\r\n\r\n{")
        held.append(sock)
    time.sleep(0.3)
    status, reply = raw_call(limited, "GET", "/pslurm/v1/cluster", NOBODY)
    assert (status, reply["errors"][0]["error"]) == (429, "Rate limit exceeded, please retry momentarily")
    assert limited.call("GET", "/pslurm/v1/cluster", uid=OTHER)[0] == 200
    for sock in held:
        sock.close()
    time.sleep(0.3)
    assert limited.call("GET", "/pslurm/v1/cluster", uid=NOBODY)[0] == 200


def test_one_users_streams_are_bounded(limited: Api) -> None:
    job_id = limited.submit(limited.spec(), uid=None)  # held: its wait stream stays open
    streams = []
    for _ in range(3):
        conn = http.client.HTTPConnection("127.0.0.1", limited.port, timeout=30)
        conn.request("GET", f"/pslurm/v1/job/{job_id}/wait", headers={"X-Pslurm-Cred": limited.credential(NOBODY)})
        assert conn.getresponse().status == 200
        streams.append(conn)
    assert raw_call(limited, "GET", f"/pslurm/v1/job/{job_id}/wait", NOBODY)[0] == 429
    assert limited.call("GET", "/pslurm/v1/cluster", uid=NOBODY)[0] == 200  # requests are counted apart
    for conn in streams:
        conn.close()
    limited.call("DELETE", f"/slurm/v0.0.40/job/{job_id}")


def test_the_token_bucket_refuses_a_burst_past_its_size(limited: Api) -> None:
    statuses = [raw_call(limited, "GET", "/openapi/v3?x", OTHER)[0] for _ in range(5)]  # open: not counted
    assert statuses == [200] * 5
    statuses = [raw_call(limited, "GET", "/slurm/v0.0.40/partitions", OTHER)[0] for _ in range(400)]
    assert 429 in statuses and statuses.count(200) >= 200


def raw_call(api: Api, method: str, path: str, uid: int) -> tuple[int, dict[str, object]]:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    try:
        conn.request(method, path, headers={"X-Pslurm-Cred": api.credential(uid)})
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()
