"""scontrol's keywords that act on jobs or ask the controller: hold, uhold, release, requeue, requeuehold,
top, suspend, resume, listpids, notify, wait_job, reconfigure, pidinfo (ping and takeover: controllers_cmd.py);
their messages and exit statuses as Slurm 22.05's scontrol gives them.

Standard library only: pscontrol imports this on its path.
"""

from __future__ import annotations

import sys

from pslurm.cli.common import connect, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from pslurm.client import Client
    from pslurm.core.jobinfo import JobInfo

    class Options(Protocol):
        """What these keywords read of pscontrol's options (pscontrol.Options)."""

        quiet: bool

PROG = prog_name("pscontrol")
NO_SUCH_JOB = "Invalid job id specified"


def run(verb: str, args: list[str], opts: Options) -> None:
    """Do ``verb`` (a keyword of pscontrol.VERBS other than show, update and write) with its words."""
    if verb == "reconfigure":
        print(f"{PROG}: warning: reconfigure has no effect: psctld reads pslurm.conf when it starts", file=sys.stderr)
    elif verb == "pidinfo":
        _fail(opts, "Failed to locate job for requested pid")
    elif verb == "listpids":
        _listpids(args, opts)
    elif not args:
        _fail(opts, f"too few arguments for keyword:{verb}")
    elif verb in ("hold", "uhold", "release", "requeue", "requeuehold"):
        _job_action(verb, args, opts)
    elif verb == "notify":
        _notify(args, opts)
    elif verb == "wait_job":
        _wait_job(args[0], opts)
    elif verb == "top":
        _top(args, opts)
    else:  # suspend, resume
        _suspend(verb, args, opts)


def _fail(opts: Options, message: str) -> None:
    if not opts.quiet:
        print(message, file=sys.stderr)
    raise SystemExit(1)


def _ids(args: list[str]) -> list[str]:
    from pslurm.core.jobids import split_ids

    return [word for arg in args for word in split_ids(arg)]


def _job(client: Client, text: str) -> JobInfo | None:
    """The job an id names (a plain id, or an array's task), None when there is none or the id is malformed."""
    from pslurm.core.jobids import parse_job_id

    try:
        selector = parse_job_id(text)
    except ValueError:
        return None
    with reporting(PROG):
        found = client.jobs(job_ids=[selector.job_id], include_finished=True)
    return next((j for j in found if selector.selects(j.job_id, j.array_job_id, j.array_task_id)), None)


def _job_action(verb: str, args: list[str], opts: Options) -> None:
    """hold / uhold / release / requeue / requeuehold of each id (14, 14_3, 14_[5-9]), the controller's
    operation each (requeuehold: requeued held at once); an unknown one is scontrol's two lines (one for
    requeue and requeuehold), exit 1."""
    quiet_after = [] if verb in ("requeue", "requeuehold") else [f"slurm_suspend error: {NO_SUCH_JOB}"]
    unknown = [f"{NO_SUCH_JOB} for job {{}}", *quiet_after]
    _each_job(args, opts, unknown, lambda client, text: client.update_job(text, action=verb))


def _each_job(args: list[str], opts: Options, unknown: list[str], act: Callable[[Client, str], list[str]]) -> None:
    """``act`` on each id of ``args`` (its error lines printed); an id that names no job gets the
    ``unknown`` lines (``{}``: the id) instead. Exit 1 after any line."""
    client = connect(PROG)
    failed = False
    for text in _ids(args):
        if _job(client, text) is None:
            errors = [line.format(text) for line in unknown]
        else:
            with reporting(PROG):
                errors = act(client, text)
        for line in errors:
            failed = True
            if not opts.quiet:
                print(line, file=sys.stderr)
    if failed:
        raise SystemExit(1)


def _top(args: list[str], opts: Options) -> None:
    """top: the job first among its user's pending jobs (a nice below theirs); a held one cannot be."""
    client = connect(PROG)
    for text in _ids(args):
        job = _job(client, text)
        if job is None:
            _fail(opts, f"{NO_SUCH_JOB} for job {text}")
            return
        if job.hold:
            _fail(opts, f"Job is in held state, pending scheduler release for job {text}")
        if job.state.value != "PENDING":
            _fail(opts, f"Job is no longer pending execution for job {text}")
        with reporting(PROG):
            mine = client.jobs(users=[job.spec.user], states=["PENDING"], light=True)
        lowest = min((j.spec.nice for j in mine if j.job_id != job.job_id), default=job.spec.nice)
        if job.spec.nice >= lowest:
            with reporting(PROG):
                errors = client.update_job(text, nice=lowest - 1)
            if errors:
                _fail(opts, errors[0])


def _suspend(verb: str, args: list[str], opts: Options) -> None:
    """suspend / resume of each id (operators only): slurmctld's refusals as scontrol prints them
    (``Job is pending execution for job 14``), exit 1 after any; an unknown id is scontrol's line."""
    _each_job(args, opts, ["Unexpected message received for job {}"],
              lambda client, text: client.resume(text) if verb == "resume" else client.suspend(text))


def _notify(args: list[str], opts: Options) -> None:
    """notify ID MSG: a running job's message (psrun has no channel for it: taken, nothing shown)."""
    client = connect(PROG)
    job = _job(client, args[0])
    if job is None or not job.state.holds_resources:
        _fail(opts, f"job notify failure: {NO_SUCH_JOB}")


def _wait_job(text: str, opts: Options) -> None:
    """wait_job ID: return once the job's launch is done (0), or say it is not running (1)."""
    import time

    client = connect(PROG)
    job = _job(client, text)
    if job is None:
        _fail(opts, f"{PROG}: Problem running job {text}")
        return
    while job is not None and job.state.value == "PENDING":
        time.sleep(0.5)
        job = _job(client, text)
    if job is None or not job.state.holds_resources:
        _fail(opts, f"{PROG}: Job {text} no longer running")


def _pid_uid(pid: int) -> int | None:
    """The real uid of process ``pid`` (None: gone, or unreadable)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _listpids(args: list[str], opts: Options) -> None:
    """listpids [ID[.STEP]]: the processes of the job's runs on this machine (its cgroup's), as scontrol
    lists those of the local slurmd: a user's own jobs only (a job whose processes run as them: nobody
    else's process enters a job's cgroup), every job for root."""
    import glob
    import os

    me = os.getuid()

    print(f"{'PID':<8} {'JOBID':<8} {'STEPID':<8} {'LOCALID':<7} GLOBALID")
    job_id = args[0].partition(".")[0].partition("_")[0] if args else "*"
    found = False
    for procs in sorted(glob.glob(f"/sys/fs/cgroup/**/pslurm_*/*/job_{job_id}/cgroup.procs", recursive=True)):
        number = os.path.basename(os.path.dirname(procs)).removeprefix("job_")
        try:
            with open(procs) as fh:
                pids = sorted(int(p) for p in fh.read().split())
        except OSError:
            continue
        if me != 0 and all(_pid_uid(pid) != me for pid in pids):
            continue  # another user's job: not theirs to list (as slurmd's answer to scontrol listpids)
        for i, pid in enumerate(pids):
            found = True
            first = i == 0
            print(f"{pid:<8} {number:<8} {'batch':<8} {'0' if first else '-':<7} {'0' if first else '-'}")
    if not found:
        _fail(opts, f"There are no steps for job {job_id if args else '*'} on node (null).")
