"""How the agent tells that MPS refused an allocation past a job's --gpu-mem slice (issue 30): the job
exited non-zero with CUDA's out-of-memory words at the end of its stderr, read through the fd its user
opened (never the path)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from pslurm.nodeagent.mps import STDERR_TAIL, read_tail, refusal_comment, refusal_note, slice_refusal
from pslurm.nodeagent.stepio import TAIL, StepOutput

TORCH = (b"Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
         b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
         b"2.00 GiB of which 1.62 GiB is free.\n")


def test_cudas_out_of_memory_and_a_failed_exit_are_a_refusal() -> None:
    assert slice_refusal(1, TORCH)
    assert slice_refusal(1, b"cudaMalloc failed: cudaErrorMemoryAllocation\n")
    assert slice_refusal(1, b"CUDA error: out of memory\n")
    assert slice_refusal(1, b"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying")
    assert not slice_refusal(0, TORCH)  # it caught the error and went on: its own business
    assert not slice_refusal(1, b"Traceback ...\nValueError: bad input\n")  # a bug of its own: FAILED
    assert not slice_refusal(1, b"MemoryError\n")  # the host's memory, not the GPU's


def test_the_tail_is_read_through_the_users_fd(tmp_path: Path) -> None:
    path = tmp_path / "slurm-1.out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # as the job's user opens it
    try:
        os.write(fd, b"x" * (2 * STDERR_TAIL) + TORCH)
        path.rename(tmp_path / "moved")  # the path is not what is read
        path.write_text("decoy\n")
        tail = read_tail(fd)
        assert len(tail) == STDERR_TAIL and tail.endswith(TORCH)
    finally:
        os.close(fd)
    read, write = os.pipe()
    try:
        assert read_tail(write) == b""  # not a file: nothing to read
    finally:
        os.close(read)
        os.close(write)
    assert read_tail(9999) == b""  # no such fd


def test_the_words_for_the_job() -> None:
    assert refusal_comment(2048) == ("GPU memory slice exceeded: MPS refused an allocation past the slice of 2048 MiB "
                                     "(--gpu-mem)")
    assert refusal_note("7.batch", 2048).startswith("slurmstepd: error: MPS refused an allocation of StepId=7.batch")


def test_a_steps_stderr_keeps_its_last_bytes_for_the_end_whether_psrun_read_them_or_not() -> None:
    output = StepOutput(threading.Condition())
    output.write("stderr", b"x" * (2 * TAIL))
    output.write("stdout", b"CUDA out of memory on stdout\n")  # not stderr's
    output.write("stderr", TORCH)
    output.buffers["stderr"].clear()  # psrun read it all
    assert len(output.stderr_tail) == TAIL and bytes(output.stderr_tail).endswith(TORCH)
