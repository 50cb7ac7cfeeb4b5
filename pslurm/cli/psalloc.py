"""psalloc: get an allocation, run a command in it, give it back (salloc).

The job is an allocation (``JobSpec.allocation``): its node holds its CPUs and GPUs and runs nothing
until the command, run here on the submit host with the job's variables, starts steps in it with
psrun. When the command ends, psalloc relinquishes the allocation (the job ends COMPLETED) and exits
with the command's status; if the job ends first (pscancel, its time limit), psalloc says that the
allocation has been revoked and ends the command."""

from __future__ import annotations

import os
import sys

from pslurm.cli.common import connect_api, current_umask, fail, prog_name, reporting, user_identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pslurm.client.api import Api
    from pslurm.core.jobinfo import JobInfo

PROG = prog_name("psalloc")
USAGE = "psalloc [OPTIONS] [command [args...]]"
DESCRIPTION = ("Get an allocation, run COMMAND (default: your login shell) with its variables, then give it back; "
               "psrun inside runs steps in it.")
RETRY_WAIT = 0.25  # seconds before asking again when the controller ended a wait early
REVOKED = 2  # the allocation's end, as salloc's allocation_state


def main(argv: Sequence[str] | None = None) -> None:
    """salloc's command line: options up to the command, which runs with the rest as its arguments."""
    from pslurm.cli.options import parse_or_fail, warn_inert

    cli = parse_or_fail(PROG, "salloc", argv, USAGE, DESCRIPTION, (("command...", "the command and its arguments"),))
    warn_inert(PROG, cli)
    opts = cli.job_values()
    values = cli.values
    no_shell = bool(values.get("no_shell"))
    command = tuple(cli.positional)
    if not command and not no_shell:
        command = (login_shell(),)
    default_name = "no-shell" if no_shell else "interactive"
    api, job_id = submit_allocation(PROG, opts, default_name, "Job submit/allocate failed: ")
    try:
        job = wait_granted(PROG, api, job_id, salloc=True)
    except KeyboardInterrupt:
        with reporting(PROG):
            api.cancel([job_id])
        print(f"{PROG}: Job allocation {job_id} has been revoked.", file=sys.stderr)
        raise SystemExit(1) from None
    if job is None:
        raise SystemExit(1)
    if no_shell:
        raise SystemExit(0)
    env = {**os.environ, **job_environment(job, api.config.cluster_name, ntasks=opts.get("ntasks") is not None)}
    raise SystemExit(run_command(api, job, command, env))


def login_shell() -> str:
    """salloc's default command: the user's shell from the password database (not $SHELL)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_shell or "/bin/sh"
    except KeyError:
        return "/bin/sh"


def submit_allocation(prog: str, opts: Mapping[str, object], default_name: str, prefix: str) -> tuple[Api, int]:
    """Submit an allocation job of ``opts`` (JobOptions' fields by name); the API and its id."""
    from pslurm.core.errors import SpecError
    from pslurm.core.jobdesc import spec_values
    from pslurm.core.restjson import desc_to_json

    user, uid, gid = user_identity()
    try:
        spec = spec_values(opts, user=user, uid=uid, gid=gid, cwd=os.getcwd(), environ=os.environ,
                           umask=current_umask(), default_name=default_name)
    except SpecError as exc:
        fail(prog, str(exc))
    spec["allocation"] = True
    api = connect_api(prog)
    with reporting(prog, prefix):
        job_id = api.submit(desc_to_json(spec))
    return api, job_id


def wait_granted(prog: str, api: Api, job_id: int, salloc: bool) -> JobInfo | None:
    """Wait for the allocation to start, with salloc's lines (``salloc``; else srun's, which creates its
    own allocation for --pty): ``Pending job allocation J``, ``job J queued and waiting for resources``
    while it waits, ``job J has been allocated resources``, ``Granted job allocation J``. The job
    RUNNING, or None when it ended before it started (said so)."""
    import time

    from pslurm.core.jobinfo import JobInfo
    from pslurm.core.states import JobReason, JobState

    queued = False
    job = None
    while job is None:
        with reporting(prog):
            for data in api.wait(job_id):
                seen = JobInfo(data)
                if seen.state == JobState.PENDING:
                    if seen.reason != JobReason.NONE and not queued:
                        if salloc:
                            print(f"{prog}: Pending job allocation {job_id}", file=sys.stderr)
                        print(f"{prog}: job {job_id} queued and waiting for resources", file=sys.stderr, flush=True)
                        queued = True
                    continue
                job = seen
                break
        if job is None:
            time.sleep(RETRY_WAIT)
    if job.state != JobState.RUNNING:
        print(f"{prog}: error: Job allocation {job_id} has been revoked.", file=sys.stderr)
        return None
    if queued:
        print(f"{prog}: job {job_id} has been allocated resources", file=sys.stderr)
    if salloc:
        print(f"{prog}: Granted job allocation {job_id}", file=sys.stderr, flush=True)
    return job


def job_environment(job: JobInfo, cluster: str, ntasks: bool) -> dict[str, str]:
    """The variables salloc gives its command (Slurm's env_array_for_job): the job's id, name, nodes,
    partition, CPUs, its submit directory and host; SLURM_NTASKS only when -n was given."""
    import _socket

    from pslurm.cli.jobview import node_count, nodelist_text
    from pslurm.core.layout import compress_counts, tasks_per_node

    spec = job.spec
    node, nodes = nodelist_text(job), node_count(job)
    tasks = tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node)  # core/layout.py's node_layout's
    cpus = tuple(t * max(1, spec.cpus_per_task) for t in tasks)
    env = {
        "SLURM_JOB_ID": str(job.job_id), "SLURM_JOBID": str(job.job_id), "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_NODELIST": node, "SLURM_NODELIST": node, "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes), "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(cpus), "SLURM_TASKS_PER_NODE": compress_counts(tasks),
        "SLURM_SUBMIT_DIR": spec.workdir, "SLURM_SUBMIT_HOST": _socket.gethostname(), "SLURM_CLUSTER_NAME": cluster,
    }
    if spec.account:
        env["SLURM_JOB_ACCOUNT"] = spec.account
    if spec.mem_mb:
        env["SLURM_MEM_PER_NODE"] = str(spec.mem_mb)
    if spec.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if ntasks or spec.ntasks_per_node:  # salloc: the count, or nodes x --ntasks-per-node
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(spec.ntasks)
    return env


