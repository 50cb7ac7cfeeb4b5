"""Jobs start with every signal's default action and none blocked, whatever the agent's parent did
(issue 30): `pslurm up` under an ignored SIGHUP (as ``nohup pslurm up`` runs it) and a blocked
SIGUSR2 hands both to its agent; a psrun job and a batch job still see nothing ignored or blocked
in their /proc/self/status."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

from tests.conftest import BIN, Cluster, cli, wait_for


def as_under_nohup() -> None:
    """Popen's preexec_fn for `pslurm up`: SIGHUP ignored (nohup), SIGUSR2 blocked; exec keeps both."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})


def masks(status: str) -> dict[str, int]:
    return {name: int(value, 16) for name, value in re.findall(r"^(SigIgn|SigBlk):\s*([0-9a-f]+)$", status, re.M)}


def test_jobs_start_with_default_dispositions_under_an_agent_that_ignores_sighup(tmp_path: Path) -> None:
    state = tmp_path / "state"
    up = subprocess.run([str(BIN / "pslurm"), "up", "--nodes", "1", "--state-dir", str(state)], capture_output=True,
                        text=True, timeout=120, stdin=subprocess.DEVNULL, preexec_fn=as_under_nohup)
    cluster = Cluster(state)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        agent = int(next((state / "run").glob("psd-*.pid")).read_text())
        inherited = masks(Path(f"/proc/{agent}/status").read_text())
        hup, usr2 = 1 << (signal.SIGHUP - 1), 1 << (signal.SIGUSR2 - 1)
        assert inherited["SigIgn"] & hup and inherited["SigBlk"] & usr2, inherited  # the agent has both
        shown = cluster.run("psrun", "grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status")
        assert shown.returncode == 0, shown.stderr
        assert masks(shown.stdout) == {"SigIgn": 0, "SigBlk": 0}, shown.stdout
        out = tmp_path / "batch.out"
        job = cluster.run("psbatch", "--parsable", "-o", str(out), "--wrap",
                          "grep -E '^Sig(Ign|Blk)' /proc/self/status", check=True).stdout.strip()
        wait_for(lambda: cluster.run("psqueue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip()
                 == "COMPLETED", 30)
        assert masks(out.read_text()) == {"SigIgn": 0, "SigBlk": 0}, out.read_text()
    finally:
        cli("pslurm", "down", "--state-dir", str(state), timeout=60)
