"""psrun: run a command as a job and wait for it (srun): output streamed live, exit code passed on."""

from __future__ import annotations

import os
import sys
import time

from pslurm.cli.common import connect_api, current_umask, fail, prog_name, reporting, user_identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Any

    from pslurm.client.api import Api, InputCall
    from pslurm.core.jobinfo import JobInfo
    from pslurm.core.steps import StepResult

    Json = dict[str, Any]

PROG = prog_name("psrun")
RETRY_WAIT = 0.25  # seconds before asking again when the controller ended a wait early
STEP_RETRY = 0.5  # seconds between attempts to create a step while the allocation is busy
USAGE = "psrun [OPTIONS] command..."
DESCRIPTION = ("Submit COMMAND, stream its output (and its stdin), exit with its exit code; Ctrl-C cancels it. "
               "Inside a job (SLURM_JOB_ID) or with --jobid: run it as a step of that job.")


def main(argv: Sequence[str] | None = None) -> None:
    """psrun's command line: options up to the command, which runs with the rest as its arguments.
    Inside a job (SLURM_JOB_ID set, as in psbatch's script or psalloc's shell) or with --jobid, the
    command runs as a step of that job (srun's behaviour); else as a job of its own."""
    from pslurm.cli.options import parse_or_fail, warn_inert

    cli = parse_or_fail(PROG, "srun", argv, USAGE, DESCRIPTION, (("command...", "the command and its arguments"),))
    if not cli.positional:
        fail(PROG, "Missing argument 'command'.")
    input_ = str(cli.values.get("input") or "all")
    if input_.lower() not in ("all", "0", "none"):
        fail(PROG, f"Invalid --input specification: {input_} (all or none)")
    forward = input_.lower() != "none"
    command = tuple(cli.positional)
    values = cli.values
    job = values.get("jobid") or os.environ.get("SLURM_JOB_ID")
    if job:  # -O/--overcommit means something to a step only: more tasks than the job's CPUs
        values["overcommit"] = cli.inert.pop("overcommit", None) is not None
    warn_inert(PROG, cli)
    if values.get("pty") and not os.isatty(0):
        print(f"{PROG}: error: Not using a pseudo-terminal, disregarding --pty option", file=sys.stderr)
        values["pty"] = False
    if job:
        raise SystemExit(run_step(_job_id(str(job)), values, command, forward))
    opts = cli.job_values()  # --ntasks-per-node without -n: -N nodes x that many tasks (spec_values)
    if values.get("pty") or _several_tasks(opts):
        raise SystemExit(run_in_allocation(opts, values, command, forward))
    raise SystemExit(run_job(opts, command, forward_stdin=forward, label=bool(values.get("label"))))


def run_job(opts: Mapping[str, object], argv: tuple[str, ...], forward_stdin: bool = True, label: bool = False) -> int:
    """Submit ``argv`` as an interactive job (``opts``: JobOptions' fields by name), follow it, return
    its exit status. ``label``: -l, each output line prefixed with the task's rank (``0: ``)."""
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
        lines = api.run(job)  # submitted and followed in one request
        job_id = int(next(lines)["job_id"])
    try:
        return _follow(api, job_id, lines, forward_stdin, label)
    except KeyboardInterrupt:
        import _signal as signal  # the signal module makes enums: milliseconds of psrun's start

        with reporting(PROG):
            api.cancel([job_id])
        print(f"{PROG}: Job step aborted: job {job_id} cancelled", file=sys.stderr)
        return 128 + signal.SIGINT


def _follow(api: Api, job_id: int, lines: Iterator[Json], forward_stdin: bool = True, label: bool = False) -> int:
    """Follow the psrun job through its run request's lines (the job's changes until it runs, its
    command's output, the job once it ended; Api.run), our stdin to it meanwhile; its exit status."""
    from pslurm.client.errors import ClientError
    from pslurm.core.jobinfo import JobInfo
    from pslurm.core.restjson import output_chunk_from_json
    from pslurm.core.states import JobReason, JobState

    queued = ran = False
    stdin: _StdinForwarder | None = None
    out = _Writer(label)
    end: StepResult | None = None
    final: JobInfo | None = None
    broken = ""
    try:
        for data in lines:
            if "job" not in data:  # a line of the command's output (the last with its end)
                stdout, stderr, end = output_chunk_from_json(data)
                out.write(stdout, stderr)
                continue
            job = JobInfo(data["job"])
            if job.state.is_final:
                final = job
                break
            if job.state == JobState.PENDING and job.reason != JobReason.NONE and not queued:
                print(f"{PROG}: job {job_id} queued and waiting for resources", file=sys.stderr)
                queued = True
            if job.state == JobState.RUNNING and not ran:
                ran = True
                if queued:
                    print(f"{PROG}: job {job_id} has been allocated resources", file=sys.stderr)
                stdin = _StdinForwarder(lambda chunks: api.send_input(job_id, chunks), forward_stdin)
    except ClientError as exc:
        broken = str(exc)
    finally:
        out.flush()
        if stdin is not None:
            stdin.close()
    if final is None:  # the stream broke or ended early: the controller's record says how the job ended
        final = _wait_until(api, job_id, lambda j: j.state.is_final)
    if ran and end is None and not broken:
        broken = "the stream ended before the step did"
    ended = Ended(f"job {job_id}", final.state.value, int(final.exit_code), int(final.exit_signal),
                  final.node or "?", 1)
    return exit_status(ended, (end, broken))


