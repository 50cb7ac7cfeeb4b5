"""pslurm compat: Slurm's command names (sbatch, squeue, ...) for pslurm's commands.

``pslurm compat install --bin-dir DIR`` writes one small executable per Slurm command into DIR, each
running the matching ps* command of this installation: a Python script whose interpreter line is this
environment's interpreter (an absolute path, so it works whatever PATH holds), started with ``-S`` as the
ps* commands are (scripts/pslurm-command: an environment's .pth files cost them nothing), which puts the
folder this pslurm is imported from on ``sys.path`` and calls the command's ``main``. It is not a shell
script that execs the ps* script, because the command reports itself by the name it was run by (``squeue:
error: ...``, :func:`pslurm.cli.common.prog_name`), and a script run through its ``#!`` line loses that
name; one process also starts sooner than two. Each file carries a marker line: install overwrites only
files that have it (``--force`` for others), uninstall removes only those.

Nothing is written anywhere but DIR: a system directory only when it is the DIR given.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from pslurm.cli.common import SLURM_NAMES, fail
from pslurm.cli.typer_support import typer_group

PROG = "pslurm compat"
MARKER = "# pslurm-compat-executable"  # in the head of every file install writes; uninstall looks for it
_HEAD = 1024  # bytes of a file read for the marker
# Linux reads at most this much of a #! line (127 before 5.1); a longer interpreter path, or one with
# blanks, goes through /bin/sh instead (as pip's own scripts do)
_SHEBANG_MAX = 127


class CompatError(Exception):
    """What install or uninstall refuses; the message is one line."""


def entry_points() -> dict[str, str]:
    """Slurm name -> ``module:function`` of the matching ps* command of this installation
    (``squeue`` -> ``pslurm.cli.psqueue:main``); a ps* command this installation lacks (``psalloc``
    before there is one) has no entry."""
    from importlib.util import find_spec

    return {slurm: f"pslurm.cli.{ps}:main" for ps, slurm in SLURM_NAMES.items() if find_spec(f"pslurm.cli.{ps}")}


def _interpreter_lines(python: str) -> str:
    """The lines that run the file with ``python``: a ``#!`` line, or the /bin/sh trampoline for a
    path a ``#!`` line cannot hold (too long, blanks); then Python reads the file itself."""
    if len(python) + 5 <= _SHEBANG_MAX and not any(c.isspace() for c in python):
        return f"#!{python} -S\n"
    if any(c in python for c in "\"'$`\\\n"):
        raise CompatError(f"cannot write an executable for the interpreter {python!r}: quotes or '$' in its path")
    # sh runs line 2 (''exec' ...: an empty word, then exec); Python reads lines 2-3 as one string
    return f"#!/bin/sh\n'''exec' \"{python}\" -S \"$0\" \"$@\"\n' '''\n"


def executable_text(slurm: str, target: str, python: str | None = None) -> str:
    """The file ``slurm`` (``squeue``) that runs ``target`` (``pslurm.cli.psqueue:main``) with
    ``python`` (default: this interpreter) and this pslurm's folder on ``sys.path``."""
    import pslurm

    module, _, function = target.partition(":")
    ps = module.rsplit(".", 1)[-1]
    folder = os.path.dirname(os.path.dirname(os.path.abspath(pslurm.__file__)))
    return (f"{_interpreter_lines(python or sys.executable)}{MARKER}\n"
            f"# {slurm}: pslurm's {ps}. Written by `pslurm compat install`; `pslurm compat uninstall` removes it.\n"
            "import sys\n"
            f"sys.path.append({folder!r})\n"
            f"from {module} import {function}\n"
            f"sys.exit({function}())\n")


def is_ours(path: Path) -> bool:
    """A regular file (not a link) that install wrote: its head has the marker."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            return MARKER.encode() in fh.read(_HEAD)
    except OSError:
        return False


def install(bin_dir: Path, force: bool = False) -> list[str]:
    """Write the executables into ``bin_dir`` (made if missing); the report's lines. Nothing is
    written when a name is taken by a file install did not write, unless ``force``: CompatError."""
    targets = entry_points()
    if bin_dir.exists() and not bin_dir.is_dir():
        raise CompatError(f"{bin_dir} is not a directory")
    taken = [slurm for slurm in targets if (bin_dir / slurm).exists() or (bin_dir / slurm).is_symlink()]
    foreign = [slurm for slurm in taken if not is_ours(bin_dir / slurm)]
    if foreign and not force:
        names = ", ".join(str(bin_dir / s) for s in foreign)
        raise CompatError(f"not overwriting {names}: not written by pslurm compat install (--force replaces them)")
    try:
        bin_dir.mkdir(parents=True, exist_ok=True)
        lines = []
        for slurm, target in targets.items():
            path = bin_dir / slurm
            temp = bin_dir / f".{slurm}.pslurm-compat.{os.getpid()}"
            temp.write_text(executable_text(slurm, target), encoding="utf-8")
            temp.chmod(0o755)
            os.replace(temp, path)  # a link in the way is replaced, never written through
            lines.append(f"pslurm: wrote {path} ({target.partition(':')[0].rsplit('.', 1)[-1]})"
                         f"{' over a file it had not written' if slurm in foreign else ''}")
    except OSError as exc:
        raise CompatError(f"cannot write into {bin_dir}: {exc.strerror or exc}") from None
    lines += [f"pslurm: {slurm} not written: this pslurm has no {ps}" for ps, slurm in SLURM_NAMES.items()
              if slurm not in targets]
    lines.append(f"pslurm: put {bin_dir} first on PATH to run them by Slurm's names: export PATH={bin_dir}:$PATH")
    return lines


def uninstall(bin_dir: Path) -> list[str]:
    """Remove what install wrote into ``bin_dir`` (files with the marker, nothing else); the report's lines."""
    lines = []
    for slurm in SLURM_NAMES.values():
        path = bin_dir / slurm
        if is_ours(path):
            try:
                path.unlink()
            except OSError as exc:
                raise CompatError(f"cannot remove {path}: {exc.strerror or exc}") from None
            lines.append(f"pslurm: removed {path}")
        elif path.exists() or path.is_symlink():
            lines.append(f"pslurm: left {path}: not written by pslurm compat install")
    return lines or [f"pslurm: nothing of pslurm compat in {bin_dir}"]


def make_app() -> typer.Typer:
    app = typer_group("Slurm's command names (sbatch, squeue, ...) for pslurm's commands.")

    @app.command("install")
    def install_command(
        bin_dir: Annotated[Path, typer.Option("--bin-dir", help="where to write them (made if missing)")],
        force: Annotated[bool, typer.Option("--force", help="replace files of those names that pslurm did not "
                                            "write")] = False,
    ) -> None:
        """Write sbatch, srun, salloc, squeue, sinfo, scancel, scontrol, sacct and sprio into BIN_DIR, each
        running pslurm's ps* command."""
        try:
            lines = install(bin_dir.absolute(), force)
        except CompatError as exc:
            fail(PROG, str(exc))
        print("\n".join(lines))

    @app.command("uninstall")
    def uninstall_command(
        bin_dir: Annotated[Path, typer.Option("--bin-dir", help="where install wrote them")],
    ) -> None:
        """Remove from BIN_DIR what install wrote there (nothing else)."""
        try:
            lines = uninstall(bin_dir.absolute())
        except CompatError as exc:
            fail(PROG, str(exc))
        print("\n".join(lines))

    return app
