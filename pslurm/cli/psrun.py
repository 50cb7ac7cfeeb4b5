"""psrun: run a command as a job and wait for it (srun): output streamed live, exit code passed on."""

from __future__ import annotations

import os
import sys
import time

from pslurm.cli.common import connect_api, current_umask, fail, prog_name, reporting, user_identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    import queue
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from pslurm.client.api import Api
    from pslurm.core.jobinfo import JobInfo

PROG = prog_name("psrun")
RETRY_WAIT = 0.25  # seconds before asking again when the controller ended a wait early
USAGE = "psrun [OPTIONS] command..."
DESCRIPTION = "Submit COMMAND, stream its output (and its stdin), exit with its exit code; Ctrl-C cancels it."


def main(argv: Sequence[str] | None = None) -> None:
    """psrun's command line: options up to the command, which runs with the rest as its arguments."""
    from pslurm.cli.options import parse_or_fail, warn_inert

    cli = parse_or_fail(PROG, "srun", argv, USAGE, DESCRIPTION, (("command...", "the command and its arguments"),))
    if not cli.positional:
        fail(PROG, "Missing argument 'command'.")
    input_ = str(cli.values.get("input") or "all")
    if input_.lower() not in ("all", "0", "none"):
        fail(PROG, f"Invalid --input specification: {input_} (all or none)")
    warn_inert(PROG, cli)
    raise SystemExit(run_job(cli.job_values(), tuple(cli.positional), forward_stdin=input_.lower() != "none"))


def run_job(opts: Mapping[str, object], argv: tuple[str, ...], forward_stdin: bool = True) -> int:
    """Submit ``argv`` as an interactive job (``opts``: JobOptions' fields by name), follow it, return
    its exit status."""
    from pslurm.core.errors import SpecError
    from pslurm.core.jobdesc import spec_values
    from pslurm.core.restjson import desc_to_json

    user, uid, gid = user_identity()
    try:
        job = desc_to_json(spec_values(opts, user=user, uid=uid, gid=gid, cwd=os.getcwd(), environ=os.environ,
                                       umask=current_umask(), argv=argv, default_name=os.path.basename(argv[0]),
                                       interactive=True))
    except SpecError as exc:
        fail(PROG, str(exc))
    api = connect_api(PROG)
    with reporting(PROG, "Unable to allocate resources: "):
        job_id = api.submit(job)
    try:
        return _follow(api, job_id, forward_stdin)
    except KeyboardInterrupt:
        import signal

        with reporting(PROG):
            api.cancel([job_id])
        print(f"{PROG}: Job step aborted: job {job_id} cancelled", file=sys.stderr)
        return 128 + signal.SIGINT


def _follow(api: Api, job_id: int, forward_stdin: bool = True) -> int:
    """Wait for the job to start, stream its output from (and our stdin to) its node, return its
    exit status."""
    from pslurm.client.errors import ClientError
    from pslurm.core.states import JobReason, JobState

    queued = False

    def note_queued(job: JobInfo) -> None:
        nonlocal queued
        if job.state == JobState.PENDING and job.reason != JobReason.NONE and not queued:
            print(f"{PROG}: job {job_id} queued and waiting for resources", file=sys.stderr)
            queued = True

    job = _wait_until(api, job_id, lambda j: j.state != JobState.PENDING, note_queued)
    if queued:
        print(f"{PROG}: job {job_id} has been allocated resources", file=sys.stderr)
    if job.state == JobState.RUNNING and job.node:
        stdin = None
        try:
            stdin = _StdinForwarder(api, job, forward_stdin)
            for stdout, stderr, done in _output(api, job):
                if stdout:
                    sys.stdout.buffer.write(stdout)
                    sys.stdout.buffer.flush()
                if stderr:
                    sys.stderr.buffer.write(stderr)
                    sys.stderr.buffer.flush()
                if done:
                    break
        except ClientError:
            pass  # the node went away: the controller's record below says how the job ended
        finally:
            if stdin is not None:
                stdin.close()
    # the agent reports the end to the controller just after the stream ends
    return _exit_status(_wait_until(api, job_id, lambda j: j.state.is_final))


def _output(api: Api, job: JobInfo, patience: float = 10.0) -> Iterator[tuple[bytes, bytes, bool]]:
    """The job's output stream. An agent answers NOT_FOUND for a job whose launch it has not seen
    yet (it waits only briefly, to keep its threads for its controller): ask again while the job
    still runs, until the first chunk comes. Yields (stdout, stderr, done)."""
    from pslurm.client.errors import NotFound
    from pslurm.core.restjson import output_chunk_from_json

    deadline = time.monotonic() + patience
    while True:
        started = False
        try:
            for data in api.output(job.job_id):
                started = True
                yield output_chunk_from_json(data)[:3]
            return
        except NotFound:
            current = _job(api, job.job_id)
            if started or time.monotonic() > deadline or current is None or current.state.is_final:
                raise
            time.sleep(0.2)


class _StdinForwarder:
    """Our stdin to the job as it comes (srun's default); its end, or -i none, is the job's EOF.

    A daemon thread reads stdin (it may never end: a terminal) into a queue that the input stream
    drains; :meth:`close` ends that stream once the job is over, so psrun never exits with a call
    still in flight."""

    def __init__(self, api: Api, job: JobInfo, forward: bool) -> None:
        import queue
        import threading

        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._sending = api.send_input(job.job_id, self._chunks())
        if forward:
            threading.Thread(target=self._read, daemon=True, name="stdin").start()
        else:
            self._queue.put(None)

    def _read(self) -> None:
        while True:
            try:
                data = os.read(0, 65536)
            except OSError:  # no stdin at all
                data = b""
            self._queue.put(data or None)
            if not data:
                return

    def _chunks(self) -> Iterator[bytes]:
        while (data := self._queue.get()) is not None:
            yield data

    def close(self) -> None:
        """The job has ended: end the stream (what stdin still holds has nowhere to go)."""
        self._queue.put(None)
        self._sending.close(timeout=5)


def _wait_until(api: Api, job_id: int, done: Callable[[JobInfo], bool],
                seen: Callable[[JobInfo], None] = lambda job: None) -> JobInfo:
    """Follow the job until ``done(job)``, passing each update to ``seen``. A busy controller may
    answer a wait with the job as it is now and end it: then ask again shortly."""
    from pslurm.core.jobinfo import JobInfo

    while True:
        with reporting(PROG):
            for data in api.wait(job_id):
                job = JobInfo(data)
                seen(job)
                if done(job):
                    return job
        time.sleep(RETRY_WAIT)


def _job(api: Api, job_id: int) -> JobInfo | None:
    """The job now (finished or not), or None."""
    from pslurm.core.jobinfo import JobInfo

    found = [JobInfo(data) for data in api.jobs([job_id], include_finished=True)]
    return next((j for j in found if j.job_id == job_id), None)


def _exit_status(job: JobInfo) -> int:
    import signal

    from pslurm.core.states import JobState

    state, code, sig, node = job.state, job.exit_code, job.exit_signal, job.node or ""
    if state == JobState.COMPLETED:
        return 0
    if state == JobState.FAILED and code:
        print(f"{PROG}: error: {node}: task 0: Exited with exit code {code}", file=sys.stderr)
        return int(code)
    if state == JobState.FAILED and sig:
        print(f"{PROG}: error: {node}: task 0: {signal.Signals(sig).name}", file=sys.stderr)
        return 128 + int(sig)
    print(f"{PROG}: error: job {job.job_id} ended {state.value}", file=sys.stderr)
    return int(code) or (128 + int(sig) if sig else 1)

