"""What the agent does as the job's user: open the job's output files, enter its working directory,
add slurmstepd's lines to its stderr file; and the batch script's private directory in the spool.

A root agent that opened ``-o``/``-e`` files itself (then chowned them) or entered ``-D`` before
switching user would let any user make root truncate, append to or take over any file: a symlink
named as the output file is enough. So the kernel must check the *user's* rights, which it does
only for a process that is the user:

- the job's own process does it (:class:`UserStart`, Popen's ``preexec_fn``): CPython's child
  (``_posixsubprocess``, 3.11) switches groups, gid then uid *before* it calls preexec_fn, so the
  chdir and the opens there are the user's. Popen gets ``cwd=None`` (its chdir comes before the
  switch) and no stdout/stderr for batch jobs (the child dup2s its own files onto 1 and 2);
- a short-lived forked child that becomes the user (:func:`append_as`) for a line when no such
  file is held (the launch failed before the job's process opened it).

An fd the user's process opened stays the user's access once passed to root: the job's process
sends the agent one (over a socketpair, SCM_RIGHTS) for slurmstepd's later lines (:class:`UserFile`).

An exception in preexec_fn reaches the parent only as "Exception occurred in preexec_fn", so the
child sends its reason (which step, errno) over the same socketpair before raising. The child-side
code keeps to plain syscalls on values prepared in the parent (see :mod:`pslurm.nodeagent.cgroups`):
no imports, locks or logging in the threaded agent's forked child.

When the agent is not root it already is the user: the same code runs, without the switch.
"""

from __future__ import annotations

import array
import errno
import fcntl
import os
import shutil
import socket
import stat
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Self

DEFAULT_UMASK = 0o022  # for the output files of a job whose environment has no SLURM_UMASK
OUTPUT_MODE = 0o666  # before the umask, as Slurm creates them

# the child's steps, as it reports which one failed
CHDIR, STDOUT, STDERR, SETUP = range(4)


def job_umask(env: Mapping[str, str]) -> int | None:
    """The submitter's umask from ``SLURM_UMASK`` (octal, as sbatch sets it), None when the
    environment has none (or an unreadable one)."""
    value = env.get("SLURM_UMASK", "").strip()
    try:
        return int(value, 8) & 0o777 if value else None
    except ValueError:
        return None


def file_umask(env: Mapping[str, str]) -> int:
    """The umask the job's output files are created under: ``SLURM_UMASK``'s, else 0022."""
    umask = job_umask(env)
    return DEFAULT_UMASK if umask is None else umask


@dataclass(frozen=True)
class JobUser:
    """Whom the job's files belong to. ``switch``: the agent must become them (it is root and they
    are not); False when the agent already is them."""

    uid: int
    gid: int
    groups: tuple[int, ...]
    switch: bool

    def become(self) -> None:
        """Drop to the user, in CPython's order (groups, gid, uid); for a forked child only."""
        if self.switch:
            os.setgroups(list(self.groups))
            os.setregid(self.gid, self.gid)
            os.setreuid(self.uid, self.uid)


