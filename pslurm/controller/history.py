"""Each GPU's utilisation and memory over the last day, kept in the controller's memory for the
dashboard's charts (not in the store: a sample per GPU per heartbeat is not worth a write).

Bounded: every GPU has a ring of ``window / resolution`` slots, one per ``resolution`` seconds
(the node monitor's heartbeat interval by default), three bytes each (utilisation in whole percent,
memory in 4 MiB units): 1000 nodes of 8 GPUs beating every 30 s hold 24 h in some 70 MB. A slot no
heartbeat filled reads as a gap. Samples of a GPU arrive in time order (its node's heartbeats), so
writing a slot clears the ones skipped since the last.
"""

from __future__ import annotations

import array
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass

DAY = 86400.0
NO_UTIL = 255  # a slot without a sample
MEMORY_UNIT_MB = 4  # memory is kept in units of 4 MiB: 65535 units are 256 GiB, more than any GPU has
MAX_UNITS = 0xFFFF


@dataclass(frozen=True)
class Sample:
    """A GPU at one time: utilisation (percent) and memory used (MB, to 4 MiB)."""

    time: float
    util: int
    memory_mb: int


class _Ring:
    __slots__ = ("util", "memory", "last")

    def __init__(self, slots: int) -> None:
        self.util = bytearray([NO_UTIL]) * slots
        self.memory = array.array("H", bytes(2 * slots))
        self.last = -1  # the absolute slot number last written (-1: none)


class GpuHistory:
    """Per (node, GPU index): a sample per ``resolution`` seconds over the last ``window`` seconds."""

    def __init__(self, resolution: float, window: float = DAY) -> None:
        if resolution <= 0 or window < resolution:
            raise ValueError("GpuHistory: resolution must be positive and at most the window")
        self.resolution = float(resolution)
        self.slots = int(math.ceil(window / resolution))
        self.window = self.slots * self.resolution
        self._rings: dict[tuple[str, int], _Ring] = {}
        self._lock = threading.Lock()

    def record(self, node: str, measured: Mapping[int, tuple[int, float]], now: float) -> None:
        """A heartbeat's measurements: per GPU index, (memory used MB, utilisation percent)."""
        slot = int(now // self.resolution)
        with self._lock:
            for index, (memory_mb, util) in measured.items():
                ring = self._rings.get((node, index))
                if ring is None:
                    ring = self._rings[(node, index)] = _Ring(self.slots)
                if slot < ring.last:
                    continue  # a clock step back: keep what is there
                if ring.last >= 0:  # a new ring has no samples to clear
                    for skipped in range(max(ring.last + 1, slot - self.slots + 1), slot):
                        ring.util[skipped % self.slots] = NO_UTIL  # no heartbeat then: a gap, not an old sample
                i = slot % self.slots
                ring.util[i] = max(0, min(100, round(util)))
                ring.memory[i] = max(0, min(MAX_UNITS, round(memory_mb / MEMORY_UNIT_MB)))
                ring.last = slot

    def series(self, node: str, index: int, start: float, end: float) -> list[Sample]:
        """The samples of one GPU between ``start`` and ``end`` (within the window before the last
        sample), oldest first; gaps are left out."""
        with self._lock:
            ring = self._rings.get((node, index))
            if ring is None or ring.last < 0:
                return []
            first = max(math.ceil(start / self.resolution), ring.last - self.slots + 1)
            last = min(int(end // self.resolution), ring.last)
            out = []
            for slot in range(first, last + 1):
                i = slot % self.slots
                if ring.util[i] != NO_UTIL:
                    out.append(Sample(slot * self.resolution, ring.util[i], ring.memory[i] * MEMORY_UNIT_MB))
            return out

    def gpus(self) -> int:
        """How many GPUs have a ring."""
        with self._lock:
            return len(self._rings)

    def bytes_held(self) -> int:
        """The rings' memory (the samples; not Python's per-object overhead)."""
        with self._lock:
            return len(self._rings) * self.slots * 3
