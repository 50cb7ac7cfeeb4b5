"""The job runner: a small process of the agent's that forks the jobs' processes for it.

A fork copies the forking process, and Python runs its at-fork handlers in the child, one step per
thread the parent has: from the agent, hundreds of threads under load (RPC workers, each step's
watchers and pumps; a thousand with ``psd --virtual``), a fork took 8-30 ms with the agent's
interpreter lock held all along, most of its CPU per job. The runner is started once, before jobs
come, as ``python -m pslurm.nodeagent.runner FD``: one thread, its imports done (nothing is imported
per job), it forks in 2-3 ms. It starts each task exactly as the agent would
(:func:`pslurm.nodeagent.childstart.start_child`), reaps it, and tells the agent its pid and, later,
its exit status.

The wire is a Unix stream socket: each message is a 4-byte length and a JSON object; file
descriptors (a task's pipes or pty slave, the stderr file its child opened for the agent) travel
with a message's first bytes (SCM_RIGHTS). The agent asks ``{"id", "plan"}`` with the task's fds;
the runner answers ``{"id", "pid"}`` (and the stderr file, for files), or ``{"id", "error",
"missing_dir"}``, and once a task ended ``{"exit": pid, "status": waitpid's status}``. A task's
answer always comes before its exit. When the runner is gone, tasks started after are started by
the agent itself; those it ran are followed by their pids (their exit status is lost: 1, logged).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from pslurm.nodeagent.childstart import ChildFailed, ChildPlan, LaunchError, start_child
from pslurm.nodeagent.runs import proc_info
from pslurm.nodeagent.userfiles import UserFile

log = logging.getLogger("psd")

MAX_FDS = 4  # a message's file descriptors at most (a task's stdio)
_HEADER = struct.Struct("!I")


# -- the wire --------------------------------------------------------------------------------


def send(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """One message, its fds with its first bytes. Callers send one message at a time (a lock)."""
    data = json.dumps(message).encode()
    frame = _HEADER.pack(len(data)) + data
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else []
    sent = sock.sendmsg([frame], ancillary)
    if sent < len(frame):
        sock.sendall(frame[sent:])


def receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """The next message and its fds; None at the end of the stream."""
    fds: list[int] = []
    head = b""
    while len(head) < _HEADER.size:  # the fds come with the first bytes
        data, ancillary, _, _ = sock.recvmsg(_HEADER.size - len(head), socket.CMSG_SPACE(MAX_FDS * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(struct.unpack(f"{len(payload) // 4}i", payload[:len(payload) - len(payload) % 4]))
        if not data:
            for fd in fds:
                os.close(fd)
            return None
        head += data
    (size,) = _HEADER.unpack(head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body), fds


# -- the runner's side -----------------------------------------------------------------------


def serve(sock: socket.socket) -> None:
    """Start tasks as asked, reap them, say how they ended; until the agent closes the socket."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    # handlers, never SIG_IGN: an ignored signal stays ignored in the tasks across exec (a job that
    # ignored SIGTERM); SIGCHLD's writes the wakeup fd; the agent ends us by closing the socket
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: None)
    tasks: dict[int, subprocess.Popen[bytes]] = {}  # kept until reaped: Popen never reaps them itself
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_r:
                while True:
                    try:
                        if not os.read(wake_r, 512):
                            break
                    except BlockingIOError:
                        break
                _reap(sock, tasks)
                continue
            got = receive(sock)
            if got is None:
                return
            message, fds = got
            note: UserFile | None = None
            try:
                reply, note = _start(message, fds, tasks)
                passed = note.fileno() if note is not None else None
                reply["note"] = passed is not None
                send(sock, reply, [passed] if passed is not None else [])
            finally:
                for fd in fds:
                    os.close(fd)
                if note is not None:
                    note.close()
            _reap(sock, tasks)  # a task that ended at once: its answer went first


def _start(message: dict[str, Any], fds: list[int], tasks: dict[int, subprocess.Popen[bytes]]
           ) -> tuple[dict[str, Any], UserFile | None]:
    """Start one task: the answer, and the stderr file its child opened for the agent (if any)."""
    note: UserFile | None = None
    try:
        proc, note = start_child(ChildPlan(**message["plan"]), fds)
    except ChildFailed as exc:
        return {"id": message["id"], "error": exc.reason, "missing_dir": exc.missing_dir}, exc.note
    except LaunchError as exc:
        return {"id": message["id"], "error": exc.reason, "missing_dir": exc.missing_dir}, None
    except Exception as exc:  # the task fails, the runner goes on
        return {"id": message["id"], "error": f"{type(exc).__name__}: {exc}", "missing_dir": False}, None
    tasks[proc.pid] = proc
    return {"id": message["id"], "pid": proc.pid}, note


def _reap(sock: socket.socket, tasks: dict[int, subprocess.Popen[bytes]]) -> None:
    while tasks:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        proc = tasks.pop(pid, None)
        if proc is not None:
            proc.returncode = os.waitstatus_to_exitcode(status)  # so that Popen never waits for it
        send(sock, {"exit": pid, "status": status})


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    try:
        serve(sock)
    finally:
        sock.close()


# -- the agent's side ------------------------------------------------------------------------


