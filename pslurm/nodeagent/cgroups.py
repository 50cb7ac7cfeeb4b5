"""A job's cgroup (:class:`JobCgroup`), how its processes join it (:class:`ChildSetup`), and the
devices it may open. Where job cgroups go on this node: :mod:`pslurm.nodeagent.cgroupnode`; its
CPUs: :mod:`pslurm.nodeagent.cpus`.

One job, one :class:`JobCgroup`, which may span hierarchies: on a pure cgroup v2 host it is one
directory; on a v1 host one per controller used; on a hybrid host (v1 controllers plus the v2
hierarchy at ``/sys/fs/cgroup/unified``, no controllers in it) the v2 directory carries what v2
does without controllers (the device program, ``cgroup.kill``) and v1 ones memory, cpuset and
devices. Every process of the job is in all of them, so any one lists the job's processes.

A job is put into its cgroup *before* it execs, from ``subprocess.Popen``'s ``preexec_fn``
(see :class:`ChildSetup`). Why preexec_fn and not a shell wrapper or a move after start:

- moving the pid after ``Popen`` returns races with the job: it may already have opened a
  device or forked children that stay outside the cgroup;
- the job runs as the submitting user, and ``cgroup.procs`` is root's: the fds are opened by
  the (root) agent before fork and only *written* in the child; the kernel checks a migration
  against the credentials the file was opened with. ``preexec_fn`` runs after ``setreuid``, so
  this covers ``user=``;
- a ``sh -c 'echo $$ >&N; exec ...'`` wrapper cannot name fds above 9 in dash, and a Python
  wrapper needs an interpreter the job user can execute.

The child-side code does only ``os.write``/``os.close``/``sched_setaffinity`` on values prepared
in the parent: no imports, locks or logging, which keeps preexec_fn safe in the threaded agent.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Self

from pslurm.nodeagent.bpfdev import DeviceRule

NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
NVIDIA_MODESET_MINOR = 254
# /dev/null, zero, full, random, urandom, tty, console, ptmx, pts/*: what any process expects
BASIC_DEVICES = tuple(DeviceRule("c", major, minor) for major, minor in
                      ((1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 1), (5, 2), (136, None)))


class CgroupError(OSError):
    """A job cgroup could not be created or set up; ``str()`` is one line."""

    def __str__(self) -> str:
        return str(self.strerror) if self.strerror is not None else super().__str__()


def dynamic_majors(names: Iterable[str], proc_devices: str = "/proc/devices") -> list[int]:
    """The majors of the character drivers ``names`` (e.g. nvidia-uvm) from /proc/devices; those
    not loaded are left out."""
    wanted, found = set(names), []
    try:
        with open(proc_devices) as f:
            for line in f:
                if line.startswith("Block"):
                    break
                fields = line.split()
                if len(fields) == 2 and fields[1] in wanted and fields[0].isdigit():
                    found.append(int(fields[0]))
    except OSError:
        pass
    return sorted(set(found))


def device_rules(gpu_minors: Iterable[int], proc_devices: str = "/proc/devices") -> list[DeviceRule]:
    """What a job may open: the basic devices and, with GPUs, its own /dev/nvidiaN, nvidiactl,
    nvidia-modeset, nvidia-uvm and nvidia-uvm-tools. Everything else is denied."""
    minors = sorted(set(gpu_minors))
    rules = list(BASIC_DEVICES) + [DeviceRule("c", NVIDIA_MAJOR, m) for m in minors]
    if minors:
        rules += [DeviceRule("c", NVIDIA_MAJOR, NVIDIACTL_MINOR), DeviceRule("c", NVIDIA_MAJOR, NVIDIA_MODESET_MINOR)]
        rules += [DeviceRule("c", major, None) for major in dynamic_majors(["nvidia-uvm", "nvidia-uvm-tools"],
                                                                           proc_devices)]
    return rules


def write(path: str, value: str) -> None:
    """One value per write(): cgroup files parse a single value (or devices rule) per call."""
    with open(path, "w") as f:
        f.write(value)


def read_file(path: str) -> str | None:
    """The file's text, None when it cannot be read (gone with its cgroup, say)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _zombie(pid: int) -> bool:
    text = read_file(f"/proc/{pid}/stat")
    return text is None or text[text.rfind(")") + 2:][:1] in ("Z", "X", "x")


