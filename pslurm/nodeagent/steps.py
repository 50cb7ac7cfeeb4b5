"""The steps psrun starts inside a job (J.0, J.1, ...) on this node: launched into the job's running
run, each by a :class:`~pslurm.nodeagent.stepd.StepSupervisor`, and kept until their ends are
acknowledged.

Each task runs as the job's user, in a session of its own, in the *job's* cgroup, so the job's
device, memory and CPU containment hold for it and the job's end (its cgroup killed) ends it. Not a
cgroup per step, as Slurm's ``job_J/step_S`` tree: on cgroup v2 a cgroup with processes may not hand
controllers to children (the no-internal-processes rule), and the batch shell lives in the job's
cgroup; a step is therefore tracked by its tasks' sessions (see the supervisor).

A step's end goes to the controller in ``StepsEnded`` (batched and retried with the job ends, and
before them); heartbeats list the running and unacknowledged steps. A run that ends (its script's
exit, cancel, time limit) ends its steps first: CANCELLED.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from pslurm.core.steplaunch import StepLaunch
from pslurm.core.steps import StepResult
from pslurm.nodeagent.environment import task_environment
from pslurm.nodeagent.launcher import RunningJob
from pslurm.nodeagent.runs import RunRecord, RunRecords, boot_id
from pslurm.nodeagent.stepd import StepHooks, StepSupervisor, Task, job_user
from pslurm.nodeagent.stepio import Pipes, Pty, label_width
from pslurm.nodeagent.userfiles import file_umask

log = logging.getLogger("psd")

StepKey = tuple[int, int]  # (job_id, step_id)


class JobStep(StepSupervisor):
    """A step psrun started in a job's run (``run``), from ``launch``."""

    run: RunningJob
    launch: StepLaunch


