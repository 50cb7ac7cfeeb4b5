"""docs/operations.md on hosts that are LXC containers (`pslurm lxc`: each node its own container with its
own address, key copy, pslurm.conf, gres.conf and cgroup.conf, as the guide installs them): the guide's
checks hold there. `pslurm doctor` run inside a node's container (as on a real node) finds everything
in order, its probe job isolated by the container's and the job's device cgroups; `pscontrol ping`
answers; a GPU job runs; a node is drained (jobs go elsewhere) and resumed, as the guide's maintenance
section says; and the units `pslurm install-units` writes for a node's configuration verify."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.lxc import host


def _skip_reason() -> str | None:
    try:
        host.check_host()
    except host.HostError as exc:
        return f"cannot run LXC here: {exc}"
    return None


REASON = _skip_reason()
pytestmark = [pytest.mark.skipif(REASON is not None, reason=REASON or ""), pytest.mark.timeout(180)]
BIN = Path(sys.executable).parent


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, env=env, timeout=120, cwd="/tmp")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, dict[str, str]]]:
    state = tmp_path_factory.mktemp("guide") / "state"
    prefix = "pg" + secrets.token_hex(3)
    up = run(str(BIN / "pslurm"), "lxc", "up", "--nodes", "2", "--gpus-per-node", "2", "--fake-gpus",
             "--state-dir", str(state), "--prefix", prefix)
    try:
        assert up.returncode == 0, up.stderr
        yield state, prefix, {**os.environ, "PSLURM_CONF": str(state / "pslurm.conf")}
    finally:
        run(str(BIN / "pslurm"), "lxc", "down", "--state-dir", str(state))


def on_node(state: Path, prefix: str, node: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command run inside node ``node``'s container, as an operator on that host would."""
    return run("lxc-attach", "-n", f"{prefix}-{node}", "-P", str(state / "lxc"), "--", *argv)


def test_pslurm_doctor_on_each_node_finds_it_in_order(hosts: tuple[Path, str, dict[str, str]]) -> None:
    state, prefix, _ = hosts
    for node in ("c000", "c001"):
        done = on_node(state, prefix, node, sys.executable, "-m", "pslurm.doctor", "-f",
                       str(state / "nodes" / node / "pslurm.conf"), "-N", node)
        lines = done.stdout.splitlines()
        assert done.returncode == 0, done.stdout + done.stderr
        assert lines[-1].startswith("pslurm doctor: 11 checks, nothing failed"), lines
        isolation = next(line for line in lines if line.startswith("ok   isolation: "))
        k = int(node[1:])
        own, other = f"/dev/nvidia{2 * k}", f"/dev/nvidia{2 * k + 1}"  # each container holds its node's own two
        assert f"given {own} opens it (ENXIO) and is refused {other};" in isolation, isolation
        assert f"ok   controller: {prefix}-ctld active" in lines


def test_the_guides_checks_and_maintenance(hosts: tuple[Path, str, dict[str, str]]) -> None:
    state, prefix, env = hosts
    ping = run(str(BIN / "pscontrol"), "ping", env=env)
    assert ping.stdout == f"Slurmctld(primary) at {prefix}-ctld is UP\n", ping
    drain = run(str(BIN / "pscontrol"), "update", "NodeName=c001", "State=DRAIN", "Reason=maintenance", env=env)
    assert drain.returncode == 0, drain.stderr
    assert run(str(BIN / "psinfo"), "-N", "-h", "-o", "%N %t", env=env).stdout.split() == \
        ["c000", "idle", "c001", "drain"]
    ran = run(str(BIN / "psrun"), "--gres=gpu:1", "sh", "-c", "echo $SLURMD_NODENAME $CUDA_VISIBLE_DEVICES", env=env)
    assert ran.stdout == "c000 0\n", ran  # the drained node takes no job
    run(str(BIN / "pscontrol"), "update", "NodeName=c001", "State=RESUME", env=env)
    assert run(str(BIN / "psinfo"), "-N", "-h", "-o", "%N %t", env=env).stdout.split() == \
        ["c000", "idle", "c001", "idle"]
    units = state.parent / "units"
    written = run(str(BIN / "pslurm"), "install-units", "--unit-dir", str(units), "--conf",
                  str(state / "nodes" / "c000" / "pslurm.conf"))
    assert written.returncode == 0, written.stderr
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze is missing: .ci/run installs systemd"
    verify = run(analyze, "verify", str(units / "psctld.service"), str(units / "psd.service"))
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, ""), verify
    rows = json.loads(run(str(BIN / "pslurm"), "lxc", "status", "--state-dir", str(state), "--json").stdout)
    assert {r["node_state"] for r in rows} == {"idle"}
