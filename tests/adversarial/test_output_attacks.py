"""Issue 18's output attacks, by mallory on the root cluster while alice goes on working: psrun of huge
binary output arrives byte for byte; a psrun that stops reading holds its own job back, not the
daemons' memory; streams naming alice's job are refused before any wait (through the API) or not
taken at all (an agent takes only its controller's calls). A stream that breaks is a one-line error:
tests/acceptance/test_output_streams.py (it kills a node agent, which this stage's other tests need)."""

from __future__ import annotations

import hashlib
import http.client
import random
import subprocess
import threading
import time

import grpc

from pslurm.auth.transport import METADATA_KEY
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc
from tests.adversarial.conftest import RUNUSER, PeakRss, Stage, User
from tests.adversarial.test_attacks import alice_works, during, report
from tests.conftest import wait_for

MB = 1 << 20
# 50 MiB of pseudo-random bytes, the same each time: every byte value, no line structure
GENERATE = ("import random, sys; r = random.Random(7); w = sys.stdout.buffer\n"
            "for _ in range(50): w.write(r.randbytes(1 << 20))\n")


def psrun(stage: Stage, user: User, *argv: str) -> subprocess.Popen[bytes]:
    """``psrun argv...`` as ``user``, its stdout a pipe of bytes."""
    shim = "import sys; sys.argv[0] = 'psrun'; from pslurm.cli.psrun import main; main()"
    env = {"PATH": "/usr/bin:/bin", "PSLURM_CONF": str(stage.cluster.conf), "PYTHONPATH": str(stage.lib),
           "HOME": str(user.home), "LANG": "C.UTF-8"}
    return subprocess.Popen([RUNUSER, "-u", user.name, "--", stage.python, "-c", shim, *argv], env=env,
                            cwd=user.home, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_50_mb_of_binary_output_arrive_exactly(stage: Stage) -> None:
    """`psrun head -c 10000000 /dev/zero | wc -c` gave 2,449,408 bytes and exit 0: now every byte comes."""
    def run() -> bytes:
        proc = psrun(stage, stage.mallory, stage.python, "-c", GENERATE)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode(errors="replace")
        return out

    out, (submit_s, run_s) = during(stage, run)
    r = random.Random(7)
    want = b"".join(r.randbytes(MB) for _ in range(50))
    report("psrun of 50 MB", received=len(out), alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    assert len(out) == len(want) and hashlib.sha256(out).digest() == hashlib.sha256(want).digest()
    assert stage.nodes_up()


def _daemon_pids(stage: Stage) -> dict[int, str]:
    """The stage's psctld and psd processes: pid -> name."""
    found = {stage.psctld_pid(): "psctld"}
    for pid_file in (stage.cluster.state_dir / "run").glob("psd-*.pid"):
        found[int(pid_file.read_text())] = pid_file.stem
    return found


def test_a_reader_that_stops_holds_its_job_not_the_daemons(stage: Stage) -> None:
    """A psrun job writing 1.5 GB took psd from 42 MB to 1544 MB: now a psrun that stops reading holds
    its job back (as a pipe would) and each daemon holds a few MiB; then every byte arrives."""
    size = 300 * MB
    proc = psrun(stage, stage.mallory, "head", "-c", str(size), "/dev/zero")
    assert proc.stdout is not None
    got = len(proc.stdout.read(64 * 1024))
    daemons = _daemon_pids(stage)
    watched = {name: PeakRss(pid) for pid, name in daemons.items()}
    for rss in watched.values():
        rss.__enter__()
    try:
        submit_s, run_s = alice_works(stage)  # meanwhile, mallory's psrun reads nothing
        time.sleep(2)
    finally:
        for rss in watched.values():
            rss.__exit__()
    while chunk := proc.stdout.read(MB):
        got += len(chunk)
    proc.wait(timeout=120)
    grown = {name: (rss.peak - rss.before) // 1024 for name, rss in watched.items()}
    report("psrun that stops reading 300 MB", daemons_growth_mb=grown, alice_submit_s=f"{submit_s:.3f}",
           alice_psrun_s=f"{run_s:.3f}")
    assert proc.returncode == 0 and got == size
    assert max(grown.values()) < 64  # MB; a step's buffers are 2 x 1 MiB
    assert stage.nodes_up()


def test_streams_naming_alices_job_are_refused_before_any_wait(stage: Stage) -> None:
    """Mallory's 48 streams naming alice's running job, with made-up step ids, held every stream slot of
    the node for 30 s and alice's psrun printed nothing: now the API refuses each at once (403), the
    agent takes no call of hers at all (her credentials are the API's), and alice's psrun works."""
    submitted = stage.run(stage.alice, "psbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 60")
    assert submitted.returncode == 0, submitted.stderr
    job = int(submitted.stdout.strip())
    wait_for(lambda: "RUNNING" in stage.run(stage.alice, "psqueue", "-h", "-j", str(job), "-o", "%T").stdout,
             timeout=30)
    codes: list[int] = []

    def attack() -> None:
        def one(step: int) -> None:
            conn = http.client.HTTPConnection(stage.config.controller_addr, stage.config.rest_port, timeout=60)
            try:
                conn.request("GET", f"/pslurm/v1/job/{job}/step/{step}/output",
                             headers={"X-Pslurm-Cred": stage.credential(stage.mallory)})
                codes.append(conn.getresponse().status)
            finally:
                conn.close()

        threads = [threading.Thread(target=one, args=(step,)) for step in range(1, 49)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

    began = time.monotonic()
    _, (submit_s, run_s) = during(stage, attack)
    took = time.monotonic() - began
    node = stage.config.nodes["c000"]
    agent = pb_grpc.NodeAgentStub(grpc.insecure_channel(f"{node.addr}:{node.port}"))
    try:
        list(agent.StreamOutput(pb.OutputRequest(job_id=job, step_id=0),
                                metadata=((METADATA_KEY, stage.credential(stage.mallory)),), timeout=10))
    except grpc.RpcError as exc:
        direct = exc.code()
    stage.run(stage.alice, "pscancel", str(job))
    report("48 streams on alice's job", codes=sorted(set(codes)), seconds=f"{took:.2f}", direct=direct.name,
           alice_submit_s=f"{submit_s:.3f}", alice_psrun_s=f"{run_s:.3f}")
    assert codes == [403] * 48
    assert direct == grpc.StatusCode.UNAUTHENTICATED
    assert stage.nodes_up()