class _Revocation:
    """Follows the job while the command runs: if it ends (cancelled, timed out) before psalloc gives
    it back, says so as salloc does and signals the command (SIGHUP when interactive, else SIGTERM)."""

    def __init__(self, api: Api, job_id: int, pid: int, interactive: bool) -> None:
        import threading

        self.api, self.job_id, self.pid, self.interactive = api, job_id, pid, interactive
        self.revoked = False
        self.done = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name="revocation").start()

    def _watch(self) -> None:
        import signal
        import time

        from pslurm.client.errors import ClientError
        from pslurm.core.jobinfo import JobInfo
        from pslurm.core.states import JobState

        while not self.done.is_set():
            try:
                for data in self.api.wait(self.job_id):
                    job = JobInfo(data)
                    if job.state.is_final or job.state == JobState.COMPLETING:
                        break
                else:
                    time.sleep(RETRY_WAIT)
                    continue
            except ClientError:
                time.sleep(1)
                continue
            if self.done.is_set():
                return
            self.revoked = True
            if job.state == JobState.TIMEOUT:
                print(f"{PROG}: Job {self.job_id} has exceeded its time limit and its allocation has been revoked.",
                      file=sys.stderr, flush=True)
            else:
                print(f"{PROG}: Job allocation {self.job_id} has been revoked.", file=sys.stderr, flush=True)
            try:
                os.killpg(self.pid, signal.SIGHUP if self.interactive else signal.SIGTERM)
            except OSError:
                pass
            return


def run_command(api: Api, job: JobInfo, command: tuple[str, ...], env: dict[str, str]) -> int:
    """Run the command in its own process group (the terminal's foreground one when interactive), wait
    for it, relinquish the allocation unless it was revoked; salloc's exit status."""
    import signal

    interactive = os.isatty(0)
    pid = os.fork()
    if pid == 0:  # the command
        try:
            os.setpgid(0, 0)
            for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
                signal.signal(sig, signal.SIG_DFL)
            os.execvpe(command[0], list(command), env)
        except OSError as exc:
            print(f"{PROG}: error: _fork_command: Unable to exec command \"{command[0]}\": {exc.strerror}",
                  file=sys.stderr, flush=True)
        os._exit(1)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # it has exec'd already (and set its own group)
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU):
        signal.signal(sig, signal.SIG_IGN)  # Ctrl-C is the command's; psalloc ends when it ends
    if interactive:
        _foreground(pid)
    watch = _Revocation(api, job.job_id, pid, interactive)
    while True:
        _, status = os.waitpid(pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            break
        os.kill(pid, signal.SIGCONT)  # salloc ignores job control: a stopped command goes on
    watch.done.set()
    if interactive:
        _foreground(os.getpgrp())
    rc = 1
    if os.WIFEXITED(status):
        rc = os.WEXITSTATUS(status)
    elif os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
                                                            signal.SIGKILL):
        rc = 0  # most likely the user's own doing (salloc's rule)
    if not watch.revoked:
        print(f"{PROG}: Relinquishing job allocation {job.job_id}", file=sys.stderr, flush=True)
        from pslurm.client.errors import ClientError

        try:
            api.relinquish(job.job_id, exit_code=rc)
        except ClientError as exc:
            if "already completing or completed" not in str(exc):
                print(f"{PROG}: error: Unable to clean up job allocation {job.job_id}: {exc}", file=sys.stderr)
    return rc


def _foreground(pgid: int) -> None:
    """Make ``pgid`` the terminal's foreground process group (as salloc does for its command)."""
    try:
        os.tcsetpgrp(0, pgid)
    except OSError:
        pass
