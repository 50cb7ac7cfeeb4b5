"""Observability's composition: the measurements and the GPU history, the hooks that feed them from
the parts that know, and the expositions served under ``/metrics``.

The hooks are plain attributes the parts call (``NodeMonitor.on_heartbeat``, ``Scheduler.on_pass``)
and a gRPC interceptor, so that the parts import nothing of this; the HTTP side is
:mod:`pslurm.controller.rest.observed`.

Who may read the metrics: anyone with a credential (or a token, or a dashboard session); without
one only when pslurm.conf says ``MetricsType=metrics/openmetrics`` (Slurm's key; Slurm serves its
metrics to anyone) and sets no ``PrivateData`` (with which Slurm disables them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from pslurm.controller import metricsets
from pslurm.controller.history import DAY, GpuHistory
from pslurm.controller.metrics import Measurements, MetricWriter
from pslurm.controller.store.stats import job_tallies
from pslurm.core.config import ClusterConfig
from pslurm.core.states import JobState

if TYPE_CHECKING:
    from pslurm.controller.monitor import NodeMonitor
    from pslurm.controller.scheduler import Scheduler
    from pslurm.controller.store import Store

    class Parts(Protocol):
        """What the observer reads of the assembled controller (app.Parts has these)."""

        store: Store
        monitor: NodeMonitor
        scheduler: Scheduler

log = logging.getLogger("psctld")

MIN_JOB_AGE = 300  # Slurm's MinJobAge default: an ended job stays in slurmctld's counts this long
# Slurm's endpoints (slurmctld's port in 25.11) and pslurm's own
ENDPOINTS = ("jobs", "nodes", "partitions", "scheduler", "jobs-users-accts", "pslurm")


def metrics_open(config: ClusterConfig) -> bool:
    """Whether the metrics are served without a credential (see the module's docstring)."""
    keys = {k.lower(): v.strip() for k, v in config.extra.items()}
    wanted = keys.get("metricstype", "").lower() == "metrics/openmetrics"
    if wanted and keys.get("privatedata"):
        log.warning("MetricsType=metrics/openmetrics with PrivateData=%s: metrics only with a credential, "
                    "as Slurm disables them", keys["privatedata"])
        return False
    return wanted


class Observer:
    """The controller's measurements and GPU history, fed by the parts' hooks (:meth:`attach`)."""

    def __init__(self, parts: Parts, config: ClusterConfig, clock: Callable[[], float] = time.time) -> None:
        self.parts, self.config, self.clock = parts, config, clock
        self.measurements = Measurements(clock())
        self.history = GpuHistory(parts.monitor.heartbeat_interval, DAY)
        self.open = metrics_open(config)

    def attach(self) -> Observer:
        """Set the parts' hooks: heartbeats (their GPUs' use into the history) and scheduler passes."""
        history, measurements = self.history, self.measurements

        def heartbeat(node: str, measured: Any, now: float) -> None:
            measurements.heartbeat()
            if measured:
                history.record(node, measured, now)

        self.parts.monitor.on_heartbeat = heartbeat
        self.parts.scheduler.on_pass = lambda backfill, seconds, started: measurements.scheduler_pass(
            backfill, seconds, started, self.clock())
        return self

    def grpc_interceptor(self) -> grpc.ServerInterceptor:
        return _TimingInterceptor(self.measurements)

    def exposition(self, endpoint: str, openmetrics: bool) -> MetricWriter:
        """One endpoint's metrics (blocking: it reads the store). KeyError for an unknown endpoint."""
        if endpoint not in ENDPOINTS:
            raise KeyError(endpoint)
        parts, now = self.parts, self.clock()
        w = MetricWriter(openmetrics)
        if endpoint in ("jobs", "partitions", "jobs-users-accts"):
            tallies = job_tallies(parts.store, now - MIN_JOB_AGE)
            if endpoint == "partitions":
                metricsets.partitions_metrics(w, list(self.config.partitions.values()), parts.monitor.nodes(),
                                              tallies)
            else:
                allocations = parts.store.allocations()
                (metricsets.jobs_metrics if endpoint == "jobs" else metricsets.users_accounts_metrics)(
                    w, tallies, allocations)
        elif endpoint == "nodes":
            metricsets.nodes_metrics(w, parts.monitor.nodes())
        elif endpoint == "scheduler":
            main, backfill, _ = self.measurements.passes()
            metricsets.scheduler_metrics(w, main, backfill, parts.store.count_active(states=[JobState.PENDING]),
                                         parts.store.count_active(states=[JobState.RUNNING]), now)
        else:
            metricsets.pslurm_metrics(w, parts.monitor.nodes(), parts.store.allocations(), self.measurements,
                                      parts.store.count_active(states=[JobState.PENDING]),
                                      self.history.bytes_held(), now)
        return w


class _TimingInterceptor(grpc.ServerInterceptor):
    """Each unary RPC's time and status code, by method (the agents' calls are all unary)."""

    def __init__(self, measurements: Measurements) -> None:
        self.measurements = measurements

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method = handler_call_details.method.rsplit("/", 1)[-1]
        inner, record = handler.unary_unary, self.measurements.grpc.record

        def timed(request: Any, context: grpc.ServicerContext) -> Any:
            began, failed = time.perf_counter(), True
            try:
                reply = inner(request, context)
                failed = False
                return reply
            finally:
                code = context.code() if hasattr(context, "code") else None
                name = code.name if isinstance(code, grpc.StatusCode) else ("UNKNOWN" if failed else "OK")
                record((("method", method),), name, time.perf_counter() - began)

        return grpc.unary_unary_rpc_method_handler(timed, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