# the step's end as its stream told it, or (None and) why the stream broke
Streamed = tuple["StepResult | None", str]


def _stream(api: Api, job_id: int, step_id: int, forward_stdin: bool, label: bool,
            running: Callable[[], bool]) -> Streamed:
    """Step ``job_id.step_id``'s output to ours and our stdin to it, until its end: ``(end, "")``,
    or ``(None, why)`` when the stream broke before the end came (output may be lost)."""
    from pslurm.client.errors import ClientError

    stdin = None
    out = _Writer(label)
    try:
        stdin = _StdinForwarder(lambda chunks: api.send_input(job_id, chunks, step_id), forward_stdin)
        for stdout, stderr, end in _output(api, job_id, step_id, running):
            out.write(stdout, stderr)
            if end is not None:
                return end, ""
        return None, "the stream ended before the step did"
    except ClientError as exc:
        return None, str(exc)
    finally:
        out.flush()
        if stdin is not None:
            stdin.close()


def _output(api: Api, job_id: int, step_id: int, running: Callable[[], bool],
            patience: float = 10.0) -> Iterator[tuple[bytes, bytes, StepResult | None]]:
    """The step's output stream. An agent answers NOT_FOUND for a step whose launch it has not seen
    yet (it waits only briefly, to keep its threads for its controller): ask again while the step
    still runs, until the first chunk comes. Yields (stdout, stderr, end)."""
    from pslurm.client.errors import NotFound
    from pslurm.core.restjson import output_chunk_from_json

    deadline = time.monotonic() + patience
    while True:
        started = False
        try:
            for data in api.output(job_id, step_id):
                started = True
                yield output_chunk_from_json(data)
            return
        except NotFound:
            if started or time.monotonic() > deadline or not running():
                raise
            time.sleep(0.2)


class _Channel:
    """queue.Queue's put and get for one reader, on one of _thread's locks (queue and threading import
    collections and more: a tenth of psrun's start). The lock is released when something may be there."""

    def __init__(self) -> None:
        from _thread import allocate_lock

        self._items: list[bytes | None] = []
        self._ready = allocate_lock()
        self._ready.acquire()

    def put(self, item: bytes | None) -> None:
        self._items.append(item)
        try:
            self._ready.release()
        except RuntimeError:  # released already: the reader has yet to take what came before
            pass

    def get(self) -> bytes | None:
        while not self._items:
            self._ready.acquire()
        return self._items.pop(0)


class _StdinForwarder:
    """Our stdin to the job as it comes (srun's default); its end, or -i none, is the job's EOF.

    A daemon thread reads stdin (it may never end: a terminal) into a queue that the input stream
    drains; :meth:`close` ends that stream once the job is over, so psrun never exits with a call
    still in flight."""

    def __init__(self, send: Callable[[Iterator[bytes]], InputCall], forward: bool) -> None:
        from _thread import start_new_thread  # a daemon thread without threading, which imports collections

        self._queue = _Channel()
        self._sending = send(self._chunks())
        if forward:
            start_new_thread(self._read, ())
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


