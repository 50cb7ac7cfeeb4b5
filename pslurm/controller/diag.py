"""sdiag's figures (slurmrestd's ``/slurm/v0.0.40/diag``), from what the controller measures.

The scheduler's passes and the API's requests come from the observer's measurements (observe.py:
the scheduler's ``on_pass`` hook, the HTTP middleware), the job counters from the store's event rows
since psctld started, the rest from the live process. What pslurm has no counterpart of (slurmdbd's
agent queue, RPC agents) is 0; the "message types" are the API's routes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pslurm.controller.metrics import Measurements, PassStats
from pslurm.controller.store import Store
from pslurm.controller.store.usage import job_counts
from pslurm.core.states import JobState


class Diag:
    """The figures since psctld started (sdiag's "Data since"), read from the observer's measurements."""

    def __init__(self, store: Store, measurements: Measurements, clock: Callable[[], float] = time.time) -> None:
        self.store, self.measurements, self.clock = store, measurements, clock

    def statistics(self) -> dict[str, Any]:
        """slurmrestd v0.0.40's ``statistics`` object (stats_info_response_msg_t): times in
        microseconds, as sdiag prints them."""
        now = int(self.clock())
        main, bf, _ = self.measurements.passes()
        started = self.measurements.started
        counts = job_counts(self.store, started)
        pending = self.store.count_active(states=[JobState.PENDING])
        running = self.store.count_active(states=[JobState.RUNNING, JobState.COMPLETING])

        def usec(seconds: float) -> int:
            return int(seconds * 1e6)

        def mean(f: PassStats) -> int:
            return usec(f.total / f.cycles) if f.cycles else 0

        minutes = (now - started) / 60
        return {
            "parts_packed": 1, "req_time": _time(now), "req_time_start": _time(int(started)),
            "server_thread_count": threading.active_count(), "agent_queue_size": 0, "agent_count": 0,
            "agent_thread_count": 0, "dbd_agent_queue_size": 0, "gettimeofday_latency": _clock_latency(),
            "schedule_cycle_max": usec(main.longest), "schedule_cycle_last": usec(main.last),
            "schedule_cycle_total": main.cycles, "schedule_cycle_mean": mean(main),
            "schedule_cycle_mean_depth": 0,
            "schedule_cycle_per_minute": int(main.cycles / minutes) if minutes > 1 else 0,
            "schedule_queue_length": pending,
            **{f"jobs_{name}": value for name, value in counts.items()},
            "jobs_pending": pending, "jobs_running": running, "job_states_ts": _time(now),
            "bf_backfilled_jobs": bf.started_jobs, "bf_last_backfilled_jobs": bf.started_jobs,
            "bf_backfilled_het_jobs": 0, "bf_cycle_counter": bf.cycles, "bf_cycle_mean": mean(bf),
            "bf_depth_mean": 0, "bf_depth_mean_try": 0, "bf_cycle_sum": usec(bf.total), "bf_cycle_last": usec(bf.last),
            "bf_cycle_max": usec(bf.longest), "bf_last_depth": 0, "bf_last_depth_try": 0, "bf_depth_sum": 0,
            "bf_depth_try_sum": 0, "bf_queue_len": pending, "bf_queue_len_mean": pending, "bf_queue_len_sum": 0,
            "bf_table_size": 0, "bf_table_size_mean": 0,
            "bf_when_last_cycle": _time(int(bf.last_at)), "bf_active": False,
            "rpcs_by_message_type": self._requests(), "rpcs_by_user": [],
        }

    def _requests(self) -> list[dict[str, Any]]:
        """The API's requests by route (pslurm's "message types"), busiest first: count, times in µs."""
        _, latency = self.measurements.http.snapshot()
        out = []
        for number, (labels, hist) in enumerate(sorted(latency.items(), key=lambda kv: -kv[1].count), 1):
            names = dict(labels)
            total = int(hist.sum * 1e6)
            out.append({"message_type": f"{names.get('method', '')} {names.get('route', '')}", "type_id": number,
                        "count": hist.count, "average_time": total // hist.count if hist.count else 0,
                        "total_time": total})
        return out


def _time(value: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": value}


def _clock_latency() -> int:
    """Microseconds for 1000 reads of the clock (sdiag's gettimeofday latency)."""
    begun = time.perf_counter()
    for _ in range(1000):
        time.time()
    return int((time.perf_counter() - begun) * 1e6)
