"""The adversarial suite's stage: a root cluster of two nodes (`pslurm up`, loopback only) that two
ordinary users reach, and those users, made with useradd for the session and removed after it.

Each user runs the real commands as themself (``runuser``, a system interpreter they may execute and a
copy of pslurm they may read: the test's own interpreter and checkout may sit where they cannot), or
speaks HTTP with credentials the credential socket gave them. Every attack is bounded in time and load.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pslurm
from pslurm.core.config import ClusterConfig, load_cluster_config
from tests.conftest import BIN, Cluster, ask_credential_as

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a root cluster and users of its own need root")
USERS = ("psadv-mallory", "psadv-alice")  # the attacker and the user who must not notice
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


@dataclass
class User:
    """An ordinary user of the cluster, with a directory of their own to submit from."""

    name: str
    uid: int
    gid: int
    home: Path


@dataclass
class Stage:
    """The cluster, its users, and how they run commands."""

    cluster: Cluster
    config: ClusterConfig
    root: Path  # the public directory everything lies in
    python: str  # an interpreter the users may run
    lib: Path  # a copy of pslurm they may read
    mallory: User
    alice: User

    def run(self, user: User, command: str, *args: str, timeout: float = 120, input: str = ""
            ) -> subprocess.CompletedProcess[str]:
        """``command args...`` (psbatch, psrun, ...) as ``user``, from their directory."""
        shim = f"import sys; sys.argv[0] = {command!r}; from pslurm.cli.{command} import main; main()"
        env = {"PATH": "/usr/bin:/bin", "PSLURM_CONF": str(self.cluster.conf), "PYTHONPATH": str(self.lib),
               "HOME": str(user.home), "LANG": "C.UTF-8"}
        return subprocess.run([RUNUSER, "-u", user.name, "--", self.python, "-c", shim, *args], env=env,
                              cwd=user.home, capture_output=True, text=True, timeout=timeout, input=input)

    def script(self, user: User, code: str, *args: str) -> subprocess.Popen[str]:
        """A Python program (``code``, run with ``args``) as ``user``, its stdout a pipe."""
        return subprocess.Popen([RUNUSER, "-u", user.name, "--", self.python, "-c", code, *args],
                                stdout=subprocess.PIPE, text=True, cwd=user.home)

    def credential(self, user: User) -> str:
        """A credential for the API, as ``user`` gets it: from the credential socket."""
        return ask_credential_as(user.uid, user.gid, self.config.auth_socket_path)

    def psctld_pid(self) -> int:
        return int((self.cluster.state_dir / "run" / "psctld.pid").read_text())

    def nodes_up(self) -> bool:
        found = self.cluster.run("psinfo", "-N", "-h", "-o", "%N %t")
        states = dict(line.split() for line in found.stdout.splitlines())
        return found.returncode == 0 and len(states) == 2 and set(states.values()) <= {"idle", "mix", "alloc"}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


class PeakRss:
    """The largest RSS of a process while the block runs (sampled every 20 ms), in kB."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.before = pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_kb(self.pid))
            self._stop.wait(0.02)

    def __enter__(self) -> PeakRss:
        self.before = self.peak = rss_kb(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    began = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - began


def system_python() -> str:
    """An interpreter of this version that users other than root can run (this one may lie under
    /root): this one if they can reach it, else the system's."""
    candidates = [sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}",
                  f"/usr/local/bin/python{sys.version_info.major}.{sys.version_info.minor}"]
    for path in candidates:
        real = os.path.realpath(path)
        parts = Path(real).parents
        if os.path.exists(real) and os.stat(real).st_mode & 0o001 and all(os.stat(p).st_mode & 0o001 for p in parts):
            return real
    raise AssertionError(f"no Python {sys.version_info[:2]} that other users can run: looked at {candidates}")


def _user(name: str, root: Path) -> User:
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
                   check=True, capture_output=True)
    entry = pwd.getpwnam(name)
    home = root / name
    home.mkdir()
    os.chown(home, entry.pw_uid, entry.pw_gid)
    home.chmod(0o700)
    return User(name, entry.pw_uid, entry.pw_gid, home)


def _remove_user(name: str) -> None:
    subprocess.run(["userdel", name], capture_output=True)
    try:
        grp.getgrnam(name)
        subprocess.run(["groupdel", name], capture_output=True)
    except KeyError:
        pass


FD_LIMIT = 512  # the daemons' open files: low, so that a flood of connections would exhaust it if it could


@contextlib.contextmanager
def low_fd_cluster(state: Path) -> Iterator[Cluster]:
    """`pslurm up` of 2 nodes (1 simulated GPU each) with at most FD_LIMIT open files per daemon."""
    up = subprocess.run(["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}", str(BIN / "pslurm"), "up", "--nodes", "2",
                         "--gpus-per-node", "1", "--state-dir", str(state)], capture_output=True, text=True,
                        timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield Cluster(state)
    finally:
        subprocess.run([str(BIN / "pslurm"), "down", "--state-dir", str(state)], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def stage() -> Iterator[Stage]:
    root = Path(tempfile.mkdtemp(prefix="pslurm-adversarial-"))
    root.chmod(0o755)
    for name in USERS:
        _remove_user(name)  # left by a run that was killed
    try:
        lib = root / "lib"
        shutil.copytree(Path(pslurm.__file__).parent, lib / "pslurm", ignore=shutil.ignore_patterns("__pycache__"))
        mallory, alice = (_user(name, root) for name in USERS)
        with low_fd_cluster(root / "cluster") as cluster:
            config = load_cluster_config(str(cluster.conf))
            yield Stage(cluster, config, root, system_python(), lib, mallory, alice)
    finally:
        for name in USERS:
            _remove_user(name)
        shutil.rmtree(root, ignore_errors=True)
