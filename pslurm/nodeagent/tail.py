"""The end of a running batch job's output file, for the dashboard (the ``TailOutput`` RPC).

The file is the user's: a root agent reads it as the user (``tail`` run with the user's uid and
groups), never as root, so that a symlink the user put in its place cannot show them a file they
may not read. An interactive job's output goes to its psrun, not to a file: nothing to tail.

Only a regular file is read: a job whose output is ``-o /dev/ptmx``, a FIFO or another device is
refused at once (``not a regular file``), and the read itself opens the file non-blocking, so that
a file swapped for a FIFO between the check and the read cannot hold the agent's thread either.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pslurm.nodeagent.agent import Agent

MAX_TAIL = 64 * 1024  # bytes at most, whatever is asked
TAIL_TIMEOUT = 2.0  # seconds: a file on a hung network filesystem does not hold the agent's thread longer
# run as the user: $1 the path, $2 the bytes wanted; a regular file's last $2 bytes, read non-blocking
_TAIL = ('[ -e "$1" ] || { echo "$1: No such file or directory" >&2; exit 3; }; '
         '[ -f "$1" ] || { echo "$1: not a regular file" >&2; exit 3; }; size=$(stat -L -c %s -- "$1"); '
         'exec dd if="$1" iflag=nonblock,skip_bytes,count_bytes skip=$((size > $2 ? size - $2 : 0)) count="$2" '
         'status=none')


class NothingToTail(LookupError):
    """The job does not run here, or has no output file; the message says which."""


def tail_output(agent: Agent, job_id: int, max_bytes: int) -> tuple[bytes, str, bool]:
    """(the last ``max_bytes`` of the job's stdout file, its path, whether the file holds more)."""
    running = agent.jobs.get(job_id)
    if running is None or running.end is not None:
        raise NothingToTail(f"job {job_id} is not running on this node")
    job = running.job
    if job.spec.interactive or job.spec.allocation:
        raise NothingToTail(f"job {job_id}'s output goes to its psrun, not to a file")
    path = agent.launcher.output_paths(job)[0]
    wanted = max(1, min(max_bytes, MAX_TAIL))
    switch = agent.launcher.as_root and job.spec.uid != 0
    try:
        with agent.launcher.spawn_lock:  # forks and batch script writes take turns (see Launcher)
            proc = subprocess.Popen(["/bin/sh", "-c", _TAIL, "tail", path, str(wanted + 1)], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                                    user=job.spec.uid if switch else None, group=job.spec.gid if switch else None,
                                    extra_groups=[] if switch else None)
        try:
            data, err = proc.communicate(timeout=TAIL_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NothingToTail(f"cannot read {path}: {exc}") from None
    if proc.returncode != 0:
        why = err.decode(errors="replace").strip().splitlines()
        raise NothingToTail(why[-1] if why else f"cannot read {path}")
    return data[-wanted:], path, len(data) > wanted