class UserFile:
    """An fd on the job's stderr file that the job's user opened (O_APPEND): the agent adds
    slurmstepd's lines through it, as root if it is, with the access the kernel granted the user.
    Thread-safe; writes after :meth:`close` do nothing (the fd number may have been reused)."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._lock = threading.Lock()

    def write(self, text: str) -> bool:
        """Append ``text``; False when it could not (closed, or the file refused it)."""
        data = text.encode()
        with self._lock:
            if self._fd is None:
                return False
            try:
                while data:
                    data = data[os.write(self._fd, data):]
            except OSError:  # O_NONBLOCK: a full FIFO drops the line rather than block the agent
                return False
            return True

    def fileno(self) -> int | None:
        """The fd (None once closed): to hand it on, as the job runner does."""
        return self._fd

    def close(self) -> None:
        """Close the fd (idempotent)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class UserStart:
    """``preexec_fn`` for the job's Popen: as the user, enter the working directory, open the
    output files (batch jobs) onto fds 1 and 2 under the job's umask, send the agent an fd for
    slurmstepd's lines, then run ``then`` (the cgroup's :class:`~pslurm.nodeagent.cgroups.ChildSetup`).

    Use as a context manager around Popen; after Popen returned or raised, :meth:`collect` says
    why the child failed (if it did) and hands over the stderr file::

        with ChildSetup(cgroup, cpus) as setup, UserStart(workdir, out, err, env, setup) as child:
            try:
                proc = subprocess.Popen(argv, cwd=None, preexec_fn=child, user=uid, ...)
            except subprocess.SubprocessError:
                failure, stderr_file = child.collect()  # failure: why, in the child's words
                ...
            stderr_file = child.collect()[1]

    ``stdout``/``stderr`` None (psrun's pipes): only the chdir. The output files get mode
    0666 & ~umask (the umask from ``SLURM_UMASK``, else 0022), and the job runs under
    ``SLURM_UMASK`` when there is one (as slurmstepd does), else under the agent's umask.
    """

    def __init__(self, workdir: str, stdout: str | None, stderr: str | None, env: Mapping[str, str],
                 then: Callable[[], object] | None = None, append: bool = False) -> None:
        self.workdir = workdir
        self.append = append  # --open-mode=append: keep what the files hold; else truncate them
        self.stdout = stdout
        self.stderr = stderr if stdout is not None else None
        self.job_umask = job_umask(env)  # None: the job keeps the umask it inherits
        self.file_umask = file_umask(env)
        self.then = then
        self._agent_end: socket.socket | None = None
        self._child_end: socket.socket | None = None
        self.output_dir_missing = False  # after collect(): an output file's directory did not exist

    def __enter__(self) -> Self:
        # SOCK_SEQPACKET: one message per report; both ends close-on-exec (Python's default)
        self._agent_end, self._child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._agent_end.setblocking(False)  # collect() takes what is there, never waits
        self._child_end.setblocking(True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for end in (self._agent_end, self._child_end):
            if end is not None:
                end.close()
        self._agent_end = self._child_end = None

    # -- the child's side (between fork and exec, as the user) --

    def __call__(self) -> None:
        child = self._child_end
        assert child is not None
        step = CHDIR
        try:
            os.chdir(self.workdir)
            if self.stdout is not None and self.stderr is not None:
                inherited = os.umask(self.file_umask)
                step = STDOUT
                out = _open_output(self.stdout, self.append)
                step = STDERR
                err = out if self.stderr == self.stdout else _open_output(self.stderr, self.append)
                os.umask(inherited if self.job_umask is None else self.job_umask)
                try:  # the agent's own open file (its own offset, O_APPEND) for slurmstepd's lines
                    note = os.open(self.stderr, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC)
                    socket.send_fds(child, [b"F"], [note])
                    os.close(note)
                except OSError:
                    pass  # the job runs; the agent's lines then go through a forked child
                os.dup2(out, 1)
                os.dup2(err, 2)
            step = SETUP
            if self.then is not None:
                self.then()
        except BaseException as exc:
            code = exc.errno if isinstance(exc, OSError) and exc.errno else 0
            try:
                child.send(b"E%d %d %s" % (step, code, type(exc).__name__.encode()))
            except OSError:
                pass
            raise

    # -- the agent's side --

    def collect(self) -> tuple[str, UserFile | None]:
        """After Popen returned or raised: the child's failure as slurmstepd's one line ("" when it
        reported none) and the stderr file it opened for the agent (None: none; the caller owns it).
        The child wrote its reports before it exec'd or exited, so they are all here already."""
        agent = self._agent_end
        assert agent is not None
        failure, note = "", None
        while True:
            try:
                data, fds = _recv_fds(agent)
            except (BlockingIOError, InterruptedError):
                break
            if not data and not fds:
                break
            for fd in fds:
                if note is None:
                    note = UserFile(fd)
                else:
                    os.close(fd)
            if data.startswith(b"E"):
                step, code, kind = data[1:].decode(errors="replace").split(" ", 2)
                failure = self._reason(int(step), int(code), kind)
        return failure, note

    def _reason(self, step: int, code: int, kind: str) -> str:
        why = os.strerror(code) if code else kind
        if step in (STDOUT, STDERR) and code == errno.ENOENT:
            # an O_CREAT open fails ENOENT for a missing directory; asking now whether it exists would race
            # the client that makes it just after submitting (submitit): the launch is tried again either way
            self.output_dir_missing = True
        if step == CHDIR:
            return f"chdir({self.workdir}): {why}"
        if step in (STDOUT, STDERR):
            which, path = ("stdout", self.stdout) if step == STDOUT else ("stderr", self.stderr)
            return f"Could not open {which} file {path}: {why}"
        return f"setting up the job's process failed: {why}"


def _recv_fds(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the fds it carries, received close-on-exec (Python 3.11's socket.recv_fds
    ignores its flags, MSG_CMSG_CLOEXEC among them)."""
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(256, socket.CMSG_SPACE(4 * fds.itemsize), socket.MSG_CMSG_CLOEXEC)
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)


def _open_output(path: str, append: bool = False) -> int:
    """Open (create; truncate unless ``append``) an output file, in the child, as the user; an fd
    above 2, so the dup2s onto 1 and 2 cannot clobber it, close-on-exec (only the dup2'd copies
    reach the job).

    Always O_APPEND, as slurmstepd opens them (``io_get_file_flags``: truncate is
    ``O_APPEND|O_TRUNC``): every write of the job lands at the file's end, so slurmstepd's lines,
    written through another open file, are never overwritten by the job's later output, nor
    written over it."""
    # O_NONBLOCK: a FIFO nobody reads fails at once (ENXIO) instead of hanging the launch
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC | (0 if append else os.O_TRUNC)
    fd = os.open(path, flags, OUTPUT_MODE)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    if fd > 2:
        return fd
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return high


def append_as(user: JobUser, path: str, text: str, umask: int) -> bool:
    """Append ``text`` to ``path`` (created with 0666 & ~``umask`` if missing) as ``user``, from a
    forked child that becomes the user first; False when it could not. For a line when no
    :class:`UserFile` is held. Blocks only as long as the open and the write take (O_NONBLOCK)."""
    data = text.encode()
    pid = os.fork()
    if pid == 0:  # the child: plain syscalls, then _exit whatever happens
        code = 1
        try:
            user.become()
            os.umask(umask)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC, OUTPUT_MODE)
            while data:
                data = data[os.write(fd, data):]
            code = 0
        finally:
            os._exit(code)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status) == 0
        except InterruptedError:
            continue
        except ChildProcessError:  # reaped by someone else: the outcome is unknown
            return False


def remove_tree(path: str) -> None:
    """Remove ``path`` (a directory and what is in it, or a file or symlink) if it is there, without
    following symlinks: for the agent's spool, where a user may have owned the directory."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)  # fd-based on Linux: does not follow symlinks inside
    else:
        os.unlink(path)


def private_dir(directory: str, owner: tuple[int, int] | None, fill: Callable[[int], None] | None = None) -> None:
    """Make ``directory`` (mode 0700) anew and give it to ``owner`` (uid, gid) when set, after
    ``fill(dir_fd)`` has written what root puts in it.

    ``directory`` is in the agent's own (root's) spool, but a user owned it during an earlier run of
    the job: whatever is there now (a leftover directory, a symlink planted anywhere) is removed
    without following symlinks. The user never owns the directory while root writes in it."""
    remove_tree(directory)
    os.mkdir(directory, 0o700)
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.fstat(dir_fd).st_uid != os.geteuid():  # someone swapped it between mkdir and open
            raise OSError(errno.EPERM, "not the agent's own directory", directory)
        if fill is not None:
            fill(dir_fd)
        os.fchmod(dir_fd, stat.S_IRWXU)
        if owner is not None:
            os.fchown(dir_fd, *owner)
    finally:
        os.close(dir_fd)


def write_private_file(directory: str, name: str, text: str, owner: tuple[int, int] | None) -> str:
    """Write ``text`` to ``directory/name`` (mode 0700) in a fresh directory of its own (mode 0700,
    :func:`private_dir`), both given to ``owner`` (uid, gid) when set; the file's path. The file is
    written and chowned before the directory is handed over."""

    def fill(dir_fd: int) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o700,
                     dir_fd=dir_fd)
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data):]
            os.fchmod(fd, stat.S_IRWXU)
            if owner is not None:
                os.fchown(fd, *owner)
        finally:
            os.close(fd)

    private_dir(directory, owner, fill)
    return os.path.join(directory, name)
