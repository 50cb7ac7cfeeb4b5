"""psrun: run a command as a job and wait for it (srun): output streamed live, exit code passed on."""

from __future__ import annotations

import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer

from pslurm.cli import options as o
from pslurm.cli.common import Client, fail, run, typer_app, user_identity

PROG = "psrun"
RETRY_WAIT = 0.25  # seconds before asking again when the controller ended a wait early


def make_app() -> typer.Typer:
    app = typer_app("Run a command on the cluster and wait for it.", allow_interspersed_args=False)

    @app.command()
    def psrun(
        command: Annotated[list[str], typer.Argument(help="the command and its arguments")],
        job_name: o.JobName = None, partition: o.Partition = None, time: o.Time = None, output: o.Output = None,
        error: o.Error = None, nodes: o.Nodes = None, ntasks: o.Ntasks = None, cpus_per_task: o.CpusPerTask = None,
        mem: o.Mem = None, gres: o.Gres = None, gpus: o.Gpus = None, gpus_per_node: o.GpusPerNode = None,
        chdir: o.Chdir = None, export: o.Export = None, account: o.Account = None, nice: o.Nice = None,
        dependency: o.Dependency = None, hold: o.Hold = None, kill_on_invalid_dep: o.KillOnInvalidDep = None,
        nodelist: o.Nodelist = None, exclude: o.Exclude = None,
        input_: Annotated[str, typer.Option("-i", "--input", help="stdin to the job: all (default) or none")] = "all",
    ) -> None:
        """Submit COMMAND, stream its output (and its stdin), exit with its exit code; Ctrl-C cancels it."""
        if input_.lower() not in ("all", "0", "none"):
            fail(PROG, f"Invalid --input specification: {input_} (all or none)")
        raise SystemExit(run_job(o.job_options(locals()), tuple(command), forward_stdin=input_.lower() != "none"))

    return app


def run_job(opts: o.JobOptions, argv: tuple[str, ...], forward_stdin: bool = True) -> int:
    from pslurm.core.convert import spec_to_pb
    from pslurm.core.jobspec import SpecError
    from pslurm.core.request import build_spec
    from pslurm.proto import pslurm_pb2 as pb

    user, uid, gid = user_identity()
    try:
        spec = build_spec(opts, user=user, uid=uid, gid=gid, cwd=os.getcwd(), environ=os.environ,
                          argv=argv, default_name=os.path.basename(argv[0]), interactive=True)
    except SpecError as exc:
        fail(PROG, str(exc))
    client = Client(PROG)
    job_id = client.call("SubmitJob", pb.SubmitRequest(spec=spec_to_pb(spec)),
                         "Unable to allocate resources: ").job_id
    try:
        return _follow(client, job_id, forward_stdin)
    except KeyboardInterrupt:
        client.call("CancelJobs", pb.CancelRequest(job_ids=[job_id]))
        print(f"{PROG}: Job step aborted: job {job_id} cancelled", file=sys.stderr)
        return 128 + signal.SIGINT


def _follow(client: Client, job_id: int, forward_stdin: bool = True) -> int:
    """Wait for the job to start, stream its output from (and our stdin to) its node, return its
    exit status."""
    import grpc

    from pslurm.proto import pslurm_pb2 as pb

    queued = False

    def note_queued(job: Any) -> None:
        nonlocal queued
        if job.state == "PENDING" and job.reason not in ("None", "") and not queued:
            print(f"{PROG}: job {job_id} queued and waiting for resources", file=sys.stderr)
            queued = True

    job = _wait_until(client, job_id, lambda j: j.state != "PENDING", note_queued)
    if queued:
        print(f"{PROG}: job {job_id} has been allocated resources", file=sys.stderr)
    if job.state == "RUNNING" and job.node_target:
        from pslurm.proto import pslurm_pb2_grpc as pb_grpc

        agent = pb_grpc.NodeAgentStub(grpc.insecure_channel(job.node_target))
        stdin = _StdinForwarder(agent, job_id, client.metadata, forward_stdin)
        try:
            for chunk in agent.StreamOutput(pb.OutputRequest(job_id=job_id), metadata=client.metadata):
                if chunk.stdout:
                    sys.stdout.buffer.write(chunk.stdout)
                    sys.stdout.buffer.flush()
                if chunk.stderr:
                    sys.stderr.buffer.write(chunk.stderr)
                    sys.stderr.buffer.flush()
                if chunk.done:
                    break
        except grpc.RpcError:
            pass  # the node went away: the controller's record below says how the job ended
        finally:
            stdin.close()
    # the agent reports the end to the controller just after the stream ends
    return _exit_status(_wait_until(client, job_id, lambda j: j.state not in ("PENDING", "RUNNING", "COMPLETING")))


class _StdinForwarder:
    """Our stdin to the job as it comes (srun's default); its end, or -i none, is the job's EOF.

    A daemon thread reads stdin (it may never end: a terminal) into a queue that the SendInput
    call's request stream drains; :meth:`close` ends that stream once the job is over, so psrun
    never exits with a call still in flight."""

    def __init__(self, agent: Any, job_id: int, metadata: Any, forward: bool) -> None:
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._call = agent.SendInput.future(self._chunks(job_id), metadata=metadata)
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

    def _chunks(self, job_id: int) -> Iterator[Any]:
        from pslurm.proto import pslurm_pb2 as pb

        yield pb.InputChunk(job_id=job_id)  # names the job, also when there is nothing to send
        while (data := self._queue.get()) is not None:
            yield pb.InputChunk(job_id=job_id, data=data)

    def close(self) -> None:
        """The job has ended: end the stream (what stdin still holds has nowhere to go)."""
        import grpc

        self._queue.put(None)
        try:
            self._call.result(timeout=5)
        except (grpc.RpcError, grpc.FutureTimeoutError):
            self._call.cancel()  # the node went away: nothing more to say to it


def _wait_until(client: Client, job_id: int, done: Callable[[Any], bool],
                seen: Callable[[Any], None] = lambda job: None) -> Any:
    """Follow the job (WaitJob) until ``done(job)``, passing each update to ``seen``. A busy
    controller may answer a wait with the job as it is now and end it: then ask again shortly."""
    import grpc

    from pslurm.proto import pslurm_pb2 as pb

    while True:
        try:
            for job in client.stream("WaitJob", pb.WaitRequest(job_id=job_id)):
                seen(job)
                if done(job):
                    return job
        except grpc.RpcError as exc:
            client.rpc_failed(exc)
        time.sleep(RETRY_WAIT)


def _exit_status(job: object) -> int:
    state, code, sig, node = job.state, job.exit_code, job.exit_signal, job.node  # type: ignore[attr-defined]
    if state == "COMPLETED":
        return 0
    if state == "FAILED" and code:
        print(f"{PROG}: error: {node}: task 0: Exited with exit code {code}", file=sys.stderr)
        return int(code)
    if state == "FAILED" and sig:
        print(f"{PROG}: error: {node}: task 0: {signal.Signals(sig).name}", file=sys.stderr)
        return 128 + int(sig)
    print(f"{PROG}: error: job {job.job_id} ended {state}", file=sys.stderr)  # type: ignore[attr-defined]
    return int(code) or (128 + int(sig) if sig else 1)


def main() -> None:
    run(make_app(), PROG)
