"""A task's process, started: what to run described as plain data (:class:`ChildPlan`), and the one
function that starts it (:func:`start_child`) in whichever process runs it: the agent itself, or
its runner (:mod:`pslurm.nodeagent.runner`), a small process that forks the jobs' processes so
that the threaded agent does not (a fork of the agent holds its interpreter's lock while it copies
a process of hundreds of threads: most of its CPU per job).

The child, between fork and exec: takes every signal's default action and blocks none (an agent
started under ``nohup`` ignores SIGHUP, and what is ignored or blocked survives exec: a job must start
as from a fresh login, whatever the agent's parent did), joins the job's cgroup and CPUs
(:class:`~pslurm.nodeagent.cgroups.ChildSetup`), becomes the user, enters the working directory and
opens the output files as the user (:class:`~pslurm.nodeagent.userfiles.UserStart`), in a session
of its own. A task that cannot start raises :class:`LaunchError` with slurmstepd's one line.
"""

from __future__ import annotations

import contextlib
import fcntl
import signal
import subprocess
import termios
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pslurm.nodeagent.cgroups import ChildSetup, JobCgroup
from pslurm.nodeagent.userfiles import UserFile, UserStart

# how a task's stdio is made (ChildPlan.stdio): nothing at all (root's, in /: an allocation's holder),
# files the child opens as the user, the fds given (stdin or -1, stdout, stderr), or the given pty slave
NULL, FILES, FDS, PTY = "null", "files", "fds", "pty"


class TaskProcess(Protocol):
    """A task's process as its supervisor uses it: a ``subprocess.Popen``, or the job runner's
    :class:`~pslurm.nodeagent.runner.RunnerProc`."""

    pid: int
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int: ...


class LaunchError(Exception):
    """A task that cannot be started; ``reason`` is slurmstepd's one line. ``missing_dir``: its
    output file could not be opened because its directory does not exist (yet)."""

    def __init__(self, reason: str, missing_dir: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing_dir = missing_dir


class ChildFailed(LaunchError):
    """A task's child that could not start; ``note``: the stderr file it opened for the agent, if any."""

    def __init__(self, reason: str, missing_dir: bool = False, note: UserFile | None = None) -> None:
        super().__init__(reason, missing_dir)
        self.note = note


@dataclass
class ChildPlan:
    """One task's process, as data (it travels to the runner as JSON)."""

    argv: list[str]
    env: dict[str, str]
    workdir: str
    stdio: str  # NULL, FILES, FDS or PTY
    user: tuple[int, int, list[int]] | None = None  # (uid, gid, groups) to become; None: stay who we are
    cgroup_dirs: list[str] = field(default_factory=list)  # the job's cgroup, in each hierarchy
    cpus: list[int] | None = None  # its CPU affinity (None: the parent's)
    stdout: str | None = None  # FILES: the paths
    stderr: str | None = None
    append: bool = False


# every signal a process may catch or ignore (SIGKILL and SIGSTOP it may not)
_CATCHABLE = tuple(sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}))


def default_signals() -> None:
    """In the child before exec: every signal's default action and an empty signal mask. exec keeps a
    signal the parent ignored ignored, and its mask, and Popen's ``restore_signals`` restores only
    SIGPIPE and SIGXFSZ; a handled signal becomes default at exec anyway, so all are reset."""
    for signum in _CATCHABLE:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def _defaults_first(then: Callable[[], object]) -> Callable[[], None]:
    """``preexec_fn``: :func:`default_signals`, then ``then``."""
    def preexec() -> None:
        default_signals()
        then()
    return preexec


def start_child(plan: ChildPlan, fds: Sequence[int] = ()) -> tuple[subprocess.Popen[bytes], UserFile | None]:
    """Start the task ``plan`` describes; ``fds``: its stdio for FDS (stdin or -1, stdout, stderr) and
    PTY (the slave). Returns the process and, for FILES, the stderr file the child opened for the
    agent's notes. ChildFailed (a LaunchError) when it cannot start."""
    cgroup = JobCgroup(plan.cgroup_dirs) if plan.cgroup_dirs else None
    user_kw: dict[str, Any] = {}
    if plan.user is not None:
        uid, gid, groups = plan.user
        user_kw = {"user": uid, "group": gid, "extra_groups": list(groups)}
    with ChildSetup(cgroup, plan.cpus) as setup:
        if plan.stdio == NULL:  # the agent's own holder: root's, in /, nothing of the user's
            with exec_errors():
                proc: subprocess.Popen[bytes] = subprocess.Popen(
                    plan.argv, cwd="/", env=plan.env, start_new_session=True, preexec_fn=_defaults_first(setup),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return proc, None
        then: Callable[[], object] = setup
        streams: dict[str, Any]
        if plan.stdio == PTY:
            streams = {"stdin": fds[0], "stdout": fds[0], "stderr": fds[0]}

            def then() -> None:  # as the user, in its new session: the slave becomes its terminal
                setup()
                fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        elif plan.stdio == FDS:
            streams = {"stdin": fds[0] if fds[0] >= 0 else subprocess.DEVNULL, "stdout": fds[1], "stderr": fds[2]}
        else:  # FILES: the child's own, dup2'd onto 1 and 2 before exec
            streams = {"stdin": subprocess.DEVNULL}
        out, err = (plan.stdout, plan.stderr) if plan.stdio == FILES else (None, None)
        with UserStart(plan.workdir, out, err, plan.env, then, append=plan.append) as child:
            try:
                with exec_errors():
                    proc = subprocess.Popen(  # type: ignore[call-overload]
                        plan.argv, cwd=None, env=plan.env, start_new_session=True, preexec_fn=_defaults_first(child),
                        **streams, **user_kw)
            except LaunchError as exc:
                failure, note = child.collect()
                # the child's own words when it said why
                raise ChildFailed(failure or exc.reason, child.output_dir_missing, note) from exc
            return proc, child.collect()[1]


def describe(exc: BaseException) -> str:
    """An unexpected exception as a one-line launch failure."""
    if isinstance(exc, OSError) and exc.strerror:
        return os_error(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def os_error(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else (exc.strerror or str(exc))


def check_strings(workdir: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """What execve cannot take (Popen raises ValueError for it, not OSError)."""
    if "\0" in workdir:
        raise LaunchError("the working directory contains a NUL byte")
    if any("\0" in a for a in argv):
        raise LaunchError("the command line contains a NUL byte")
    for name, value in env.items():
        if "\0" in name or "\0" in value:
            shown = name.replace("\0", "\\0")
            raise LaunchError(f"the environment contains a NUL byte (in {shown})")
        if not name or "=" in name:
            raise LaunchError(f"the environment contains an invalid variable name {name!r}")


@contextlib.contextmanager
def exec_errors() -> Iterator[None]:
    """Popen's failures as slurmstepd's lines: the execve, or the child's setup (whose own reason,
    when it sent one, the caller puts first)."""
    try:
        yield
    except OSError as exc:
        raise LaunchError(f"execve(): {os_error(exc)}") from exc
    except subprocess.SubprocessError as exc:
        raise LaunchError(f"setting up the job's process failed: {describe(exc)}") from exc
    except ValueError as exc:
        raise LaunchError(f"execve(): {describe(exc)}") from exc
