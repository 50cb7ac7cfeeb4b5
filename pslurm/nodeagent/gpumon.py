"""GPU health and per-job usage through NVML, for an inventory that came from NVML (simulated GPUs
have a meter of their own with the same face: :mod:`pslurm.nodeagent.simgpu`).

pynvml itself is imported only by :mod:`pslurm.nodeagent.gpus` (``load_nvml``); this module works
on the module object it returns, so the one-import-site rule holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pslurm.nodeagent.gpus import GpuDevice, GpuDiscoveryError, load_nvml

# Xids that an application causes (bad kernel, OOB access, ...) and that leave the GPU usable;
# the same set the NVIDIA k8s device plugin ignores.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


class GpuMeter(Protocol):
    """What the agent reads of its GPUs: :class:`GpuMonitor` (NVML) or the simulated GPUs' meter."""

    def sample(self, indices: Iterable[int]) -> dict[int, tuple[float, int]]:
        """Utilisation % and used memory MB per GPU; GPUs that cannot be read are left out."""
        ...

    def process_memory(self, indices: Iterable[int]) -> dict[int, int]:
        """GPU memory MB per pid over the given GPUs."""
        ...

    def health(self) -> str | None:
        """A one-line drain reason, or None when healthy."""
        ...

    def forget_events(self) -> None:
        """Drop the events behind the last health reason (the controller has the drain)."""
        ...

    def close(self) -> None:
        """Release what the meter holds (idempotent)."""
        ...


