"""Device isolation (cgroup v1 ``devices``) and CPU affinity for job processes.

A job is put into its cgroup *before* it execs, from ``subprocess.Popen``'s ``preexec_fn``
(see :class:`ChildSetup`). Why preexec_fn and not a shell wrapper or a move after start:

- moving the pid after ``Popen`` returns races with the job: it may already have opened a
  device or forked children that stay outside the cgroup;
- the job runs as the submitting user, and ``cgroup.procs`` is root's: the fd is opened by
  the (root) agent before fork and only *written* in the child, which v1 allows because the
  writer moves itself. ``preexec_fn`` runs after ``setreuid``, so this covers ``user=``;
- a ``sh -c 'echo $$ >&N; exec ...'`` wrapper cannot name fds above 9 in dash, and a Python
  wrapper needs an interpreter the job user can execute.

The child-side code does only ``os.write``/``os.close``/``sched_setaffinity`` on values prepared
in the parent: no imports, locks or logging, which keeps preexec_fn safe in the threaded agent.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Self

from pslurm.nodeagent.gpus import GpuDevice

NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
NVIDIA_MODESET_MINOR = 254
# /dev/null, zero, full, random, urandom, tty, console, ptmx, pts/*: what any process expects
BASIC_DEVICES = ("c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
                 "c 5:0 rwm", "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm")  # fmt: skip
V1_MOUNT = "/sys/fs/cgroup/devices"


class CgroupError(OSError):
    """A job cgroup could not be created or set up; the message is one line."""


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``"0-3,8,10-11"`` -> ``(0, 1, 2, 3, 8, 10, 11)`` (cpuset / Cores= syntax); ``""`` -> ``()``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi) if hi else int(lo)
        if last < first:
            raise ValueError(f"bad CPU range {part!r}")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def affinity_for(devices: list[GpuDevice], indices: Iterable[int]) -> set[int] | None:
    """CPUs close to the allocated GPUs (union of their cores) that this process may use.

    None when no allocated GPU has cores known, or when none of those cores is usable here
    (better unbound than failing the launch).
    """
    wanted = set(indices)
    cores: set[int] = set()
    for d in devices:
        if d.index in wanted and d.cores:
            cores.update(d.cores)
    if not cores:
        return None
    return (cores & os.sched_getaffinity(0)) or None


def _find_v1_mount(mounts: str = "/proc/self/mounts") -> str | None:
    try:
        with open(mounts) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 4 and fields[2] == "cgroup" and "devices" in fields[3].split(","):
                    return fields[1]
    except OSError:
        pass
    return None


def nvidia_uvm_major(proc_devices: str = "/proc/devices") -> int | None:
    """The (dynamic) major of ``nvidia-uvm`` from /proc/devices, or None when it is not loaded."""
    try:
        with open(proc_devices) as f:
            for line in f:
                fields = line.split()
                if len(fields) == 2 and fields[1] == "nvidia-uvm":
                    return int(fields[0])
    except OSError:
        pass
    return None


def _write(path: str, value: str) -> None:
    # one rule per write(): the kernel parses a single rule per call
    with open(path, "w") as f:
        f.write(value)


class JobCgroup:
    """One job's devices cgroup (v1)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs_path = os.path.join(path, "cgroup.procs")

    def add_pid(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the cgroup; its later children follow."""
        _write(self.procs_path, str(pid))

    def pids(self) -> list[int]:
        """Processes in the cgroup now (empty once removed)."""
        try:
            with open(self.procs_path) as f:
                return [int(x) for x in f.read().split()]
        except FileNotFoundError:
            return []

    def remove(self, timeout: float = 2.0) -> bool:
        """rmdir the cgroup; True when it is gone (or never existed).

        A cgroup can only be removed once empty; exiting processes leave it asynchronously,
        so EBUSY is retried until ``timeout``. The launcher kills the job first.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                    return False
            time.sleep(0.02)


class DeviceCgroups:
    """Creates per-job device cgroups under ``<devices mount>/<parent>/job_<id>`` (cgroup v1)."""

    def __init__(self, mount: str = V1_MOUNT, parent: str = "pslurm") -> None:
        self.mount = mount
        self.base = os.path.join(mount, parent)

    @classmethod
    def probe(cls, mount: str | None = None) -> str | None:
        """None when device cgroups can be used here, else a one-line reason."""
        if os.geteuid() != 0:
            return f"device cgroups need root (the agent runs as uid {os.geteuid()})"
        mount = mount or _find_v1_mount() or V1_MOUNT
        if os.path.exists(os.path.join(mount, "devices.allow")):
            if not os.access(os.path.join(mount, "devices.allow"), os.W_OK):
                return f"{mount} is read-only here"
            return None
        if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            return "cgroup v2 device control (eBPF) is not supported by this agent"
        return f"no cgroup v1 devices controller mounted (looked at {mount})"

    @classmethod
    def detect(cls, parent: str = "pslurm") -> DeviceCgroups:
        """An instance on the devices hierarchy mounted on this host (call probe() first)."""
        return cls(_find_v1_mount() or V1_MOUNT, parent)

    def create(self, job_id: int, allowed_minors: list[int]) -> JobCgroup:
        """Make (or reuse) the job's cgroup: deny all, then the basics and its own GPUs.

        Raises CgroupError when a GPU rule cannot be written (e.g. the parent, such as an LXC
        container's cgroup, does not allow that device); a basic rule the parent lacks is skipped.
        """
        path = os.path.join(self.base, f"job_{job_id}")
        try:
            os.makedirs(path, exist_ok=True)
            _write(os.path.join(path, "devices.deny"), "a")
        except OSError as exc:
            raise CgroupError(exc.errno, f"cannot set up device cgroup {path}: {exc.strerror}") from None
        allow = os.path.join(path, "devices.allow")
        for rule in BASIC_DEVICES:
            try:
                _write(allow, rule)
            except OSError:
                pass  # not allowed by our own parent: the job cannot have it either
        gpu_rules = [f"c {NVIDIA_MAJOR}:{m} rwm" for m in sorted(set(allowed_minors))]
        if allowed_minors:
            gpu_rules += [
                f"c {NVIDIA_MAJOR}:{NVIDIACTL_MINOR} rwm",
                f"c {NVIDIA_MAJOR}:{NVIDIA_MODESET_MINOR} rwm",
            ]
            uvm = nvidia_uvm_major()
            if uvm is not None:
                gpu_rules.append(f"c {uvm}:* rwm")
        for rule in gpu_rules:
            try:
                _write(allow, rule)
            except OSError as exc:
                raise CgroupError(exc.errno, f"cannot allow '{rule}' in {path}: {exc.strerror}") from None
        return JobCgroup(path)

    def remove_parents(self) -> None:
        """rmdir this agent's parent cgroup and, when no other agent uses it, the top one."""
        path = self.base
        while os.path.normpath(path) != os.path.normpath(self.mount):
            try:
                os.rmdir(path)
            except OSError:
                return  # not empty (a job still there, or another agent's node): leave it
            path = os.path.dirname(path)

    def get(self, job_id: int) -> JobCgroup:
        """The job's cgroup object without touching the filesystem (for cleanup after a restart)."""
        return JobCgroup(os.path.join(self.base, f"job_{job_id}"))


class ChildSetup:
    """``preexec_fn`` for ``subprocess.Popen``: joins the job cgroup and sets CPU affinity.

    Use as a context manager around Popen, so the cgroup fd is opened (as root) before the
    fork and closed after it::

        with ChildSetup(job_cgroup, cpus) as setup:
            proc = subprocess.Popen(argv, preexec_fn=setup, start_new_session=True, user=uid, ...)

    If either step fails in the child, Popen raises SubprocessError and nothing runs.
    """

    def __init__(self, cgroup: JobCgroup | None = None, cpus: Iterable[int] | None = None) -> None:
        self.cgroup = cgroup
        self.cpus = frozenset(cpus) if cpus else None
        self._fd: int | None = None

    def __enter__(self) -> Self:
        if self.cgroup is not None:
            self._fd = os.open(self.cgroup.procs_path, os.O_WRONLY | os.O_CLOEXEC)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __call__(self) -> None:
        # runs in the child between fork and exec: keep to plain syscalls
        if self._fd is not None:
            os.write(self._fd, b"%d" % os.getpid())
            os.close(self._fd)
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)
