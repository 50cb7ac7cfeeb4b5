"""The node's GPUs as the agent uses them: their sharing (MPS daemons, simulated GPUs:
``shares.GpuSharing``), their monitor (NVML's, or the simulated GPUs' meter), the jobs' usage and
memory slices (``gpumon.UsageTracker``), and what a heartbeat says of them (health, use)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pslurm.core.jobspec import JobRecord
from pslurm.nodeagent.environment import GpuSetup
from pslurm.nodeagent.gpumon import GpuMeter, JobGpuUsage, SliceOverrun, UsageTracker
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.link import GpuUse, RunKey
from pslurm.nodeagent.shares import GpuSharing, memory_slice

log = logging.getLogger("psd")

USAGE_INTERVAL = 1.0  # seconds between GPU usage samples of running jobs (and checks of their memory slices)


class NodeGpus:
    """One node's GPUs (see the module's docstring).

    ``monitor`` is given when the inventory came from NVML: health is then reported with every
    heartbeat and jobs' GPU usage sampled. Without it, GPUs with a gres.conf ``Memory=`` are
    simulated (:mod:`pslurm.nodeagent.simgpu`) and their meter is the monitor; with neither only
    GPU-seconds are known.
    """

    def __init__(self, devices: list[GpuDevice], spool: str, monitor: GpuMeter | None) -> None:
        self.devices = devices
        self.sharing = GpuSharing(devices, spool, monitor)  # MPS daemons, simulated GPUs
        self.monitor: GpuMeter | None = monitor if monitor is not None else self.sharing.simulated
        self.usage = UsageTracker(self.monitor)

    def health(self) -> str | None:
        """The GPUs' health as a one-line drain reason, None when healthy or not watched."""
        if self.monitor is None:
            return None
        try:
            reason = self.monitor.health()
        except Exception as exc:  # NVML gone or failing: that is itself the node's problem
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            reason = f"GPU health check failed: {first}"
        if reason:
            log.warning("GPU health: %s", reason)
        return reason

    def drain_sent(self) -> None:
        """The controller has the health drain: an operator's RESUME now holds."""
        if self.monitor is not None:
            self.monitor.forget_events()

    def use(self) -> list[GpuUse]:
        """What each GPU of the node has in use now, from the monitor (none without one, or when
        it cannot be read: the health check reports that)."""
        if self.monitor is None:
            return []
        try:
            samples = self.monitor.sample([d.index for d in self.devices])
        except Exception as exc:
            log.debug("GPU use for the heartbeat: %s", exc)
            return []
        return [GpuUse(index=i, memory_used_mb=mb, util=util) for i, (util, mb) in sorted(samples.items())]

    def usage_loop(self, stop: threading.Event, on_overrun: Callable[[SliceOverrun], None],
                   interval: float = USAGE_INTERVAL) -> None:
        """Sample running jobs' GPUs every ``interval`` seconds until ``stop`` (only started with a
        monitor); ``on_overrun`` is told of each job that uses more than its slice of GPU memory."""
        while not stop.wait(interval):
            try:
                overruns = self.usage.sample_all()
            except Exception as exc:  # a failing sample must not end sampling; health reports NVML
                log.debug("GPU usage sample failed: %s", exc)
                continue
            for over in overruns:
                on_overrun(over)

    def follow(self, job: JobRecord) -> None:
        """Follow a run's GPU usage (and its memory slice) from now on; :meth:`end` ends it."""
        self.usage.begin(job.job_id, job.gpu_indices, memory_slice(job))

    def setup(self, job: JobRecord, key: RunKey, owner: tuple[int, int] | None) -> GpuSetup:
        """Set up a run's share (an MPS daemon, a simulated GPU's directory; SetupError when it
        cannot be), for ``owner`` (uid, gid) when the agent runs as root; :meth:`end` undoes it."""
        return self.sharing.setup(job, key, owner)

    def session(self, job_id: int, session: int) -> None:
        """The run's leader's session: whose processes' GPU memory is its own."""
        self.usage.set_session(job_id, session)

    def end(self, job: JobRecord, key: RunKey, elapsed: float) -> JobGpuUsage | None:
        """A run's end: its share torn down (its MPS daemon may quit), its usage (None: no GPUs,
        or it could not be read). Never raises: the end is reported all the same."""
        try:
            self.sharing.teardown(job, key)
        except Exception:
            log.exception("job %d: GPU sharing teardown failed", job.job_id)
        try:
            return self.usage.end(job.job_id, len(job.gpu_indices), elapsed)
        except Exception as exc:  # the end is reported without usage rather than not at all
            log.warning("job %d: no usage: %s", job.job_id, exc)
            return None

    def recover(self) -> None:
        """Remove what a previous agent's sharing left (MPS daemons, simulated GPU directories)."""
        self.sharing.recover()

    def close(self) -> None:
        if self.monitor is not None:
            self.monitor.close()
