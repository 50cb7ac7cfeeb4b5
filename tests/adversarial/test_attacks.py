"""Issue 18's attacks, tried again by an ordinary user (mallory) on a root cluster of two nodes, while
another ordinary user (alice) goes on working: each asserts the safe outcome, that alice's submit and
psrun still work and that both nodes stay up, and prints what it measured (run with -s to see them;
docs/security.md has the figures). The output attacks (psrun of huge output, streams on a node) are
the agent's, in its own tests.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from pslurm.auth.credential import CONTROLLER, Identity, load_key, node_audience, sign
from pslurm.auth.transport import METADATA_KEY
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc
from tests.adversarial.conftest import FD_LIMIT, PeakRss, Stage, User, timed
from tests.conftest import wait_for

TASKS = 1001  # MaxArraySize's default: the largest array a user may submit
SCRIPT_BYTES = 1 << 20


def alice_works(stage: Stage) -> tuple[float, float]:
    """Alice's submit and psrun (each a whole command, as she would wait for it), both working; their times."""
    submitted, submit_s = timed(lambda: stage.run(stage.alice, "psbatch", "--parsable", "-o", "/dev/null", "--wrap",
                                                  "true"))
    assert submitted.returncode == 0, submitted.stderr
    ran, run_s = timed(lambda: stage.run(stage.alice, "psrun", "echo", "hello"))
    assert (ran.returncode, ran.stdout) == (0, "hello\n"), ran.stderr
    return submit_s, run_s


def during(stage: Stage, attack: Any) -> tuple[Any, tuple[float, float]]:
    """Run ``attack()`` in a thread and alice's work meanwhile; the attack's value and alice's times."""
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(value=attack()), daemon=True)
    thread.start()
    time.sleep(0.05)
    times = alice_works(stage)
    thread.join(timeout=600)
    assert "value" in outcome, "the attack did not finish"
    return outcome["value"], times


