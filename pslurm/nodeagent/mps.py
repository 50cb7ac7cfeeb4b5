"""NVIDIA MPS control daemons, one per GPU, for as long as jobs on that GPU run as MPS clients.

The agent starts ``nvidia-cuda-mps-control -d`` for a GPU when the first job that needs MPS on it
starts (an ``mps:N`` job, or a ``--gpu-mem`` slice on a GPU with gres.conf ``Name=mps``), and quits it
(``echo quit | nvidia-cuda-mps-control``) when the last of them has ended. Each daemon sees only its
GPU (CUDA_VISIBLE_DEVICES: the GPU's UUID, else its index) and has its own pipe and log
directories under the agent's spool, ``mps/gpu<i>/pipe`` and ``mps/gpu<i>/log``; its clients find it
through CUDA_MPS_PIPE_DIRECTORY. As in Slurm's example prolog, the daemon runs as the agent's user
(root) and starts an MPS server for each client's user itself.

A ``--gpu-mem`` slice on a GPU with MPS is also the driver's hard limit
(CUDA_MPS_PINNED_DEVICE_MEM_LIMIT): CUDA refuses an allocation past it *inside* the job, which the
meter never sees (the memory was never had), so the job exits with CUDA's out-of-memory error instead
of being ended by the agent. :func:`slice_refusal` tells that end from a bug in the job, so that it
ends OUT_OF_MEMORY as an overrun without MPS does (Slurm's state for a job past its memory limit).

The binary is the boundary: the tests put a fake ``nvidia-cuda-mps-control`` first on PATH.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from pslurm.nodeagent.gpus import GpuDevice

log = logging.getLogger("psd")

MPS_CONTROL = "nvidia-cuda-mps-control"
CONTROL_TIMEOUT = 10.0  # seconds a start (-d returns once the daemon is up) or a quit may take


class MpsError(Exception):
    """The MPS daemon a job needs could not be started; the message is the job's one-line reason."""


@dataclass(frozen=True)
class MpsDirs:
    """Where a GPU's daemon and its clients meet (CUDA_MPS_PIPE_DIRECTORY) and where it logs."""

    pipe: str
    log: str


class MpsDaemons:
    """The MPS control daemons of this node's GPUs, reference counted by the runs that use them.

    :meth:`acquire` and :meth:`release` take any hashable user (the agent gives the run's key) and
    are idempotent per user; thread-safe (a start for one GPU does not hold up the others)."""

    def __init__(self, directory: str, devices: Iterable[GpuDevice], timeout: float = CONTROL_TIMEOUT) -> None:
        self.directory = directory
        self.devices = {d.index: d for d in devices}
        self.timeout = timeout
        self._users: dict[int, set[Hashable]] = {}
        self._locks: dict[int, threading.Lock] = {}
        self._lock = threading.Lock()  # guards the two dicts; a GPU's own lock guards its daemon

    def dirs(self, gpu: int) -> MpsDirs:
        """The pipe and log directories of GPU ``gpu``'s daemon."""
        base = os.path.join(self.directory, f"gpu{gpu}")
        return MpsDirs(os.path.join(base, "pipe"), os.path.join(base, "log"))

    def _gpu_lock(self, gpu: int) -> threading.Lock:
        with self._lock:
            return self._locks.setdefault(gpu, threading.Lock())

    def acquire(self, gpu: int, user: Hashable) -> MpsDirs:
        """GPU ``gpu``'s daemon for ``user``, started if none of its users has it yet; MpsError (one
        line) when it cannot be."""
        with self._gpu_lock(gpu):
            users = self._users.setdefault(gpu, set())
            if not users:
                self._start(gpu)
            users.add(user)
        return self.dirs(gpu)

    def release(self, gpu: int, user: Hashable) -> None:
        """``user`` is done with GPU ``gpu``'s daemon: quit it once it has no user left (idempotent)."""
        with self._gpu_lock(gpu):
            users = self._users.get(gpu)
            if not users or user not in users:
                return
            users.discard(user)
            if not users:
                self._quit(gpu)

    def in_use(self) -> dict[int, int]:
        """How many users each running daemon has, by GPU."""
        with self._lock:
            return {gpu: len(users) for gpu, users in self._users.items() if users}

    def recover(self) -> None:
        """Quit the daemons a previous agent left running (it crashed while jobs used them): call
        before any run starts. A daemon leaves its control pipe in its pipe directory."""
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return
        for name in names:
            if not (name.startswith("gpu") and name[3:].isdigit()):
                continue
            gpu = int(name[3:])
            try:
                running = bool(os.listdir(self.dirs(gpu).pipe))
            except OSError:
                continue
            if running and shutil.which(MPS_CONTROL) is not None:
                log.warning("quitting the MPS control daemon of GPU %d a previous agent left running", gpu)
                self._quit(gpu)

    def _env(self, gpu: int) -> dict[str, str]:
        device = self.devices.get(gpu)
        dirs = self.dirs(gpu)
        visible = device.uuid if device is not None and device.uuid else str(gpu)
        return {**os.environ, "CUDA_VISIBLE_DEVICES": visible,
                "CUDA_MPS_PIPE_DIRECTORY": dirs.pipe, "CUDA_MPS_LOG_DIRECTORY": dirs.log}

    def _start(self, gpu: int) -> None:
        binary = shutil.which(MPS_CONTROL)
        if binary is None:
            raise MpsError(f"{MPS_CONTROL}: not found; MPS jobs need NVIDIA's MPS")
        dirs = self.dirs(gpu)
        try:
            for path in (self.directory, os.path.dirname(dirs.pipe), dirs.pipe, dirs.log):
                os.makedirs(path, exist_ok=True)
                os.chmod(path, 0o755)  # the jobs' users reach the daemon's pipes (they run as themselves)
        except OSError as exc:
            raise MpsError(f"cannot make the MPS directories of GPU {gpu}: {exc.strerror or exc}") from None
        rc, output = self._run(binary, ["-d"], gpu, None)
        if rc != 0:
            raise MpsError(f"{MPS_CONTROL} -d failed for GPU {gpu}"
                           f"{f' (exit {rc})' if rc is not None else ''}: {output or 'no output'}")
        log.info("started the MPS control daemon of GPU %d", gpu)

    def _quit(self, gpu: int) -> None:
        binary = shutil.which(MPS_CONTROL)
        if binary is None:
            log.warning("cannot quit the MPS control daemon of GPU %d: %s not found", gpu, MPS_CONTROL)
            return
        rc, output = self._run(binary, [], gpu, b"quit\n")
        if rc != 0:
            log.warning("quitting the MPS control daemon of GPU %d failed: %s", gpu, output or f"exit {rc}")
        else:
            log.info("quit the MPS control daemon of GPU %d", gpu)

    def _run(self, binary: str, args: list[str], gpu: int, stdin: bytes | None) -> tuple[int | None, str]:
        """Run the control binary for GPU ``gpu``: its exit status (None: it did not return in time)
        and the first line of its output. The output goes to a file, not a pipe: the daemon that
        ``-d`` forks may keep a pipe open long after the command returned."""
        with tempfile.TemporaryFile() as out:
            try:
                proc = subprocess.run([binary, *args], input=stdin, stdin=None if stdin else subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT, env=self._env(gpu),
                                      timeout=self.timeout, start_new_session=True, check=False)
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
            except OSError as exc:
                return 127, f"{binary}: {exc.strerror or exc}"
            out.seek(0)
            lines = out.read(4096).decode(errors="replace").strip().splitlines()
        first = " ".join(lines[0].split()) if lines else ""
        return rc, first if rc is not None else f"no answer in {self.timeout:.0f} s"


