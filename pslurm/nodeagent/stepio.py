"""A step's input and output: bounded output buffers with back-pressure, srun's line framing, and
how a task's stdio is wired (files, pipes, a pseudo-terminal, nothing).

psrun reads a step's stdout and stderr through :meth:`StepOutput.follow`, at most :data:`CHUNK_MAX`
bytes a message. Each stream holds at most :data:`STREAM_BUFFER` bytes (plus one read); a pump that
finds its buffer full stops reading the task's pipe until the reader takes some, so a task that
writes faster than psrun reads blocks in write(2), as it would on a pipe. A step's output therefore
costs the agent at most ``2 x (STREAM_BUFFER + READ_SIZE)`` bytes, whatever it writes. Only when no
reader is attached for :data:`READER_GRACE` seconds (psrun gone) is what does not fit dropped (and
the next reader told how much), so that a task is not held for ever by a reader that will not come.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pslurm.core.steps import StepResult

STREAM_BUFFER = 1 << 20  # bytes of one stream (stdout or stderr) a step holds for its reader
READ_SIZE = 1 << 16  # bytes a pump reads from a task's pipe at once
CHUNK_MAX = 256 << 10  # bytes of output in one message to a reader: well under gRPC's 4 MiB
READER_GRACE = 60.0  # seconds without a reader after which output that does not fit is dropped
TAIL = 64 << 10  # bytes of a step's stderr kept for its end to read (CUDA's out-of-memory under MPS)
LAST_OUTPUT_WAIT = 2.0  # seconds the end waits for output that does not come (a process that left holds a pipe)


class StepOutput:
    """A step's stdout and stderr on their way to psrun: bounded buffers, one reader at a time.

    Pumps :meth:`write` (blocking while their stream's buffer is full and a reader may still come);
    :meth:`follow` takes what is there for the one current reader (a new reader supersedes an older
    one: psrun asking again). ``changed`` is the step's condition."""

    NAMES = ("stdout", "stderr")

    def __init__(self, changed: threading.Condition, capacity: int = STREAM_BUFFER) -> None:
        self.changed = changed
        self.capacity = capacity
        self.buffers = {name: bytearray() for name in self.NAMES}
        self.writers = dict.fromkeys(self.NAMES, 0)  # pumps still writing each stream
        self.waiting_writers = 0  # pumps waiting for room: the end waits for them, not for silence
        self.last_write = time.monotonic()
        self.reader: object | None = None
        self.unread_since = time.monotonic()  # when the last reader left (or the step began)
        self.ended = False  # the step's end is decided: no more output; a reader gets the rest, then the end
        self.dropped = 0  # bytes dropped for want of a reader (said to the next one)
        self.stderr_tail = bytearray()  # the last TAIL bytes the tasks wrote to stderr, read or not (the end's clues)

    def _abandoned(self) -> bool:
        return self.reader is None and time.monotonic() - self.unread_since > READER_GRACE

    def write(self, name: str, data: bytes) -> None:
        """Add a pump's ``data``: waits while the stream's buffer is full (back-pressure), unless no
        reader came for READER_GRACE seconds (then what does not fit is dropped)."""
        if not data:
            return
        buffer = self.buffers[name]
        with self.changed:
            self.waiting_writers += 1
            try:
                while len(buffer) >= self.capacity and not self.ended and not self._abandoned():
                    self.changed.wait(1.0)
            finally:
                self.waiting_writers -= 1
            self.last_write = time.monotonic()
            if name == "stderr":
                self.stderr_tail.extend(data)
                del self.stderr_tail[:-TAIL]
            if self.ended:
                return  # a process that left the step writes after its end: nobody reads it any more
            if len(buffer) >= self.capacity:  # no reader came for READER_GRACE seconds
                self.dropped += len(data)
                return
            buffer.extend(data)
            self.changed.notify_all()

    def note(self, text: str) -> None:
        """slurmstepd's lines to stderr: always kept (they are few and short)."""
        with self.changed:
            self.buffers["stderr"].extend(text.encode())
            self.changed.notify_all()

    def opened(self, name: str) -> None:
        with self.changed:
            self.writers[name] += 1

    def closed(self, name: str) -> None:
        with self.changed:
            self.writers[name] -= 1
            self.changed.notify_all()

    def wait_drained(self) -> None:
        """Wait until the pumps have read the tasks' last output (call once the tasks have exited):
        while a pump waits for room (a reader takes it, or READER_GRACE drops it), and otherwise until
        LAST_OUTPUT_WAIT seconds pass without output from now (a process that left the step may hold
        a pipe open for ever)."""
        since = time.monotonic()
        with self.changed:
            while any(self.writers.values()):
                quiet = time.monotonic() - max(self.last_write, since)
                if not self.waiting_writers and quiet > LAST_OUTPUT_WAIT:
                    return
                self.changed.wait(0.2)

    def end(self) -> None:
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    def follow(self, end: Callable[[], StepResult | None], stop: threading.Event,
               active: Callable[[], bool]) -> Iterator[tuple[bytes, bytes, StepResult | None]]:
        """The output as it comes, ``(stdout, stderr, None)`` at most CHUNK_MAX bytes at a time,
        then ``(b"", b"", end)`` once the step ended and all was read. Stops without an end when
        ``stop`` is set, ``active()`` is false, or a newer reader took over."""
        me = object()
        with self.changed:
            self.reader = me
            if self.dropped:  # said to the reader that comes after, in its stderr
                self.buffers["stderr"].extend(b"slurmstepd: error: %d bytes of output dropped: no reader came for "
                                              b"%d s\n" % (self.dropped, READER_GRACE))
                self.dropped = 0
            self.changed.notify_all()
        try:
            while True:
                with self.changed:
                    self.changed.wait_for(lambda: self._news() or self.reader is not me or stop.is_set(), 1.0)
                    if self.reader is not me:
                        return
                    out, err = self._take()
                    finished = end() if self.ended and not any(self.buffers.values()) else None
                    self.changed.notify_all()  # room for the pumps
                if out or err:
                    yield out, err, None
                if finished is not None:
                    yield b"", b"", finished
                    return
                if stop.is_set() or not active():
                    return
        finally:
            with self.changed:
                if self.reader is me:
                    self.reader = None
                    self.unread_since = time.monotonic()

    def _news(self) -> bool:
        return self.ended or any(self.buffers.values())

    def _take(self) -> tuple[bytes, bytes]:
        out_buf, err_buf = self.buffers["stdout"], self.buffers["stderr"]
        out = bytes(out_buf[:CHUNK_MAX])
        err = bytes(err_buf[:CHUNK_MAX - len(out)])
        del out_buf[:len(out)]
        del err_buf[:len(err)]
        return out, err


class Framer:
    """One task's stream cut into whole lines (``lines``), each prefixed with the task's rank when
    ``label`` (srun's ``%*d: ``); else passed through as it comes. :meth:`flush` gives the partial
    last line at the stream's end (with a newline added in label mode, as srun's
    write_labelled_message does). A partial line longer than STREAM_BUFFER goes as it is."""

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
            return self.flush() if len(self._partial) > STREAM_BUFFER else b""
        whole, self._partial = bytes(self._partial[:cut]), self._partial[cut:]
        if not self.prefix:
            return whole
        return b"".join(self.prefix + line for line in whole.splitlines(keepends=True))

    def flush(self) -> bytes:
        rest, self._partial = bytes(self._partial), bytearray()
        if not rest:
            return b""
        return self.prefix + rest + b"\n" if self.prefix else rest


def label_width(ntasks: int) -> int:
    """Digits of the largest rank: srun's ``--label`` pads ranks to it (step_io.c's _wid)."""
    return len(str(max(ntasks, 1) - 1))


# -- how a task's stdio is wired --------------------------------------------------------------


@dataclass(frozen=True)
class Files:
    """A batch script's stdout and stderr: files the task opens as the user (``stderr`` None: stdout's)."""

    stdout: str
    stderr: str
    append: bool = False


@dataclass(frozen=True)
class Pipes:
    """psrun's: stdout and stderr into the step's output, stdin from psrun (task 0 only). ``lines``:
    output in whole lines (several tasks share the stream), ``label``: each prefixed with the task's
    rank, padded to ``width`` digits (srun --label)."""

    stdin: bool = False
    lines: bool = False
    label: bool = False
    width: int = 1

    def framer(self, rank: int) -> Framer | None:
        return Framer(rank, self.width, self.label, self.lines) if self.lines or self.label else None


@dataclass(frozen=True)
class Pty:
    """psrun --pty: the task on a pseudo-terminal of its own (its controlling terminal), whose output
    is the step's stdout and which psrun's input goes to; ``rows``x``cols`` its window."""

    rows: int = 0
    cols: int = 0


@dataclass(frozen=True)
class Null:
    """Nothing in, nothing out: an allocation's holder."""


Stdio = Files | Pipes | Pty | Null


