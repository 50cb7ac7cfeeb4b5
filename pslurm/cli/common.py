"""What every command shares: the cluster's client and Slurm-style errors.

Standard library only (Typer's helpers for the `pslurm` admin command are in typer_support): the
ps* commands import this on their path, and their cold start is measured against a bare interpreter."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs a command ~8 ms; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

    from pslurm.client import Client
    from pslurm.client.api import Api


# The Slurm command each ps* command stands in for: the names `pslurm compat install` writes.
SLURM_NAMES = {"psbatch": "sbatch", "psrun": "srun", "psalloc": "salloc", "psqueue": "squeue", "psinfo": "sinfo",
               "pscancel": "scancel", "pscontrol": "scontrol", "psacct": "sacct", "psprio": "sprio",
               "psacctmgr": "sacctmgr", "psshare": "sshare", "psdiag": "sdiag", "pseff": "seff",
               "psreport": "sreport", "psstat": "sstat"}


def prog_name(own: str) -> str:
    """The name a command reports itself by (``squeue: error: ...``): its Slurm name when it was run
    by that name (``argv[0]``, as Slurm's commands take theirs: the executables of `pslurm compat
    install`), else its own."""
    slurm = SLURM_NAMES.get(own)
    if slurm and sys.argv and os.path.basename(sys.argv[0]) == slurm:
        return slurm
    return own


def fail(prog: str, message: str, code: int = 1) -> NoReturn:
    """Slurm's one-line error: ``psbatch: error: ...`` on stderr, non-zero exit."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def connect(prog: str) -> Client:
    """The cluster's client (:mod:`pslurm.client`) for this command; a missing or unreadable
    configuration is a one-line error. Nothing is sent, and gRPC not imported, before its first call."""
    from pslurm.client import Client, ClientError

    try:
        return Client()
    except ClientError as exc:
        fail(prog, str(exc))


def connect_api(prog: str) -> Api:
    """The cluster's API (:class:`pslurm.client.api.Api`: replies as the API's JSON, read with
    :mod:`pslurm.core.jobinfo`), from only the client's keys of pslurm.conf; a missing or unreadable
    configuration is a one-line error. What the commands on the hot path use: their start imports
    no dataclasses."""
    from pslurm.client.api import Api
    from pslurm.client.errors import ClientError

    try:
        return Api.load()
    except ClientError as exc:
        fail(prog, str(exc))


class reporting:  # noqa: N801 - used as a function: ``with reporting(PROG):``
    """A failed request inside becomes Slurm's one-line error, ``prog: error: [prefix]message``, and
    exit 1. The prefix (``Batch job submission failed: ``) goes only before what the controller
    answered, not before an unreachable controller or a credential this side could not get.
    (A class, not contextlib's decorator: contextlib is one import more on every command's path.)"""

    def __init__(self, prog: str, prefix: str = "") -> None:
        self.prog, self.prefix = prog, prefix

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return
        from pslurm.client.errors import ClientError

        if isinstance(exc, ClientError):
            fail(self.prog, f"{self.prefix if exc.remote else ''}{exc}")


def job_id_list(prog: str, text: object) -> list[int]:
    """A ``-j 1,2,3`` list of plain job ids; anything else is Slurm's one-line error."""
    if not isinstance(text, str) or not text:
        return []
    try:
        return [int(j) for j in text.split(",") if j]
    except ValueError:
        fail(prog, f"Invalid job id specified: {text}")


def print_listing(prog: str, render: Callable[[], list[str]]) -> None:
    """Print a listing's lines; a bad -o/--format (ValueError from rendering) is a one-line error."""
    try:
        lines = render()
    except ValueError as exc:
        fail(prog, str(exc))
    sys.stdout.write("".join(line + "\n" for line in lines))


def current_umask() -> int:
    """This process's umask (read by setting it and back: the commands are single-threaded)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def user_identity() -> tuple[str, int, int]:
    import pwd

    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return name, uid, os.getgid()
