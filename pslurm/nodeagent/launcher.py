"""Start a job's processes and watch them: output files, time limit, cancel, exit status.

Each job runs in its own session (process group) in its submit directory, as its user when the
agent is root. What is the user's (the output files, the working directory, slurmstepd's lines in
the stderr file) the agent touches only as the user: see :mod:`pslurm.nodeagent.userfiles`. A
watcher thread per job reports the end through ``on_end`` once none of the job's processes is left;
a job with a time limit has a second thread that enforces it (SIGTERM, KillWait, SIGKILL), waiting
on the run's condition so that a limit changed while it runs (pscontrol update) holds at once. A
job that cannot be started at all ends FAILED with ``launch_failure`` saying why; ``start`` never
raises.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pslurm.core.jobspec import JobRecord
from pslurm.core.patterns import default_output_pattern, expand_output_pattern
from pslurm.core.states import JobState
from pslurm.core.timefmt import format_timestamp
from pslurm.nodeagent.cgroups import ChildSetup, JobCgroup
from pslurm.nodeagent.runs import Group, RunRecord, RunRecords, boot_id, kill_groups, kill_pgid, start_ticks
from pslurm.nodeagent.userfiles import JobUser, UserFile, UserStart, append_as, file_umask, write_private_file

log = logging.getLogger("psd")


@dataclass
class OutputBuffer:
    """psrun's stream of one job's stdout or stderr, kept until the job has been streamed."""

    data: bytearray = field(default_factory=bytearray)
    closed: bool = False


@dataclass
class JobEnd:
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float


@dataclass
class RunningJob:
    job: JobRecord
    proc: subprocess.Popen[bytes] | None
    started: float
    cgroup: JobCgroup | None = None
    stderr_path: str | None = None
    stderr_file: UserFile | None = None  # the stderr file as the job's user opened it, for slurmstepd's lines
    cancelled: bool = False
    timed_out: bool = False
    end: JobEnd | None = None
    outputs: dict[str, OutputBuffer] = field(default_factory=dict)  # interactive jobs only
    stdin: Any = None  # interactive jobs: the write end of the job's stdin, fed by psrun (SendInput)
    changed: threading.Condition = field(default_factory=threading.Condition)
    usage: Any = None  # the agent's JobGpuUsage, set when the job ends (None: no GPUs)
    max_rss_bytes: int | None = None  # its memory cgroup's peak, read when it ends (None: not measured)
    cpu_seconds: float | None = None  # its cgroup's CPU time, read when it ends (None: not measured)
    launch_failure: str = ""  # why the run never started ("" when it did)
    start_ticks: int | None = None  # the leader's start time (/proc/<pid>/stat field 22)
    settled: threading.Event = field(default_factory=threading.Event)  # set by on_end's receiver once it took the end
    overrun: str = ""  # the agent ended it for using more than its GPU memory slice: why (its SystemComment)
    exited: bool = False  # its leader process has ended (set by the watcher)
    limit_watched: bool = False  # a thread enforces its time limit (job.time_limit, which may change)
    relinquished: int | None = None  # an allocation its owner gave back (psalloc's end): the exit code to report
    visible: list[int] = field(default_factory=list)  # CUDA_VISIBLE_DEVICES of the job (its steps renumber so)
    gpu_setup: Any = None  # the job's GpuSetup (its steps' sharing variables)
    node_index: int = 0  # this node's position in the job's allocation (> 0: it holds the run for steps only)


def close_input(running: RunningJob) -> None:
    """End the job's stdin (EOF for the job; idempotent)."""
    with running.changed:
        pipe, running.stdin = running.stdin, None
    if pipe is not None:
        try:
            pipe.close()
        except OSError:
            pass  # the job is gone: nothing more to tell it


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
        self._boot_id = boot_id()
        self.as_root = os.geteuid() == 0
        # A fork in one thread while another has a script open for writing makes that script's
        # exec fail with ETXTBSY: script writes and forks take turns.
        self._spawn_lock = threading.Lock()
        # told when a run begins to end (cancel, time limit, the leader's exit), before its processes
        # are killed: the agent ends the run's steps first (CANCELLED)
        self.on_ending: Callable[[RunningJob], None] = lambda running: None
        os.makedirs(spool_dir, exist_ok=True)

    def start(self, job: JobRecord, env: dict[str, str], cgroup: JobCgroup | None,
              cpus: set[int] | None, running: RunningJob | None = None) -> RunningJob:
        """Start the job's processes and its watcher, in ``running`` when given (the agent's
        placeholder for the run); never raises for a job that cannot start: the failure is recorded
        as the job's end (FAILED, exit code 2 as slurmstepd reports, ``launch_failure`` set). A run
        cancelled before it started ends CANCELLED without starting."""
        if running is None:
            running = RunningJob(job, None, time.time())
        running.cgroup = cgroup
        running.started = time.time()
        if running.cancelled:
            return self.never_started(running)
        try:
            with self._spawn_lock:
                proc = self._hold(cgroup) if job.spec.allocation else self._spawn(running, env, cgroup, cpus)
        except LaunchError as exc:
            return self._failed(running, exc.reason)
        except Exception as exc:  # whatever it is, the run ends and the controller hears why
            log.exception("job %d: unexpected error starting it", job.job_id)
            return self._failed(running, describe(exc))
        running.start_ticks = start_ticks(proc.pid)
        self._record(running, proc.pid)
        with running.changed:
            running.proc = proc
            cancelled = running.cancelled  # a cancel that came while it was being started
        threading.Thread(target=self._watch, args=(running,), name=f"job{job.job_id}", daemon=True).start()
        if cancelled:
            self._note(running, "")
            threading.Thread(target=self._terminate, args=(running,), daemon=True).start()
        return running

    def _record(self, running: RunningJob, pgid: int) -> None:
        if self.records is None:
            return
        job = running.job
        try:
            self.records.save(RunRecord(job.job_id, job.restarts, pgid, running.start_ticks, self._boot_id,
                                        running.cgroup.path if running.cgroup is not None else "",
                                        running.started))
        except OSError as exc:  # the job runs all the same; only a restarted agent would not know of it
            log.warning("job %d: could not record its run: %s", job.job_id, exc)

    def fail(self, job: JobRecord, why: str, running: RunningJob | None = None) -> RunningJob:
        """Record a job that cannot start at all (e.g. its device cgroup cannot be made): FAILED."""
        if running is None:
            running = RunningJob(job, None, time.time())
        running.started = time.time()  # it did not run: no time (and no GPU-seconds) to count
        if not job.spec.interactive and not job.spec.allocation and running.stderr_path is None:
            try:
                running.stderr_path = self._output_paths(job)[1]
            except Exception:  # no file for the message; the end is reported all the same
                pass
        return self._failed(running, why)

    def never_started(self, running: RunningJob) -> RunningJob:
        """End a run cancelled before it started: CANCELLED, nothing ran."""
        running.started = time.time()
        if running.job.spec.interactive:
            running.outputs = {"stdout": OutputBuffer(closed=True), "stderr": OutputBuffer(closed=True)}
        running.end = JobEnd(JobState.CANCELLED, 0, 0, time.time())
        self._finish(running)
        return running

    def _failed(self, running: RunningJob, why: str) -> RunningJob:
        job = running.job
        why = " ".join(why.split()) or "unknown error"  # one line
        message = f"slurmstepd: error: {why}\n"
        log.warning("job %d could not start: %s", job.job_id, why)
        if job.spec.interactive:
            running.outputs = {"stdout": OutputBuffer(closed=True),
                               "stderr": OutputBuffer(bytearray(message.encode()), closed=True)}
        else:
            self.note_stderr(running, message)
        running.launch_failure = why
        running.end = JobEnd(JobState.FAILED, 2, 0, time.time())
        self._finish(running)
        return running

    def _spawn(self, running: RunningJob, env: dict[str, str], cgroup: JobCgroup | None,
               cpus: set[int] | None) -> subprocess.Popen[bytes]:
        """Start the job's leader; LaunchError with slurmstepd's reason when it cannot.

        The leader's child side (:class:`UserStart`, then :class:`ChildSetup`) enters the working
        directory and opens the output files as the user, never root: Popen gets no ``cwd``."""
        job, spec = running.job, running.job.spec
        out_path = err_path = None
        if not spec.interactive:
            out_path, err_path = self._output_paths(job)
            running.stderr_path = err_path
        _check_strings(spec.workdir, spec.argv if spec.script is None else (), env)
        for which, path in (("stdout", out_path), ("stderr", err_path)):
            if path is not None and "\0" in path:
                raise LaunchError(f"the {which} file name contains a NUL byte")
        if spec.script is not None:
            try:
                argv = [self._write_script(job)]
            except OSError as exc:
                raise LaunchError(f"could not write the batch script: {_os_error(exc)}") from exc
        else:
            argv = list(spec.argv)
            if not argv:
                raise LaunchError("execve(): no command to run")
        user_kw: dict[str, object] = {}
        if self.as_root and spec.uid != 0:  # run as the submitter, never as root on their behalf
            user_kw = {"user": spec.uid, "group": spec.gid, "extra_groups": _groups_of(spec.user, spec.gid)}
        if spec.interactive:
            streams: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        else:  # stdout and stderr: the child's own files, dup2'd onto 1 and 2 before exec
            streams = {"stdin": subprocess.DEVNULL}
        with ChildSetup(cgroup, cpus) as setup, UserStart(spec.workdir, out_path, err_path, env, setup,
                                                         append=spec.open_mode == "append") as child:
            try:
                with _exec_errors():
                    proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
                        argv, cwd=None, env=env, start_new_session=True, preexec_fn=child, **streams, **user_kw)
            except LaunchError as exc:
                failure, running.stderr_file = child.collect()
                raise LaunchError(failure or exc.reason) from exc  # the child's own words when it said why
            running.stderr_file = child.collect()[1]
        if spec.interactive:
            running.stdin = proc.stdin  # psrun's stdin goes here (srun forwards it to the task)
            running.outputs = {"stdout": OutputBuffer(), "stderr": OutputBuffer()}
            for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
                threading.Thread(target=self._pump, args=(running, name, pipe), daemon=True).start()
        return proc

    @staticmethod
    def _hold(cgroup: JobCgroup | None) -> subprocess.Popen[bytes]:
        """An allocation's (psalloc's) run: no command of the user runs, only a placeholder that holds
        the run as a leader holds a batch job's (the watcher, time limit, cancel, records and recovery
        are those of any run): the agent's own ``sleep``, in the job's cgroup and a session of its
        own, in ``/``, which the job's user cannot signal. It ends when the run is cancelled, times
        out or is relinquished (:meth:`relinquish`)."""
        with ChildSetup(cgroup) as setup, _exec_errors():
            proc: subprocess.Popen[bytes] = subprocess.Popen(
                ["sleep", "infinity"], cwd="/", env={"PATH": "/usr/bin:/bin"}, start_new_session=True,
                preexec_fn=setup, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return proc

    def relinquish(self, running: RunningJob, exit_code: int) -> None:
        """psalloc's end: its owner gives the allocation back; its run ends COMPLETED (FAILED with
        a non-zero ``exit_code``, the command's, as salloc's slurm_complete_job). Idempotent; a run
        already cancelled or ended is left alone."""
        with running.changed:
            if running.cancelled or running.end is not None or not running.job.spec.allocation:
                return
            running.cancelled = True  # ended from outside: a later cancel does nothing more
            running.relinquished = exit_code
            if running.proc is None:
                return
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    def _output_paths(self, job: JobRecord) -> tuple[str, str]:
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

    def _job_user(self, job: JobRecord) -> JobUser:
        spec = job.spec
        switch = self.as_root and spec.uid != 0
        return JobUser(spec.uid, spec.gid, tuple(_groups_of(spec.user, spec.gid)) if switch else (), switch)

    def note_stderr(self, running: RunningJob, text: str) -> None:
        """Add slurmstepd's ``text`` (whole lines) to the job's stderr: psrun's stream, or the
        stderr file, written as the job's user: through the file the job's process opened for the
        agent at launch, else (the launch failed before that) from a child that becomes the user.
        Never by path as root. Never raises; a line that cannot be written is dropped."""
        spec = running.job.spec
        if spec.interactive:
            with running.changed:
                buffer = running.outputs.get("stderr")
                if buffer is not None:
                    buffer.data.extend(text.encode())
                    running.changed.notify_all()
        elif running.stderr_file is not None:
            running.stderr_file.write(text)  # closed once the run ended: then nothing
        elif running.stderr_path:
            try:
                with self._spawn_lock:  # a fork while a script is open for writing: ETXTBSY (see __init__)
                    append_as(self._job_user(running.job), running.stderr_path, text, file_umask(spec.environment))
            except OSError as exc:  # fork failed: the end is reported all the same
                log.warning("job %d: could not write to its stderr file: %s", running.job.job_id, exc)

    def _pump(self, running: RunningJob, name: str, pipe: object) -> None:
        buffer = running.outputs[name]
        read = pipe.read1  # type: ignore[attr-defined]
        while chunk := read(65536):
            with running.changed:
                buffer.data.extend(chunk)
                running.changed.notify_all()
        with running.changed:
            buffer.closed = True
            running.changed.notify_all()

    def _watch(self, running: RunningJob) -> None:
        proc = running.proc
        assert proc is not None
        self._watch_limit(running)
        if running.job.spec.warn_signal:
            threading.Thread(target=self._warn_before_limit, args=(running,), name=f"job{running.job.job_id}.signal",
                             daemon=True).start()
        proc.wait()
        with running.changed:
            running.exited = True
            running.changed.notify_all()  # its time limit is watched no more
        self.on_ending(running)  # its steps end (CANCELLED) before the reap kills them
        rc = proc.returncode if not running.job.spec.allocation else 0  # its placeholder's is no one's
        self._reap(running)  # what the job left running in the background goes too, before the end is told
        if running.cgroup is not None:  # read before _finish removes the cgroup
            running.max_rss_bytes = running.cgroup.max_rss_bytes()
            running.cpu_seconds = running.cgroup.cpu_seconds()
        self._drain_output(running)
        oom_kills = self._oom_kills(running)
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
        running.end = JobEnd(state, rc if rc > 0 else 0, -rc if rc < 0 else 0, time.time())
        self._finish(running)

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
                limit = running.job.time_limit
                if running.exited or limit is None:
                    running.limit_watched = False
                    return
                left = running.started + limit - time.time()
                if left <= 0:
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
            started = running.proc is not None  # not yet: the limit is watched from its start
        if started:
            self._watch_limit(running)

    def _warn_before_limit(self, running: RunningJob) -> None:
        """--signal: its signal once, SIGTIME seconds before the time limit in force (a limit changed
        meanwhile is followed, as the limit itself is). The thread goes when the run ends first."""
        spec = running.job.spec
        with running.changed:
            while True:
                if running.exited or running.timed_out or running.cancelled:
                    return
                limit = running.job.time_limit
                left = None if limit is None else running.started + limit - spec.warn_time - time.time()
                if left is not None and left <= 0:
                    break
                running.changed.wait(left)  # woken by a new limit, and by the run's end
        self._warn(running)

    @staticmethod
    def _warn(running: RunningJob) -> None:
        """The warning: to the batch shell alone (``B:``), else to every process of the job, as
        ``pscancel -s`` does (Slurm sends it to the job's steps; a pslurm job's processes are its one
        step). ``R:`` (also at a reservation's end) asks nothing more: pslurm has no reservations."""
        spec = running.job.spec
        assert running.proc is not None
        log.info("job %d: signal %d, %d s before its time limit%s", running.job.job_id, spec.warn_signal,
                 spec.warn_time, " (batch shell)" if spec.warn_batch else "")
        if spec.allocation:  # no batch shell: its steps' processes (the leader is the agent's placeholder)
            Launcher._signal_members(running, spec.warn_signal)
        elif spec.warn_batch:
            with contextlib.suppress(ProcessLookupError):
                os.kill(running.proc.pid, spec.warn_signal)
        else:
            Launcher._signal_all(running, spec.warn_signal)

    @staticmethod
    def _drain_output(running: RunningJob) -> None:
        """Wait until psrun's streams have read what the job's processes wrote last (a shell's
        "Killed" line), so that slurmstepd's notes come after it, as in Slurm. Bounded: a process
        that left the session and the cgroup may still hold a pipe open."""
        with running.changed:
            running.changed.wait_for(lambda: all(b.closed for b in running.outputs.values()), timeout=2.0)

    def _reap(self, running: RunningJob) -> None:
        """SIGKILL the job's cgroup (every process, even those that left its session), session and
        process group, and wait, re-sending SIGKILL, until none of its processes is left, for at
        most ``reap_timeout`` seconds."""
        assert running.proc is not None
        pgid = running.proc.pid
        if running.cgroup is not None:
            running.cgroup.kill()
        kill_pgid(pgid, signal.SIGKILL)
        left = kill_groups([Group(pgid, running.start_ticks, running.cgroup)], self.reap_timeout)
        if left:
            log.error("job %d: %d process(es) still there %.0f s after SIGKILL, reporting its end anyway: %s",
                      running.job.job_id, len(left[pgid]), self.reap_timeout, left[pgid])

    def _finish(self, running: RunningJob) -> None:
        with running.changed:
            running.changed.notify_all()
        close_input(running)
        if running.stderr_file is not None:
            running.stderr_file.close()  # the run is over: no more lines from the agent
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

    def _terminate(self, running: RunningJob) -> None:
        """SIGTERM to the whole job (its cgroup, session and process group), SIGKILL after KillWait.
        What is left once the leader is gone, ``_watch`` reaps."""
        assert running.proc is not None
        self.on_ending(running)
        for signum in (signal.SIGCONT, signal.SIGTERM):
            self._signal_all(running, signum)
        try:
            running.proc.wait(timeout=self.kill_wait)
        except subprocess.TimeoutExpired:
            if running.cgroup is not None:
                running.cgroup.kill()
            kill_pgid(running.proc.pid, signal.SIGKILL)
            running.proc.wait()

    @staticmethod
    def _signal_members(running: RunningJob, signum: int) -> None:
        """``signum`` to an allocation's processes (its steps'), never to its placeholder leader."""
        assert running.proc is not None
        for pid in running.cgroup.pids() if running.cgroup is not None else ():
            if pid != running.proc.pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signum)

    @staticmethod
    def _signal_all(running: RunningJob, signum: int) -> None:
        assert running.proc is not None
        kill_pgid(running.proc.pid, signum)
        if running.cgroup is not None:
            running.cgroup.signal(signum)

    def _oom_kills(self, running: RunningJob) -> int:
        """How many of the run's processes the OOM killer took (its memory cgroup says); when any,
        slurmstepd's line goes to the job's stderr."""
        count = running.cgroup.oom_kills() if running.cgroup is not None else 0
        if count:
            self.note_stderr(running, f"slurmstepd: error: Detected {count} oom_kill event{'s' if count > 1 else ''} "
                                    f"in StepId={running.job.job_id}.{step_name(running.job)}. "
                                    "Some of the step tasks have been OOM Killed.\n")
        return count

    def cancel(self, running: RunningJob) -> None:
        """scancel: the job ends CANCELLED (idempotent; a second cancel does nothing more). A run
        not started yet is only marked: ``start`` then ends it without starting it."""
        with running.changed:
            if running.cancelled or running.end is not None:
                return
            running.cancelled = True
            if running.proc is None:
                return
        self._note(running, "")
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    def end_overrun(self, running: RunningJob, note: str, comment: str) -> bool:
        """End a run that used more than its GPU memory slice: ``note`` (slurmstepd's lines) to its
        stderr, then its processes killed as on cancel; it ends OUT_OF_MEMORY with ``comment`` as
        its SystemComment. False (and nothing done) when it had already been ended or cancelled."""
        with running.changed:
            if running.cancelled or running.end is not None or running.proc is None:
                return False
            running.cancelled = True
            running.overrun = comment
        self.note_stderr(running, note)
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()
        return True

    def signal(self, running: RunningJob, signum: int) -> None:
        """pscancel -s: ``signum`` to every process of the job."""
        if running.proc is not None and running.end is None:
            if running.job.spec.allocation:
                self._signal_members(running, signum)
            else:
                self._signal_all(running, signum)

    def _note(self, running: RunningJob, why: str) -> None:
        """slurmstepd's line in the job's stderr when it is ended from outside."""
        line = (f"slurmstepd: error: *** JOB {running.job.job_id} ON {self.node} CANCELLED AT "
                f"{format_timestamp(time.time())} {why}***\n")
        self.note_stderr(running, line)