def call(stage: Stage, user: User, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(stage.config.controller_addr, stage.config.rest_port, timeout=120)
    try:
        conn.request(method, path, body=body, headers={"X-Pslurm-Cred": stage.credential(user),
                                                        "Content-Type": "application/json"})
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def store_bytes(stage: Stage) -> int:
    return sum(p.stat().st_size for p in (stage.cluster.state_dir / "ctld").glob("pslurm.db*"))


def log_bytes(stage: Stage) -> int:
    return (stage.cluster.state_dir / "log" / "psctld.log").stat().st_size


def report(what: str, **figures: Any) -> None:
    print(f"\n[adversarial] {what}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def big_array(stage: Stage) -> int:
    """Mallory's 1 MB script as --array=0-1000, held (so nothing runs); the array's id."""
    script = stage.mallory.home / "big.sh"
    if not script.exists():
        script.write_text("#!/bin/sh\n" + ("# " + "x" * 77 + "\n") * (SCRIPT_BYTES // 80) + "true\n")
        os.chown(script, stage.mallory.uid, stage.mallory.gid)
    done = stage.run(stage.mallory, "psbatch", "--parsable", "-H", "-o", "/dev/null", f"--array=0-{TASKS - 1}",
                     str(script))
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_alice_alone(stage: Stage) -> None:
    """The baseline: alice's times with nobody attacking."""
    alice_works(stage)  # warm
    submit_s, run_s = alice_works(stage)
    report("baseline", alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    assert stage.nodes_up()


def test_a_1mb_script_as_1001_tasks_is_stored_once(stage: Stage) -> None:
    before = store_bytes(stage)
    array, (submit_s, run_s) = during(stage, lambda: timed(lambda: big_array(stage)))
    grew = store_bytes(stage) - before
    report("1 MB x 1001 array", store_growth_mb=f"{grew / 2**20:.2f}", submit_s=f"{array[1]:.2f}",
           alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    assert grew < 5 * SCRIPT_BYTES  # about one script, not 1001 of them (1 GB)
    assert stage.nodes_up()


def test_listing_it_twice_moves_psctld_little(stage: Stage) -> None:
    array = big_array(stage)

    def list_twice() -> tuple[int, int]:
        sizes = []
        for _ in range(2):
            # -j: a held array was never eligible, so sacct's default window (since midnight) leaves it out
            listed = stage.run(stage.mallory, "psacct", "-a", "-X", "-n", "-o", "JobID%30", "-j", str(array))
            assert listed.returncode == 0, listed.stderr
            sizes.append(len(listed.stdout.split()))
        return sizes[0], sizes[1]

    with PeakRss(stage.psctld_pid()) as rss:
        counts, (submit_s, run_s) = during(stage, list_twice)
        status, body = call(stage, stage.mallory, "GET", f"/pslurm/v1/jobs?include_finished=1&job_id={array}")
    report("psacct -a twice", psctld_rss_before_mb=rss.before // 1024, psctld_peak_mb=rss.peak // 1024,
           listing_reply_mb=f"{len(body) / 2**20:.2f}", alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    assert counts == (1, 1) and status == 200  # its pending tasks as one record, as sacct: 14_[0-1000]
    assert len(body) < 3 * SCRIPT_BYTES  # the script once in the reply
    assert rss.peak - rss.before < 100 * 1024  # kB: less than 100 MB (it was 1.7 GB -> 14 GB)
    assert stage.nodes_up()


def test_a_huge_selector_is_answered_from_the_array_alone(stage: Stage) -> None:
    array = big_array(stage)
    log_before = log_bytes(stage)
    (status, body), get_s = timed(lambda: call(stage, stage.mallory, "GET", f"/slurm/v0.0.40/job/{array}_[0-10000000]"))
    assert status == 200 and len(json.loads(body)["jobs"]) == TASKS
    cancelled, cancel_s = timed(lambda: stage.run(stage.mallory, "pscancel", f"{array}_[0-10000000]"))
    assert cancelled.returncode == 0, cancelled.stderr
    (status, body), delete_s = timed(lambda: call(stage, stage.mallory, "DELETE",
                                                  f"/slurm/v0.0.40/job/{array}_[0-10000000]"))
    _, (submit_s, run_s) = during(stage, lambda: None)
    report("selector 1_[0-10000000]", get_s=f"{get_s:.3f}", pscancel_command_s=f"{cancel_s:.3f}",
           delete_again_s=f"{delete_s:.3f}", log_growth_kb=(log_bytes(stage) - log_before) // 1024,
           alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    status, body = call(stage, stage.mallory, "GET", f"/slurm/v0.0.40/job/{array}")
    assert {j["job_state"][0] for j in json.loads(body)["jobs"]} == {"CANCELLED"}
    assert log_bytes(stage) - log_before < 64 * 1024
    assert stage.nodes_up()


FLOOD = """
import socket, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
ok = refused = 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        line = s.makefile("rb").readline()
    if line.startswith(b"error:"):
        refused += 1
    else:
        ok += 1
print(ok, refused)
"""


def test_a_credential_flood_is_held_to_its_rate(stage: Stage) -> None:
    seconds = 6.0
    flood = stage.script(stage.mallory, FLOOD, stage.config.auth_socket_path, str(seconds))
    time.sleep(0.5)
    submit_s, run_s = alice_works(stage)
    out, _ = flood.communicate(timeout=60)
    ok, refused = map(int, out.split())
    report("credential flood", mallory_credentials_per_s=f"{ok / seconds:.0f}",
           mallory_refused_per_s=f"{refused / seconds:.0f}", alice_submit_s=f"{submit_s:.3f}",
           alice_psrun_s=f"{run_s:.3f}")
    assert refused > 0 and ok <= 100 * seconds + 200 + 100  # AuthCredentialRate (100/s), its burst, some slack
    assert stage.nodes_up()


HALF_SENT = """
import select, socket, sys, time
host, port, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
socks = []
for _ in range(count):
    s = socket.create_connection((host, port))
    s.sendall(b"GET /pslurm/v1/cluster HTTP/1.1\\r\\nHost: x\\r\\n")  # and never the rest
    socks.append(s)
time.sleep(seconds)
closed = 0
for s in socks:
    readable, _, _ = select.select([s], [], [], 0)
    if readable:
        try:
            closed += s.recv(1) == b""
        except OSError:
            closed += 1
print(closed)
"""


def test_half_sent_requests_are_cut_and_crowd_nobody_out(stage: Stage) -> None:
    count = 600  # more than psctld may hold at its FD_LIMIT: the oldest idle ones make room
    log_before = log_bytes(stage)
    pid = stage.psctld_pid()
    holder = stage.script(stage.mallory, HALF_SENT, stage.config.controller_addr, str(stage.config.rest_port),
                          str(count), "15")
    time.sleep(2)
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    submit_s, run_s = alice_works(stage)
    out, _ = holder.communicate(timeout=120)
    closed = int(out)
    report("half-sent requests", opened=count, closed_by_psctld_within_15s=closed, psctld_fds_under_flood=fds,
           fd_limit=FD_LIMIT, log_growth_kb=(log_bytes(stage) - log_before) // 1024,
           alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    assert closed == count  # every one cut: by the read timeout (10 s), or to make room
    assert fds < FD_LIMIT - 32
    assert log_bytes(stage) - log_before < 64 * 1024
    assert stage.nodes_up()


def test_bad_input_is_a_4xx_of_one_line(stage: Stage) -> None:
    for method, path, body in (("POST", "/slurm/v0.0.40/job/submit", b"[" * 100_000 + b"]" * 100_000),
                               ("GET", "/slurm/v0.0.40/job/" + "9" * 5000, None),
                               ("DELETE", "/slurm/v0.0.40/job/1_" + "9" * 5000, None),
                               ("POST", "/pslurm/v1/jobs/cancel", b'{"job_ids": [' + b"9" * 5000 + b"]}")):
        status, reply = call(stage, stage.mallory, method, path, body)
        message = json.loads(reply)["errors"][0]["error"]
        assert 400 <= status < 500 and "\n" not in message and len(message) < 200, (path[:40], status, message)
    alice_works(stage)
    assert stage.nodes_up()


def test_a_step_may_not_ask_more_tasks_than_its_cpus(stage: Stage) -> None:
    job = stage.run(stage.mallory, "psbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 60")
    job_id = int(job.stdout.strip())

    def running() -> bool:
        status, body = call(stage, stage.mallory, "GET", f"/slurm/v0.0.40/job/{job_id}")
        return status == 200 and json.loads(body)["jobs"][0]["job_state"] == ["RUNNING"]

    wait_for(running, timeout=60)
    for extra, why in (({"overlap": True}, "More processors requested than permitted"),
                       ({"overlap": True, "overcommit": True}, "Task count specification invalid")):
        body = json.dumps({"argv": ["true"], "ntasks": 100_000, **extra}).encode()
        status, reply = call(stage, stage.mallory, "POST", f"/pslurm/v1/job/{job_id}/steps", body)
        assert status == 400 and json.loads(reply)["errors"][0]["error"].startswith(why)
    assert stage.run(stage.mallory, "pscancel", str(job_id)).returncode == 0
    alice_works(stage)


def test_a_credential_is_good_only_where_it_was_meant_to_go(stage: Stage) -> None:
    """Mallory's credential (the API's) is refused by the agents and the controller's gRPC; one the
    controller made for c000 is refused by c001 and by the controller."""
    nodes = stage.config.nodes
    c000, c001 = (pb_grpc.NodeAgentStub(grpc.insecure_channel(f"{nodes[n].addr}:{nodes[n].port}"))
                  for n in ("c000", "c001"))
    controller = pb_grpc.ControllerStub(grpc.insecure_channel(stage.config.controller_target))
    key = load_key(stage.config.auth_key_path)
    for_c000 = sign(key, Identity(0, 0), time.time(), audience=node_audience("c000"))
    attempts = [
        (lambda: c000.SignalJob(pb.SignalRequest(job_id=1), metadata=((METADATA_KEY, stage.credential(stage.mallory)),),
                                timeout=10), "made for api, not for node-c000"),
        (lambda: c001.SignalJob(pb.SignalRequest(job_id=1), metadata=((METADATA_KEY, for_c000),), timeout=10),
         "made for node-c000, not for node-c001"),
        (lambda: controller.Heartbeat(pb.HeartbeatRequest(name="c000"), metadata=((METADATA_KEY, for_c000),),
                                      timeout=10), f"made for node-c000, not for {CONTROLLER}"),
    ]
    for attempt, words in attempts:
        try:
            attempt()
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAUTHENTICATED and words in (exc.details() or ""), exc.details()
        else:
            raise AssertionError(f"accepted: {words}")
    assert Path(stage.config.auth_key_path).stat().st_mode & 0o077 == 0
    alice_works(stage)
