"""The step supervisor: one step's tasks on this node, from their spawn to their end (slurmstepd's part).

A step is the node's only unit of execution: a batch job's script runs as its ``batch`` step, a
psrun job's command as its step 0, an allocation is held by its ``extern`` step, and psrun inside a
job adds steps 0, 1, ... (:mod:`pslurm.core.steps`). :class:`StepSupervisor` does for each of them
what slurmstepd does:

- **spawn** each task as the job's user (:class:`~pslurm.nodeagent.userfiles.UserStart`: the working
  directory entered and the output files opened *as the user*), in a session of its own, in the
  job's cgroup (:class:`~pslurm.nodeagent.cgroups.ChildSetup` before exec); its stdio is files (a
  batch script), pipes or a pseudo-terminal (psrun), or nothing (an allocation's holder);
- **pump** pipe and pty output into :class:`StepOutput`, bounded buffers with back-pressure, and
  psrun's input to task 0;
- **signal** its tasks' sessions, and **terminate** them: SIGCONT and SIGTERM, KillWait, SIGKILL;
- **record how each task ended** (:class:`~pslurm.core.steps.TaskEnd`), kill what the tasks left in
  their sessions, wait for their last output, and decide the step's end.

What belongs to the job's *run* (its cgroup, time limit, run records, the end the controller hears)
is the launcher's (:mod:`pslurm.nodeagent.launcher`); a run's own step hands it the moments that
matter through :class:`StepHooks`.

The output's buffers, their bounds and the stdio kinds are in :mod:`pslurm.nodeagent.stepio`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import grp
import io
import logging
import os
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pslurm.core.states import JobState
from pslurm.core.steps import StepResult, TaskEnd, step_name
from pslurm.nodeagent import runner as job_runner
from pslurm.nodeagent.cgroups import JobCgroup
from pslurm.nodeagent.childstart import (
    FDS,
    FILES,
    NULL,
    PTY,
    ChildFailed,
    ChildPlan,
    LaunchError,
    TaskProcess,
    check_strings,
    describe,
    start_child,
)
from pslurm.nodeagent.identity import supplementary_groups
from pslurm.nodeagent.runs import Group, kill_groups, kill_pgid, start_ticks
from pslurm.nodeagent.stepio import READ_SIZE, Files, Framer, Null, Pipes, Pty, Stdio, StepOutput
from pslurm.nodeagent.userfiles import JobUser, UserFile, append_as

log = logging.getLogger("psd")



# -- the supervisor ---------------------------------------------------------------------------


@dataclass
class Task:
    rank: int
    local: int
    proc: TaskProcess | None = None
    ticks: int | None = None
    returncode: int | None = None  # set once it ended (2: it could not start)

    def end(self, node: str) -> TaskEnd:
        code = self.returncode or 0
        return TaskEnd(self.rank, code if code > 0 else 0, -code if code < 0 else 0, node)


class StepHooks:
    """What a supervisor tells its owner. The default is an ordinary step's: its end from its tasks'.
    A job's run (the launcher) overrides them for the run's own step."""

    def tasks_exited(self, step: StepSupervisor) -> None:
        """Every task has exited; what they left in their sessions is killed next."""

    def decide(self, step: StepSupervisor) -> StepResult:
        return step.default_end()

    def publish(self, step: StepSupervisor, end: StepResult) -> None:
        """Make ``end`` the step's (readers and waiters see it from now on)."""
        with step.changed:
            step.end = end
            step.changed.notify_all()

    def ended(self, step: StepSupervisor) -> None:
        """The step's end is decided and visible (``step.end``)."""


