"""Token buckets per key (a uid): Slurm's rate limiting (``rl_*``), for the credential socket and the API.

Each key has a bucket of ``burst`` tokens refilled at ``rate`` a second; a request takes one or is
refused. The table is bounded: past ``max_keys`` keys the full buckets (keys idle long enough to
have refilled) are dropped first, then the oldest.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

MAX_KEYS = 8192  # Slurm's rl_table_size default


class TokenBuckets:
    """Thread-safe; ``rate`` tokens a second, at most ``burst`` held, per key."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = MAX_KEYS) -> None:
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self._buckets: dict[Hashable, list[float]] = {}  # key -> [tokens, when counted]
        self._lock = threading.Lock()

    def take(self, key: Hashable) -> bool:
        """Take a token of ``key``'s bucket: False when it is empty (refuse the request)."""
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                if len(self._buckets) >= self.max_keys:
                    self._prune(now)
                bucket = self._buckets[key] = [self.burst, now]
            tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
            if tokens < 1:
                bucket[0] = tokens
                return False
            bucket[0] = tokens - 1
            return True

    def _prune(self, now: float) -> None:
        full = [k for k, (tokens, when) in self._buckets.items() if tokens + (now - when) * self.rate >= self.burst]
        for key in full or sorted(self._buckets, key=lambda k: self._buckets[k][1])[:len(self._buckets) // 2]:
            del self._buckets[key]
