"""Versions that mean something: the daemons and pslurm print the release, the package's metadata
is the same number (pyproject.toml reads it from pslurm/__init__.py), and CHANGELOG.md has it."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
from pathlib import Path

import pytest

import pslurm
from tests.conftest import BIN

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("argv", [["psctld", "--version"], ["psd", "--version"], ["pslurm", "--version"],
                                  ["psd", "-V"], ["pslurm", "-V"]])
def test_the_daemons_and_pslurm_print_the_release(argv):
    out = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, f"pslurm {pslurm.__version__}\n", "")


def test_the_release_is_set_once_and_named_in_the_changelog():
    assert re.fullmatch(r"\d+\.\d+\.\d+", pslurm.__version__)
    assert importlib.metadata.version("pslurm") == pslurm.__version__  # pyproject.toml's dynamic version
    assert 'version = "' not in (REPO / "pyproject.toml").read_text().split("[project]")[1].split("\n[")[0]
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert headings[0] == pslurm.__version__  # the newest release first
