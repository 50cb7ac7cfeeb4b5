"""Job steps (psrun inside an allocation: J.0, J.1, ...): a step's tasks on this node, inside its
job's running run, their merged output, their end.

Each task is a process as the job's user (:class:`~pslurm.nodeagent.userfiles.UserStart`: the
working directory is entered as the user), in a session of its own, in the *job's* cgroup
(:class:`~pslurm.nodeagent.cgroups.ChildSetup` before exec), so the job's device, memory and CPU
containment hold for it, and the job's end (its cgroup killed) ends it. Not a cgroup per step, as
Slurm's ``job_J/step_S`` tree: on cgroup v2 a cgroup with processes may not hand controllers to
children (the no-internal-processes rule), and the batch shell lives in the job's cgroup; Slurm
moves it into a ``step_batch`` leaf, which here would change every run's cgroup, its records and
its reaping (``JobCgroup.pids`` reads one level). A step is therefore tracked by its tasks'
sessions: cancelling a step signals those (SIGTERM, KillWait, SIGKILL), and once its tasks have
exited whatever is left in their sessions is killed, as slurmstepd's proctrack does; a process of
a step that left its session ends with the job.

Output: per step an stdout and an stderr :class:`~pslurm.nodeagent.launcher.OutputBuffer`, every
task's lines merged in arrival order (whole lines whenever the node runs several tasks or
``--label`` asks for ``RANK: `` prefixes, srun's framing); stdin goes to task 0; with ``pty``
task 0 runs on a pseudo-terminal (its controlling terminal), whose output is the step's stdout.

The step's end: COMPLETED when every task exited 0; else FAILED with the largest exit code, or the
signal that killed a task; CANCELLED when it was cancelled or its job's run ended first;
OUT_OF_MEMORY when a task was SIGKILLed while the job's memory cgroup counted OOM kills.
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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pslurm.core import hostlists
from pslurm.core.states import JobState
from pslurm.nodeagent.cgroups import ChildSetup
from pslurm.nodeagent.identity import supplementary_groups
from pslurm.nodeagent.launcher import JobEnd, LaunchError, OutputBuffer, RunningJob, _exec_errors, describe
from pslurm.nodeagent.runs import Group, RunRecord, RunRecords, boot_id, kill_groups, kill_pgid, start_ticks
from pslurm.nodeagent.userfiles import UserStart
from pslurm.proto import pslurm_pb2 as pb

log = logging.getLogger("psd")

StepKey = tuple[int, int]  # (job_id, step_id)
RunKey = tuple[int, int]  # (job_id, restarts)


# -- the environment ------------------------------------------------------------------------


def label_width(ntasks: int) -> int:
    """Digits of the largest rank: srun's ``--label`` pads ranks to it (step_io.c's _wid)."""
    return len(str(max(ntasks, 1) - 1))


def step_gpus(launch: pb.StepLaunch, job_gpus: Sequence[int]) -> list[int]:
    """The node's GPUs the step may use: the launch's, or (none named) all of the job's there; none
    when the launch says so (``no_gpus``: a step that asked none)."""
    if launch.no_gpus:
        return []
    return list(launch.gpu_indices) if launch.gpu_indices else list(job_gpus)


def task_environment(job_env: Mapping[str, str], launch: pb.StepLaunch, local: int, job_gpus: Sequence[int],
                     job_visible: Sequence[int], mps: bool = False) -> dict[str, str]:
    """One task's environment: ``job_env`` (the job's Slurm variables built over psrun's exported
    environment) and the step's, as srun (env_array_for_step) and slurmstepd set them.
    ``job_visible``: the job's CUDA_VISIBLE_DEVICES, position by position for ``job_gpus`` (0..n-1
    behind a device cgroup); the step's GPUs are renumbered the same way. With per-task GPUs
    (``launch.task_gpus``, --gpus-per-task/--gpu-bind) CUDA_VISIBLE_DEVICES (and GPU_DEVICE_ORDINAL,
    NVIDIA_VISIBLE_DEVICES) is the task's own, SLURM_STEP_GPUS the step's."""
    env = dict(job_env)
    total = launch.total_tasks or launch.ntasks
    nodes = hostlists.expand(launch.step_nodelist) if launch.step_nodelist else []
    tasks_per_node = launch.tasks_per_node or str(launch.ntasks)
    rank = launch.task_offset + local
    env.update({
        "SLURM_STEP_ID": str(launch.step_id),
        "SLURM_STEPID": str(launch.step_id),
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(launch.node_index),
        "SLURM_STEP_NODELIST": launch.step_nodelist,
        "SLURM_NODELIST": launch.step_nodelist or env.get("SLURM_NODELIST", ""),  # srun's: the step's nodes
        "SLURM_STEP_NUM_NODES": str(len(nodes) or 1),
        "SLURM_STEP_NUM_TASKS": str(total),
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
        "SLURM_NTASKS": str(total),
        "SLURM_NPROCS": str(total),
        "SLURM_TASKS_PER_NODE": tasks_per_node,
        "SLURM_NNODES": str(len(nodes) or 1),
        "SLURM_GTIDS": ",".join(str(launch.task_offset + i) for i in range(launch.ntasks)),
        "PWD": launch.workdir,
    })
    if launch.cpus_per_task > 0:
        env["SLURM_CPUS_PER_TASK"] = str(launch.cpus_per_task)
    gpus = step_gpus(launch, job_gpus)
    if gpus:
        renumber = dict(zip(job_gpus, job_visible, strict=False))
        mine = list(launch.task_gpus[local].gpu_indices) if local < len(launch.task_gpus) else []
        visible = ",".join(str(renumber.get(g, g)) for g in (mine or gpus))  # --gpus-per-task: the task's own
        env["SLURM_STEP_GPUS"] = ",".join(str(g) for g in gpus)
        env["CUDA_VISIBLE_DEVICES"] = "0" if mps else visible
        env["NVIDIA_VISIBLE_DEVICES"] = visible
        env["GPU_DEVICE_ORDINAL"] = visible
    else:
        for name in ("SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
            env.pop(name, None)
    return env


# -- output framing -------------------------------------------------------------------------


class Framer:
    """One task's stream cut into whole lines (``lines``), each prefixed with the task's rank when
    ``label`` (srun's ``%*d: ``); else passed through as it comes. :meth:`flush` gives the partial
    last line at the stream's end (with a newline added in label mode, as srun's
    write_labelled_message does)."""

    def __init__(self, rank: int, width: int, label: bool, lines: bool) -> None:
        self.prefix = b"%*d: " % (width, rank) if label else b""
        self.lines = lines or label
        self._partial = bytearray()

    def feed(self, data: bytes) -> bytes:
        if not self.lines:
            return data
        self._partial.extend(data)
        cut = self._partial.rfind(b"\n") + 1
        if not cut:
            return b""
        whole, self._partial = bytes(self._partial[:cut]), self._partial[cut:]
        if not self.prefix:
            return whole
        return b"".join(self.prefix + line for line in whole.splitlines(keepends=True))

    def flush(self) -> bytes:
        rest, self._partial = bytes(self._partial), bytearray()
        if not rest:
            return b""
        return self.prefix + rest + b"\n" if self.prefix else rest


# -- a step's processes ---------------------------------------------------------------------


@dataclass
class Task:
    rank: int
    local: int
    proc: subprocess.Popen[bytes] | None = None
    ticks: int | None = None
    returncode: int | None = None  # set once it ended (2: it could not start)


@dataclass
class RunningStep:
    """One step's tasks on this node; ``changed`` guards its buffers and its end."""

    job_id: int
    step_id: int
    run: RunningJob
    launch: pb.StepLaunch
    tasks: list[Task] = field(default_factory=list)
    outputs: dict[str, OutputBuffer] = field(default_factory=dict)
    changed: threading.Condition = field(default_factory=threading.Condition)
    stdin: Any = None  # task 0's stdin: a pipe, or the pty's master (a FileIO)
    pty: Any = None  # the pty's master (FileIO), closed once the step ended
    cancelled: bool = False  # SignalStep 0
    job_ending: bool = False  # its job's run ends: it ends CANCELLED unless it ended already
    oom_before: int = 0
    started: float = field(default_factory=time.time)
    end: JobEnd | None = None
    pumps: dict[str, int] = field(default_factory=dict)  # readers left per stream

    @property
    def key(self) -> StepKey:
        return self.job_id, self.step_id


