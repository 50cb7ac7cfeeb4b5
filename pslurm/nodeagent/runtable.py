"""The agent's book of runs: every run of a job it was given, from its launch until its end was
reported and it is forgotten, and the newest run of each job (what signals and psrun's streams
reach). One lock guards it; its condition ``changed`` wakes those waiting for a run to launch,
begin or end (psrun's streams, steps)."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection
from dataclasses import replace

from pslurm.core.jobspec import JobRecord
from pslurm.nodeagent.launcher import RunningJob
from pslurm.nodeagent.link import RunKey

KEEP_ENDED = 300.0  # seconds an ended job's record (and psrun output) is kept for late readers
EARLY_LIMITS = 256  # time limit changes kept for runs whose launch has not come yet


def key_of(running: RunningJob) -> RunKey:
    """The run's key: (job id, restarts)."""
    return running.job.job_id, running.job.restarts


class RunTable:
    """The runs of one node's agent (see the module's docstring). Methods take the lock themselves
    unless they say "hold ``lock``"."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)  # psrun may ask for output before the launch
        self.newest: dict[int, RunningJob] = {}  # the newest run of each job (signals, psrun's streams)
        self._runs: dict[RunKey, RunningJob] = {}  # every run, until its end is reported and it is forgotten
        self._runs_of: dict[int, set[RunKey]] = {}  # job id -> its keys in _runs (a node keeps thousands of runs)
        # time limits changed for runs not launched here yet (the change overtook the launch), a few kept
        self._early_limits: dict[RunKey, int | None] = {}

    def add(self, job: JobRecord, node_index: int) -> tuple[RunningJob, list[RunningJob]] | None:
        """Book a new run of ``job``: the run and the older runs of the job still going (the new one
        starts once they have ended). None when the job already has this run or a newer one (a
        repeated launch). A time limit that came before the launch is the run's."""
        with self.lock:
            newest = self.newest.get(job.job_id)
            if newest is not None and newest.job.restarts >= job.restarts:
                return None
            if (job.job_id, job.restarts) in self._early_limits:
                job.time_limit = self._early_limits.pop((job.job_id, job.restarts))
            if node_index > 0:  # a node other than the first holds the allocation for steps only
                job = replace(job, spec=replace(job.spec, allocation=True))
            running = RunningJob(job, node_index=node_index)
            runs_of_job = self._runs_of.setdefault(job.job_id, set())
            older = [r for k in runs_of_job if not (r := self._runs[k]).settled.is_set()]
            self.newest[job.job_id] = running
            self._runs[key_of(running)] = running
            runs_of_job.add(key_of(running))
        return running, older

    def get(self, key: RunKey) -> RunningJob | None:
        """The run ``key``, if booked. Hold ``lock`` or not: a dict read."""
        return self._runs.get(key)

    def limit_for_later(self, key: RunKey, time_limit: int | None) -> RunningJob | None:
        """The run ``key``; when it is not booked yet, keep ``time_limit`` for its launch (None)."""
        with self.lock:
            running = self._runs.get(key)
            if running is None:
                self._early_limits[key] = time_limit
                while len(self._early_limits) > EARLY_LIMITS:  # those of launches that never came
                    del self._early_limits[next(iter(self._early_limits))]
        return running

    def live(self, job_id: int | None = None) -> list[RunningJob]:
        """The runs that have not ended (of ``job_id`` only, when given)."""
        with self.lock:
            return [r for k, r in self._runs.items() if (job_id is None or k[0] == job_id) and r.end is None]

    def listed(self, unreported: Collection[RunKey]) -> list[RunKey]:
        """What a heartbeat lists: the runs going (or about to start), and those ended whose end is
        not settled yet (queued for the controller) or not acknowledged (``unreported``, read under
        ``lock``: a run settles only once its end is queued)."""
        with self.lock:
            return [k for k, r in sorted(self._runs.items())
                    if r.end is None or not r.settled.is_set() or k in unreported]

    def live_cgroup_dirs(self) -> set[str]:
        """The cgroup directories of runs not ended."""
        with self.lock:
            return {d for r in self._runs.values() if r.cgroup is not None and r.end is None for d in r.cgroup.dirs}

    def forget_old(self, unreported: Collection[RunKey], now: float | None = None) -> None:
        """Forget reported runs (not in ``unreported``, read under ``lock``): a job's newest run
        after KEEP_ENDED (psrun may still read it), an older run at once."""
        now = time.time() if now is None else now
        with self.lock:
            for key, running in list(self._runs.items()):
                if running.end is None or key in unreported:
                    continue
                newest = self.newest.get(key[0]) is running
                if newest and now - running.end.end_time <= KEEP_ENDED:
                    continue
                del self._runs[key]
                keys = self._runs_of.get(key[0])
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._runs_of[key[0]]
                if newest:
                    del self.newest[key[0]]

    def notify(self) -> None:
        """Wake those waiting on ``changed``."""
        with self.changed:
            self.changed.notify_all()