class StepSupervisor:
    """One step's tasks on this node. Spawn them (:meth:`spawn`), then :meth:`started` watches them
    until the step ends; ``changed`` guards the step's state and output.

    ``user``: whom the tasks run as (None: the agent's own user, for an allocation's holder);
    ``records``: called with each task once it runs (the agent's run records)."""

    def __init__(self, job_id: int, step_id: int, *, cgroup: JobCgroup | None, user: JobUser | None,
                 spawn_lock: threading.Lock, kill_wait: float, reap_timeout: float, cpus: set[int] | None = None,
                 hooks: StepHooks | None = None, record: Callable[[Task], None] = lambda task: None,
                 umask: int = 0o022, owns_cgroup: bool = False, node: str = "") -> None:
        self.job_id, self.step_id = job_id, step_id
        self.cgroup, self.cpus, self.user = cgroup, cpus, user
        self.spawn_lock = spawn_lock
        self.kill_wait, self.reap_timeout = kill_wait, reap_timeout
        self.hooks = hooks or StepHooks()
        self.record = record
        self.umask = umask  # a note's stderr file is created under it when the task never made one
        self.owns_cgroup = owns_cgroup  # the run's own step: its end kills the whole cgroup
        self.node = node  # this node's name, in its tasks' ends
        self.changed = threading.Condition()
        self.output = StepOutput(self.changed)
        self.tasks: list[Task] = []
        self.stdin: Any = None  # task 0's stdin: a pipe, or the pty's master (a FileIO)
        self.stderr_file: UserFile | None = None  # a batch script's stderr as the user opened it
        self.stderr_path: str | None = None
        self.cancelled = False  # terminate() asked
        self.sent: set[int] = set()  # the signals scancel -s sent it (signal_tasks): a task they kill ends it CANCELLED
        self.job_ending = False  # its job's run ends first: it ends CANCELLED unless it ended already
        self.oom_before = cgroup.oom_kills() if cgroup is not None else 0
        self.started_at = time.time()
        self.end: StepResult | None = None

    @property
    def name(self) -> str:
        return f"{self.job_id}.{step_name(self.step_id)}"

    @property
    def leader(self) -> TaskProcess | None:
        """Task 0's process (a run's own step has one task: the job's leader)."""
        return self.tasks[0].proc if self.tasks else None

    # -- spawn --

    def spawn(self, rank: int, local: int, argv: Sequence[str], env: dict[str, str], workdir: str,
              stdio: Stdio) -> Task:
        """Start one task; LaunchError (slurmstepd's reason) when it cannot. The task is added to the
        step either way (one that cannot start ends with exit code 2: :meth:`spawn_or_note`)."""
        task = Task(rank, local)
        self.tasks.append(task)
        if not argv:
            raise LaunchError("execve(): no command to run")
        check_strings(workdir, argv, env)
        if isinstance(stdio, Files):
            for which, path in (("stdout", stdio.stdout), ("stderr", stdio.stderr)):
                if "\0" in path:
                    raise LaunchError(f"the {which} file name contains a NUL byte")
            self.stderr_path = stdio.stderr
        with _Spawn(self, stdio, rank) as spawn:
            task.proc = spawn.popen(list(argv), env, workdir)
        task.ticks = start_ticks(task.proc.pid)
        self.record(task)
        return task

    def spawn_or_note(self, rank: int, local: int, argv: Sequence[str], env: dict[str, str], workdir: str,
                      stdio: Stdio) -> None:
        """:meth:`spawn`, a task that cannot start exiting 2 with slurmstepd's line in the step's stderr."""
        try:
            self.spawn(rank, local, argv, env, workdir, stdio)
        except Exception as exc:
            why = exc.reason if isinstance(exc, LaunchError) else describe(exc)
            if not isinstance(exc, LaunchError):
                log.exception("step %s: task %d could not start", self.name, rank)
            self.tasks[-1].returncode = 2
            self.note(f"slurmstepd: error: task {rank} launch failed: {why}\n")

    def started(self) -> None:
        """Every task is spawned: watch them until the step ends (in a thread of its own)."""
        threading.Thread(target=self._watch, daemon=True, name=f"step{self.name}").start()

    def _pump(self, name: str, pipe: Any, framer: Framer | None) -> None:
        read = pipe.read1 if hasattr(pipe, "read1") else pipe.read
        while True:
            try:
                chunk = read(READ_SIZE)
            except OSError as exc:  # a pty's master once the terminal's last holder is gone
                if exc.errno != errno.EIO:
                    log.debug("step %s: %s: %s", self.name, name, exc)
                chunk = b""
            if not chunk:
                break
            self.output.write(name, framer.feed(chunk) if framer is not None else chunk)
        with contextlib.suppress(OSError):
            pipe.close()  # a pty's master too: its writer (psrun's input) then finds it closed
        if framer is not None:
            self.output.write(name, framer.flush())
        self.output.closed(name)

    def pump(self, name: str, pipe: Any, framer: Framer | None) -> None:
        self.output.opened(name)
        threading.Thread(target=self._pump, args=(name, pipe, framer), daemon=True,
                         name=f"step{self.name}.{name}").start()

    # -- notes, input --

    def note(self, text: str) -> None:
        """slurmstepd's ``text`` (whole lines) in the step's stderr: psrun's stream, or the stderr
        file, written as the job's user (through the file its task opened for the agent, else from a
        child that becomes the user; never by path as root). Never raises."""
        if self.stderr_path is None:
            self.output.note(text)
        elif self.stderr_file is not None:
            self.stderr_file.write(text)  # closed once the step ended: then nothing
        elif self.user is not None:
            try:
                with self.spawn_lock:  # a fork while a script is open for writing: ETXTBSY (see Launcher)
                    append_as(self.user, self.stderr_path, text, self.umask)
            except OSError as exc:  # fork failed
                log.warning("step %s: could not write to its stderr file: %s", self.name, exc)

    def write_input(self, chunks: Iterator[bytes]) -> None:
        """psrun's stdin to task 0; its end closes a pipe (EOF), never a pty (psrun sends ^D itself)."""
        try:
            for data in chunks:
                target = self.stdin
                if target is None:
                    return
                if isinstance(target, io.FileIO):
                    view = memoryview(data)
                    while view:
                        view = view[target.write(view) or 0:]
                else:
                    target.write(data)
                    target.flush()
        except (OSError, ValueError):
            return
        finally:
            if not isinstance(self.stdin, io.FileIO):
                self.close_input()

    def close_input(self) -> None:
        """End task 0's stdin (EOF; idempotent). A pty's master is its pump's to close."""
        with self.changed:
            pipe = self.stdin
            if isinstance(pipe, io.FileIO):
                return
            self.stdin = None
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()

    # -- signals --

    def signal(self, signum: int) -> None:
        """``signum`` to each running task's session."""
        for task in self.tasks:
            if task.proc is not None and task.returncode is None:
                kill_pgid(task.proc.pid, signum)

    def signal_tasks(self, signum: int) -> None:
        """scancel -s's ``signum`` to its tasks: a task it kills ends the step CANCELLED (as slurmstepd's
        step signalled by slurmctld), not FAILED."""
        with self.changed:
            self.sent.add(signum)
        self.signal(signum)

    def terminate(self) -> None:
        """End the step: SIGCONT and SIGTERM to its tasks, SIGKILL after KillWait (idempotent; in a
        thread of its own)."""
        with self.changed:
            if self.cancelled or self.end is not None:
                return
            self.cancelled = True
        threading.Thread(target=self._escalate, daemon=True, name=f"step{self.name}.kill").start()

    def _escalate(self) -> None:
        for signum in (signal.SIGCONT, signal.SIGTERM):
            self.signal(signum)
        deadline = time.monotonic() + self.kill_wait
        for task in self.tasks:
            if task.proc is None:
                continue
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        self.signal(signal.SIGKILL)

    # -- the end --

    def _watch(self) -> None:
        for task in self.tasks:
            if task.proc is not None:
                task.proc.wait()
                task.returncode = task.proc.returncode
        self.hooks.tasks_exited(self)
        # what the tasks left in their sessions goes too, as slurmstepd's proctrack kills the step's container
        # (the run's own step: the whole cgroup, every step's processes and those that left their session)
        cgroup = self.cgroup if self.owns_cgroup else None
        if cgroup is not None:
            cgroup.kill()
        groups = [Group(t.proc.pid, t.ticks, cgroup) for t in self.tasks if t.proc is not None]
        for g in groups:
            kill_pgid(g.pgid, signal.SIGKILL)
        left = kill_groups(groups, self.reap_timeout)
        if left:
            log.error("step %s: processes still there after SIGKILL: %s", self.name, left)
        self.output.wait_drained()
        end = self.hooks.decide(self)
        self.hooks.publish(self, end)
        self.output.end()
        self.close_input()
        if self.stderr_file is not None:
            self.stderr_file.close()  # the step is over: no more lines from the agent
        log.info("step %s ended %s (exit %d, signal %d)", self.name, end.state.name, end.exit_code, end.exit_signal)
        self.hooks.ended(self)

    def task_ends(self) -> tuple[TaskEnd, ...]:
        return tuple(t.end(self.node) for t in self.tasks)

    def default_end(self) -> StepResult:
        """An ordinary step's end: CANCELLED when it was cancelled, its job's run ended first, or a
        signal scancel sent it killed a task;
        OUT_OF_MEMORY when a task was SIGKILLed while the job's memory cgroup counted OOM kills;
        FAILED with the largest exit code, or the signal that killed a task; else COMPLETED."""
        ends = self.task_ends()
        exit_code = max((e.exit_code for e in ends), default=0)
        signals = [e.signal for e in ends if e.signal]
        exit_signal = signals[0] if signals else 0
        oom = self.cgroup.oom_kills() > self.oom_before if self.cgroup is not None else False
        if self.cancelled or self.job_ending or exit_signal in self.sent:
            state = JobState.CANCELLED
        elif oom and signal.SIGKILL in signals:
            state = JobState.OUT_OF_MEMORY
        elif exit_code or exit_signal:
            state = JobState.FAILED
        else:
            state = JobState.COMPLETED
        return StepResult(state, exit_code, exit_signal, time.time(), ends)

    def ended_without_tasks(self, end: StepResult) -> None:
        """A step none of whose tasks ran (its run could not start, or was cancelled first)."""
        self.hooks.publish(self, end)
        self.output.end()
        self.close_input()
        if self.stderr_file is not None:
            self.stderr_file.close()
        self.hooks.ended(self)

    def wait_end(self, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.end is not None, timeout)

    def follow(self, stop: threading.Event, active: Callable[[], bool]
               ) -> Iterator[tuple[bytes, bytes, StepResult | None]]:
        """psrun's stream: the step's output as it comes, then its end (see :meth:`StepOutput.follow`)."""
        return self.output.follow(lambda: self.end, stop, active)