class Steps:
    """The steps this agent runs, or ran and has not had the end of acknowledged.

    ``on_end(step)`` is told each step's end (the agent reports it); ``records`` keeps each task
    (its session) for a restarted agent, until the end is acknowledged."""

    def __init__(self, node: str, kill_wait: float, reap_timeout: float, as_root: bool,
                 spawn_lock: threading.Lock, on_end: Callable[[RunningStep], None],
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
        self.steps: dict[StepKey, RunningStep] = {}
        self.unreported: dict[StepKey, RunningStep] = {}

    # -- the agent's view --

    def get(self, job_id: int, step_id: int) -> RunningStep | None:
        with self._lock:
            return self.steps.get((job_id, step_id))

    def refs(self) -> list[pb.StepRef]:
        """Running steps and those whose end is not acknowledged (every heartbeat lists them)."""
        with self._lock:
            return [pb.StepRef(job_id=k[0], step_id=k[1]) for k, s in sorted(self.steps.items())
                    if s.end is None or k in self.unreported]

    def of_run(self, run: RunningJob) -> list[RunningStep]:
        with self._lock:
            return [s for s in self.steps.values() if s.run is run]

    def pending_ends(self, limit: int) -> list[pb.StepEnded]:
        with self._lock:
            return [self._end_pb(s) for s in list(self.unreported.values())[:limit]]

    def acknowledged(self, ends: Sequence[pb.StepEnded]) -> None:
        with self._lock:
            steps = [self.unreported.pop((e.job_id, e.step_id), None) for e in ends]
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

    def _end_pb(self, step: RunningStep) -> pb.StepEnded:
        from pslurm.core import convert

        end = step.end
        assert end is not None
        return pb.StepEnded(job_id=step.job_id, step_id=step.step_id, node=self.node,
                            state=convert.job_state_to_pb(end.state), exit_code=end.exit_code,
                            exit_signal=end.exit_signal, end_time=end.end_time)

    # -- launch --

    def launch(self, run: RunningJob, launch: pb.StepLaunch, job_env: Mapping[str, str]) -> RunningStep:
        """Start the step's tasks in ``run`` (the caller checked it runs); a repeated launch of a
        step this agent has is a no-op. A task that cannot start exits 2 with slurmstepd's line in
        the step's stderr. Never raises for a task."""
        key = (launch.job_id, launch.step_id)
        with self._lock:
            known = self.steps.get(key)
            if known is not None:
                return known
            step = RunningStep(launch.job_id, launch.step_id, run, launch)
            self.steps[key] = step
        step.outputs = {"stdout": OutputBuffer(), "stderr": OutputBuffer()}
        step.oom_before = run.cgroup.oom_kills() if run.cgroup is not None else 0
        job = run.job
        width = label_width(launch.total_tasks or launch.ntasks)
        lines = launch.ntasks > 1
        mps = bool(getattr(run.gpu_setup, "mps_pipe", ""))
        user_kw: dict[str, object] = {}
        spec = job.spec  # the job's user, whatever the launch says: a step runs as its job does
        if launch.uid != spec.uid:
            log.warning("step %d.%d: launch names uid %d, the job's is %d: running as the job's user",
                        step.job_id, step.step_id, launch.uid, spec.uid)
        if self.as_root and spec.uid != 0:
            user_kw = {"user": spec.uid, "group": spec.gid, "extra_groups": supplementary_groups(spec.uid, spec.gid)}
        for local in range(max(launch.ntasks, 1)):
            task = Task(launch.task_offset + local, local)
            step.tasks.append(task)
            env = task_environment(job_env, launch, local, job.gpu_indices, run.visible or job.gpu_indices, mps)
            try:
                self._spawn(step, task, env, user_kw, _framer(task.rank, width, launch.label, lines))
            except LaunchError as exc:
                task.returncode = 2
                self._note(step, f"slurmstepd: error: task {task.rank} launch failed: {exc.reason}\n")
            except Exception as exc:
                log.exception("step %d.%d: task %d could not start", step.job_id, step.step_id, task.rank)
                task.returncode = 2
                self._note(step, f"slurmstepd: error: task {task.rank} launch failed: {describe(exc)}\n")
        with step.changed:
            for name, buffer in step.outputs.items():
                buffer.closed = step.pumps.get(name, 0) <= 0  # none reads it (a pty step's stderr)
            step.changed.notify_all()
        threading.Thread(target=self._watch, args=(step,), daemon=True,
                         name=f"step{step.job_id}.{step.step_id}").start()
        return step

    def _spawn(self, step: RunningStep, task: Task, env: dict[str, str], user_kw: dict[str, object],
               framer: Callable[[], Framer]) -> None:
        launch = step.launch
        argv = list(launch.argv)
        if not argv:
            raise LaunchError("execve(): no command to run")
        _check(launch.workdir, argv, env)
        pty = launch.pty and task.local == 0 and launch.task_offset == 0
        master = slave = -1
        if pty:
            master, slave = os.openpty()
            _set_window(master, env)
            if user_kw:  # the terminal is the user's, as login makes it (group tty, 0620)
                with contextlib.suppress(OSError):
                    os.fchown(slave, step.run.job.spec.uid, _tty_gid())
                    os.fchmod(slave, 0o620)
            streams: dict[str, Any] = {"stdin": slave, "stdout": slave, "stderr": slave}
        else:
            streams = {"stdin": subprocess.PIPE if task.rank == 0 else subprocess.DEVNULL,
                       "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        run = step.run
        try:
            with ChildSetup(run.cgroup) as setup:
                then: Callable[[], object] = setup
                if pty:
                    def then() -> None:  # as the user, in its new session: the slave becomes its terminal
                        setup()
                        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                with UserStart(launch.workdir, None, None, env, then) as child, self.spawn_lock:
                    try:
                        with _exec_errors():
                            proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
                                argv, cwd=None, env=env, start_new_session=True, preexec_fn=child,
                                **streams, **user_kw)
                    except LaunchError as exc:
                        failure, note = child.collect()
                        if note is not None:
                            note.close()
                        raise LaunchError(failure or exc.reason) from exc
        except BaseException:
            for fd in (master, slave):
                if fd >= 0:
                    os.close(fd)
            raise
        task.proc = proc
        task.ticks = start_ticks(proc.pid)
        self._record(step, task)
        if pty:
            os.close(slave)
            step.pty = step.stdin = io.FileIO(master, "r+", closefd=True)
            self._pump_start(step, "stdout", step.pty, Framer(task.rank, 1, False, False))
            return
        if task.rank == 0:
            step.stdin = proc.stdin
        self._pump_start(step, "stdout", proc.stdout, framer())
        self._pump_start(step, "stderr", proc.stderr, framer())

    def _record(self, step: RunningStep, task: Task) -> None:
        if self.records is None or task.proc is None:
            return
        try:
            self.records.save(RunRecord(step.job_id, step.run.job.restarts, task.proc.pid, task.ticks,
                                        self._boot_id, "", step.started, f"{step.step_id}.{task.rank}"))
        except OSError as exc:
            log.warning("step %d.%d: could not record task %d: %s", step.job_id, step.step_id, task.rank, exc)

    def _pump_start(self, step: RunningStep, name: str, pipe: Any, framer: Framer) -> None:
        with step.changed:
            step.pumps[name] = step.pumps.get(name, 0) + 1
        threading.Thread(target=self._pump, args=(step, name, pipe, framer), daemon=True).start()

    @staticmethod
    def _pump(step: RunningStep, name: str, pipe: Any, framer: Framer) -> None:
        buffer = step.outputs[name]
        read = pipe.read1 if hasattr(pipe, "read1") else pipe.read
        while True:
            try:
                chunk = read(65536)
            except OSError as exc:  # a pty's master once the terminal's last holder is gone
                if exc.errno != errno.EIO:
                    log.debug("step %d.%d: %s: %s", step.job_id, step.step_id, name, exc)
                chunk = b""
            if not chunk:
                break
            data = framer.feed(chunk)
            if data:
                with step.changed:
                    buffer.data.extend(data)
                    step.changed.notify_all()
        with contextlib.suppress(OSError):
            pipe.close()  # a pty's master too: its writer (psrun's input) then finds it closed
        with step.changed:
            buffer.data.extend(framer.flush())
            step.pumps[name] -= 1
            buffer.closed = step.pumps[name] <= 0
            step.changed.notify_all()

    def _note(self, step: RunningStep, text: str) -> None:
        with step.changed:
            step.outputs["stderr"].data.extend(text.encode())
            step.changed.notify_all()

    # -- the end --

    def _watch(self, step: RunningStep) -> None:
        for task in step.tasks:
            if task.proc is not None:
                task.proc.wait()
                task.returncode = task.proc.returncode
        # what the tasks left in their sessions goes too, as slurmstepd's proctrack kills the step's container
        groups = [Group(t.proc.pid, t.ticks) for t in step.tasks if t.proc is not None]
        for g in groups:
            kill_pgid(g.pgid, signal.SIGKILL)
        left = kill_groups(groups, self.reap_timeout)
        if left:
            log.error("step %d.%d: processes still there after SIGKILL: %s", step.job_id, step.step_id, left)
        with step.changed:  # its last output read (bounded: a process that left may hold a pipe)
            step.changed.wait_for(lambda: all(b.closed for b in step.outputs.values()), timeout=2.0)
        codes = [t.returncode or 0 for t in step.tasks]
        exit_code = max((c for c in codes if c > 0), default=0)
        signals = [-c for c in codes if c < 0]
        exit_signal = signals[0] if signals else 0
        oom = step.run.cgroup.oom_kills() > step.oom_before if step.run.cgroup is not None else False
        if step.cancelled or step.job_ending:
            state = JobState.CANCELLED
        elif oom and signal.SIGKILL in signals:
            state = JobState.OUT_OF_MEMORY
        elif exit_code or exit_signal:
            state = JobState.FAILED
        else:
            state = JobState.COMPLETED
        with step.changed:
            pipe, step.stdin = step.stdin, None
            with self._lock:  # ended and unreported at once: a job's end that waits for it reports it first
                step.end = JobEnd(state, exit_code, exit_signal, time.time())
                self.unreported[step.key] = step
            for buffer in step.outputs.values():
                buffer.closed = True
            step.changed.notify_all()
        if pipe is not None and not isinstance(pipe, io.FileIO):  # the pty's master its reader closes
            with contextlib.suppress(OSError):
                pipe.close()
        log.info("step %d.%d ended %s (exit %d, signal %d)", step.job_id, step.step_id, state.name, exit_code,
                 exit_signal)
        self.on_end(step)

    def signal(self, job_id: int, step_id: int, signum: int) -> bool:
        """SignalStep: 0 cancels the step (SIGTERM, KillWait, SIGKILL to its tasks' sessions), any
        other signal goes to its tasks. False when this agent has no such running step."""
        step = self.get(job_id, step_id)
        if step is None or step.end is not None:
            return False
        if signum:
            self._signal(step, signum)
            return True
        with step.changed:
            if step.cancelled:
                return True
            step.cancelled = True
        threading.Thread(target=self._terminate, args=(step,), daemon=True).start()
        return True

    @staticmethod
    def _signal(step: RunningStep, signum: int) -> None:
        for task in step.tasks:
            if task.proc is not None and task.returncode is None:
                kill_pgid(task.proc.pid, signum)

    def _terminate(self, step: RunningStep) -> None:
        for signum in (signal.SIGCONT, signal.SIGTERM):
            self._signal(step, signum)
        deadline = time.monotonic() + self.kill_wait
        for task in step.tasks:
            if task.proc is None:
                continue
            try:
                task.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
        for task in step.tasks:
            if task.proc is not None:
                kill_pgid(task.proc.pid, signal.SIGKILL)

    def job_ending(self, run: RunningJob, leader_gone: bool) -> None:
        """The run is ending (cancel, time limit, its leader's exit): its running steps end
        CANCELLED. Their processes get SIGTERM (from the job's cgroup when it has one, else here)
        and, once the leader is gone, SIGKILL."""
        steps = [s for s in self.of_run(run) if s.end is None]
        for step in steps:
            with step.changed:
                step.job_ending = True
            if leader_gone:
                self._signal(step, signal.SIGKILL)
            elif run.cgroup is None:
                for signum in (signal.SIGCONT, signal.SIGTERM):
                    self._signal(step, signum)

    def wait_run(self, run: RunningJob, timeout: float) -> None:
        """Wait until the run's steps have ended (their ends then are unreported before the job's)."""
        deadline = time.monotonic() + timeout
        for step in self.of_run(run):
            with step.changed:
                step.changed.wait_for(lambda s=step: s.end is not None,  # type: ignore[misc]
                                      timeout=max(0.0, deadline - time.monotonic()))
            if step.end is None:
                log.error("step %d.%d: still running %.0f s after its job ended", step.job_id, step.step_id, timeout)

    # -- psrun's streams --

    def follow(self, job_id: int, step_id: int, active: Callable[[], bool], wait: float) -> RunningStep | None:
        """The step, waited for ``wait`` seconds (its launch may come after psrun's stream)."""
        deadline = time.monotonic() + wait
        while True:
            step = self.get(job_id, step_id)
            if step is not None or time.monotonic() >= deadline or not active():
                return step
            time.sleep(0.05)


def follow_output(step: Any, stopped: threading.Event, active: Callable[[], bool]) -> Iterator[pb.OutputChunk]:
    """A run's or a step's output as it comes (``outputs``, ``changed``, ``end``), then its end."""
    from pslurm.core import convert

    sent = {"stdout": 0, "stderr": 0}

    def news() -> bool:
        if any(len(b.data) > sent.get(n, 0) for n, b in step.outputs.items()):
            return True
        return step.end is not None and all(b.closed for b in step.outputs.values())

    while True:
        with step.changed:
            step.changed.wait_for(lambda: news() or stopped.is_set(), timeout=1.0)
            chunk = {name: bytes(buf.data[sent.get(name, 0):]) for name, buf in step.outputs.items()}
            for name, data in chunk.items():
                sent[name] = sent.get(name, 0) + len(data)
            finished = step.end is not None and all(b.closed for b in step.outputs.values())
        if any(chunk.values()):
            yield pb.OutputChunk(stdout=chunk.get("stdout", b""), stderr=chunk.get("stderr", b""))
        if finished:
            end: JobEnd = step.end
            yield pb.OutputChunk(done=True, state=convert.job_state_to_pb(end.state), exit_code=end.exit_code,
                                 exit_signal=end.exit_signal)
            return
        if stopped.is_set() or not active():
            return


def write_input(step: RunningStep, chunks: Iterator[bytes]) -> None:
    """psrun's stdin to task 0; its end closes a pipe (EOF), never a pty (psrun sends ^D itself)."""
    try:
        for data in chunks:
            target = step.stdin
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
        with step.changed:
            pipe = step.stdin if not isinstance(step.stdin, io.FileIO) else None
            if pipe is not None:
                step.stdin = None
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _framer(rank: int, width: int, label: bool, lines: bool) -> Callable[[], Framer]:
    return lambda: Framer(rank, width, label, lines)


def _set_window(master: int, env: Mapping[str, str]) -> None:
    """The pty's size from srun's SLURM_PTY_WIN_ROW/COL (psrun sends its terminal's)."""
    try:
        rows, cols = int(env.get("SLURM_PTY_WIN_ROW", "0")), int(env.get("SLURM_PTY_WIN_COL", "0"))
    except ValueError:
        return
    if rows > 0 and cols > 0:
        with contextlib.suppress(OSError, struct.error):
            fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _tty_gid() -> int:
    try:
        return grp.getgrnam("tty").gr_gid
    except KeyError:
        return -1


def _check(workdir: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    from pslurm.nodeagent.launcher import _check_strings

    _check_strings(workdir, tuple(argv), dict(env))
