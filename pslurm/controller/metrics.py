"""What the controller measures about itself, and the OpenMetrics text it is served as.

The parts that know feed these (the HTTP server and the gRPC servicer their requests, the scheduler
its passes, the node monitor its heartbeats, through the hooks :mod:`pslurm.controller.observe` sets);
:mod:`pslurm.controller.metricsets` turns them, with the store's and the node monitor's figures, into
Slurm 25.11's metric families and pslurm's own. Everything here is thread-safe and bounded: label
values come from a fixed set (routes, RPC names, status codes), never from a request's own text.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# Latency buckets (seconds): a loopback call is well under a millisecond, a scheduler pass on a
# 100,000-job queue about a second.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


class Histogram:
    """Counts of observations at or below each bucket's bound, their sum and count (Prometheus's)."""

    def __init__(self, buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last: above every bound (+Inf only)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(le, observations at or below it) for each bound and +Inf."""
        out, running = [], 0
        for bound, n in zip((*self.buckets, math.inf), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == math.inf else _number(bound), running))
        return out


class RequestStats:
    """Requests by their labels (method, route, code): a count and a latency histogram each."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latency: dict[Labels, Histogram] = {}  # (method, route) -> latency
        self._count: dict[Labels, int] = {}  # (method, route, code) -> requests

    def record(self, labels: Labels, code: str, seconds: float) -> None:
        with self._lock:
            hist = self._latency.get(labels)
            if hist is None:
                hist = self._latency[labels] = Histogram()
            hist.observe(seconds)
            key = (*labels, ("code", code))
            self._count[key] = self._count.get(key, 0) + 1

    def snapshot(self) -> tuple[dict[Labels, int], dict[Labels, Histogram]]:
        """Copies: the counts by (labels, code), and the latency by labels."""
        with self._lock:
            copies = {}
            for labels, hist in self._latency.items():
                copy = Histogram(hist.buckets)
                copy.counts, copy.sum, copy.count = list(hist.counts), hist.sum, hist.count
                copies[labels] = copy
            return dict(self._count), copies


@dataclass
class PassStats:
    """One kind of scheduler pass (main or backfill), as sdiag counts it: cycles, the last and
    longest cycle's time, their sum, when the last ran; and the latency histogram."""

    cycles: int = 0
    last: float = 0.0  # seconds
    longest: float = 0.0
    total: float = 0.0
    last_at: float = 0.0  # when the last pass ended (epoch seconds; 0: none yet)
    started_jobs: int = 0  # jobs the passes started, all together
    histogram: Histogram = field(default_factory=Histogram)

    def record(self, seconds: float, started: int, now: float) -> None:
        self.cycles += 1
        self.last = seconds
        self.longest = max(self.longest, seconds)
        self.total += seconds
        self.last_at = now
        self.started_jobs += started
        self.histogram.observe(seconds)


class Measurements:
    """The controller's own measurements: requests served, scheduler passes, heartbeats."""

    def __init__(self, started: float) -> None:
        self.started = started  # when psctld started (sdiag's "since reset")
        self.http = RequestStats()
        self.grpc = RequestStats()
        self._lock = threading.Lock()
        self.main = PassStats()
        self.backfill = PassStats()
        self.heartbeats = 0

    def scheduler_pass(self, backfill: bool, seconds: float, started: int, now: float) -> None:
        """The scheduler ran a pass (its hook)."""
        with self._lock:
            (self.backfill if backfill else self.main).record(seconds, started, now)

    def heartbeat(self) -> None:
        with self._lock:
            self.heartbeats += 1

    def passes(self) -> tuple[PassStats, PassStats, int]:
        """Copies of the main and backfill pass figures, and the heartbeats counted."""
        with self._lock:
            def copy(p: PassStats) -> PassStats:
                hist = Histogram(p.histogram.buckets)
                hist.counts, hist.sum, hist.count = list(p.histogram.counts), p.histogram.sum, p.histogram.count
                return PassStats(p.cycles, p.last, p.longest, p.total, p.last_at, p.started_jobs, hist)

            return copy(self.main), copy(self.backfill), self.heartbeats


def _number(value: float) -> str:
    """A sample's value as OpenMetrics writes it: whole numbers without a fraction."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) or (math.isfinite(value) and value == int(value) and abs(value) < 1e15):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels) + "}"


class MetricWriter:
    """Builds one exposition: families in the order they are added, each with HELP and TYPE once.

    ``openmetrics``: OpenMetrics 1.0 (a counter's family named without ``_total``, ``# EOF`` at the
    end); else Prometheus's text format 0.0.4, which every Prometheus reads. The samples are the same."""

    def __init__(self, openmetrics: bool = True) -> None:
        self.openmetrics = openmetrics
        self._lines: list[str] = []
        self._seen: set[str] = set()

    def _family(self, name: str, kind: str, help_text: str) -> None:
        if name in self._seen:
            raise ValueError(f"metric family {name} written twice")
        self._seen.add(name)
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")

    def gauge(self, name: str, help_text: str, samples: Iterable[tuple[Labels, float]]) -> None:
        self._family(name, "gauge", help_text)
        self._lines.extend(f"{name}{_labels(labels)} {_number(value)}" for labels, value in samples)

    def counter(self, name: str, help_text: str, samples: Iterable[tuple[Labels, float]]) -> None:
        """``name`` without ``_total``: the samples get it."""
        self._family(name if self.openmetrics else f"{name}_total", "counter", help_text)
        self._lines.extend(f"{name}_total{_labels(labels)} {_number(value)}" for labels, value in samples)

    def histogram(self, name: str, help_text: str, samples: Iterable[tuple[Labels, Histogram]]) -> None:
        self._family(name, "histogram", help_text)
        for labels, hist in samples:
            for le, n in hist.cumulative():
                self._lines.append(f"{name}_bucket{_labels((*labels, ('le', le)))} {n}")
            self._lines.append(f"{name}_count{_labels(labels)} {hist.count}")
            self._lines.append(f"{name}_sum{_labels(labels)} {_number(hist.sum)}")

    def text(self) -> str:
        return "\n".join([*self._lines, "# EOF"] if self.openmetrics else self._lines) + "\n"

    @property
    def content_type(self) -> str:
        return OPENMETRICS if self.openmetrics else PROMETHEUS_TEXT
