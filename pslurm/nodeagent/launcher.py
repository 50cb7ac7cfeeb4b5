"""Start a job's processes and watch them: output files, time limit, cancel, exit status.

Each job runs in its own session (process group) in its submit directory, as its user when the
agent is root. A watcher thread per job enforces the time limit (SIGTERM, KillWait, SIGKILL) and
reports the end through ``on_end``.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pslurm.core.jobspec import JobRecord
from pslurm.core.patterns import default_output_pattern, expand_output_pattern
from pslurm.core.states import JobState
from pslurm.core.timefmt import format_timestamp
from pslurm.nodeagent.cgroups import ChildSetup, JobCgroup

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
    cancelled: bool = False
    timed_out: bool = False
    end: JobEnd | None = None
    outputs: dict[str, OutputBuffer] = field(default_factory=dict)  # interactive jobs only
    stdin: Any = None  # interactive jobs: the write end of the job's stdin, fed by psrun (SendInput)
    changed: threading.Condition = field(default_factory=threading.Condition)
    usage: Any = None  # the agent's JobGpuUsage, set when the job ends (None: no GPUs)


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
                 on_end: Callable[[RunningJob], None]) -> None:
        self.node = node
        self.cluster = cluster
        self.spool_dir = spool_dir
        self.kill_wait = kill_wait
        self.on_end = on_end
        self.as_root = os.geteuid() == 0
        # A fork in one thread while another has a script open for writing makes that script's
        # exec fail with ETXTBSY: script writes and forks take turns.
        self._spawn_lock = threading.Lock()
        os.makedirs(spool_dir, exist_ok=True)

    def start(self, job: JobRecord, env: dict[str, str], cgroup: JobCgroup | None,
              cpus: set[int] | None) -> RunningJob:
        """Start the job's processes and its watcher; never raises for a job that cannot start:
        the failure is recorded as the job's end (FAILED, exit code 2 as slurmstepd reports)."""
        running = RunningJob(job, None, time.time(), cgroup)
        try:
            with self._spawn_lock:
                running.proc = self._spawn(running, env, cgroup, cpus)
        except (OSError, subprocess.SubprocessError) as exc:
            return self._failed(running, f"execve(): {exc}")
        threading.Thread(target=self._watch, args=(running,), name=f"job{job.job_id}", daemon=True).start()
        return running

    def fail(self, job: JobRecord, why: str) -> RunningJob:
        """Record a job that cannot start at all (e.g. its device cgroup cannot be made): FAILED."""
        running = RunningJob(job, None, time.time())
        if not job.spec.interactive:
            running.stderr_path = self._output_paths(job)[1]
        return self._failed(running, why)

    def _failed(self, running: RunningJob, why: str) -> RunningJob:
        job = running.job
        message = f"slurmstepd: error: {why}\n"
        log.warning("job %d could not start: %s", job.job_id, why)
        if job.spec.interactive:
            running.outputs = {"stdout": OutputBuffer(closed=True),
                               "stderr": OutputBuffer(bytearray(message.encode()), closed=True)}
        elif running.stderr_path:
            _append(running.stderr_path, message)
        running.end = JobEnd(JobState.FAILED, 2, 0, time.time())
        self._finish(running)
        return running

    def _spawn(self, running: RunningJob, env: dict[str, str], cgroup: JobCgroup | None,
               cpus: set[int] | None) -> subprocess.Popen[bytes]:
        job, spec = running.job, running.job.spec
        if spec.script is not None:
            argv = [self._write_script(job)]
        else:
            argv = list(spec.argv)
        user_kw: dict[str, object] = {}
        if self.as_root and spec.uid != 0:  # run as the submitter, never as root on their behalf
            user_kw = {"user": spec.uid, "group": spec.gid, "extra_groups": _groups_of(spec.user, spec.gid)}
        with ChildSetup(cgroup, cpus) as setup:
            preexec = setup if (cgroup is not None or cpus) else None
            if spec.interactive:
                proc = subprocess.Popen(argv, cwd=spec.workdir, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True, preexec_fn=preexec, **user_kw)  # type: ignore[call-overload]
                running.stdin = proc.stdin  # psrun's stdin goes here (srun forwards it to the task)
                running.outputs = {"stdout": OutputBuffer(), "stderr": OutputBuffer()}
                for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
                    threading.Thread(target=self._pump, args=(running, name, pipe), daemon=True).start()
                return proc  # type: ignore[no-any-return]
            out_path, err_path = self._output_paths(job)
            running.stderr_path = err_path
            out = self._open_output(out_path, spec.uid, spec.gid)
            err = out if err_path == out_path else self._open_output(err_path, spec.uid, spec.gid)
            try:
                return subprocess.Popen(argv, cwd=spec.workdir, env=env, stdin=subprocess.DEVNULL,  # type: ignore[call-overload, no-any-return]
                                        stdout=out, stderr=err, start_new_session=True,
                                        preexec_fn=preexec, **user_kw)
            finally:
                os.close(out)
                if err != out:
                    os.close(err)

    def _output_paths(self, job: JobRecord) -> tuple[str, str]:
        spec = job.spec

        def resolve(pattern: str) -> str:
            path = expand_output_pattern(pattern, job_id=job.job_id, job_name=spec.name, user=spec.user,
                                         node=self.node, array_job_id=job.array_job_id,
                                         array_task_id=job.array_task_id)
            return path if os.path.isabs(path) else os.path.join(spec.workdir, path)

        out = resolve(spec.stdout or default_output_pattern(job.array_job_id is not None))
        return out, resolve(spec.stderr) if spec.stderr else out

    def _open_output(self, path: str, uid: int, gid: int) -> int:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        if self.as_root:
            os.fchown(fd, uid, gid)
        return fd

    def _write_script(self, job: JobRecord) -> str:
        job_dir = os.path.join(self.spool_dir, f"job{job.job_id:05d}")
        os.makedirs(job_dir, exist_ok=True)
        path = os.path.join(job_dir, "slurm_script")
        with open(path, "w") as f:
            f.write(job.spec.script or "")
        os.chmod(path, stat.S_IRWXU)
        if self.as_root:
            os.chown(job_dir, job.spec.uid, job.spec.gid)
            os.chown(path, job.spec.uid, job.spec.gid)
        return path

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
        limit = running.job.time_limit
        try:
            proc.wait(timeout=None if limit is None else max(0.0, running.started + limit - time.time()))
        except subprocess.TimeoutExpired:
            running.timed_out = True
            self._note(running, "DUE TO TIME LIMIT ")
            self._terminate(running)
        rc = proc.returncode
        _kill_group(proc.pid, signal.SIGKILL)  # what the job left running in the background goes too
        if running.timed_out:
            state = JobState.TIMEOUT
        elif running.cancelled:
            state = JobState.CANCELLED
        else:
            state = JobState.COMPLETED if rc == 0 else JobState.FAILED
        running.end = JobEnd(state, rc if rc > 0 else 0, -rc if rc < 0 else 0, time.time())
        self._finish(running)

    def _finish(self, running: RunningJob) -> None:
        with running.changed:
            running.changed.notify_all()
        close_input(running)
        if running.cgroup is not None:
            running.cgroup.remove()
        job_dir = os.path.join(self.spool_dir, f"job{running.job.job_id:05d}")
        for leftover in (os.path.join(job_dir, "slurm_script"), job_dir):
            try:
                os.remove(leftover) if leftover.endswith("script") else os.rmdir(leftover)
            except OSError:
                pass
        self.on_end(running)

    def _terminate(self, running: RunningJob) -> None:
        """SIGTERM to the whole job, SIGKILL after KillWait."""
        assert running.proc is not None
        _kill_group(running.proc.pid, signal.SIGCONT)
        _kill_group(running.proc.pid, signal.SIGTERM)
        try:
            running.proc.wait(timeout=self.kill_wait)
        except subprocess.TimeoutExpired:
            _kill_group(running.proc.pid, signal.SIGKILL)
            running.proc.wait()

    def cancel(self, running: RunningJob) -> None:
        """scancel: the job ends CANCELLED (idempotent; a second cancel does nothing more)."""
        if running.cancelled or running.end is not None or running.proc is None:
            return
        running.cancelled = True
        self._note(running, "")
        threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    def signal(self, running: RunningJob, signum: int) -> None:
        if running.proc is not None and running.end is None:
            _kill_group(running.proc.pid, signum)

    def _note(self, running: RunningJob, why: str) -> None:
        """slurmstepd's line in the job's stderr when it is ended from outside."""
        line = (f"slurmstepd: error: *** JOB {running.job.job_id} ON {self.node} CANCELLED AT "
                f"{format_timestamp(time.time())} {why}***\n")
        if running.job.spec.interactive:
            with running.changed:
                buffer = running.outputs.get("stderr")
                if buffer is not None:
                    buffer.data.extend(line.encode())
                    running.changed.notify_all()
        elif running.stderr_path:
            _append(running.stderr_path, line)


def _kill_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _append(path: str, text: str) -> None:
    try:
        with open(path, "a") as f:
            f.write(text)
    except OSError:
        pass


def _groups_of(user: str, gid: int) -> list[int]:
    try:
        return os.getgrouplist(user, gid)
    except (KeyError, OSError):
        return [gid]