# CUDA's own words for a refused allocation: the runtime's and driver API's error names and strings,
# as CUDA programs and their frameworks print them (torch's "CUDA out of memory", CuPy's
# cudaErrorMemoryAllocation, JAX's RESOURCE_EXHAUSTED, a C program's cudaGetErrorString)
CUDA_REFUSAL = re.compile(rb"CUDA out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
                          rb"CUDA error: out of memory|RESOURCE_EXHAUSTED: Out of memory", re.IGNORECASE)
STDERR_TAIL = 64 << 10  # bytes of the job's stderr read at its end


def slice_refusal(exit_code: int, stderr_tail: bytes) -> bool:
    """A job that ran as an MPS client under its slice's pinned-memory limit ended by MPS's refusal:
    it exited non-zero (CUDA's error ends the program) and its stderr's tail has CUDA's
    out-of-memory words. Why this and not the others: the MPS server logs no refused allocation
    (its log has clients' connections and fatal faults), and the meter's peak is no sign (the refused
    allocation was never held: a 4 GiB request in a 2 GiB slice leaves the job at its context's few
    hundred MiB). With slices summing to at most the GPU's memory, CUDA's out-of-memory under the
    limit is the slice's."""
    return exit_code != 0 and CUDA_REFUSAL.search(stderr_tail) is not None


def read_tail(fd: int, size: int = STDERR_TAIL) -> bytes:
    """The last ``size`` bytes of the file open at ``fd`` (write-only, O_APPEND: the job's stderr as
    its user opened it), read through a new description of the same file (/proc/self/fd: never
    its path, which the user may have replaced); b"" when it cannot be read (a pipe, a tty)."""
    try:
        reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        found = os.fstat(reader)
        if not stat.S_ISREG(found.st_mode):
            return b""
        return os.pread(reader, size, max(0, found.st_size - size))
    except OSError:
        return b""
    finally:
        os.close(reader)


def refusal_note(step: str, slice_mb: int) -> str:
    """slurmstepd's line in the job's stderr when MPS refused an allocation past its slice."""
    return (f"slurmstepd: error: MPS refused an allocation of StepId={step} past the job's GPU memory slice of "
            f"{slice_mb} MiB (--gpu-mem, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). The job ends OUT_OF_MEMORY.\n")


def refusal_comment(slice_mb: int) -> str:
    """The job's SystemComment when MPS refused an allocation past its slice."""
    return f"GPU memory slice exceeded: MPS refused an allocation past the slice of {slice_mb} MiB (--gpu-mem)"
