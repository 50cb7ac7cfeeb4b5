"""A job's run on this node: its own step started, its time limit, its cancel, and its end.

A run is one launch of a job (job id, restarts). What runs is a step (:mod:`pslurm.nodeagent.stepd`):
the run's *own* step is the batch script (step ``batch``, its output into files), a psrun job's
command (step 0, its output to psrun) or, for an allocation and a multi-node job's later nodes, the
agent's placeholder that holds the allocation (step ``extern``). The launcher keeps what belongs to
the run: its cgroup, its time limit (SIGTERM, KillWait, SIGKILL -> TIMEOUT, waiting on the run's
condition so that a limit changed while it runs holds at once), ``--signal``, cancel, the run
record, and the end the controller hears (``on_end``, once none of the run's processes is left).
A run that cannot be started at all ends FAILED with ``launch_failure`` saying why; ``start``
never raises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pslurm.core.jobspec import JobRecord
from pslurm.core.patterns import default_output_pattern, expand_output_pattern
from pslurm.core.states import JobState
from pslurm.core.steps import BATCH_STEP, EXTERN_STEP, INTERACTIVE_STEP, StepResult
from pslurm.core.timefmt import format_timestamp
from pslurm.nodeagent.cgroups import JobCgroup
from pslurm.nodeagent.childstart import LaunchError, TaskProcess, check_strings, describe, os_error
from pslurm.nodeagent.mps import read_tail, refusal_comment, refusal_note, slice_refusal
from pslurm.nodeagent.runs import RunRecord, RunRecords, boot_id, kill_pgid
from pslurm.nodeagent.stepd import StepHooks, StepSupervisor, Task, job_user
from pslurm.nodeagent.stepio import Files, Null, Pipes, Stdio
from pslurm.nodeagent.userfiles import file_umask, write_private_file

log = logging.getLogger("psd")

OUTPUT_DIR_WAIT = 10.0  # seconds a launch waits for its output file's directory to appear (tools make it late)
# A fork in one thread while another has a script open for writing makes that script's exec fail
# with ETXTBSY: script writes and forks take turns, in the whole process (psd --virtual runs the
# launchers of many nodes in one).
SPAWN_LOCK = threading.Lock()


@dataclass
class RunningJob:
    """One run of a job on this node; ``changed`` guards its flags (its step has a condition of its own)."""

    job: JobRecord
    started: float = field(default_factory=time.time)
    cgroup: JobCgroup | None = None
    step: StepSupervisor | None = None  # the run's own step, once made
    cancelled: bool = False
    timed_out: bool = False
    end: StepResult | None = None
    changed: threading.Condition = field(default_factory=threading.Condition)
    usage: Any = None  # the agent's JobGpuUsage, set when the job ends (None: no GPUs)
    max_rss_bytes: int | None = None  # its memory cgroup's peak, read when it ends (None: not measured)
    cpu_times: tuple[float, float, float] | None = None  # its cgroup's CPU time (all, user, system) at its end
    launch_failure: str = ""  # why the run never started ("" when it did)
    start_ticks: int | None = None  # the leader's start time (/proc/<pid>/stat field 22)
    settled: threading.Event = field(default_factory=threading.Event)  # set by on_end's receiver once it took the end
    overrun: str = ""  # the agent ended it for using more than its GPU memory slice: why (its SystemComment)
    begun: bool = False  # its leader runs and is watched (a cancel from now on kills it)
    exited: bool = False  # its leader process has ended (set by the watcher)
    limit_watched: bool = False  # a thread enforces its time limit (job.time_limit, which may change)
    relinquished: int | None = None  # an allocation its owner gave back (psalloc's end): the exit code to report
    visible: list[int] = field(default_factory=list)  # CUDA_VISIBLE_DEVICES of the job (its steps renumber so)
    gpu_setup: Any = None  # the job's GpuSetup (its steps' sharing variables)
    node_index: int = 0  # this node's position in the job's allocation (> 0: it holds the run for steps only)
    suspended_at: float | None = None  # pscontrol suspend: when its processes were stopped (None: they run)
    suspended_for: float = 0.0  # the time it was suspended before its last resume: its limit's end moves so

    def limit_left(self, now: float) -> float | None:
        """Seconds before its time limit (negative: past it), counting only the time it ran; None
        while it has no limit or is suspended (its limit does not run then). Hold ``changed``."""
        limit = self.job.time_limit
        if limit is None or self.suspended_at is not None:
            return None
        return self.started + self.suspended_for + limit - now

    @property
    def proc(self) -> TaskProcess | None:
        """The run's leader: its own step's task (None until it started)."""
        return self.step.leader if self.step is not None else None

    @property
    def step_id(self) -> int:
        """The id of the run's own step."""
        spec = self.job.spec
        return EXTERN_STEP if spec.allocation else INTERACTIVE_STEP if spec.interactive else BATCH_STEP


