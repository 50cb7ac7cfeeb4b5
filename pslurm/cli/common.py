"""What every command shares: the cluster's client and Slurm-style errors.

Standard library only (Typer's helpers for the `pslurm` admin command are in typer_support): the
ps* commands import this on their path, and their cold start is measured against a bare interpreter."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs a command ~8 ms; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from pslurm.client import Client
    from pslurm.client.api import Api


# The Slurm command each ps* command stands in for: the names `pslurm compat install` writes.
SLURM_NAMES = {"psbatch": "sbatch", "psrun": "srun", "psalloc": "salloc", "psqueue": "squeue", "psinfo": "sinfo",
               "pscancel": "scancel", "pscontrol": "scontrol", "psacct": "sacct", "psprio": "sprio",
               "psacctmgr": "sacctmgr", "psshare": "sshare", "psdiag": "sdiag", "pseff": "seff",
               "psreport": "sreport", "psstat": "sstat"}


# The Slurm release whose behaviour pslurm follows: what the commands say for their version when run by
# Slurm's names (clients read `sinfo --version`'s second word as Slurm's version and gate features on it)
SLURM_VERSION = "22.05.8"


def called_by_slurm_name() -> bool:
    """Whether this process was started by one of Slurm's command names (``squeue``, not ``psqueue``)."""
    return bool(sys.argv) and os.path.basename(sys.argv[0]) in SLURM_NAMES.values()


def version() -> str:
    """The version a command reports: Slurm's (``22.05.8``) under Slurm's names, else pslurm's own."""
    if called_by_slurm_name():
        return SLURM_VERSION
    from pslurm import __version__

    return __version__


def version_line() -> str:
    """``-V``/``--version``'s answer: ``slurm 22.05.8`` under Slurm's names (Slurm's form), else
    ``pslurm 0.1.0``."""
    return f"{'slurm' if called_by_slurm_name() else 'pslurm'} {version()}"


def prog_name(own: str) -> str:
    """The name a command reports itself by (``squeue: error: ...``): its Slurm name when it was run
    by that name (``argv[0]``, as Slurm's commands take theirs: the executables of `pslurm compat
    install`), else its own. A command's output into a pipe that closes ends it quietly, as it ends
    Slurm's (``squeue | head -1``): SIGPIPE's default action, in the command's own process only (not in
    a program that imports the command, such as a test run or a daemon)."""
    slurm = SLURM_NAMES.get(own)
    called = os.path.basename(sys.argv[0]) if sys.argv else ""
    if called in (own, slurm):
        import _signal  # signal itself makes enums: milliseconds of every command's start

        _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    if slurm and called == slurm:
        return slurm
    return own


def fail(prog: str, message: str, code: int = 1) -> NoReturn:
    """Slurm's one-line error: ``psbatch: error: ...`` on stderr, non-zero exit."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


_clients: dict[str, Client] = {}  # one client a command: its connections are kept alive between requests


def connect(prog: str) -> Client:
    """The cluster's client (:mod:`pslurm.client`, the one way the commands submit and read) for this
    command, from only the client's keys of pslurm.conf; a missing or unreadable configuration is a
    one-line error. Nothing is sent before its first call."""
    client = _clients.get(prog)
    if client is not None:
        return client
    from pslurm.client.client import Client
    from pslurm.client.errors import ClientError

    try:
        client = _clients[prog] = Client()
    except ClientError as exc:
        fail(prog, str(exc))
    return client


def connect_api(prog: str) -> Api:
    """The raw layer of :func:`connect`'s client (:class:`pslurm.client.api.Api`): for the streams psrun
    and psalloc follow (output, input, steps' waits)."""
    return connect(prog).api


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


def job_selectors(prog: str, text: object, bad: str) -> list[Any]:
    """The ids of a ``-j`` list as Slurm reads them (:func:`pslurm.core.jobids.parse_job_id`); a malformed one
    is ``bad`` (a message with ``{id}``) on stderr, exit 1."""
    from pslurm.core.jobids import parse_job_id, split_ids

    if not isinstance(text, str) or not text:
        return []
    out = []
    for word in split_ids(text):
        try:
            out.append(parse_job_id(word))
        except ValueError:
            print(bad.format(prog=prog, id=word), file=sys.stderr)
            raise SystemExit(1) from None
    return out


def selected(job: Any, selectors: list[Any]) -> bool:
    """Whether a job is one the ids name (any job, when none are named)."""
    return not selectors or any(s.selects(job.job_id, job.array_job_id, job.array_task_id) for s in selectors)


def listed(given: dict[str, object], key: str) -> set[str] | None:
    """The comma-separated values an option was given (None: not given)."""
    value = given.get(key)
    return {x for x in str(value).split(",") if x} if isinstance(value, str) else None


def iterate(prog: str, text: object, once: Callable[[], object]) -> None:
    """``-i SECONDS``: ``once()`` again every so many seconds, each time under the date, until interrupted."""
    import time

    seconds = str(text)
    if not seconds.isdigit() or int(seconds) < 1:
        fail(prog, f"Invalid iterate value: {seconds}")
    try:
        while True:
            print(time.strftime("%a %b %d %H:%M:%S %Y"), flush=True)
            once()
            print(flush=True)
            time.sleep(int(seconds))
    except KeyboardInterrupt:
        raise SystemExit(0) from None


def answer_usage_version(given: dict[str, object], usage: str) -> None:
    """``--usage`` and ``-V/--version``, as every read command answers them: print and exit 0."""
    if given.get("usage"):
        print(usage)
        raise SystemExit(0)
    if given.get("version"):
        print(version_line())
        raise SystemExit(0)


def node_memory(client: Any) -> int:
    """A node's memory (the largest), as Slurm counts a job that asked none (ReqMem, ReqTRES, a waiting
    job's TRES); 0 when not known."""
    try:
        return max((n.real_memory for n in client.nodes()), default=0)
    except Exception:  # noqa: BLE001 - a field's value: the listing goes on without it
        return 0


def check_clusters(prog: str, text: object, cluster: str) -> bool:
    """``-M/--clusters NAMES|all``: pslurm answers for its own cluster only. True when it was given (the
    commands then say ``CLUSTER: name`` as Slurm's do); a list without this cluster's name is Slurm's
    two error lines and exit 1."""
    if not isinstance(text, str):
        return False
    names = [n for n in text.split(",") if n]
    if "all" in (n.lower() for n in names) or cluster in names:
        return True
    bad = next((n for n in names if n != cluster), text)
    print(f"{prog}: error: No cluster '{bad}' known by database.", file=sys.stderr)
    print(f"{prog}: error: '{bad}' can't be reached now, or it is an invalid entry for --cluster.  Use 'sacctmgr "
          "list clusters' to see available clusters.", file=sys.stderr)
    raise SystemExit(1)


def user_names(prog: str, text: object, me: bool = False) -> list[str] | None:
    """The users ``-u NAME,UID,...`` (or ``--me``) name, None for no filter. A name or uid that is no
    user is said on stderr as Slurm says it (``Invalid user: x``) and selects nothing."""
    import pwd

    if me:
        try:
            return [pwd.getpwuid(os.geteuid()).pw_name]
        except KeyError:
            return [str(os.geteuid())]
    if not isinstance(text, str):
        return None
    names = []
    for word in (w for w in text.split(",") if w):
        try:
            names.append(pwd.getpwuid(int(word)).pw_name if word.isdigit() else pwd.getpwnam(word).pw_name)
        except KeyError:
            print(f"{prog}: error: Invalid user: {word}", file=sys.stderr)
    return names
