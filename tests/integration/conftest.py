"""Integration fixtures: a controller and two agents as real processes; a tree a job's user reaches."""

from __future__ import annotations

import getpass
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pslurm.auth.credential import create_key
from pslurm.cluster.local import free_ports
from pslurm.controller.store import Store
from tests.conftest import cli, wait_for


class Procs:
    """A controller and two agents as real processes, each started and killed at will."""

    def __init__(self, tmp: Path) -> None:
        ports = free_ports(4)
        self.tmp = tmp
        self.conf = tmp / "pslurm.conf"
        self.conf.write_text(f"""ClusterName=fail{os.getpid()}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports[0]}
RestPort={ports[3]}
StateSaveLocation={tmp}
SlurmdSpoolDir={tmp}/spool
SlurmdTimeout=2
KillWait=1
BatchStartTimeout=2
NodeName=c000 NodeAddr=127.0.0.1 Port={ports[1]} CPUs=2 RealMemory=1000 Gres=gpu:1
NodeName=c001 NodeAddr=127.0.0.1 Port={ports[2]} CPUs=2 RealMemory=1000 Gres=gpu:1
PartitionName=gpu Nodes=c[000-001] Default=YES
""")
        create_key(str(tmp / "pslurm.key"))  # what an operator installs on every host (munge.key's place)
        self.env = {**os.environ, "PSLURM_CONF": str(self.conf)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, env: dict[str, str] | None = None) -> None:
        module = "pslurm.controller.app" if name == "psctld" else "pslurm.nodeagent.app"
        extra = [] if name == "psctld" else ["-N", name]
        log = open(self.tmp / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen([sys.executable, "-m", module, "-f", str(self.conf), *extra],
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **(env or {})})

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for name in sorted(self.procs, key=lambda n: n == "psctld"):
            self.procs[name].terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(*args, env=self.env, cwd=self.tmp)

    def state(self, job: str) -> str:
        return self.run("psqueue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip()

    def node_states(self) -> str:
        return self.run("psinfo", "-N", "-h", "-o", "%N %t").stdout


@pytest.fixture
def procs(tmp_path):
    p = Procs(tmp_path)
    try:  # stopped also when they never came up: nothing outlives the test
        for name in ("psctld", "c000", "c001"):
            p.start(name)
        wait_for(lambda: p.node_states().split() == ["c000", "idle", "c001", "idle"])
        yield p
    finally:
        p.stop_all()


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A migrated store on each kind of database (the store contract's)."""
    s = Store(db_url)
    s.migrate()
    yield s
    s.close()


@dataclass
class Place:
    """A tree the jobs' user reaches (pytest's tmp_path sits under a 0700 root directory): the
    agent's spool, the jobs' submit directory ``home`` (theirs: nobody's when the tests run as root)."""

    top: Path
    home: Path
    user: str
    uid: int
    gid: int


@pytest.fixture
def place() -> Iterator[Place]:
    top = Path(tempfile.mkdtemp(prefix="pslurm-jobs-"))
    top.chmod(0o755)
    home = top / "home"
    home.mkdir()
    user, uid, gid = getpass.getuser(), os.getuid(), os.getgid()
    if os.geteuid() == 0:
        try:
            nobody = pwd.getpwnam("nobody")
            user, uid, gid = "nobody", nobody.pw_uid, nobody.pw_gid
            os.chown(home, uid, gid)
        except KeyError:
            pass  # no such user: the jobs run as root
    try:
        yield Place(top, home, user, uid, gid)
    finally:
        shutil.rmtree(top)