class _RunHooks(StepHooks):
    """The run's own step tells its run: its leader's exit, the run's end."""

    def __init__(self, launcher: Launcher, running: RunningJob) -> None:
        self.launcher, self.running = launcher, running

    def tasks_exited(self, step: StepSupervisor) -> None:
        self.launcher.leader_exited(self.running)

    def decide(self, step: StepSupervisor) -> StepResult:
        return self.launcher.run_end(self.running, step)

    def ended(self, step: StepSupervisor) -> None:
        self.running.end = step.end
        self.launcher.finish(self.running)


class Launcher:
    """Runs jobs on this node."""

    def __init__(self, node: str, cluster: str, spool_dir: str, kill_wait: float,
                 on_end: Callable[[RunningJob], None], records: RunRecords | None = None) -> None:
        self.node = node
        self.cluster = cluster
        self.spool_dir = spool_dir
        self.kill_wait = kill_wait
        self.on_end = on_end
        self.records = records  # where each started run is recorded (the agent forgets it once acknowledged)
        self.reap_timeout = kill_wait + 5.0  # how long a run's processes may take to die after SIGKILL
        self.output_dir_wait = OUTPUT_DIR_WAIT
        self._boot_id = boot_id()
        self.as_root = os.geteuid() == 0
        self.spawn_lock = SPAWN_LOCK
        # told when a run begins to end (cancel, time limit, the leader's exit), before its processes
        # are killed: the agent ends the run's steps first (CANCELLED)
        self.on_ending: Callable[[RunningJob], None] = lambda running: None
        self.on_begin: Callable[[RunningJob], None] = lambda running: None  # its leader runs
        os.makedirs(spool_dir, exist_ok=True)

    # -- start --

    def start(self, job: JobRecord, env: dict[str, str], cgroup: JobCgroup | None,
              cpus: set[int] | None, running: RunningJob | None = None) -> RunningJob:
        """Start the run's own step and watch it, in ``running`` when given (the agent's placeholder
        for the run); never raises for a job that cannot start: the failure is recorded as the run's
        end (FAILED, exit code 2 as slurmstepd reports, ``launch_failure`` set). A run cancelled
        before it started ends CANCELLED without starting. A batch job whose output file's directory
        is missing is tried again, in a thread, for ``output_dir_wait`` seconds (a client may make it
        just after submitting, as submitit does)."""
        if running is None:
            running = RunningJob(job)
        running.cgroup = cgroup
        running.started = time.time()
        if running.cancelled:
            return self.never_started(running)
        try:
            self._spawn(running, env, cpus)
        except LaunchError as exc:
            if exc.missing_dir and self.output_dir_wait > 0:
                threading.Thread(target=self._retry, args=(running, env, cpus), daemon=True,
                                 name=f"job{job.job_id}.start").start()
                return running
            return self._failed(running, exc.reason)
        except Exception as exc:  # whatever it is, the run ends and the controller hears why
            log.exception("job %d: unexpected error starting it", job.job_id)
            return self._failed(running, describe(exc))
        self._begin(running)
        return running

    def _retry(self, running: RunningJob, env: dict[str, str], cpus: set[int] | None) -> None:
        deadline = time.monotonic() + self.output_dir_wait
        delay = 0.05
        while True:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.5)
            if running.cancelled:
                self.never_started(running)
                return
            try:
                self._spawn(running, env, cpus)
            except LaunchError as exc:
                if exc.missing_dir and time.monotonic() < deadline:
                    continue
                self._failed(running, exc.reason)
                return
            except Exception as exc:
                log.exception("job %d: unexpected error starting it", running.job.job_id)
                self._failed(running, describe(exc))
                return
            self._begin(running)
            return

    def _spawn(self, running: RunningJob, env: dict[str, str], cpus: set[int] | None) -> None:
        """Make the run's own step and start its task (LaunchError when it cannot)."""
        job, spec = running.job, running.job.spec
        step = self._step(running, cpus, env)
        if spec.allocation:  # no command of the user's: the agent's own holder, which the user cannot signal
            step.spawn(0, 0, ["sleep", "infinity"], {"PATH": "/usr/bin:/bin"}, "/", Null())
            return
        stdio: Stdio = Pipes(stdin=True)
        if not spec.interactive:
            out, err = self.output_paths(job)
            step.stderr_path = err
            stdio = Files(out, err, append=spec.open_mode == "append")
        argv = list(spec.argv)
        if spec.script is not None:
            check_strings(spec.workdir, (), env)  # before the script is written
            try:
                with self.spawn_lock:
                    argv = [self._write_script(job)]
            except OSError as exc:
                raise LaunchError(f"could not write the batch script: {os_error(exc)}") from exc
        step.spawn(0, 0, argv, env, spec.workdir, stdio)

    def _step(self, running: RunningJob, cpus: set[int] | None, env: dict[str, str]) -> StepSupervisor:
        spec = running.job.spec
        user = None if spec.allocation else job_user(spec.uid, spec.gid, spec.user, self.as_root)
        step = StepSupervisor(running.job.job_id, running.step_id, cgroup=running.cgroup, user=user,
                              spawn_lock=self.spawn_lock, kill_wait=self.kill_wait, reap_timeout=self.reap_timeout,
                              cpus=cpus, hooks=_RunHooks(self, running), umask=file_umask(env), owns_cgroup=True,
                              node=self.node, record=lambda task: self._record(running, task))
        running.step = step
        return step

    def _begin(self, running: RunningJob) -> None:
        """The run's leader runs: watch it; a cancel that came while it was being started ends it now."""
        step = running.step
        assert step is not None and step.leader is not None
        running.start_ticks = step.tasks[0].ticks
        with running.changed:
            running.begun = True
            cancelled = running.cancelled  # a cancel that came while it was being started
            running.changed.notify_all()
        self._watch_limit(running)
        if running.job.spec.warn_signal:
            threading.Thread(target=self._warn_before_limit, args=(running,), name=f"job{running.job.job_id}.signal",
                             daemon=True).start()
        step.started()
        self.on_begin(running)
        if cancelled:
            self._note(running, "")
            threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    def _record(self, running: RunningJob, task: Task) -> None:
        if self.records is None or task.proc is None:
            return
        job = running.job
        try:
            self.records.save(RunRecord(job.job_id, job.restarts, task.proc.pid, task.ticks, self._boot_id,
                                        running.cgroup.path if running.cgroup is not None else "",
                                        running.started))
        except OSError as exc:  # the job runs all the same; only a restarted agent would not know of it
            log.warning("job %d: could not record its run: %s", job.job_id, exc)

    def fail(self, job: JobRecord, why: str, running: RunningJob | None = None) -> RunningJob:
        """Record a job that cannot start at all (e.g. its device cgroup cannot be made): FAILED."""
        if running is None:
            running = RunningJob(job)
        running.started = time.time()  # it did not run: no time (and no GPU-seconds) to count
        return self._failed(running, why)

    def never_started(self, running: RunningJob) -> RunningJob:
        """End a run cancelled before it started: CANCELLED, nothing ran."""
        running.started = time.time()
        self._end_unstarted(running, StepResult(JobState.CANCELLED, 0, 0, time.time()))
        return running

    def _failed(self, running: RunningJob, why: str) -> RunningJob:
        job = running.job
        why = " ".join(why.split()) or "unknown error"  # one line
        log.warning("job %d could not start: %s", job.job_id, why)
        running.launch_failure = why
        step = self._unstarted_step(running)
        step.note(f"slurmstepd: error: {why}\n")
        self._end_unstarted(running, StepResult(JobState.FAILED, 2, 0, time.time()))
        return running

    def _unstarted_step(self, running: RunningJob) -> StepSupervisor:
        """The run's own step when no task of it runs: for its notes and its end (psrun reads both)."""
        step = running.step
        if step is None or step.leader is not None:
            step = self._step(running, None, running.job.spec.environment)
        if not running.job.spec.interactive and not running.job.spec.allocation and step.stderr_path is None:
            with contextlib.suppress(Exception):  # no file for the message; the end is reported all the same
                step.stderr_path = self.output_paths(running.job)[1]
        return step

    def _end_unstarted(self, running: RunningJob, end: StepResult) -> None:
        self._unstarted_step(running).ended_without_tasks(end)

    def output_paths(self, job: JobRecord) -> tuple[str, str]:
        """The batch script's stdout and stderr files, their patterns expanded for this node."""
        spec = job.spec

        def resolve(pattern: str) -> str:
            path = expand_output_pattern(pattern, job_id=job.job_id, job_name=spec.name, user=spec.user,
                                         node=self.node, array_job_id=job.array_job_id,
                                         array_task_id=job.array_task_id)
            return path if os.path.isabs(path) else os.path.join(spec.workdir, path)

        out = resolve(spec.stdout or default_output_pattern(job.array_job_id is not None))
        return out, resolve(spec.stderr) if spec.stderr else out

    def _write_script(self, job: JobRecord) -> str:
        """The batch script, in a fresh directory of the spool that is the user's (0700) once written."""
        job_dir = os.path.join(self.spool_dir, f"job{job.job_id:05d}")
        owner = (job.spec.uid, job.spec.gid) if self.as_root else None
        return write_private_file(job_dir, "slurm_script", job.spec.script or "", owner)

    def note_stderr(self, running: RunningJob, text: str) -> None:
        """slurmstepd's ``text`` (whole lines) in the job's stderr (see StepSupervisor.note)."""
        step = running.step or self._unstarted_step(running)
        step.note(text)

    # -- the end --

    def leader_exited(self, running: RunningJob) -> None:
        """The run's leader has exited: its time limit is watched no more, its steps end (CANCELLED)
        before its processes are killed (the step supervisor kills its cgroup next)."""
        with running.changed:
            running.exited = True
            running.changed.notify_all()
        self.on_ending(running)

    def run_end(self, running: RunningJob, step: StepSupervisor) -> StepResult:
        """How the run ended, once none of its processes is left: TIMEOUT, OUT_OF_MEMORY (the OOM
        killer took a process: slurmstepd's line in its stderr; or its GPU memory slice overran), a
        relinquished allocation's own code, CANCELLED, else its leader's exit status."""
        if running.cgroup is not None:  # read before finish() removes the cgroup
            running.max_rss_bytes = running.cgroup.max_rss_bytes()
            running.cpu_times = running.cgroup.cpu_times()
        oom_kills = self._oom_kills(running)
        rc = 0 if running.job.spec.allocation else (step.tasks[0].returncode or 0)  # a placeholder's is no one's
        if not (oom_kills or running.overrun or running.timed_out or running.cancelled):
            self._slice_refused(running, step, rc)
        if running.timed_out:
            state = JobState.TIMEOUT
        elif oom_kills or running.overrun:
            state = JobState.OUT_OF_MEMORY
        elif running.relinquished is not None:
            state = JobState.COMPLETED if running.relinquished == 0 else JobState.FAILED
            rc = running.relinquished
        elif running.cancelled:
            state = JobState.CANCELLED
        else:
            state = JobState.COMPLETED if rc == 0 else JobState.FAILED
        return StepResult(state, rc if rc > 0 else 0, -rc if rc < 0 else 0, time.time(), step.task_ends())

    def _slice_refused(self, running: RunningJob, step: StepSupervisor, rc: int) -> None:
        """A run whose --gpu-mem slice is MPS's pinned-memory limit, ended by CUDA refusing an
        allocation past it (:func:`~pslurm.nodeagent.mps.slice_refusal`, from its stderr's tail: the
        file's, or what psrun was sent): slurmstepd's line in its stderr and its SystemComment say so;
        it ends OUT_OF_MEMORY."""
        setup = running.gpu_setup
        share = getattr(setup, "share", None)
        if share is None or share.kind != "gpumem" or not getattr(setup, "mps_pipe", ""):
            return
        fd = step.stderr_file.fileno() if step.stderr_file is not None else None
        with step.changed:
            tail = bytes(step.output.stderr_tail) if step.stderr_path is None else b""
        if slice_refusal(rc, read_tail(fd) if fd is not None else tail):
            self.note_stderr(running, refusal_note(step.name, share.amount))
            running.overrun = refusal_comment(share.amount)
            log.warning("job %d: %s", running.job.job_id, running.overrun)

    def finish(self, running: RunningJob) -> None:
        with running.changed:
            running.changed.notify_all()
        if running.cgroup is not None:
            running.cgroup.remove()
        self.remove_script(running.job.job_id)
        self.on_end(running)

    def remove_script(self, job_id: int) -> None:
        """Remove a batch job's script and its directory in the spool, if they are there."""
        job_dir = os.path.join(self.spool_dir, f"job{job_id:05d}")
        for leftover in (os.path.join(job_dir, "slurm_script"), job_dir):
            try:
                os.remove(leftover) if leftover.endswith("script") else os.rmdir(leftover)
            except OSError:
                pass

    def _oom_kills(self, running: RunningJob) -> int:
        """How many of the run's processes the OOM killer took (its memory cgroup says); when any,
        slurmstepd's line goes to the job's stderr."""
        count = running.cgroup.oom_kills() if running.cgroup is not None else 0
        if count:
            step = running.step.name if running.step is not None else str(running.job.job_id)
            self.note_stderr(running, f"slurmstepd: error: Detected {count} oom_kill event{'s' if count > 1 else ''} "
                                      f"in StepId={step}. Some of the step tasks have been OOM Killed.\n")
        return count

    # -- time limit and --signal --

    def _watch_limit(self, running: RunningJob) -> None:
        """Start the thread that ends the run at its time limit, if it has one and none runs yet."""
        with running.changed:
            start = running.job.time_limit is not None and not running.limit_watched and not running.exited
            running.limit_watched = running.limit_watched or start
        if start:
            threading.Thread(target=self._enforce_limit, args=(running,), name=f"job{running.job.job_id}.limit",
                             daemon=True).start()

    def _enforce_limit(self, running: RunningJob) -> None:
        """End the run when its time limit is reached: SIGTERM, KillWait, SIGKILL, and it ends TIMEOUT.
        The limit is read again whenever it changes (:meth:`set_time_limit`); the thread goes when the
        run ends first or its limit is lifted."""
        with running.changed:
            while True:
                if running.exited or running.job.time_limit is None:
                    running.limit_watched = False
                    return
                left = running.limit_left(time.time())  # None while suspended: woken by its resume
                if left is not None and left <= 0:
                    running.timed_out = True
                    break
                running.changed.wait(left)
        self._note(running, "DUE TO TIME LIMIT ")
        self._terminate(running)

    def set_time_limit(self, running: RunningJob, time_limit: int | None) -> None:
        """pscontrol update TimeLimit= of a running job: its new limit (seconds from its start; None:
        none) holds from now on; a limit already passed ends it at once."""
        with running.changed:
            if running.end is not None or running.timed_out:
                return
            running.job.time_limit = time_limit
            running.changed.notify_all()
            begun = running.begun  # not yet: the limit is watched from its start
        if begun:
            self._watch_limit(running)

    def _warn_before_limit(self, running: RunningJob) -> None:
        """--signal: its signal once, SIGTIME seconds before the time limit in force (a limit changed
        meanwhile is followed, as the limit itself is). The thread goes when the run ends first."""
        spec = running.job.spec
        with running.changed:
            while True:
                if running.exited or running.timed_out or running.cancelled:
                    return
                before = running.limit_left(time.time())
                left = None if before is None else before - spec.warn_time
                if left is not None and left <= 0:
                    break
                running.changed.wait(left)  # woken by a new limit, and by the run's end
        self._warn(running)

    def _warn(self, running: RunningJob) -> None:
        """The warning: to the batch shell alone (``B:``), else to every process of the job, as
        ``pscancel -s`` does (Slurm sends it to the job's steps). ``R:`` (also at a reservation's end)
        asks nothing more: pslurm has no reservations."""
        spec = running.job.spec
        log.info("job %d: signal %d, %d s before its time limit%s", running.job.job_id, spec.warn_signal,
                 spec.warn_time, " (batch shell)" if spec.warn_batch else "")
        if spec.warn_batch and not spec.allocation and running.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.proc.pid, spec.warn_signal)
        else:
            self.signal(running, spec.warn_signal)

    # -- suspend and resume --

    def suspend(self, running: RunningJob, resume: bool) -> None:
        """pscontrol suspend / resume: the run's processes stopped or continued (its cgroup frozen or
        thawed; without a freezer SIGSTOP / SIGCONT to its processes, as Slurm's proctrack does), and
        its time limit paused meanwhile. Idempotent; a run not begun or ended is left alone."""
        with running.changed:
            if running.end is not None or not running.begun or resume == (running.suspended_at is None):
                return
            now = time.time()
            if resume:
                running.suspended_for += max(0.0, now - (running.suspended_at or now))
                running.suspended_at = None
            else:
                running.suspended_at = now
            running.changed.notify_all()  # the limit's and --signal's watchers count again, or stop counting
        self._freeze(running, not resume)

    def _freeze(self, running: RunningJob, frozen: bool) -> None:
        if running.cgroup is None or not running.cgroup.freeze(frozen):
            self._signal_all(running, signal.SIGSTOP if frozen else signal.SIGCONT)
        log.info("job %d: %s", running.job.job_id, "suspended" if frozen else "resumed")

    # -- cancel and signals --

    def cancel(self, running: RunningJob) -> None:
        """scancel: the job ends CANCELLED (idempotent; a second cancel does nothing more). A run
        not started yet is only marked: ``start`` then ends it without starting it."""
        with running.changed:
            if running.cancelled or running.end is not None:
                return
            running.cancelled = True
            if not running.begun:
                return
        self._note(running, "")
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    def relinquish(self, running: RunningJob, exit_code: int) -> None:
        """psalloc's end: its owner gives the allocation back; its run ends COMPLETED (FAILED with
        a non-zero ``exit_code``, the command's, as salloc's slurm_complete_job). Idempotent; a run
        already cancelled or ended is left alone."""
        with running.changed:
            if running.cancelled or running.end is not None or not running.job.spec.allocation:
                return
            running.cancelled = True  # ended from outside: a later cancel does nothing more
            running.relinquished = exit_code
            if not running.begun:
                return
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    def end_overrun(self, running: RunningJob, note: str, comment: str) -> bool:
        """End a run that used more than its GPU memory slice: ``note`` (slurmstepd's lines) to its
        stderr, then its processes killed as on cancel; it ends OUT_OF_MEMORY with ``comment`` as
        its SystemComment. False (and nothing done) when it had already been ended or cancelled."""
        with running.changed:
            if running.cancelled or running.end is not None or not running.begun:
                return False
            running.cancelled = True
            running.overrun = comment
        self.note_stderr(running, note)
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()
        return True

    def _terminate(self, running: RunningJob) -> None:
        """SIGTERM to the whole job (its cgroup, session and process group), SIGKILL after KillWait.
        What is left once the leader is gone, its step's supervisor reaps."""
        leader = running.proc
        assert leader is not None
        with running.changed:
            suspended, running.suspended_at = running.suspended_at is not None, None
        if suspended:  # a frozen process takes no signal: it is continued first, as slurmd's terminate does
            self._freeze(running, False)
        self.on_ending(running)
        for signum in (signal.SIGCONT, signal.SIGTERM):
            self._signal_all(running, signum)
        try:
            leader.wait(timeout=self.kill_wait)
        except subprocess.TimeoutExpired:
            if running.cgroup is not None:
                running.cgroup.kill()
            kill_pgid(leader.pid, signal.SIGKILL)
            leader.wait()

    def signal(self, running: RunningJob, signum: int) -> None:
        """pscancel -s: ``signum`` to every process of the job (an allocation's: its steps', never
        its placeholder)."""
        if running.proc is None or running.end is not None:
            return
        if running.job.spec.allocation:
            for pid in running.cgroup.pids() if running.cgroup is not None else ():
                if pid != running.proc.pid:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signum)
        else:
            self._signal_all(running, signum)

    @staticmethod
    def signal_batch(running: RunningJob, signum: int) -> None:
        """scancel -b: ``signum`` to the batch shell and what runs in its process group (psrun's
        clients too), not to its steps' tasks (sessions of their own), as slurmstepd's batch step."""
        if running.proc is not None and running.end is None:
            kill_pgid(running.proc.pid, signum)

    @staticmethod
    def _signal_all(running: RunningJob, signum: int) -> None:
        assert running.proc is not None
        kill_pgid(running.proc.pid, signum)
        if running.cgroup is not None:
            running.cgroup.signal(signum)

    def _note(self, running: RunningJob, why: str) -> None:
        """slurmstepd's line in the job's stderr when it is ended from outside."""
        line = (f"slurmstepd: error: *** JOB {running.job.job_id} ON {self.node} CANCELLED AT "
                f"{format_timestamp(time.time())} {why}***\n")
        self.note_stderr(running, line)