class GpuMonitor:
    """Health and usage of this node's GPUs through NVML.

    Build it only for an NVML inventory (``inventory_from_gres_conf`` returned True); NVML is
    initialised on first use and GpuDiscoveryError is raised when it cannot be. Handles are
    found by UUID, then PCI bus id, then index.
    """

    def __init__(self, devices: list[GpuDevice]) -> None:
        self.devices = {d.index: d for d in devices}
        self._nv: Any = None
        self._handles: dict[int, Any] = {}
        self._events: Any = None
        self._xids: dict[int, int] = {}  # index -> first critical Xid seen (sticky until forget_events)
        self._open_lock = threading.Lock()  # the heartbeat and the usage sampler may both open first

    def open(self) -> None:
        """Initialise NVML, resolve handles and register for critical Xid events."""
        with self._open_lock:
            if self._nv is None:
                self._open()

    def _open(self) -> None:
        nv = load_nvml()
        try:
            handles = {idx: self._handle(nv, d) for idx, d in self.devices.items()}
        except nv.NVMLError as exc:
            nv.nvmlShutdown()
            raise GpuDiscoveryError(f"NVML cannot find a GPU found at start: {exc}") from None
        self._nv, self._handles = nv, handles
        try:
            self._events = nv.nvmlEventSetCreate()
            for h in self._handles.values():
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self._events)
        except nv.NVMLError:
            self._events = None  # unsupported (some GPUs, vGPU): ECC and GPU-lost still checked

    @staticmethod
    def _handle(nv: Any, d: GpuDevice) -> Any:
        if d.uuid:
            return nv.nvmlDeviceGetHandleByUUID(d.uuid)
        if d.pci_bus_id:
            return nv.nvmlDeviceGetHandleByPciBusId(d.pci_bus_id)
        return nv.nvmlDeviceGetHandleByIndex(d.index)

    def close(self) -> None:
        """Free the event set and shut NVML down (idempotent)."""
        nv, self._nv = self._nv, None
        if nv is None:
            return
        try:
            if self._events is not None:
                nv.nvmlEventSetFree(self._events)
            nv.nvmlShutdown()
        except nv.NVMLError:
            pass
        self._events = None
        self._handles.clear()

    def _index_of(self, handle: Any) -> int | None:
        for idx, h in self._handles.items():
            if h == handle:
                return idx
        return None

    def _drain_events(self) -> None:
        nv = self._nv
        while self._events is not None:
            try:
                ev = nv.nvmlEventSetWait(self._events, 0)
            except nv.NVMLError:
                return  # NVMLError_Timeout: no event pending
            idx = self._index_of(ev.device)
            if idx is not None and int(ev.eventData) not in APPLICATION_XIDS:
                self._xids.setdefault(idx, int(ev.eventData))

    def forget_events(self) -> None:
        """Drop the Xids seen so far, once the drain they caused is recorded: an Xid is an event,
        not a state, so an operator's RESUME holds unless the GPU fails again (ECC, lost, new Xid)."""
        self._xids.clear()

    def health(self) -> str | None:
        """A one-line drain reason (critical Xid, uncorrectable ECC, GPU lost), or None when healthy."""
        self.open()
        nv = self._nv
        self._drain_events()
        if self._xids:
            idx = min(self._xids)
            return f"gpu {idx}: Xid {self._xids[idx]} critical error"
        for idx, h in sorted(self._handles.items()):
            try:
                errors = nv.nvmlDeviceGetTotalEccErrors(
                    h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC
                )
            except nv.NVMLError_GpuIsLost:
                return f"gpu {idx}: GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)"
            except nv.NVMLError:
                errors = 0  # ECC off or unsupported (consumer cards): still check the GPU answers
                try:
                    nv.nvmlDeviceGetMemoryInfo(h)
                except nv.NVMLError_GpuIsLost:
                    return f"gpu {idx}: GPU has fallen off the bus (NVML_ERROR_GPU_IS_LOST)"
                except nv.NVMLError:
                    pass
            if errors > 0:
                return f"gpu {idx}: {errors} uncorrectable ECC error(s)"
        return None

    def sample(self, indices: Iterable[int]) -> dict[int, tuple[float, int]]:
        """Utilisation % and used memory MB per GPU; GPUs that cannot be read are left out."""
        self.open()
        nv = self._nv
        out: dict[int, tuple[float, int]] = {}
        for idx in indices:
            h = self._handles.get(idx)
            if h is None:
                continue
            try:
                util = nv.nvmlDeviceGetUtilizationRates(h).gpu
                used = nv.nvmlDeviceGetMemoryInfo(h).used
            except nv.NVMLError:
                continue  # health() reports a lost GPU
            out[idx] = (float(util), int(used) // (1024 * 1024))
        return out

    def process_memory(self, indices: Iterable[int]) -> dict[int, int]:
        """GPU memory MB per pid over the given GPUs (0 where the driver hides it, e.g. in containers)."""
        self.open()
        nv = self._nv
        out: dict[int, int] = {}
        for idx in indices:
            h = self._handles.get(idx)
            if h is None:
                continue
            try:
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except nv.NVMLError:
                continue
            for p in procs:
                used = p.usedGpuMemory or 0  # None: not available
                out[p.pid] = out.get(p.pid, 0) + int(used) // (1024 * 1024)
        return out


@dataclass(frozen=True)
class JobGpuUsage:
    """What a job's record keeps: GPU count, GPU-seconds, and (measured GPUs only: NVML, or simulated
    GPUs with memory) peak memory and mean util."""

    gpu_count: int
    gpu_seconds: float
    peak_gpu_memory_mb: int | None = None  # None: not measured (GPUs without a meter)
    mean_gpu_util: float | None = None


@dataclass(frozen=True)
class SliceOverrun:
    """A job whose own processes use more of its GPU's memory than its slice (``gpumem:MB``)."""

    job_id: int
    used_mb: int
    slice_mb: int
    gpus: tuple[int, ...]  # the node's indices of the job's GPUs


class UsageAccumulator:
    """GPU usage of one job, fed with ``GpuMonitor.sample`` results over time.

    GPU-seconds are allocated GPUs x elapsed (Slurm's gres/gpu TRES convention, not
    utilisation-weighted), from the job's own start and end, so they exist without NVML too.
    Each sample describes the interval since the previous one, since NVML's utilisation is an
    average over its last sample period. ``peak_memory_mb`` is the largest total at one sample of the
    job's own processes' memory (0 at a sample where the driver named other processes but none of the
    job's: their memory is never charged to it); only when the driver never named any process at all
    (it hides pids in containers) is it the devices' used memory. ``mean_util`` is time-weighted over
    the job's GPUs. Both are None until something was sampled.
    """

    def __init__(self, gpu_count: int, start: float) -> None:
        self.gpu_count = gpu_count
        self.start = start
        self.last = start
        self._peak_device: int | None = None
        self._peak_process: int | None = None  # set once the job's own processes were seen
        self._util_time = 0.0  # sum of mean-util x dt
        self._sampled_time = 0.0
        self._samples = 0
        self._util_sum = 0.0  # plain sum of per-sample means, for samples with no interval behind them

    def add(self, now: float, samples: Mapping[int, tuple[float, int]],
            job_memory_mb: int | None = None) -> None:
        """Record the samples taken at ``now`` (seconds, monotonic); ``job_memory_mb``: the job's own
        processes' memory (0: the driver named only others'), None when the driver named no process
        at all (then the devices' used memory stands for it, until a sample names some)."""
        dt = max(0.0, now - self.last)
        self.last = max(self.last, now)
        if not samples:
            return
        utils = [u for u, _ in samples.values()]
        self._util_time += sum(utils) / len(utils) * dt
        self._sampled_time += dt
        self._samples += 1
        self._util_sum += sum(utils) / len(utils)
        self._peak_device = max(self._peak_device or 0, sum(m for _, m in samples.values()))
        if job_memory_mb is not None:
            self._peak_process = max(self._peak_process or 0, job_memory_mb)

    @property
    def peak_memory_mb(self) -> int | None:
        return self._peak_process if self._peak_process is not None else self._peak_device

    @property
    def gpu_seconds(self) -> float:
        return self.gpu_count * (self.last - self.start)

    @property
    def mean_util(self) -> float | None:
        if self._sampled_time:
            return self._util_time / self._sampled_time
        return self._util_sum / self._samples if self._samples else None

    def result(self, elapsed: float) -> JobGpuUsage:
        """The job's usage record for ``elapsed`` seconds of wall time."""
        return JobGpuUsage(self.gpu_count, self.gpu_count * max(0.0, elapsed), self.peak_memory_mb,
                           self.mean_util)


def session_of(pid: int) -> int | None:
    """The session id of ``pid`` (a job is its own session), None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


def sample_job(monitor: GpuMeter, indices: Iterable[int], session: int | None
               ) -> tuple[dict[int, tuple[float, int]], int | None]:
    """Per-GPU (util, used MB) for a job's GPUs, and the memory its own processes hold.

    The second value is 0 when NVML names processes on the job's GPUs but none of the job's session
    (it has not touched the GPU, or its neighbours' and an MPS server's are there: theirs is not its
    own), and None only when NVML names no process at all there (the driver hides pids in
    containers) or the job's session is not known yet: the caller then counts the devices' used
    memory, which is the job's own with whole-GPU allocation.
    """
    wanted = list(indices)
    samples = monitor.sample(wanted)
    if session is None:
        return samples, None
    named = monitor.process_memory(wanted)
    if not named:
        return samples, None
    return samples, sum(mb for pid, mb in named.items() if session_of(pid) == session)


@dataclass
class _Tracked:
    usage: UsageAccumulator
    gpus: tuple[int, ...]
    session: int | None = None
    slice_mb: int | None = None  # gpumem:MB: the memory its own processes may use on its GPU


class UsageTracker:
    """GPU usage of the jobs running on this node.

    With a monitor (NVML, or simulated GPUs with memory) a sampler calls :meth:`sample_all` every
    few seconds; without one only GPU-seconds are known. Thread-safe: the launcher's watcher
    threads end jobs.
    """

    def __init__(self, monitor: GpuMeter | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.monitor = monitor
        self.clock = clock
        self._jobs: dict[int, _Tracked] = {}
        self._lock = threading.Lock()

    def begin(self, job_id: int, gpu_indices: Iterable[int], slice_mb: int | None = None) -> None:
        """Start tracking a job (before its processes start, so a quick end finds it); ``slice_mb``:
        its share of its GPU's memory (``gpumem:MB``), watched by :meth:`sample_all`."""
        indices = tuple(gpu_indices)
        if indices:
            with self._lock:
                self._jobs[job_id] = _Tracked(UsageAccumulator(len(indices), self.clock()), indices,
                                              slice_mb=slice_mb)

    def set_session(self, job_id: int, session: int) -> None:
        """The job's session id (its leader's pid), to tell its processes among NVML's."""
        with self._lock:
            if job_id in self._jobs:
                self._jobs[job_id].session = session

    def peak_memory(self, job_id: int) -> int | None:
        """The job's peak GPU memory so far (None: not tracked, or nothing measured yet)."""
        with self._lock:
            tracked = self._jobs.get(job_id)
        return None if tracked is None else tracked.usage.peak_memory_mb

    def _sample(self, job_id: int) -> SliceOverrun | None:
        with self._lock:
            tracked = self._jobs.get(job_id)
        if tracked is None or self.monitor is None:
            return None
        samples, job_mem = sample_job(self.monitor, tracked.gpus, tracked.session)
        tracked.usage.add(self.clock(), samples, job_mem)
        # only the job's own processes count against its slice: the GPU's used memory is its
        # neighbours' too (NVML that hides pids, in containers, leaves the slice unwatched)
        if tracked.slice_mb is not None and job_mem is not None and job_mem > tracked.slice_mb:
            return SliceOverrun(job_id, job_mem, tracked.slice_mb, tracked.gpus)
        return None

    def sample_all(self) -> list[SliceOverrun]:
        """One sample of every tracked job's GPUs (nothing without a monitor); the jobs that use
        more than their slice of GPU memory."""
        if self.monitor is None:
            return []
        with self._lock:
            ids = list(self._jobs)
        return [over for job_id in ids if (over := self._sample(job_id)) is not None]

    def end(self, job_id: int, gpu_count: int, elapsed: float) -> JobGpuUsage | None:
        """The job's usage (after a last sample); None for a job without GPUs."""
        if self.monitor is not None:
            try:
                self._sample(job_id)
            except GpuDiscoveryError:
                pass  # NVML went away: keep what was measured; health() reports it
        with self._lock:
            tracked = self._jobs.pop(job_id, None)
        if tracked is not None:
            return tracked.usage.result(elapsed)
        return JobGpuUsage(gpu_count, gpu_count * max(0.0, elapsed)) if gpu_count else None
