"""Fixtures the unit tests share."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pslurm.cli import pscontrol

RunPscontrol = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_pscontrol(capsys: pytest.CaptureFixture[str]) -> RunPscontrol:
    """``pscontrol ARGV...`` in process: (exit code, stdout, stderr)."""
    def run(*argv: str) -> tuple[int, str, str]:
        code = 0
        try:
            pscontrol.main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run
