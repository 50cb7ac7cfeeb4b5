"""A failover drill on real processes: two controllers on one PostgreSQL, two agents, a loop that
submits while jobs run, and a disruption of the active controller (kill -9, its database connection
cut, a graceful takeover). What it measures is what tests/integration/test_failover.py asserts and
bench/failover_bench.py prints.

The primary, ``ctl0`` on 127.0.0.1, reaches PostgreSQL through :class:`Proxy`, a TCP relay in this
process that can cut the connection (the packets stop: no error reaches either side, as in a network
partition) without touching the process; ``ctl1`` on 127.0.0.2 reaches it directly. Each job writes
``start JOB RESTARTS`` when it starts and ``end JOB`` when it ends to one file, so a job that ran
twice, or whose run was lost, shows there.
"""

from __future__ import annotations

import os
import pwd
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pslurm.auth.credential import create_key
from pslurm.client import Client, ClientError
from pslurm.cluster.local import free_ports
from pslurm.controller.store import Store
from pslurm.core.jobspec import JobSpec
from pslurm.core.states import JobState

JOB_SECONDS = 2.0  # each job's length
SUBMITTERS = 4  # threads submitting at once, each with a client of its own
SUBMIT_GAP = 0.2  # seconds between one thread's submits
CONTROLLERS = (("ctl0", "127.0.0.1"), ("ctl1", "127.0.0.2"))