class _Spawn:
    """One task's Popen: its stdio as ``stdio`` says, as the step's user, in the job's cgroup; the
    parent's side (pumps, stdin, the stderr file) set up on the supervisor once it runs."""

    def __init__(self, step: StepSupervisor, stdio: Stdio, rank: int) -> None:
        self.step, self.stdio, self.rank = step, stdio, rank
        self.master = self.slave = -1
        self.child_fds: dict[str, int] = {}  # pipes: the child's ends (stdin, stdout, stderr), until it has them
        self.ours: dict[str, Any] = {}  # pipes: our ends, until the step has them

    def __enter__(self) -> _Spawn:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self.master, self.slave, *self.child_fds.values()):
            if fd >= 0:
                os.close(fd)
        for pipe in self.ours.values():
            pipe.close()

    def popen(self, argv: list[str], env: dict[str, str], workdir: str) -> TaskProcess:
        """The task's process (a ``subprocess.Popen``, or the job runner's RunnerProc: pid, wait,
        returncode), started by the job runner when the agent has one (a fork there is cheap, see
        :mod:`pslurm.nodeagent.runner`), else by the agent itself."""
        step, stdio = self.step, self.stdio
        user = step.user if step.user is not None and step.user.switch else None  # never root on their behalf
        plan = ChildPlan(argv, env, workdir, FILES, cgroup_dirs=list(step.cgroup.dirs) if step.cgroup else [],
                         cpus=sorted(step.cpus) if step.cpus else None,
                         user=(user.uid, user.gid, list(user.groups)) if user is not None else None)
        fds: list[int] = []
        if isinstance(stdio, Null):  # the agent's own holder: root's, in /, nothing of the user's
            plan.stdio, plan.workdir, plan.user = NULL, "/", None
        elif isinstance(stdio, Pty):
            plan.stdio = PTY
            self._pty(stdio)
            fds = [self.slave]
        elif isinstance(stdio, Pipes):
            plan.stdio = FDS
            self._pipes(stdio)
            fds = [self.child_fds[k] for k in ("stdin", "stdout", "stderr")]
        else:  # Files: the child's own, opened as the user and dup2'd onto 1 and 2 before exec
            plan.stdout, plan.stderr, plan.append = stdio.stdout, stdio.stderr, stdio.append
        proc: TaskProcess
        note: UserFile | None
        runner = job_runner.current()
        try:
            if runner is not None:
                try:
                    proc, note = runner.spawn(plan, fds)
                except OSError:  # the runner is gone: this agent starts its tasks itself from now on
                    job_runner.lost(runner)
                    runner = None
            if runner is None:
                with step.spawn_lock:
                    proc, note = start_child(plan, fds)
        except ChildFailed as exc:
            self._keep(exc.note)
            raise
        self._keep(note)
        self._attach(proc)
        return proc

    def _keep(self, note: UserFile | None) -> None:
        """The stderr file a batch task's child opened for the agent's notes: the step's (files only)."""
        if isinstance(self.stdio, Files):
            self.step.stderr_file = note
        elif note is not None:
            note.close()

    def _pipes(self, stdio: Pipes) -> None:
        """psrun's pipes: the child's ends in ``child_fds`` (closed once it runs), ours as files."""
        if stdio.stdin:
            read, write = os.pipe()
            self.child_fds["stdin"], self.ours["stdin"] = read, open(write, "wb")
        else:
            self.child_fds["stdin"] = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        for name in ("stdout", "stderr"):
            read, write = os.pipe()
            self.child_fds[name], self.ours[name] = write, open(read, "rb")

    def _pty(self, stdio: Pty) -> None:
        step = self.step
        self.master, self.slave = os.openpty()
        if stdio.rows > 0 and stdio.cols > 0:
            with contextlib.suppress(OSError, struct.error):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", stdio.rows, stdio.cols, 0, 0))
        if step.user is not None and step.user.switch:  # the terminal is the user's, as login makes it (tty, 0620)
            with contextlib.suppress(OSError):
                os.fchown(self.slave, step.user.uid, _tty_gid())
                os.fchmod(self.slave, 0o620)

    def _attach(self, proc: TaskProcess) -> None:
        step, stdio = self.step, self.stdio
        if isinstance(stdio, Pty):
            os.close(self.slave)
            self.slave = -1
            master = io.FileIO(self.master, "r+", closefd=True)
            self.master = -1
            step.stdin = master
            step.pump("stdout", master, None)
        elif isinstance(stdio, Pipes):
            for fd in self.child_fds.values():  # the child has them now
                os.close(fd)
            self.child_fds.clear()
            if stdio.stdin:
                step.stdin = self.ours.pop("stdin")
            step.pump("stdout", self.ours.pop("stdout"), stdio.framer(self.rank))
            step.pump("stderr", self.ours.pop("stderr"), stdio.framer(self.rank))


# -- whom tasks run as -------------------------------------------------------------------------


def job_user(uid: int, gid: int, user: str, as_root: bool) -> JobUser:
    """Whom a job's tasks run as: its user, switched to when the agent is root and they are not."""
    switch = as_root and uid != 0  # groups from the uid's own name here, never from ``user`` (a request's word)
    return JobUser(uid, gid, tuple(supplementary_groups(uid, gid)) if switch else (), switch)


def _tty_gid() -> int:
    try:
        return grp.getgrnam("tty").gr_gid
    except KeyError:
        return -1