class _Writer:
    """Output to our stdout and stderr as it comes; with -l each line prefixed with its task's rank
    (``0: ``), as srun --label (a psrun job has one task, rank 0; a step's agent labels its own)."""

    def __init__(self, label: bool) -> None:
        self.label = label
        self._at_start = {1: True, 2: True}

    def write(self, stdout: bytes, stderr: bytes) -> None:
        for fd, data, stream in ((1, stdout, sys.stdout), (2, stderr, sys.stderr)):
            if not data:
                continue
            if self.label:
                data = self._labelled(fd, data)
            stream.buffer.write(data)
            stream.buffer.flush()

    def _labelled(self, fd: int, data: bytes) -> bytes:
        lines = data.split(b"\n")
        out = [(b"0: " if self._at_start[fd] else b"") + lines[0]]
        out += [b"0: " + line if line else line for line in lines[1:-1]] + [b"0: " + lines[-1] if lines[-1] else b""]
        self._at_start[fd] = not lines[-1]
        return b"\n".join(out)

    def flush(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass


def _count(flag: str, text: object) -> int:
    """A positive count given on the command line; anything else is srun's one-line error."""
    value = str(text).strip()
    if not value.isdigit() or int(value) < 1:
        fail(PROG, f"Invalid {flag} specification: {text}")
    return int(value)


def _job_id(text: str) -> int:
    if not text.strip().isdigit():
        fail(PROG, f"Invalid job id specified: {text}")
    return int(text)


# -- steps: psrun inside an allocation ------------------------------------------------------------

def step_body(values: Mapping[str, object], argv: tuple[str, ...], environ: Mapping[str, str]) -> Json:
    """The API's step request (docs/api.md) of psrun's options: tasks, CPUs, GPUs, the command, its
    environment (--export) and working directory (--chdir)."""
    from pslurm.core.errors import SpecError
    from pslurm.core.gres import GresError, parse_gpus, parse_gres
    from pslurm.core.jobdesc import export_environment

    def count(dest: str, flag: str) -> int | None:
        return None if values.get(dest) is None else _count(flag, values[dest])

    try:
        gres = [str(g) for g in parse_gres(str(values["gres"]))] if values.get("gres") else []
        for gpus in (values.get("gpus"), values.get("gpus_per_node")):
            if gpus:
                gres += [str(g) for g in parse_gpus(str(gpus))]
        if values.get("gres") and not gres:
            gres = ["none"]  # --gres=none (gpu:0): the step gets no GPUs
    except (GresError, SpecError) as exc:
        fail(PROG, str(exc))
    export = values.get("export")
    env = export_environment(export if isinstance(export, str) else None, environ)
    env["SLURM_UMASK"] = f"{current_umask():04o}"
    chdir = values.get("chdir")
    overlap = values.get("overlap", False)
    gpu_bind = str(values.get("gpu_bind") or "")
    if gpu_bind:
        from pslurm.core.gpubind import parse_gpu_bind
        bind = parse_gpu_bind(gpu_bind)
        if bind is None:
            fail(PROG, f"Invalid --gpu-bind argument: {gpu_bind}")
        elif bind[0] in ("closest", "single"):
            print(f"{PROG}: warning: --gpu-bind={gpu_bind} has no effect here (no GPU topology): "
                  "each task sees all of the step's GPUs", file=sys.stderr)
    return {
        "argv": list(argv), "environment": env,
        "workdir": os.path.abspath(str(chdir)) if chdir else os.getcwd(),
        "ntasks": count("ntasks", "--ntasks"), "ntasks_per_node": count("ntasks_per_node", "--ntasks-per-node"),
        "cpus_per_task": count("cpus_per_task", "--cpus-per-task") or 1, "gres": gres or None,
        "gpus_per_task": count("gpus_per_task", "--gpus-per-task"),
        "overlap": overlap is not False, "label": bool(values.get("label")),
        "exact": bool(values.get("exact")) or values.get("exclusive") is not None,  # a step's --exclusive: --exact
        "overcommit": bool(values.get("overcommit")),
        "gpu_bind": gpu_bind,
        "pty": bool(values.get("pty")),
        "name": str(values.get("job_name") or os.path.basename(argv[0])),
    }


def run_step(job_id: int, values: Mapping[str, object], argv: tuple[str, ...], forward_stdin: bool = True,
             environ: Mapping[str, str] | None = None) -> int:
    """Run ``argv`` as a step of the running job ``job_id`` (srun inside an allocation): create it
    (waiting while the job's other steps hold its resources), stream its output and our stdin, wait
    for its end; srun's exit status."""
    body = step_body(values, argv, os.environ if environ is None else environ)
    api = connect_api(PROG)
    step = _create_step(api, job_id, body)
    if step is None:
        return 1
    with _RawTerminal(bool(body["pty"])):
        return _follow_step(api, job_id, int(step["step_id"]), step, forward_stdin)


def _create_step(api: Api, job_id: int, body: Json) -> Json | None:
    """The created step (``{"step_id", "nodes", "ntasks"}``). While the allocation is busy, srun's
    line once and again every minute, and ask again; Ctrl-C meanwhile gives up (None)."""
    from pslurm.client.errors import ClientError, StepBusy

    waiting_since = 0.0
    try:
        while True:
            try:
                step = api.create_step(job_id, body)
            except StepBusy:
                now = time.monotonic()
                if not waiting_since or now - waiting_since >= 60:
                    word = "still" if waiting_since else "temporarily"
                    print(f"{PROG}: Job {job_id} step creation {word} disabled, retrying (Requested nodes are busy)",
                          file=sys.stderr, flush=True)
                    waiting_since = now
                time.sleep(STEP_RETRY)
                continue
            except ClientError as exc:
                message = str(exc)
                if exc.remote and not message.startswith("Unable to create step"):
                    message = f"Unable to create step for job {job_id}: {message}"
                fail(PROG, message)
            if waiting_since:
                print(f"{PROG}: Step created for job {job_id}", file=sys.stderr, flush=True)
            return step
    except KeyboardInterrupt:
        print(f"{PROG}: Cancelled pending step for job {job_id}", file=sys.stderr)
        return None


class _Interrupts:
    """srun's Ctrl-C while a step runs: the first prints the step's state (``interrupt (one more
    within 1 sec to abort)``), a second within a second cancels the step (``sending Ctrl-C to
    StepId=J.S``); the output stream then ends with the step."""

    def __init__(self, api: Api, job_id: int, step_id: int, ntasks: int) -> None:
        import _signal as signal  # the signal module makes enums: milliseconds of psrun's start

        self.api, self.job_id, self.step_id, self.ntasks = api, job_id, step_id, ntasks
        self.last = 0.0
        self.cancelled = False
        self._previous = signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: object) -> None:
        import threading

        now = time.monotonic()
        ref = f"StepId={self.job_id}.{self.step_id}"
        if self.cancelled or now - self.last <= 1.0:
            print(f"{PROG}: sending Ctrl-C to {ref}", file=sys.stderr, flush=True)
            self.cancelled = True
            threading.Thread(target=self._cancel, daemon=True, name="cancel").start()
        else:
            tasks = "task 0" if self.ntasks == 1 else f"tasks 0-{self.ntasks - 1}"
            print(f"{PROG}: interrupt (one more within 1 sec to abort)\n{PROG}: {ref} {tasks}: running",
                  file=sys.stderr, flush=True)
        self.last = now

    def _cancel(self) -> None:
        from pslurm.client.errors import ClientError

        try:
            self.api.cancel_step(self.job_id, self.step_id)
        except ClientError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)

    def close(self) -> None:
        import _signal as signal  # the signal module makes enums: milliseconds of psrun's start

        signal.signal(signal.SIGINT, self._previous)


