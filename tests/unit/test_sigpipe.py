"""A command whose output pipe closes ends quietly, as Slurm's do (``squeue | head -1``): SIGPIPE's default
action, set by the command for itself. A program that imports a command's module (a test run, a daemon)
keeps its own SIGPIPE handling: a write to a closed socket must stay an error there, not a silent death."""

from __future__ import annotations

import signal
import subprocess
import sys


def test_importing_the_commands_leaves_sigpipe_alone() -> None:
    code = ("import signal; import pslurm.cli.pscontrol, pslurm.cli.scontrol_verbs, pslurm.cli.psqueue; "
            "print(signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_a_command_by_its_name_takes_sigpipes_default(monkeypatch) -> None:
    from pslurm.cli.common import prog_name

    before = signal.getsignal(signal.SIGPIPE)
    try:
        monkeypatch.setattr(sys, "argv", ["/usr/local/bin/squeue"])
        assert prog_name("psqueue") == "squeue"
        assert signal.getsignal(signal.SIGPIPE) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGPIPE, before)
