"""psrun's streams of a step on this node (StreamOutput, SendInput: its output and its input), one
path for every step: a run's own (a psrun job's command) or one psrun started in the job. A stream
may come before the job's launch: it waits, bounded, on the book of runs' condition."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from pslurm.core.jobspec import JobSpec
from pslurm.core.steps import StepResult, step_name
from pslurm.nodeagent.launcher import RunningJob
from pslurm.nodeagent.runtable import RunTable
from pslurm.nodeagent.stepd import StepSupervisor
from pslurm.nodeagent.steps import Steps

# how long a stream waits for its job, and what it may hold
LAUNCH_GRACE = 2.0  # seconds a stream waits for the launch of a job this agent has not heard of
START_WAIT = 30.0  # seconds it waits for a launched job to start
LAUNCH_WAITS = 16  # streams of users (not operators) that may wait for a launch at once, all users together
LAUNCH_WAITS_PER_USER = 4  # ... and of one user
FIRST_INPUT_WAIT = 10.0  # seconds SendInput may take to send the chunk that names its job
INPUT_LINGER = 5.0  # seconds an input stream may stay open after its job ended (psrun closes it sooner)


class JobNotHere(LookupError):
    """No psrun job of that id runs on this node (a stream's NOT_FOUND)."""


class StepStreams:
    """psrun's streams of one node's steps (see the module's docstring); they end with the agent
    (``stop``)."""

    def __init__(self, node: str, table: RunTable, steps: Steps, stop: threading.Event) -> None:
        self.node = node
        self.table = table
        self.steps = steps
        self._stop = stop

    def step(self, job_id: int, step_id: int, allowed: Callable[[JobSpec], bool],
             active: Callable[[], bool] = lambda: True, grace: float = LAUNCH_GRACE) -> StepSupervisor:
        """The step a stream of psrun names: the run's own (a psrun job's command, step 0) or a
        step psrun started in the job. Who may is checked first, as soon as the job is known here
        (PermissionError unless ``allowed``: the job's owner, or an operator), then the step is
        waited for: a job this agent has not heard of ``grace`` seconds only (a stream for a job that
        never comes holds a thread that long, not half a minute), a step of a job it runs until it
        has started (START_WAIT at most); both end early when the caller goes (``active``).
        JobNotHere when there is no such step."""
        begun = time.monotonic()
        step: StepSupervisor | None = None
        with self.table.changed:
            while True:
                running = self.table.newest.get(job_id)
                if running is not None and not allowed(running.job.spec):
                    raise PermissionError(f"Access/permission denied: job {job_id} is not yours")
                step = self._find_step(running, job_id, step_id)
                if step is not None or not active():
                    break
                left = begun + (START_WAIT if running is not None and running.end is None else grace) - time.monotonic()
                if left <= 0:
                    break
                self.table.changed.wait(min(left, 0.2))
        if step is None:
            where = f"{job_id}.{step_name(step_id)} on node {self.node}"
            raise JobNotHere(f"Invalid job id specified: no step {where}")
        return step

    def _find_step(self, running: RunningJob | None, job_id: int, step_id: int) -> StepSupervisor | None:
        if running is not None and running.step_id == step_id:
            own = running.step
            return own if own is not None and (running.begun or running.end is not None) else None
        return self.steps.get(job_id, step_id)

    def output(self, job_id: int, step_id: int, may_read: Callable[[JobSpec], bool],
               active: Callable[[], bool] = lambda: True, grace: float = LAUNCH_GRACE,
               opened: Callable[[StepSupervisor], None] = lambda step: None,
               ) -> Iterator[tuple[bytes, bytes, StepResult | None]]:
        """psrun's stream of a step: its output as it comes (bounded chunks; see StepOutput), then
        its end; it stops within a second of the caller going (``active`` false). ``opened`` is told
        the step once found. JobNotHere, PermissionError, ``grace``: see :meth:`step`."""
        step = self.step(job_id, step_id, may_read, active, grace)
        opened(step)
        yield from step.follow(self._stop, active)

    def input(self, job_id: int, step_id: int, chunks: Iterator[bytes], may_write: Callable[[JobSpec], bool],
              opened: Callable[[StepSupervisor], None] = lambda step: None, grace: float = LAUNCH_GRACE) -> None:
        """psrun's stdin for the step's task 0 (its pty with ``--pty``): the chunks, then EOF."""
        step = self.step(job_id, step_id, may_write, lambda: True, grace)
        opened(step)
        step.write_input(chunks)
