"""Bring-up fails fast: a port another program holds is named before anything starts, and a daemon
that dies while ``pslurm up`` waits for the nodes ends the wait at once with the daemon's own error."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.cluster.local import ClusterError, LocalCluster, check_ports, last_error, port_taken
from pslurm.lxc.cluster import with_free_ports
from pslurm.lxc.plan import make_plan

BIN = Path(sys.executable).parent


@pytest.fixture
def held() -> Iterator[int]:
    """A port some other program listens on (every address), as a real slurmctld does on 6817."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield s.getsockname()[1]


def conf(tmp_path: Path, extra: str, node_extra: str = "") -> Path:
    path = tmp_path / "src" / "pslurm.conf"
    path.parent.mkdir()
    path.write_text(f"ClusterName=bu\n{extra}\nNodeName=n1 CPUs=1 RealMemory=500 {node_extra}\n"
                    "PartitionName=p Nodes=n1 Default=YES\n")
    return path


def test_port_taken(held: int) -> None:
    assert port_taken("127.0.0.1", held)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    assert not port_taken("127.0.0.1", free)


def test_a_taken_configured_port_is_named(tmp_path: Path, held: int) -> None:
    cluster = LocalCluster(tmp_path / "state")
    config = cluster.write_config_from(conf(tmp_path, f"SlurmctldPort={held}"))
    with pytest.raises(ClusterError, match=f"SlurmctldPort {held} on 127.0.0.1 is taken"):
        check_ports(config)
    (tmp_path / "x").mkdir()
    config = LocalCluster(tmp_path / "state2").write_config_from(conf(tmp_path / "x", "", f"Port={held}"))
    with pytest.raises(ClusterError, match=f"node n1's Port {held} on 127.0.0.1 is taken"):
        check_ports(config)


def test_pslurm_up_names_the_taken_port_at_once(tmp_path: Path, held: int) -> None:
    started = time.monotonic()
    proc = subprocess.run([str(BIN / "pslurm"), "up", "--conf", str(conf(tmp_path, f"SlurmctldPort={held}")),
                           "--state-dir", str(tmp_path / "state")], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and f"SlurmctldPort {held} on 127.0.0.1 is taken" in proc.stderr, proc.stderr
    assert time.monotonic() - started < 10
    assert not LocalCluster(tmp_path / "state").running()


def test_a_controller_that_dies_ends_the_wait_with_its_error(tmp_path: Path) -> None:
    """The controller dies (a database it cannot load); the agent, still retrying its registration,
    ends on SIGTERM at once: ``up`` fails in seconds, not after its timeout or the stop's grace."""
    started = time.monotonic()
    proc = subprocess.run([str(BIN / "pslurm"), "up", "--conf", str(conf(tmp_path, "DatabaseURL=nosuchdb://x/y")),
                           "--state-dir", str(tmp_path / "state")], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    assert proc.returncode != 0, proc.stdout
    assert "psctld exited during start-up" in proc.stderr and "nosuchdb" in proc.stderr, proc.stderr
    assert took < 6, f"{took:.1f}s"
    assert not LocalCluster(tmp_path / "state").running()


def test_last_error_prefers_the_error_line(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("INFO starting\npsctld: error: Failed to bind to address 127.0.0.1:6817\nINFO exiting\n")
    assert last_error(log) == "psctld: error: Failed to bind to address 127.0.0.1:6817"
    log.write_text("just this\n\n")
    assert last_error(log) == "just this"
    assert "no output" in last_error(tmp_path / "empty.log") or "no log" in last_error(tmp_path / "empty.log")


def test_lxc_controller_ports_move_off_taken_ones(tmp_path: Path, held: int) -> None:
    plan = make_plan(tmp_path, 1, 0, network=ipaddress.IPv4Network("10.99.7.0/24"))
    assert with_free_ports(plan) == plan or port_taken("0.0.0.0", plan.controller_port)
    moved = with_free_ports(type(plan)(**{**plan.__dict__, "controller_port": held}))
    assert moved.controller_port != held and not port_taken("0.0.0.0", moved.controller_port)
    assert moved.rest_port not in (held, moved.controller_port)