class Proxy:
    """A TCP relay from a loopback port to ``target``; :meth:`cut` stops every byte both ways (and
    holds new connections unanswered), :meth:`heal` drops the held connections and relays again."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._cut = threading.Event()
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, name="proxy", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(client)
            if self._cut.is_set():
                continue  # held, unanswered
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.append(server)
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while True:
                ready, _, _ = select.select(list(peers), [], [], 0.1)
                if self._cut.is_set():
                    time.sleep(0.1)  # the bytes wait in the kernel, unread: nothing arrives either side
                    continue
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):  # ValueError: healed, the sockets closed under select
            return
        finally:
            a.close()
            b.close()

    def cut(self) -> None:
        self._cut.set()

    def heal(self) -> None:
        with self._lock:
            held, self._open = self._open, []
        for sock in held:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.heal()


class HaCluster:
    """ctl0 and ctl1 (SlurmctldTimeout=``timeout``) and agents c000 and c001 as processes, in ``tmp``."""

    def __init__(self, tmp: Path, db_url: str, timeout: int = 10) -> None:
        from sqlalchemy.engine import make_url

        self.tmp, self.db_url, self.timeout = tmp, db_url, timeout
        url = make_url(db_url)
        self.proxy = Proxy((url.host or "127.0.0.1", url.port or 5432))
        ctl_port, rest_port, *node_ports = free_ports(4)
        self.log = tmp / "runs.log"
        base = f"""ClusterName=drill{os.getpid()}
{"".join(f"SlurmctldHost={name}({addr}){chr(10)}" for name, addr in CONTROLLERS)}SlurmctldPort={ctl_port}
RestPort={rest_port}
SlurmctldTimeout={timeout}
StateSaveLocation={tmp}/ctld
SlurmdSpoolDir={tmp}/spool
SlurmdTimeout=10
KillWait=2
NodeName=c000 NodeAddr=127.0.0.1 Port={node_ports[0]} CPUs=4 RealMemory=4000
NodeName=c001 NodeAddr=127.0.0.1 Port={node_ports[1]} CPUs=4 RealMemory=4000
PartitionName=batch Nodes=c[000-001] Default=YES
"""
        self.conf = tmp / "pslurm.conf"
        self.conf.write_text(base + f"DatabaseURL={db_url}\n")
        # ctl0's own copy: the same cluster, its database through the proxy (the key is the one beside it)
        proxied = url.set(host="127.0.0.1", port=self.proxy.port).render_as_string(hide_password=False)
        (tmp / "pslurm-ctl0.conf").write_text(base + f"DatabaseURL={proxied}\n")
        for path in (self.conf, tmp / "pslurm-ctl0.conf"):
            path.chmod(0o600)  # a DatabaseURL with a password: psctld refuses a file others read
        create_key(str(tmp / "pslurm.key"))
        (tmp / "out").mkdir()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {**os.environ, "PSLURM_CONF": str(self.conf)}

    def start(self, name: str) -> None:
        """Start controller ``ctl0``/``ctl1`` or agent ``c000``/``c001``."""
        if name.startswith("ctl"):
            conf = self.tmp / "pslurm-ctl0.conf" if name == "ctl0" else self.conf
            args = ["pslurm.controller.app", "-f", str(conf), "--host", name]
        else:
            args = ["pslurm.nodeagent.app", "-f", str(self.conf), "-N", name]
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        proc.wait(timeout=30)

    def up(self) -> None:
        """ctl0 first (it takes control), then ctl1, then the agents; returns once both nodes are idle."""
        self.start("ctl0")
        _wait(lambda: self.active() == "ctl0", 30)
        for name in ("ctl1", "c000", "c001"):
            self.start(name)
        _wait(lambda: self.mode("ctl1") == "standby", 30)
        with Client(self.conf, timeout=5) as client:
            _wait(lambda: [n.display_state for n in _quiet(client.nodes, [])] == ["idle", "idle"], 60)

    def down(self) -> None:
        for name in sorted(self.procs, key=lambda n: n.startswith("ctl")):  # agents first: they end their jobs
            self.procs[name].terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()
        self.proxy.close()

    def mode(self, name: str) -> str | None:
        """What controller ``name`` says it is (active, standby), None when it does not answer."""
        from pslurm.client.api import Api

        with Api.load(self.conf, timeout=2) as api:
            try:
                return str(api.ping(dict(CONTROLLERS)[name])["mode"])
            except ClientError:
                return None

    def active(self) -> str | None:
        """The controller that says it is active, None when none does."""
        return next((name for name, _ in CONTROLLERS if self.mode(name) == "active"), None)

    def spec(self, name: str) -> JobSpec:
        user = pwd.getpwuid(os.getuid())
        script = (f"#!/bin/sh\necho start $SLURM_JOB_ID ${{SLURM_RESTART_COUNT:-0}} >> {self.log}\n"
                  f"sleep {JOB_SECONDS}\necho end $SLURM_JOB_ID >> {self.log}\n")
        return JobSpec(name=name, user=user.pw_name, uid=user.pw_uid, gid=user.pw_gid, workdir=str(self.tmp),
                       script=script, stdout=f"{self.tmp}/out/%j.out")


@dataclass
class Load:
    """The submit loop: SUBMITTERS threads, each submitting a job every SUBMIT_GAP seconds through a
    pslurm.client of its own; each acknowledged submit recorded with its id and when it was sent and
    answered."""

    cluster: HaCluster
    acked: dict[str, int] = field(default_factory=dict)
    answered: list[tuple[float, float]] = field(default_factory=list)  # (sent, acknowledged), wall clock
    failed: list[str] = field(default_factory=list)  # one line per submit that got an error
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        for t in range(SUBMITTERS):
            thread = threading.Thread(target=self._run, args=(t,), name=f"load{t}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _run(self, t: int) -> None:
        i = 0
        with Client(self.cluster.conf, timeout=30) as client:
            while not self._stop.is_set():
                name = f"drill{t}-{i}"
                i += 1
                sent = time.time()
                try:
                    self.acked[name] = client.submit(self.cluster.spec(name))
                    self.answered.append((sent, time.time()))
                except ClientError as exc:
                    self.failed.append(f"{name}: {exc}")
                self._stop.wait(SUBMIT_GAP)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)

    def longest_gap(self, around: float) -> float:
        """The longest time without an acknowledgement, among those from just before ``around`` on."""
        times = sorted(done for _, done in self.answered)
        before = [t for t in times if t < around]
        after = [t for t in times if t >= around]
        marks = before[-1:] + after
        return max((b - a for a, b in zip(marks, marks[1:], strict=False)), default=0.0)


@dataclass
class Outcome:
    """What a drill found."""

    time_to_serve: float  # seconds from the disruption to the first submit acknowledged after it
    longest_gap: float  # the longest time without any acknowledged submit, around the disruption
    acknowledged: int
    lost: list[str]  # acknowledged, not in the store
    duplicated: list[str]  # stored more than once
    ran_twice: list[int]  # jobs with more than one start line
    never_ran: list[int]  # ended COMPLETED without a start line, or not ended
    running_before: dict[int, str]  # the jobs running on their node at the disruption: how each ended, and
    # whether it was restarted (``COMPLETED`` only when it ran on to its end, never restarted)
    requeued_unlaunched: list[int]  # started by the controller that went, its launch lost with it: run later
    node_failures: list[int]  # jobs that ended NODE_FAIL, or were lost while they ran
    nodes: dict[str, str]  # each node's state at the end
    failed_submits: list[str]
    stored_unacknowledged: list[str]  # a failed submit that was stored all the same (sent, then the answer lost)
    active_after: str | None


def drill(cluster: HaCluster, disrupt: Callable[[], None], settle: float = 2.0) -> Outcome:
    """Load the cluster, disrupt its active controller once jobs run, keep loading until a submit is
    acknowledged after it and ``settle`` seconds more, then wait for every acknowledged job to end."""
    load = Load(cluster)
    load.start()
    store = Store(cluster.db_url)
    try:
        _wait(lambda: len(_running(store)) >= 6, 60)
        running = _running(store)
        started = _starts(cluster.log)  # on their node by now: their script has begun
        disrupted = time.time()
        disrupt()
        _wait(lambda: any(sent >= disrupted for sent, _ in load.answered), 60)
        served = min(done for sent, done in load.answered if sent >= disrupted)
        time.sleep(settle)
        load.stop()
        ids = set(load.acked.values())
        _wait(lambda: all(j.state.is_final for j in store.get_jobs(sorted(ids))), 120)
        by_id = {j.job_id: j for j in store.get_jobs(include_finished=True)}
        names = Counter(j.spec.name for j in by_id.values())
        starts = _starts(cluster.log)
        lost_runs = {j for j in by_id if any(e.op == "node_lost" for e in store.events(j))}
        return Outcome(
            time_to_serve=served - disrupted,
            longest_gap=load.longest_gap(disrupted),
            acknowledged=len(load.acked),
            lost=sorted(name for name in load.acked if names[name] == 0),
            duplicated=sorted(name for name, count in names.items() if count > 1),
            ran_twice=sorted(job for job, count in starts.items() if count > 1),
            never_ran=sorted(j for j in ids if by_id[j].state is not JobState.COMPLETED or not starts[j]),
            running_before={j: by_id[j].state.name if not by_id[j].restarts else "restarted"
                            for j in running if started[j]},
            requeued_unlaunched=sorted(j for j in lost_runs if j in running and not started[j]),
            node_failures=sorted(j for j in by_id if by_id[j].state is JobState.NODE_FAIL
                                 or (j in lost_runs and (started[j] or j not in running))),
            nodes={n.name: n.state.name for n in store.get_nodes()},
            failed_submits=load.failed,
            stored_unacknowledged=sorted(name for name in names if name not in load.acked),
            active_after=cluster.active(),
        )
    finally:
        load.stop()
        store.close()


def _running(store: Store) -> list[int]:
    return [j.job_id for j in store.get_jobs(states=[JobState.RUNNING])]


def _starts(log: Path) -> Counter[int]:
    """How many times each job's script has begun, by its ``start`` lines."""
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(int(line.split()[1]) for line in lines if line.startswith("start "))


def _quiet(fn: Callable[[], list], default: list) -> list:  # type: ignore[type-arg]
    try:
        return fn()
    except ClientError:
        return default


def _wait(predicate: Callable[[], object], timeout: float, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"condition not met in {timeout:.0f}s")
