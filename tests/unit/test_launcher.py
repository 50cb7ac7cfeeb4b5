"""The commands' launcher (scripts/pslurm-command) is Python source as well as sh: it must compile without
a warning, or every start of every command prints one (Python 3.12 warns of an invalid escape such as ``\\$``
in a string: seen on the H200 host)."""

import warnings
from pathlib import Path

LAUNCHER = Path(__file__).parents[2] / "scripts" / "pslurm-command"


def test_the_launcher_compiles_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(LAUNCHER.read_text(), str(LAUNCHER), "exec")
