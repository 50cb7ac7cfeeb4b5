"""The ends the controller has yet to hear: runs' and steps' ends, sent through the link until a
call that carried them is answered.

An end is sent at once, in one call with whatever else ended meanwhile; an end that comes while
another thread sends is sent by that thread in its next call; the ends a failed call carried are
sent again on the next heartbeat. Step ends go before the ends of their jobs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, KeysView, Sequence
from typing import TypeVar

from pslurm.nodeagent.launcher import RunningJob
from pslurm.nodeagent.link import ControllerLink, LinkDown, RunEnded, RunKey, StepEnded
from pslurm.nodeagent.runs import RunRecords
from pslurm.nodeagent.runtable import key_of
from pslurm.nodeagent.steps import JobStep, Steps

log = logging.getLogger("psd")

End = TypeVar("End", RunEnded, StepEnded)

MAX_ENDS_PER_CALL = 1000  # ends in one call (after an outage many may wait)


class EndReporter:
    """One node's unreported ends (see the module's docstring)."""

    def __init__(self, node: str, link: ControllerLink, steps: Steps, records: RunRecords,
                 lock: threading.Lock) -> None:
        self.node = node
        self.link = link
        self.steps = steps
        self.records = records  # an acknowledged run's record goes: a restarted agent has nothing to look for
        # the run table's lock: a heartbeat lists the unreported runs with the table's in one look
        self._lock = lock
        self._unreported: dict[RunKey, RunningJob] = {}  # ended runs the controller has not acknowledged
        self.unreported: KeysView[RunKey] = self._unreported.keys()  # a live view: read it under ``lock``
        self._reporting = False  # a thread is sending the unreported ends

    def add(self, running: RunningJob) -> None:
        """Queue the run's end (its ``end`` set) for the controller; :meth:`report` sends it. Hold
        ``lock``."""
        self._unreported[key_of(running)] = running

    def report(self) -> None:
        """Send every unreported end, one thread at a time (see the module's docstring)."""
        with self._lock:
            if self._reporting:
                return
            self._reporting = True
        released = False
        try:
            while True:
                steps = self.steps.pending_ends(MAX_ENDS_PER_CALL)  # before the ends of their jobs
                if steps and not self._send_step_ends(steps):
                    return
                with self._lock:
                    pending = list(self._unreported.values())[:MAX_ENDS_PER_CALL]
                    if not pending and not self.steps.unreported:
                        released = True
                        self._reporting = False  # under the lock: a later end finds no reporter and reports
                        return
                if pending and not self._send_ends(pending):
                    return  # the controller is unreachable: the heartbeat loop tries again
        finally:
            if not released:
                with self._lock:
                    self._reporting = False

    def _send_step_ends(self, steps: list[JobStep]) -> bool:
        """Send these step ends in one call; True once the controller has them."""
        ends = [self._step_end(step) for step in steps]
        if not _sent(self.link.steps_ended, ends, [f"step {e.job_id}.{e.step_id}" for e in ends]):
            return False
        self.steps.acknowledged([(e.job_id, e.step_id) for e in ends])
        return True

    def _send_ends(self, ended: list[RunningJob]) -> bool:
        """Send these ends in one call; True (and no longer unreported) once the controller has them."""
        ends = [self._run_end(running) for running in ended]
        if not _sent(self.link.jobs_ended, ends, [f"job {e.job_id} (run {e.restarts})" for e in ends]):
            return False
        with self._lock:
            for end in ends:
                self._unreported.pop((end.job_id, end.restarts), None)
        for end in ends:
            self.records.remove(end.job_id, end.restarts)
        return True

    def _step_end(self, step: JobStep) -> StepEnded:
        end = step.end
        assert end is not None
        return StepEnded(step.job_id, step.step_id, self.node, end.state, end.exit_code, end.exit_signal,
                         end.end_time)

    def _run_end(self, running: RunningJob) -> RunEnded:
        end = running.end
        assert end is not None
        job_id, restarts = key_of(running)
        return RunEnded(job_id, restarts, self.node, end.state, end.exit_code, end.exit_signal, end.end_time,
                        gpu_usage=running.usage, max_rss_bytes=running.max_rss_bytes,
                        cpu_times=running.cpu_times, launch_failure=running.launch_failure,
                        comment=running.overrun)


def _sent(call: Callable[[Sequence[End]], None], ends: list[End], names: list[str]) -> bool:
    """Whether ``call`` took ``ends`` (named ``names`` in the warning when it did not)."""
    try:
        call(ends)
    except LinkDown as exc:
        log.warning("could not report the end of %s: %s; will retry", ", ".join(names), exc)
        return False
    return True
