"""A controller and agents one release apart work together (docs/operations.md, Upgrading): the
previous release's psd (its tree from git) under the current psctld, and the reverse, as real
processes over gRPC; a batch job runs on each node and ends with its output and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.integration.conftest import Procs
from tests.integration.test_upgrade_store import PREVIOUS_RELEASES, release_tree

LAST_RELEASE = PREVIOUS_RELEASES[-1][1]


def command(tree: Path | None, cwd: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One of the commands of the release in ``tree`` (None: the current one)."""
    code = f"import sys; sys.argv[0] = {name!r}; from pslurm.cli.{name} import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], env=release_env(tree), cwd=tree or cwd,
                          capture_output=True, text=True, timeout=60, input="")


def release_env(tree: Path | None) -> dict[str, str]:
    """The environment that runs the release in ``tree`` (None: the current one). Its processes also
    start in ``tree``: ``python -m``/``-c`` put their directory first on the path, before PYTHONPATH."""
    return {**os.environ, **({"PYTHONPATH": str(tree)} if tree else {})}


def start(procs: Procs, name: str, tree: Path | None) -> None:
    """Procs.start, with the daemon of the release in ``tree`` (None: the current one)."""
    module = "pslurm.controller.app" if name == "psctld" else "pslurm.nodeagent.app"
    extra = [] if name == "psctld" else ["-N", name]
    with open(procs.tmp / f"{name}.log", "ab") as log:
        procs.procs[name] = subprocess.Popen([sys.executable, "-m", module, "-f", str(procs.conf), *extra],
                                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                             env=release_env(tree), cwd=tree or procs.tmp)


@pytest.mark.parametrize("old", ["agents", "controller"])
def test_a_controller_and_agents_one_release_apart_run_jobs(old, tmp_path, tmp_path_factory, monkeypatch):
    tree = release_tree(LAST_RELEASE, tmp_path_factory.getbasetemp())
    where = subprocess.run([sys.executable, "-c", "import pslurm; print(pslurm.__file__)"], env=release_env(tree),
                           cwd=tree, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tree)), "the previous release's daemons would not run its own code"
    procs = Procs(tmp_path)
    controller, agents = (tree, None) if old == "controller" else (None, tree)
    monkeypatch.setenv("PSLURM_CONF", str(procs.conf))  # for the commands (the daemons get -f)
    try:
        start(procs, "psctld", controller)
        for node in ("c000", "c001"):
            start(procs, node, agents)

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return command(controller, tmp_path, *args)  # the commands of the controller's release

        def states() -> list[str]:
            return run("psinfo", "-N", "-h", "-o", "%N %t").stdout.split()

        wait_for(lambda: states() == ["c000", "idle", "c001", "idle"], timeout=60)
        jobs = {}
        for node, code in (("c000", 0), ("c001", 3)):
            out = run("psbatch", "--parsable", "-w", node, "-o", str(tmp_path / f"{node}.out"), "--wrap",
                      f"echo hello from $SLURMD_NODENAME; exit {code}")
            assert out.returncode == 0, out.stderr
            jobs[node] = out.stdout.strip()

        def ended() -> list[str] | None:
            shown = [run("psqueue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip() for job in jobs.values()]
            return shown if all(s in ("COMPLETED", "FAILED") for s in shown) else None

        assert wait_for(ended, timeout=60) == ["COMPLETED", "FAILED"]
        for node in jobs:
            assert (tmp_path / f"{node}.out").read_text() == f"hello from {node}\n"
        exits = run("psacct", "-n", "-X", "-P", "-j", ",".join(jobs.values()), "-o", "JobID,ExitCode").stdout.split()
        assert exits == [f"{jobs['c000']}|0:0", f"{jobs['c001']}|3:0"]
    finally:
        procs.stop_all()
        for log in sorted(tmp_path.glob("*.log")):  # shown by pytest when the test fails
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
