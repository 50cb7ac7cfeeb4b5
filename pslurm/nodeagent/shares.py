"""The agent's side of GPU sharing (:mod:`pslurm.core.sharing`): what a run on a shared or simulated
GPU needs set up before it starts and torn down once it has ended, and the words for a run that
used more than its slice of GPU memory.

- ``shard:K``: nothing to set up (shards are only counted); SLURM_SHARDS_ON_NODE=K.
- ``mps:N``: the GPU's MPS control daemon (:mod:`pslurm.nodeagent.mps`), started for the first
  such run and quit after the last; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.
- ``gpumem:MB``: the agent watches the run's own processes on the GPU (:meth:`UsageTracker.sample_all`)
  and ends the run OUT_OF_MEMORY when they use more than MB; on a GPU with MPS configured the run
  is also an MPS client with the driver's hard limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT).
- any run on a simulated GPU with memory: its PSLURM_SIMULATED_GPU_DIR (:mod:`pslurm.nodeagent.simgpu`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from pslurm.core.jobspec import JobRecord
from pslurm.core.sharing import GpuShare, share_of
from pslurm.nodeagent.environment import GpuSetup
from pslurm.nodeagent.gpumon import GpuMeter, SliceOverrun
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.mps import MpsDaemons, MpsError
from pslurm.nodeagent.simgpu import RunKey, SimulatedGpus


class SetupError(Exception):
    """A run's GPU set-up failed; the message is its one-line launch failure."""


class GpuSharing:
    """Set-up and tear-down of runs on shared and simulated GPUs, for one node.

    ``monitor``: the node's NVML monitor, if any; without it, GPUs with a gres.conf ``Memory=`` are
    simulated and :attr:`simulated` is their meter."""

    def __init__(self, devices: Iterable[GpuDevice], spool_dir: str, monitor: GpuMeter | None) -> None:
        self.devices = {d.index: d for d in devices}
        self.mps = MpsDaemons(os.path.join(spool_dir, "mps"), self.devices.values())
        self.simulated: SimulatedGpus | None = None
        if monitor is None and any(d.memory_mb for d in self.devices.values()):
            self.simulated = SimulatedGpus(self.devices.values(), os.path.join(spool_dir, "gpusim"))

    def recover(self) -> None:
        """Quit the MPS daemons and remove the simulated GPUs' directories a previous agent left."""
        self.mps.recover()
        if self.simulated is not None:
            self.simulated.recover()

    def _mps_gpu(self, job: JobRecord, share: GpuShare | None) -> int | None:
        """The GPU whose MPS daemon the run is a client of, None when it runs without MPS."""
        if share is None or not job.gpu_indices:
            return None
        gpu = job.gpu_indices[0]
        device = self.devices.get(gpu)
        if share.kind == "mps" or (share.kind == "gpumem" and device is not None and device.mps > 0):
            return gpu
        return None

    def setup(self, job: JobRecord, key: RunKey, owner: tuple[int, int] | None) -> GpuSetup:
        """What the run needs before it starts; SetupError (one line: the run's launch failure) when
        it cannot have it. ``owner``: (uid, gid) the run's simulated GPU directory is given to."""
        share = share_of(job.spec.gres)
        mps_gpu = self._mps_gpu(job, share)
        try:
            dirs = self.mps.acquire(mps_gpu, key) if mps_gpu is not None else None
        except MpsError as exc:
            raise SetupError(str(exc)) from None
        simulated = ""
        if self.simulated is not None:
            try:
                simulated = self.simulated.open_job(key, job.gpu_indices, owner) or ""
            except OSError as exc:
                self.teardown(job, key)
                raise SetupError(f"cannot make the simulated GPU's directory: {exc.strerror or exc}") from None
        device = self.devices.get(job.gpu_indices[0]) if job.gpu_indices else None
        return GpuSetup(share=share, mps_count=device.mps if device is not None else 0,
                        mps_pipe=dirs.pipe if dirs else "", mps_log=dirs.log if dirs else "",
                        simulated_dir=simulated)

    def teardown(self, job: JobRecord, key: RunKey) -> None:
        """Undo :meth:`setup` once the run has ended (idempotent; nothing for a run never set up)."""
        mps_gpu = self._mps_gpu(job, share_of(job.spec.gres))
        if mps_gpu is not None:
            self.mps.release(mps_gpu, key)
        if self.simulated is not None:
            self.simulated.close_job(key)


def memory_slice(job: JobRecord) -> int | None:
    """The run's slice of its GPU's memory in MB (``gpumem:MB``), None when it has none."""
    share = share_of(job.spec.gres)
    return share.amount if share is not None and share.kind == "gpumem" else None


def overrun_note(job: JobRecord, over: SliceOverrun, step: str) -> str:
    """slurmstepd's line in the job's stderr when it is killed for using more than its slice."""
    gpus = ",".join(str(i) for i in over.gpus)
    return (f"slurmstepd: error: Detected GPU memory use of {over.used_mb} MiB on GPU {gpus} by "
            f"StepId={job.job_id}.{step}, over the job's slice of {over.slice_mb} MiB (--gpu-mem). "
            "The job is killed.\n")


def overrun_comment(over: SliceOverrun) -> str:
    """The job's SystemComment when it was killed for using more than its slice."""
    return f"GPU memory slice exceeded: used {over.used_mb} MiB of {over.slice_mb} MiB (--gpu-mem)"
