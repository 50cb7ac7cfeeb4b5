"""A recording in-memory ``ControllerLink``: the agent's port to the controller, implemented by
the tests (not a fake of the wire). It keeps every registration, heartbeat and end, in order,
answers with the kills the test queued, and refuses every call while ``up`` is False."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from pslurm.nodeagent.link import Beat, LinkDown, NodeReport, Orders, RunEnded, RunKey, StepEnded
from tests.conftest import wait_for


class RecordingLink:
    """The controller's side of the agent's calls, recorded (see the module's docstring)."""

    def __init__(self) -> None:
        self.up = True
        self.reports: list[NodeReport] = []
        self.beats: list[Beat] = []
        self.ended: list[tuple[float, RunEnded]] = []
        self.step_ends: list[StepEnded] = []
        self.order: list[str] = []  # "job 5", "step 5.0": every end in the order it came
        self.calls: list[int] = []  # the number of run ends in each call that was answered
        self.kill: list[RunKey] = []  # answered (once) to the next registration or heartbeat
        self.reregister = False  # answered (once) to the next heartbeat
        self.on_end: Callable[[RunEnded], None] | None = None  # told of each run end before it is taken
        self._lock = threading.Lock()

    def _check(self) -> None:
        if not self.up:
            raise LinkDown("the test's controller is down")

    def _orders(self, **kw: object) -> Orders:
        with self._lock:
            kill, self.kill = self.kill, []
        return Orders(kill=tuple(kill), **kw)  # type: ignore[arg-type]

    def register(self, report: NodeReport) -> Orders:
        self._check()
        self.reports.append(report)
        return self._orders(heartbeat_interval=2.0)

    def heartbeat(self, beat: Beat) -> Orders:
        self._check()
        self.beats.append(beat)
        again, self.reregister = self.reregister, False
        return self._orders(reregister=again)

    def jobs_ended(self, ends: Sequence[RunEnded]) -> None:
        self._check()
        for end in ends:
            if self.on_end is not None:
                self.on_end(end)
        with self._lock:
            self.ended.extend((time.time(), end) for end in ends)
            self.order.extend(f"job {end.job_id}" for end in ends)
            self.calls.append(len(ends))

    def steps_ended(self, ends: Sequence[StepEnded]) -> None:
        self._check()
        with self._lock:
            self.step_ends.extend(ends)
            self.order.extend(f"step {end.job_id}.{end.step_id}" for end in ends)

    def end_of(self, job_id: int, restarts: int = 0) -> RunEnded | None:
        """The run's end, if reported (a run's end reported twice fails the test)."""
        found = [r for _, r in self.ended if (r.job_id, r.restarts) == (job_id, restarts)]
        assert len(found) <= 1, f"end of {job_id}.{restarts} reported {len(found)} times"
        return found[0] if found else None

    def end_time(self, job_id: int, restarts: int = 0) -> float:
        """When the run's end came."""
        return next(t for t, r in self.ended if (r.job_id, r.restarts) == (job_id, restarts))

    def step_end(self, job_id: int, step_id: int) -> StepEnded | None:
        """The step's end, if reported (once at most)."""
        found = [e for e in self.step_ends if (e.job_id, e.step_id) == (job_id, step_id)]
        assert len(found) <= 1, f"end of step {job_id}.{step_id} reported {len(found)} times"
        return found[0] if found else None


def ended(link: RecordingLink, job_id: int, restarts: int = 0, timeout: float = 5.0) -> RunEnded:
    """The run's end once reported (waited for ``timeout`` seconds at most)."""
    return wait_for(lambda: link.end_of(job_id, restarts), timeout=timeout, interval=0.02)