def _first(dirs: Iterable[str], marker: str) -> str | None:
    return next((d for d in dirs if os.path.exists(os.path.join(d, marker))), None)


class JobCgroup:
    """One run's cgroup: its directory in each hierarchy it uses, handled as one.

    ``dirs`` may be given as one path or several (the first is the one a restarted agent is told
    of: the v2 one, else the freezer's); which does what is read from the files each one has.
    """

    def __init__(self, dirs: str | Iterable[str], devices: bool = False, cpus: Iterable[int] | None = None) -> None:
        self.dirs = (dirs,) if isinstance(dirs, str) else tuple(dirs)
        self.path = self.dirs[0] if self.dirs else ""
        self.procs_paths = [os.path.join(d, "cgroup.procs") for d in self.dirs]
        self.devices = devices  # device rules applied: the job may open only its own GPUs
        self.cpus = frozenset(cpus) if cpus else None  # its cpuset, when one was applied
        self._v2 = _first(self.dirs, "cgroup.controllers")  # only v2 directories have it
        self._freezer = _first(self.dirs, "freezer.state")
        self._memory = _first(self.dirs, "memory.events") or _first(self.dirs, "memory.oom_control")

    def __repr__(self) -> str:
        return f"JobCgroup({list(self.dirs)!r})"

    def add_pid(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the cgroup; its later children follow."""
        for path in self.procs_paths:
            write(path, str(pid))

    def pids(self) -> list[int]:
        """Processes in the cgroup now (empty once removed)."""
        found: set[int] = set()
        for path in self.procs_paths:
            found.update(int(x) for x in (read_file(path) or "").split())
        return sorted(found)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every process in the cgroup (racing with forks: use kill() to end it)."""
        for pid in self.pids():
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        """SIGKILL every process in the cgroup, wherever in its session tree it went, without a race
        against forks: ``cgroup.kill`` on v2 (Linux 5.14+), else freeze, SIGKILL, thaw (v1 freezer),
        else signal what ``cgroup.procs`` lists (a process forked meanwhile may survive a round)."""
        if self._v2 is not None:
            try:
                write(os.path.join(self._v2, "cgroup.kill"), "1")
                return
            except OSError:
                pass  # an older kernel, or already removed
        if self._freezer is not None:
            state = os.path.join(self._freezer, "freezer.state")
            try:
                write(state, "FROZEN")
            except OSError:
                self.signal(signal.SIGKILL)
                return
            deadline = time.monotonic() + 1.0  # FREEZING while a task sleeps uninterruptibly: kill anyway
            while (read_file(state) or "").strip() not in ("FROZEN", "") and time.monotonic() < deadline:
                time.sleep(0.005)
            self.signal(signal.SIGKILL)  # frozen: nobody forks; the signals land once thawed
            try:
                write(state, "THAWED")
            except OSError:
                pass
            return
        self.signal(signal.SIGKILL)

    def freeze(self, frozen: bool) -> bool:
        """Stop (``frozen``) or continue every process in the cgroup, the way scontrol suspend /
        resume does it with Slurm's cgroup plugins: v2 ``cgroup.freeze`` (Linux 5.2+), else the v1
        freezer's ``freezer.state``. False when neither is there or writable (the caller then sends
        SIGSTOP / SIGCONT, as Slurm's proctrack/linuxproc does)."""
        if self._v2 is not None:
            try:
                write(os.path.join(self._v2, "cgroup.freeze"), "1" if frozen else "0")
                return True
            except OSError:
                pass  # an older kernel, or already removed
        if self._freezer is not None:
            try:
                write(os.path.join(self._freezer, "freezer.state"), "FROZEN" if frozen else "THAWED")
                return True
            except OSError:
                pass
        return False

    def kill_all(self, timeout: float) -> list[int]:
        """kill() until the cgroup is empty or ``timeout`` seconds have passed; the processes left
        (none: all gone). Zombies count as gone: their parent reaps them."""
        deadline = time.monotonic() + timeout
        while True:
            self.kill()
            time.sleep(0.01)
            left = [pid for pid in self.pids() if not _zombie(pid)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)

    def oom_kills(self) -> int:
        """How many of its processes the OOM killer has killed (0 without a memory cgroup): v2
        ``memory.events`` oom_kill, v1 ``memory.oom_control`` oom_kill (``memory.failcnt`` on
        kernels without that counter)."""
        if self._memory is None:
            return 0
        for name in ("memory.events", "memory.oom_control"):
            for line in (read_file(os.path.join(self._memory, name)) or "").splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    return int(value)
        failcnt = (read_file(os.path.join(self._memory, "memory.failcnt")) or "").strip()
        return int(failcnt) if failcnt.isdigit() and int(failcnt) > 0 else 0

    def max_rss_bytes(self) -> int | None:
        """The most memory its processes used together, in bytes (sacct's MaxRSS): v1
        ``memory.max_usage_in_bytes``, v2 ``memory.peak``; None without a memory cgroup
        (ConstrainRAMSpace=no) or where the kernel has no such file. Read it before remove()."""
        return self._number("memory.peak", "memory.max_usage_in_bytes")

    def _number(self, *names: str) -> int | None:
        """The first of these files (of any of its directories) that holds a number."""
        for path in self.dirs:
            for name in names:
                value = (read_file(os.path.join(path, name)) or "").strip()
                if value.isdigit():
                    return int(value)
        return None

    def memory_bytes(self) -> int | None:
        """The memory its processes use now (v2 ``memory.current``, v1 ``memory.usage_in_bytes``); None
        without a memory cgroup."""
        return self._number("memory.current", "memory.usage_in_bytes")

    def cpu_seconds(self) -> float | None:
        """The CPU time its processes used, user and system, in seconds (seff's CPU Utilized): the
        first of :meth:`cpu_times`. Read it before remove()."""
        times = self.cpu_times()
        return None if times is None else times[0]

    def cpu_times(self) -> tuple[float, float, float] | None:
        """The CPU time its processes used in seconds, in all, in user and in system mode (sacct's
        TotalCPU, UserCPU, SystemCPU): v2 ``cpu.stat``'s usage_usec, user_usec, system_usec (kept in
        every v2 cgroup), v1 ``cpuacct.usage``, ``cpuacct.usage_user``, ``cpuacct.usage_sys`` (ns); None
        where neither is there. Read it before remove()."""
        for path in self.dirs:
            stat = {}
            for line in (read_file(os.path.join(path, "cpu.stat")) or "").splitlines():
                key, _, value = line.partition(" ")
                if value.strip().isdigit():
                    stat[key] = int(value) / 1e6
            if "usage_usec" in stat:
                return stat["usage_usec"], stat.get("user_usec", 0.0), stat.get("system_usec", 0.0)
        nanoseconds = self._number("cpuacct.usage")
        if nanoseconds is None:
            return None
        user, system = self._number("cpuacct.usage_user") or 0, self._number("cpuacct.usage_sys") or 0
        return nanoseconds / 1e9, user / 1e9, system / 1e9

    def remove(self, timeout: float = 2.0) -> bool:
        """rmdir the cgroup's directories (and any the job made below them); True when all are
        gone (or never existed).

        A cgroup can only be removed once empty; exiting processes leave it asynchronously,
        so EBUSY is retried until ``timeout``. The launcher kills the job first.
        """
        deadline = time.monotonic() + timeout
        while True:
            busy = False
            for top in self.dirs:
                for path in [d for d, _, _ in os.walk(top, topdown=False)] or [top]:
                    try:
                        os.rmdir(path)
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        if exc.errno != errno.EBUSY:
                            return False
                        busy = True
            if not busy:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


class ChildSetup:
    """``preexec_fn`` for ``subprocess.Popen``: joins the job cgroup and sets CPU affinity.

    Use as a context manager around Popen, so the cgroup fds are opened (as root) before the
    fork and closed after it::

        with ChildSetup(job_cgroup, cpus) as setup:
            proc = subprocess.Popen(argv, preexec_fn=setup, start_new_session=True, user=uid, ...)

    If either step fails in the child, Popen raises SubprocessError and nothing runs.
    """

    def __init__(self, cgroup: JobCgroup | None = None, cpus: Iterable[int] | None = None) -> None:
        self.cgroup = cgroup
        self.cpus = frozenset(cpus) if cpus else None
        self._fds: list[int] = []

    def __enter__(self) -> Self:
        try:
            for path in self.cgroup.procs_paths if self.cgroup is not None else ():
                self._fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._close()

    def _close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)

    def __call__(self) -> None:
        # runs in the child between fork and exec: keep to plain syscalls
        pid = b"%d" % os.getpid()
        for fd in self._fds:
            os.write(fd, pid)
            os.close(fd)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)
