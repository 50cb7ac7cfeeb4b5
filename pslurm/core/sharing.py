"""GPU sharing: what a job asks of one shared GPU, and what a GPU offers to share.

Three ways to share a GPU, each a GRES item of the job's request (per node):

- ``shard:K`` (Slurm's gres/shard): K of the GPU's shards; nothing is fenced, only counted.
- ``mps:N`` (Slurm's gres/mps): N of the GPU's MPS units; the job runs as a client of the GPU's
  MPS control daemon with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = N * 100 / the GPU's MPS count.
- ``gpumem:MB`` (pslurm's own, from ``--gpu-mem=SIZE|auto``): a slice of the GPU's memory; the
  agent watches the job's processes on the GPU (and under MPS the driver enforces it).

A job's shared request is served from one GPU per node, as Slurm serves shards and MPS. A GPU is in
one mode at a time: free, held whole (``gpu:N``), or shared in one of the three ways; a GPU held
whole is never shared, and a shared one is never handed out whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pslurm.core.gres import GresRequest

SHARE_KINDS = ("shard", "mps", "gpumem")


@dataclass(frozen=True)
class GpuShare:
    """What a job takes of one shared GPU: ``amount`` shards, MPS units or MB (``kind``), on a GPU
    of ``type`` when given."""

    kind: str  # one of SHARE_KINDS
    amount: int
    type: str | None = None


def share_of(gres: Iterable[GresRequest]) -> GpuShare | None:
    """The shared-GPU part of a job's request, None when it asks for none. Admission makes sure a
    request holds at most one share item and no whole GPUs beside it (:func:`sharing_error`)."""
    for g in gres:
        if g.name in SHARE_KINDS:
            return GpuShare(g.name, g.count, g.type)
    return None


def sharing_error(gres: Iterable[GresRequest]) -> str | None:
    """Why a request's GRES cannot be served (one line), or None. A job asks for whole GPUs or for
    one kind of share, never both (Slurm: a GPU is allocated as gres/gpu or as gres/mps, not both)."""
    items = list(gres)
    kinds = [g.name for g in items if g.name in SHARE_KINDS]
    if len(kinds) > 1:
        return f"Invalid GRES specification: only one of shard, mps and --gpu-mem may be asked ({', '.join(kinds)})"
    if kinds and any(g.name == "gpu" for g in items):
        return f"Invalid GRES specification: {kinds[0]} cannot be combined with whole GPUs (gpu)"
    return None
