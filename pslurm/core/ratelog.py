"""Log lines at a bounded rate: a message that repeats (the same logger, level and format) is written
at most ``burst`` times per ``window`` seconds; what was held back is counted and said once, with the
next line of that kind that gets through.

Why: a daemon's log is written for every request that fails, and a user can make requests fail as
fast as they like (half-sent requests, a flood of bad credentials, a resource exhausted): without a
bound one user fills the disk (issue 18: 119 MB in 45 s). Slurm's own answer to such floods is to
log the first and count the rest (``rl_log_freq``); this is that, for any message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

BURST = 20  # lines of one kind per window
WINDOW = 60.0  # seconds
MAX_KINDS = 1024  # kinds remembered at once: a message whose format varies (it should not) cannot grow the table


class RateLimit(logging.Filter):
    """A filter for a handler (or a logger): see the module's doc."""

    def __init__(self, burst: int = BURST, window: float = WINDOW, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        super().__init__()
        self.burst, self.window, self.clock = burst, window, clock
        self._seen: dict[tuple[str, int, str], list[float]] = {}  # kind -> [window start, lines in it, held back]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg)[:200])
        now = self.clock()
        with self._lock:
            entry = self._seen.get(kind)
            if entry is None or now - entry[0] >= self.window:
                held = int(entry[2]) if entry is not None else 0
                if len(self._seen) >= MAX_KINDS:
                    self._seen.clear()
                self._seen[kind] = [now, 1, 0]
                if held:
                    record.msg = f"{record.msg} ({held} more like this in the last {self.window:.0f} s not logged)"
                return True
            if entry[1] < self.burst:
                entry[1] += 1
                return True
            entry[2] += 1
            return False


def bound_logging(burst: int = BURST, window: float = WINDOW) -> None:
    """Put a :class:`RateLimit` on every handler of the root logger (a daemon's, after basicConfig)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RateLimit) for f in handler.filters):
            handler.addFilter(RateLimit(burst, window))
