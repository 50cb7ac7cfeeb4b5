"""The conformance run: both clusters started and the scenario set up once, every case run in order,
docs/conformance.md written; the tests then look up their case's outcome.

This directory is not collected by a plain ``pytest`` (pyproject's ``norecursedirs``): it needs root, a
Slurm 22.05 from Debian's packages (slurm/setup.sh installs them) and some minutes. CI runs it as its own
step (``.ci/run``: ``python -m pytest tests/conformance``); ``python -m tests.conformance.run`` runs it
by hand and prints each difference.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.corpus import CASES
from tests.conformance.run import Run, write_report


@pytest.fixture(scope="session")
def conformance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    if os.geteuid() != 0:
        pytest.fail("the conformance suite starts Slurm's daemons: it runs as root (CI does)")
    run = Run(tmp_path_factory.mktemp("conformance"), Path(sys.executable).parent)
    try:
        for case in CASES:
            run.run_case(case)
        write_report(run.outcomes)
        yield run
    finally:
        run.close()
