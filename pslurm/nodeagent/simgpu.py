"""Simulated GPUs with memory: the GPU memory their jobs' processes say they use.

GPUs from a static gres.conf with ``Memory=`` (pslurm's own key) have no NVML behind them. So that
memory slices (``--gpu-mem``), their enforcement and the usage records work on them too, each job on
such a GPU gets a directory of its own, named by ``PSLURM_SIMULATED_GPU_DIR``, and a process "uses"
GPU memory by writing a whole number of MB into a file named by its pid there::

    echo 3000 > "$PSLURM_SIMULATED_GPU_DIR/$$"

That use counts while the process lives: a GPU frees a process's memory when it exits. As with
NVML, a job's use is that of the processes in its session (``gpumon.sample_job``). A file counts
only for a process of the directory's own job: one of the directory owner's processes, and, where
it is in a job's cgroup (a root agent's jobs), in this job's. A file named after another job's pid
is ignored, so no job can make another look over its slice (and get it killed OUT_OF_MEMORY).
The directory is the job's user's, so the agent reads it with care: no symlink is followed, only
regular files with a single link are opened, and what is not a small whole number is ignored.
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
import threading
from collections.abc import Iterable

from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.runs import proc_info
from pslurm.nodeagent.userfiles import private_dir, remove_tree

log = logging.getLogger("psd")

ENV_VAR = "PSLURM_SIMULATED_GPU_DIR"
MAX_ENTRIES = 1024  # names looked at per job and sample: a directory the user fills does not stall the agent
MAX_FILE = 32  # bytes: a number of MB and a newline, with room to spare
MAX_MB = 1 << 30  # no GPU has more: a larger number is ignored

RunKey = tuple[int, int]  # (job id, restarts)


class SimulatedGpus:
    """The meter (:class:`pslurm.nodeagent.gpumon.GpuMeter`) of simulated GPUs with memory.

    A job's declared memory is on its first simulated GPU (a shared job has only the one).
    Utilisation is 100 % while any job's process holds memory on the GPU, else 0: there is no
    compute to measure, and a job that holds GPU memory is taken to be using the GPU.
    Simulated GPUs are always healthy. Thread-safe.
    """

    def __init__(self, devices: Iterable[GpuDevice], directory: str) -> None:
        self.memory = {d.index: d.memory_mb for d in devices if d.memory_mb}  # the GPUs it measures
        self.directory = directory  # the jobs' directories are made in it
        self._jobs: dict[RunKey, tuple[int, str]] = {}  # run -> (its GPU, its directory)
        self._lock = threading.Lock()

    def open_job(self, key: RunKey, gpu_indices: Iterable[int], owner: tuple[int, int] | None) -> str | None:
        """Make the run's directory (0700, given to ``owner`` (uid, gid) when set) and watch it; its
        path, or None when the run has no simulated GPU with memory. OSError when it cannot be made."""
        gpus = [i for i in gpu_indices if i in self.memory]
        if not gpus:
            return None
        os.makedirs(self.directory, exist_ok=True)
        os.chmod(self.directory, 0o755)  # the jobs' users reach their own directories in it
        path = os.path.join(self.directory, f"job{key[0]}.{key[1]}")
        private_dir(path, owner)
        with self._lock:
            self._jobs[key] = (gpus[0], path)
        return path

    def close_job(self, key: RunKey) -> None:
        """Forget the run and remove its directory (idempotent)."""
        with self._lock:
            entry = self._jobs.pop(key, None)
        if entry is not None:
            try:
                remove_tree(entry[1])
            except OSError as exc:  # left behind: the next agent's recover() removes it
                log.warning("could not remove %s: %s", entry[1], exc)

    def recover(self) -> None:
        """Remove the directories a previous agent left (call before any run starts)."""
        with self._lock:
            if self._jobs:
                return
        try:
            remove_tree(self.directory)
        except OSError as exc:
            log.warning("could not remove the simulated GPUs' leftovers in %s: %s", self.directory, exc)

    def _dirs(self, indices: Iterable[int]) -> list[tuple[int, str, int]]:
        """(GPU, directory, job id) of the runs on these GPUs."""
        wanted = set(indices)
        with self._lock:
            return [(gpu, path, key[0]) for key, (gpu, path) in self._jobs.items() if gpu in wanted]

    def sample(self, indices: Iterable[int]) -> dict[int, tuple[float, int]]:
        """Utilisation % and used MB of each simulated GPU asked for (others are left out)."""
        wanted = [i for i in indices if i in self.memory]
        used = dict.fromkeys(wanted, 0)
        for gpu, path, job_id in self._dirs(wanted):
            used[gpu] += sum(declared_memory(path, job_id).values())
        return {i: (100.0 if mb else 0.0, mb) for i, mb in used.items()}

    def process_memory(self, indices: Iterable[int]) -> dict[int, int]:
        """MB per live pid that declared memory on these GPUs (in its own job's directory)."""
        out: dict[int, int] = {}
        for _, path, job_id in self._dirs(indices):
            for pid, mb in declared_memory(path, job_id).items():
                out[pid] = out.get(pid, 0) + mb
        return out

    def health(self) -> str | None:
        """Always healthy: there is no hardware to fail."""
        return None

    def forget_events(self) -> None:
        """Nothing to forget."""

    def close(self) -> None:
        """Nothing to release: the runs' directories go with their ends."""


def declared_memory(directory: str, job_id: int) -> dict[int, int]:
    """MB per live pid of job ``job_id``, from the files named by pids in its directory (see the
    module's doc): a pid that is not one of that job's processes is ignored."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    out: dict[int, int] = {}
    try:
        owner = os.fstat(dir_fd).st_uid
        with os.scandir(dir_fd) as entries:
            for entry in itertools.islice(entries, MAX_ENTRIES):
                name = entry.name
                if not (name.isascii() and name.isdigit() and len(name) <= 10):
                    continue
                mb = _read_number(dir_fd, name)
                info = proc_info(int(name)) if mb else None
                if mb and info is not None and info.state not in "ZXx" and _of_job(int(name), job_id, owner):
                    out[int(name)] = mb
    except OSError:
        pass  # the directory went with its run
    finally:
        os.close(dir_fd)
    return out


def _of_job(pid: int, job_id: int, owner: int) -> bool:
    """Whether process ``pid`` is one of job ``job_id``'s: it is the job's user's (``owner``, who owns
    the directory), and in the job's cgroup if it is in any pslurm job's (``.../pslurm_*/.../job_N``:
    a process cannot leave its job's cgroup for another's)."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != owner:
            return False
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read(16384).splitlines()
    except OSError:
        return False
    jobs = {part for line in lines if "/pslurm_" in line for part in line.split("/") if part.startswith("job_")}
    return not jobs or jobs == {f"job_{job_id}"}


def _plain(st: os.stat_result) -> bool:
    # a single link: not a hard link to a file of someone else's, and no device, FIFO or symlink
    return stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_size <= MAX_FILE


def _read_number(dir_fd: int, name: str) -> int | None:
    """The whole number in the file ``name`` (1 to MAX_MB), None for anything else."""
    try:
        if not _plain(os.stat(name, dir_fd=dir_fd, follow_symlinks=False)):  # before any open
            return None
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                     dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not _plain(os.fstat(fd)):  # swapped between the look and the open
            return None
        text = os.read(fd, MAX_FILE + 1).strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not (text.isdigit() and 0 < len(text) <= 10):
        return None
    mb = int(text)
    return mb if 0 < mb <= MAX_MB else None
