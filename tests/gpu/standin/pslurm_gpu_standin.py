"""The GPU stand-in's shared part (tests/acceptance/test_gpu_run_script.py runs tests/gpu/run.sh on it):
what a process "sees" of the stand-in's GPUs and the processes holding their memory.

- The GPUs are the fake NVML's (``$PSLURM_FAKE_NVML``, the JSON file the fake ``pynvml`` of
  tests/acceptance/test_gpu_cluster.py reads); GPU i's device file is the i-th of ``$FAKE_CUDA_DEVICES``
  (colon-separated, as the doctor's stand-in CUDA driver takes them). A process sees the GPUs whose
  file it may open: opening one answers ENXIO (no driver behind it), its device cgroup's refusal EPERM.
- A process holding GPU memory is listed in the JSON's ``procs`` (what NVML names), under a lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from collections.abc import Iterator
from typing import Any


def state() -> dict[str, Any]:
    with open(os.environ["PSLURM_FAKE_NVML"]) as f:
        return json.load(f)  # type: ignore[no-any-return]


def visible() -> list[int]:
    """The NVML indices of the GPUs this process may open, in order."""
    seen = []
    for index, path in enumerate(p for p in os.environ.get("FAKE_CUDA_DEVICES", "").split(":") if p):
        try:
            os.close(os.open(path, os.O_RDWR))
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                continue
        seen.append(index)
    return seen


def alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


@contextlib.contextmanager
def _locked() -> Iterator[dict[str, Any]]:
    path = os.environ["PSLURM_FAKE_NVML"]
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = state()
        yield found
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(found, f)
        os.replace(tmp, path)  # the agent's NVML reads it at any time: whole or not at all


def hold(gpu: int, mb: int) -> None:
    """This process holds ``mb`` MiB on GPU ``gpu`` (0: none), as NVML will name it."""
    with _locked() as found:
        procs = found.setdefault("procs", {})
        for key in list(procs):
            procs[key] = [[pid, held] for pid, held in procs[key] if pid != os.getpid() and alive(pid)]
        if mb:
            procs.setdefault(str(gpu), []).append([os.getpid(), mb])