def _follow_step(api: Api, job_id: int, step_id: int, step: Json, forward_stdin: bool) -> int:
    """Follow step ``job_id.step_id`` (its output, our stdin, srun's Ctrl-C) until it ended; its exit status."""
    ntasks = int(step.get("ntasks") or 1)
    interrupts = _Interrupts(api, job_id, step_id, ntasks)
    try:
        # the step's agent labels its lines (--label is in the request)
        streamed = _stream(api, job_id, step_id, forward_stdin, False,
                           lambda: _step_state(_step(api, job_id, step_id)) == "RUNNING")
        record = _wait_step(api, job_id, step_id)
    finally:
        interrupts.close()
    ended = Ended(f"StepId={job_id}.{step_id}", _step_state(record), int(record.get("exit_code") or 0),
                  int(record.get("exit_signal") or 0), str(record.get("nodes") or "?"),
                  int(record.get("ntasks") or 1))
    return exit_status(ended, streamed, quiet=interrupts.cancelled)


def _step(api: Api, job_id: int, step_id: int) -> Json | None:
    return next((s for s in api.steps(job_id) if int(s["step_id"]) == step_id), None)


def _step_state(step: Json | None) -> str:
    """A step's state name (``RUNNING``); "" for none."""
    if step is None:
        return ""
    state = step.get("state")
    if isinstance(state, list):
        state = state[0] if state else ""
    return str(state or "")


def _wait_step(api: Api, job_id: int, step_id: int) -> Json:
    """The step once it has ended (the wait stream, asked again if the controller ends it early)."""
    from pslurm.core.states import FINAL_STATES

    finals = {s.value for s in FINAL_STATES}
    while True:
        with reporting(PROG):
            for data in api.wait_step(job_id, step_id):
                if _step_state(data) in finals:
                    return data
        time.sleep(RETRY_WAIT)


class Ended:
    """How a psrun job or step ended, as the controller recorded it: ``what`` names it in srun's
    last line (``job 14``, ``StepId=14.0``); ``nodes`` and ``ntasks`` where its tasks ran."""

    def __init__(self, what: str, state: str, exit_code: int, exit_signal: int, nodes: str, ntasks: int) -> None:
        self.what, self.state, self.exit_code, self.exit_signal = what, state, exit_code, exit_signal
        self.nodes, self.ntasks = nodes, ntasks


