"""torch on the GPU stand-in (pslurm_gpu_standin.py): enough of its face for tests/gpu/run.sh and the
packing bench's training job, with CUDA's memory behaviour: a process sees the GPUs it may open, holds
what it allocates (NVML names it), and under an MPS pinned-memory limit (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT,
with the control daemon's pipe there) an allocation past the limit raises CUDA's out-of-memory error."""

from __future__ import annotations

import atexit
import os
import time
from typing import Any

from pslurm_gpu_standin import hold, visible

__version__ = "0.0+standin"
uint8, float32, long = "uint8", "float32", "int64"
CONTEXT_MB = 300  # what a CUDA context holds once a process touched the GPU
STEP_S = 0.001  # a training step's time on the stand-in GPU: a job of a few thousand steps is sampled by the meter


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError."""


class _Device:
    def __init__(self) -> None:
        self.gpu: int | None = None
        self.held_mb = 0

    def allocate(self, nbytes: int) -> None:
        if self.gpu is None:
            seen = visible()
            if not seen:
                raise RuntimeError("CUDA error: no CUDA-capable device is detected")
            self.gpu, self.held_mb = seen[0], CONTEXT_MB
            atexit.register(hold, self.gpu, 0)
        mb = -(-nbytes // 2**20)
        limit = _mps_limit_mb()
        if limit is not None and self.held_mb + mb > limit:
            raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {mb / 1024:.2f} GiB. GPU 0 has a total "
                                   f"capacity of {limit / 1024:.2f} GiB of which {(limit - self.held_mb) / 1024:.2f} "
                                   "GiB is free.")
        self.held_mb += mb
        hold(self.gpu, self.held_mb)


def _mps_limit_mb() -> int | None:
    """Device 0's pinned-memory limit while an MPS control daemon serves this client, else None."""
    pipe, limit = os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), os.environ.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "")
    if not pipe or not os.path.exists(os.path.join(pipe, "control")) or not limit.startswith("0="):
        return None
    value = limit[2:].split(",")[0]
    return int(value[:-1]) * (1024 if value.endswith("G") else 1) if value[-1:] in "MG" else int(value) // 2**20


_device = _Device()


class Tensor:
    def __init__(self, nbytes: int = 4, device: str = "cpu") -> None:
        self.device = device
        if str(device).startswith("cuda"):
            _device.allocate(nbytes)

    def __matmul__(self, other: Any) -> Tensor:
        return self

    def __truediv__(self, other: Any) -> Tensor:
        return self

    __itruediv__ = __truediv__

    def norm(self) -> Tensor:
        return self

    def item(self) -> float:
        return 0.5

    def backward(self) -> None:
        pass

    def to(self, device: str) -> Tensor:
        return self


def _size(shape: tuple[Any, ...]) -> int:
    n = 1
    for s in shape:
        for d in s if isinstance(s, tuple) else (s,):
            n *= int(d)
    return n


def empty(*shape: Any, dtype: str = float32, device: str = "cpu") -> Tensor:
    return Tensor(_size(shape) * (1 if dtype == uint8 else 4), device)


def randn(*shape: Any, device: str = "cpu") -> Tensor:
    return Tensor(_size(shape) * 4, device)


def randint(low: int, high: int, size: tuple[int, ...], device: str = "cpu") -> Tensor:
    return Tensor(_size(size) * 8, device)


def manual_seed(seed: int) -> None:
    pass


class cuda:  # noqa: N801 - torch's name
    OutOfMemoryError = OutOfMemoryError

    @staticmethod
    def device_count() -> int:
        return len(visible())

    @staticmethod
    def is_available() -> bool:
        return bool(visible())

    @staticmethod
    def synchronize() -> None:
        pass


class _Module:
    def __init__(self, *layers: Any) -> None:
        self.layers = layers

    def to(self, device: str) -> _Module:
        if str(device).startswith("cuda"):
            Tensor(4 << 20, device)  # its parameters
        return self

    def parameters(self) -> list[Tensor]:
        return []

    def __call__(self, x: Tensor) -> Tensor:
        return x


class nn:  # noqa: N801 - torch's name
    Linear = ReLU = Sequential = _Module

    class functional:  # noqa: N801
        @staticmethod
        def cross_entropy(out: Tensor, target: Tensor) -> Tensor:
            return out


class optim:  # noqa: N801 - torch's name
    class SGD:
        def __init__(self, params: Any, lr: float = 0.01) -> None:
            pass

        def zero_grad(self, set_to_none: bool = True) -> None:
            pass

        def step(self) -> None:
            time.sleep(STEP_S)


OutOfMemoryError.__module__ = "torch"