class LaunchError(Exception):
    """A job that cannot be started; ``reason`` is slurmstepd's one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def step_name(job: JobRecord) -> str:
    """The step slurmstepd's lines name: a psrun job's step 0, a batch job's batch step."""
    return "0" if job.spec.interactive else "batch"


def describe(exc: BaseException) -> str:
    """An unexpected exception as a one-line launch failure."""
    if isinstance(exc, OSError) and exc.strerror:
        return _os_error(exc)
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _os_error(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else (exc.strerror or str(exc))


def _check_strings(workdir: str, argv: tuple[str, ...], env: dict[str, str]) -> None:
    """What execve cannot take (Popen raises ValueError for it, not OSError)."""
    if "\0" in workdir:
        raise LaunchError("the working directory contains a NUL byte")
    if any("\0" in a for a in argv):
        raise LaunchError("the command line contains a NUL byte")
    for name, value in env.items():
        if "\0" in name or "\0" in value:
            shown = name.replace("\0", "\\0")
            raise LaunchError(f"the environment contains a NUL byte (in {shown})")
        if not name or "=" in name:
            raise LaunchError(f"the environment contains an invalid variable name {name!r}")


@contextlib.contextmanager
def _exec_errors() -> Iterator[None]:
    """Popen's failures as slurmstepd's lines: the execve, or the child's setup (whose own reason,
    when it sent one, the caller puts first)."""
    try:
        yield
    except OSError as exc:
        raise LaunchError(f"execve(): {_os_error(exc)}") from exc
    except subprocess.SubprocessError as exc:
        raise LaunchError(f"setting up the job's process failed: {describe(exc)}") from exc
    except ValueError as exc:
        raise LaunchError(f"execve(): {describe(exc)}") from exc


def _groups_of(user: str, gid: int) -> list[int]:
    try:
        return os.getgrouplist(user, gid)
    except (KeyError, OSError):
        return [gid]