class RunnerProc:
    """A task the runner started, seen as the part of ``subprocess.Popen`` the step supervisor uses."""

    def __init__(self, pid: int, argv: list[str], stdin: Any = None, stdout: Any = None, stderr: Any = None) -> None:
        self.pid, self.args = pid, argv
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._ended = threading.Event()

    def _exited(self, returncode: int) -> None:
        self.returncode = returncode
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class Runner:
    """The agent's end: starts the runner process, asks it for tasks, hands out their exits."""

    def __init__(self, sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        self._sock, self._proc = sock, proc
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._next = 0
        self._answers: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._tasks: dict[int, RunnerProc] = {}
        self._exits: dict[int, int] = {}  # exits of tasks whose answer is still on its way to its caller
        self.alive = True
        threading.Thread(target=self._read, name="runner", daemon=True).start()

    @classmethod
    def start(cls) -> Runner | None:
        """The runner process, started (None when it cannot be: the agent then forks its tasks itself)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = subprocess.Popen([sys.executable, "-m", "pslurm.nodeagent.runner", str(theirs.fileno())],
                                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, close_fds=True)
        except OSError as exc:
            log.warning("no job runner (%s): the agent forks its jobs' processes itself", exc)
            ours.close()
            return None
        finally:
            theirs.close()
        return cls(ours, proc)

    def spawn(self, plan: ChildPlan, fds: Sequence[int] = ()) -> tuple[RunnerProc, UserFile | None]:
        """Start a task (see :func:`start_child`); its stdio file objects are the caller's to attach.
        LaunchError (ChildFailed) as start_child's; OSError when the runner is gone."""
        event: threading.Event = threading.Event()
        slot: list[Any] = []
        with self._lock:
            if not self.alive:
                raise OSError("the job runner is gone")
            self._next += 1
            ident = self._next
            self._answers[ident] = (event, slot)
        try:
            with self._send_lock:
                send(self._sock, {"id": ident, "plan": dataclasses.asdict(plan)}, fds)
        except OSError:
            with self._lock:
                self._answers.pop(ident, None)
            raise
        event.wait()
        if not slot:
            raise OSError("the job runner is gone")
        answer, passed = slot
        note = UserFile(passed[0]) if passed else None
        if "error" in answer:
            raise ChildFailed(answer["error"], answer["missing_dir"], note)
        proc = RunnerProc(answer["pid"], plan.argv)
        with self._lock:
            self._tasks[proc.pid] = proc
            status = self._exits.pop(proc.pid, None)
        if status is not None:
            proc._exited(os.waitstatus_to_exitcode(status))
        return proc, note

    def _read(self) -> None:
        while True:
            try:
                got = receive(self._sock)
            except OSError:
                got = None
            if got is None:
                self._gone()
                return
            message, fds = got
            if "exit" in message:
                with self._lock:
                    proc = self._tasks.pop(message["exit"], None)
                    if proc is None:  # its answer is being handed to its caller right now
                        self._exits[message["exit"]] = message["status"]
                if proc is not None:
                    proc._exited(os.waitstatus_to_exitcode(message["status"]))
                continue
            with self._lock:
                event, slot = self._answers.pop(message["id"], (None, None))
            if event is None or slot is None:
                for fd in fds:
                    os.close(fd)
                continue
            slot.extend((message, fds))
            event.set()

    def _gone(self) -> None:
        """The runner ended: callers waiting for an answer get OSError; tasks it ran are followed by
        their pids until they are gone (their exit status went with the runner)."""
        with self._lock:
            if not self.alive:
                return
            self.alive = False
            waiting, self._answers = list(self._answers.values()), {}
            orphans, self._tasks = list(self._tasks.values()), {}
        if orphans:
            log.error("the job runner ended: %d task(s) it started lose their exit status", len(orphans))
        for event, _ in waiting:
            event.set()
        if orphans:
            threading.Thread(target=_follow, args=(orphans,), name="runner-orphans", daemon=True).start()

    def close(self) -> None:
        """Stop the runner (its tasks are the agent's to have ended first)."""
        with self._lock:
            self.alive = False
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


# The process's runner: one for all the agents of a process (psd --virtual runs many).
_current: Runner | None = None


def begin() -> Runner | None:
    """Start this process's runner (once); None when it could not start."""
    global _current
    if _current is None:
        _current = Runner.start()
    return _current


def current() -> Runner | None:
    """The process's runner, None when it has none (then the agent forks its tasks itself)."""
    return _current


def lost(runner: Runner) -> None:
    """``runner`` is gone: the agent forks its tasks itself from now on."""
    global _current
    if _current is runner:
        log.error("the job runner is gone: the agent starts its jobs' processes itself")
        _current = None


def end() -> None:
    """Stop the process's runner, if it has one (its tasks ended first)."""
    global _current
    runner, _current = _current, None
    if runner is not None:
        runner.close()


def _follow(orphans: list[RunnerProc]) -> None:
    """Tasks of a runner that is gone, until each is gone too (or a zombie nobody reaps): exit 1."""
    while orphans:
        for proc in list(orphans):
            info = proc_info(proc.pid)
            if info is None or info.state == "Z":
                proc._exited(1)
                orphans.remove(proc)
        time.sleep(0.2)


if __name__ == "__main__":
    main()