def exit_status(ended: Ended, streamed: Streamed = (None, ""), quiet: bool = False) -> int:
    """srun's exit status and its error lines: a line per node and outcome of the tasks that failed
    (``psrun: error: c000: tasks 0-1: Exited with exit code 3``, ``...: task 2: Killed``), from the
    tasks' ends the stream gave, else for the whole step; a signal that ended a task wins (128 + the
    signal), else the largest exit code; a step that ended otherwise (cancelled, timed out) says so.
    A stream that broke is said in one line and is never a success. ``quiet``: psrun cancelled the
    step itself (Ctrl-C): no line for the signal or the state, as srun."""
    import _signal as signal  # the signal module makes enums: milliseconds of psrun's start

    end, broken = streamed
    code, sig = ended.exit_code, ended.exit_signal
    tasks = [t for t in (end.tasks if end is not None else ()) if t.exit_code or t.signal]
    if not tasks and (code or sig):
        from pslurm.core.steps import TaskEnd

        tasks = [TaskEnd(rank, code, sig, ended.nodes) for rank in range(ended.ntasks)]
    lines: dict[tuple[str, str], list[int]] = {}
    for task in tasks:
        how = (signal.strsignal(task.signal) or str(task.signal)) if task.signal else \
            f"Exited with exit code {task.exit_code}"
        lines.setdefault((task.node or ended.nodes, how), []).append(task.rank)
    for (node, how), ranks in lines.items():
        if quiet and not how.startswith("Exited"):
            continue
        from pslurm.core.hostlists import int_ranges

        word = "task" if len(ranks) == 1 else "tasks"
        print(f"{PROG}: error: {node}: {word} {int_ranges(sorted(ranks))}: {how}", file=sys.stderr)
    status = 128 + sig if sig else code
    if not status and ended.state != "COMPLETED":
        if not quiet:
            print(f"{PROG}: error: {ended.what} ended {ended.state}", file=sys.stderr)
        status = 1
    if broken:
        print(f"{PROG}: error: {ended.what}: its output stream broke, output may be missing: {broken}",
              file=sys.stderr)
        status = status or 1
    return status


class _RawTerminal:
    """--pty: our terminal in raw mode while the step runs (its own terminal does the echo, the line
    editing and Ctrl-C), restored however psrun ends. Nothing when stdin is not a terminal."""

    def __init__(self, on: bool) -> None:
        self.on = on
        self._saved: list[Any] | None = None

    def __enter__(self) -> _RawTerminal:
        if self.on:
            import termios
            import tty

            self._saved = termios.tcgetattr(0)
            tty.setraw(0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(0, termios.TCSADRAIN, self._saved)


def _several_tasks(opts: Mapping[str, object]) -> bool:
    """Whether a psrun outside an allocation asks more than one task or node (then its tasks are a step's)."""
    def number(key: str) -> int:
        text = str(opts.get(key) or "").partition("-")[0]
        return int(text) if text.isdigit() else 0

    return number("nodes") > 1 or number("ntasks") > 1 or number("ntasks_per_node") > 1


def run_in_allocation(opts: Mapping[str, object], values: Mapping[str, object], argv: tuple[str, ...],
                      forward_stdin: bool = True) -> int:
    """psrun outside an allocation with several tasks or nodes, or --pty: as srun does, an allocation
    of its own (``opts``), then the command as its step 0 (all its tasks, over all its nodes; task 0 on
    a pseudo-terminal with --pty); the allocation is given back when the step ends. One task without
    --pty stays a job of its own (the fast path: one request, no step)."""
    from pslurm.cli.psalloc import job_environment, submit_allocation, wait_granted

    api, job_id = submit_allocation(PROG, opts, os.path.basename(argv[0]), "Unable to allocate resources: ")
    try:
        job = wait_granted(PROG, api, job_id, salloc=False)
    except KeyboardInterrupt:
        with reporting(PROG):
            api.cancel([job_id])
        print(f"{PROG}: Job allocation {job_id} has been revoked", file=sys.stderr)
        return 1
    if job is None:
        return 1
    status = 1
    try:
        environ = {**os.environ, **job_environment(job, api.config.cluster_name, ntasks=False)}
        status = run_step(job_id, values, argv, forward_stdin, environ)
    finally:
        from pslurm.client.errors import ClientError

        try:
            api.relinquish(job_id, exit_code=status)
        except ClientError:
            pass  # it ended meanwhile (cancelled, timed out)
    return status