class Steps(StepHooks):
    """The steps this agent runs, or ran and has not had the end of acknowledged.

    ``on_end(step)`` is told each step's end (the agent reports it); ``records`` keeps each task
    (its session) for a restarted agent, until the end is acknowledged."""

    def __init__(self, node: str, kill_wait: float, reap_timeout: float, as_root: bool,
                 spawn_lock: threading.Lock, on_end: Callable[[JobStep], None],
                 records: RunRecords | None = None) -> None:
        self.node = node
        self.kill_wait = kill_wait
        self.reap_timeout = reap_timeout
        self.as_root = as_root
        self.spawn_lock = spawn_lock
        self.on_end = on_end
        self.records = records
        self._boot_id = boot_id()
        self._lock = threading.Lock()
        self.steps: dict[StepKey, JobStep] = {}
        self.unreported: dict[StepKey, JobStep] = {}

    # -- the agent's view --

    def get(self, job_id: int, step_id: int) -> JobStep | None:
        with self._lock:
            return self.steps.get((job_id, step_id))

    def refs(self) -> list[StepKey]:
        """Running steps and those whose end is not acknowledged (every heartbeat lists them)."""
        with self._lock:
            return [k for k, s in sorted(self.steps.items()) if s.end is None or k in self.unreported]

    def of_run(self, run: RunningJob) -> list[JobStep]:
        with self._lock:
            return [s for s in self.steps.values() if s.run is run]

    def pending_ends(self, limit: int) -> list[JobStep]:
        """Ended steps the controller has not acknowledged yet (``limit`` at most)."""
        with self._lock:
            return list(self.unreported.values())[:limit]

    def acknowledged(self, keys: Sequence[StepKey]) -> None:
        with self._lock:
            steps = [self.unreported.pop(key, None) for key in keys]
        for step in steps:
            if step is not None and self.records is not None:
                for task in step.tasks:
                    self.records.remove(step.job_id, step.run.job.restarts, f"{step.step_id}.{task.rank}")

    def forget_old(self, keep: float) -> None:
        """Forget steps whose end was acknowledged ``keep`` seconds ago (psrun may still read them)."""
        now = time.time()
        with self._lock:
            for key, step in list(self.steps.items()):
                if step.end is not None and key not in self.unreported and now - step.end.end_time > keep:
                    del self.steps[key]

    # -- launch --

    def launch(self, run: RunningJob, launch: StepLaunch, job_env: Mapping[str, str]) -> JobStep:
        """Start the step's tasks in ``run`` (the caller checked it runs); a repeated launch of a
        step this agent has is a no-op. A task that cannot start exits 2 with slurmstepd's line in
        the step's stderr. Never raises for a task."""
        key = (launch.job_id, launch.step_id)
        job = run.job
        spec = job.spec  # the job's user, whatever the launch says: a step runs as its job does
        with self._lock:
            known = self.steps.get(key)
            if known is not None:
                return known
            step = JobStep(launch.job_id, launch.step_id, cgroup=run.cgroup,
                           user=job_user(spec.uid, spec.gid, spec.user, self.as_root), spawn_lock=self.spawn_lock,
                           kill_wait=self.kill_wait, reap_timeout=self.reap_timeout, hooks=self,
                           record=lambda task: self._record(step, task), umask=file_umask(job_env),
                           node=self.node)
            step.run, step.launch = run, launch
            self.steps[key] = step
        if launch.uid != spec.uid:
            log.warning("step %s: launch names uid %d, the job's is %d: running as the job's user",
                        step.name, launch.uid, spec.uid)
        mps = bool(getattr(run.gpu_setup, "mps_pipe", ""))
        width = label_width(launch.total_tasks or launch.ntasks)
        pipes = Pipes(lines=launch.ntasks > 1, label=launch.label, width=width)
        for local in range(max(launch.ntasks, 1)):
            rank = launch.task_offset + local
            env = task_environment(job_env, launch, local, job.gpu_indices, run.visible or job.gpu_indices, mps)
            first = rank == 0
            stdio = _pty(env) if launch.pty and first else Pipes(first, pipes.lines, pipes.label, pipes.width)
            step.spawn_or_note(rank, local, launch.argv, env, launch.workdir, stdio)
        step.started()
        return step

    def _record(self, step: JobStep, task: Task) -> None:
        if self.records is None or task.proc is None:
            return
        try:
            self.records.save(RunRecord(step.job_id, step.run.job.restarts, task.proc.pid, task.ticks,
                                        self._boot_id, "", step.started_at, f"{step.step_id}.{task.rank}"))
        except OSError as exc:
            log.warning("step %s: could not record task %d: %s", step.name, task.rank, exc)

    # -- the end (StepHooks) --

    def publish(self, step: StepSupervisor, end: StepResult) -> None:
        """Ended and unreported at once: a job's end that waits for its steps reports them first."""
        with self._lock, step.changed:
            step.end = end
            self.unreported[(step.job_id, step.step_id)] = step  # type: ignore[assignment]
            step.changed.notify_all()

    def ended(self, step: StepSupervisor) -> None:
        self.on_end(step)  # type: ignore[arg-type]

    def signal(self, job_id: int, step_id: int, signum: int) -> bool:
        """SignalStep: 0 cancels the step (SIGTERM, KillWait, SIGKILL to its tasks' sessions), any
        other signal goes to its tasks. False when this agent has no such running step."""
        step = self.get(job_id, step_id)
        if step is None or step.end is not None:
            return False
        if signum:
            step.signal_tasks(signum)
        else:
            step.terminate()
        return True

    def job_ending(self, run: RunningJob, leader_gone: bool) -> None:
        """The run is ending (cancel, time limit, its leader's exit): its running steps end
        CANCELLED. Their processes get SIGTERM (from the job's cgroup when it has one, else here)
        and, once the leader is gone, SIGKILL."""
        import signal

        for step in [s for s in self.of_run(run) if s.end is None]:
            with step.changed:
                step.job_ending = True
            if leader_gone:
                step.signal(signal.SIGKILL)
            elif run.cgroup is None:
                for signum in (signal.SIGCONT, signal.SIGTERM):
                    step.signal(signum)

    def wait_run(self, run: RunningJob, timeout: float) -> None:
        """Wait until the run's steps have ended (their ends then are unreported before the job's)."""
        deadline = time.monotonic() + timeout
        for step in self.of_run(run):
            if not step.wait_end(max(0.0, deadline - time.monotonic())):
                log.error("step %s: still running %.0f s after its job ended", step.name, timeout)


def _pty(env: Mapping[str, str]) -> Pty:
    """--pty's terminal, of psrun's size (srun's SLURM_PTY_WIN_ROW/COL)."""
    try:
        return Pty(int(env.get("SLURM_PTY_WIN_ROW", "0")), int(env.get("SLURM_PTY_WIN_COL", "0")))
    except ValueError:
        return Pty()
