"""Shared fixtures: database URLs for the store contract, and local clusters for acceptance tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# run_as() forks this process, which holds gRPC channels to the daemons: gRPC's fork handlers can
# deadlock the parent in fork() (seen in CI). Set before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")  # as psd does (nodeagent/app.py)

import pytest

BIN = Path(sys.executable).parent  # the console scripts of the environment running the tests


def store_with_nodes(db: Path, config: Any, up: Iterable[str] | None = None, heartbeat: bool = False) -> Any:
    """A migrated SQLite store in the file ``db`` holding ``config``'s nodes as the node monitor registers
    them; those in ``up`` (None: every node) UP at t=1000, with a heartbeat then when ``heartbeat``."""
    from pslurm.controller.store import Store
    from pslurm.core.node import NodeRecord
    from pslurm.core.states import NodeState

    store = Store(f"sqlite:///{db}")
    store.migrate()
    store.ensure_nodes([NodeRecord(n.name, n.addr, n.port, n.cpus, n.real_memory, n.gres)
                        for n in config.nodes.values()])
    for name in config.nodes if up is None else up:
        store.set_node_state(name, NodeState.UP, 1000.0)
        if heartbeat:
            store.update_node(name, last_heartbeat=1000.0)
    return store


def pg_url() -> str | None:
    """PostgreSQL for the store tests: PSLURM_TEST_PG_URL (.ci/run starts a server and sets it)."""
    return os.environ.get("PSLURM_TEST_PG_URL")


def require_pg() -> str:
    url = pg_url()
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail("PSLURM_TEST_PG_URL is not set: CI must run the PostgreSQL store tests (.ci/run starts one)")
    pytest.skip("no PostgreSQL: set PSLURM_TEST_PG_URL (bash .ci/run starts a server and sets it)")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of each kind."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    with fresh_pg_database(f"pslurm_t{os.getpid()}_{abs(hash(request.node.nodeid)) % 10**8}") as url:
        yield url


@contextlib.contextmanager
def fresh_pg_database(name: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the test server (PSLURM_TEST_PG_URL's), dropped afterwards."""
    base = require_pg()
    from sqlalchemy import create_engine, text

    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield base.rsplit("/", 1)[0] + "/" + name
    finally:
        _drop_database(admin, name)
        admin.dispose()


def _drop_database(admin: Any, name: str) -> None:
    """Drop a test's database, ending the sessions left in it. Ending another role's session needs
    rights the test's role may not have (a busy server once had one there as the test ended): then
    wait for it to go, and at worst leave the database (a later run's name is another)."""
    import warnings

    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    for attempt in range(20):
        try:
            with admin.connect() as conn:
                force = " WITH (FORCE)" if attempt == 0 else ""
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"{force}'))
            return
        except DBAPIError as exc:
            last = exc
            time.sleep(0.25)
    warnings.warn(f"test database {name} left in place: {str(last).splitlines()[0]}", stacklevel=1)


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns something true, and return that; fail after ``timeout``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def first_error(reply: dict[str, Any]) -> str:
    """The first error line of an HTTP API reply (slurmrestd's ``errors`` list)."""
    return str(reply["errors"][0]["error"])


def wait_until_one_node_idle(call: Callable[[str, str], tuple[int, Any]], timeout: float = 60) -> None:
    """Poll the HTTP API (``call(method, path)``) until the cluster's one node is IDLE."""
    def idle() -> bool:
        try:
            status, reply = call("GET", "/slurm/v0.0.40/nodes")
        except OSError:
            return False
        return status == 200 and [n["state"] for n in reply["nodes"]] == [["IDLE"]]

    wait_for(idle, timeout=timeout)


def run_as(uid: int, gid: int, fn: Callable[[], object]) -> str:
    """``str(fn())`` from a forked child that has become ``uid``:``gid`` (forked, not exec'd: the venv's
    interpreter may sit where that user cannot run it). An exception's message comes back instead of
    a value. Needs root."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: become the user, do it, hand the answer back, exit without cleanup
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.write(write, str(fn()).encode())
        except BaseException as exc:
            os.write(write, str(exc).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        answer = f.read()
    os.waitpid(pid, 0)
    return answer


def ask_credential_as(uid: int, gid: int, socket_path: str) -> str:
    """A credential from the credential socket, asked by a child process running as ``uid``:``gid``."""
    from pslurm.auth.transport import ask_credential_socket

    return run_as(uid, gid, lambda: ask_credential_socket(socket_path))


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | str | None = None,
        timeout: float = 60, check: bool = False, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run one of pslurm's commands as a subprocess (the real console script); its stdin is ``input``,
    or empty (never the test runner's own: psrun forwards stdin to its job)."""
    proc = subprocess.run([str(BIN / args[0]), *args[1:]], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, input=input if input is not None else "")
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    return proc


class Cluster:
    """A cluster started with `pslurm up` in a temporary state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.conf = state_dir / "pslurm.conf"
        self.env = {**os.environ, "PSLURM_CONF": str(self.conf)}

    def run(self, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
        kw.setdefault("env", self.env)
        return cli(*args, **kw)  # type: ignore[arg-type]


@contextlib.contextmanager
def cluster_from_conf(root: Path, conf: str, gres: str) -> Iterator[Cluster]:
    """`pslurm up --conf` on this pslurm.conf and gres.conf text, `pslurm down` afterwards."""
    (root / "pslurm.conf").write_text(conf)
    (root / "gres.conf").write_text(gres)
    state = root / "state"
    up = cli("pslurm", "up", "--conf", str(root / "pslurm.conf"), "--state-dir", str(state), timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield Cluster(state)
    finally:
        cli("pslurm", "down", "--state-dir", str(state), timeout=60)


@contextlib.contextmanager
def cluster_for_users(prefix: str, conf: str, gres: str) -> Iterator[Cluster]:
    """:func:`cluster_from_conf` in a new directory other users reach (its configuration and credential
    socket: tests that act as nobody), removed afterwards."""
    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp(prefix=prefix))
    where.chmod(0o755)
    try:
        with cluster_from_conf(where, conf, gres) as c:
            yield c
    finally:
        shutil.rmtree(where)


def api_as(cluster: Cluster, uid: int, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """The user API as ``uid`` (group the same number): a credential from the controller's socket, asked
    by a child running as that user. (status, JSON reply)."""
    import http.client
    import json

    from pslurm.core.config import load_cluster_config

    config = load_cluster_config(str(cluster.conf))
    conn = http.client.HTTPConnection(config.controller_addr, config.rest_port, timeout=10)
    try:
        headers = {"Content-Type": "application/json",
                   "X-Pslurm-Cred": ask_credential_as(uid, uid, config.auth_socket_path)}
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


@contextlib.contextmanager
def local_cluster(state: Path, nodes: int, gpus_per_node: int) -> Iterator[Cluster]:
    """`pslurm up` with simulated GPUs in ``state``, `pslurm down` afterwards."""
    up = cli("pslurm", "up", "--nodes", str(nodes), "--gpus-per-node", str(gpus_per_node), "--state-dir", str(state),
             timeout=120)
    try:
        assert up.returncode == 0, up.stderr
        yield Cluster(state)
    finally:
        cli("pslurm", "down", "--state-dir", str(state), timeout=60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """4 nodes x 2 simulated GPUs, for a whole test module."""
    with local_cluster(tmp_path_factory.mktemp("cluster"), 4, 2) as found:
        yield found
