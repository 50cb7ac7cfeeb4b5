"""A running interactive job's (or a job step's) output and input, relayed between an HTTP client (psrun) and the
gRPC streams of the job's node agent (``StreamOutput``, ``SendInput``).

The relay uses grpc.aio on the API's own event loop: a relayed stream is a coroutine, not a
thread. The controller calls the agent with its own credential (an operator's), so the API checks
that the caller owns the job (or is an operator) before it relays anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence

import grpc
import grpc.aio

from pslurm.auth.transport import Metadata
from pslurm.core.lifecycle import combine_step_ends
from pslurm.core.states import JobState
from pslurm.core.steps import StepResult
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc
from pslurm.proto.convert import job_state_from_pb, task_ends_from_pb

Piece = tuple[bytes, bytes, "StepResult | None"]  # stdout, stderr, and the step's end on the last one
FOR_UID = "x-pslurm-for-uid"  # metadata: the user a stream is relayed for (nodeagent.servicer reads it)

# What an agent's refusal means to the API's caller (HTTP status); UNAVAILABLE, DEADLINE_EXCEEDED:
# the node is unreachable (502, with the agent's address, for the client's NodeUnreachable).
_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.PERMISSION_DENIED: 403,
}
UNREACHABLE = 502


class AgentStreamError(Exception):
    """An agent's stream failed: ``status`` is the HTTP status for the caller, the message one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def stream_error(exc: grpc.aio.AioRpcError, target: str) -> AgentStreamError:
    code = exc.code()
    status = _STATUS.get(code)
    if status is None:
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
            return AgentStreamError(UNREACHABLE, f"Unable to contact pslurm node agent at {target} (connect failure)")
        status = 500
    return AgentStreamError(status, exc.details() or code.name)


def _result(msg: pb.OutputChunk) -> StepResult:
    try:
        state = job_state_from_pb(msg.state)
    except ValueError:
        state = JobState.COMPLETED
    return StepResult(state, msg.exit_code, msg.exit_signal, tasks=task_ends_from_pb(msg.tasks))


def combine_results(a: StepResult | None, b: StepResult) -> StepResult:
    """Two nodes' ends of one step as the step's: lifecycle.combine_step_ends, every task's end."""
    state, code, sig = combine_step_ends(None if a is None else (a.state, a.exit_code, a.exit_signal),
                                         (b.state, b.exit_code, b.exit_signal))
    tasks = tuple(sorted((a.tasks if a is not None else ()) + b.tasks, key=lambda t: t.rank))
    return StepResult(state, code, sig, tasks=tasks)


class AgentRelay:
    """grpc.aio channels to the agents, one per agent, made on (and used only from) the API's loop."""

    def __init__(self, credentials: Callable[[str], Metadata]) -> None:
        self._credentials = credentials  # fresh metadata for each call to that agent (a credential is good once)
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, target: str) -> pb_grpc.NodeAgentStub:
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = grpc.aio.insecure_channel(target)
        return pb_grpc.NodeAgentStub(channel)

    def _metadata(self, target: str, for_uid: int | None) -> Metadata:
        """The controller's credential for the agent at ``target``, naming the user a stream is relayed
        for (the agent counts the stream against that user's share)."""
        metadata = tuple(self._credentials(target))
        return metadata if for_uid is None else (*metadata, (FOR_UID, str(for_uid)))

    async def output(self, target: str, job_id: int, step_id: int, for_uid: int | None = None
                     ) -> AsyncGenerator[Piece, None]:
        """The agent's output stream of step ``job_id.step_id`` (0: a psrun job's command), as
        :data:`Piece` s; AgentStreamError when it fails. Leaving the iteration cancels the call."""
        call = self._stub(target).StreamOutput(pb.OutputRequest(job_id=job_id, step_id=step_id),
                                               metadata=self._metadata(target, for_uid))
        try:
            while True:
                msg = await call.read()
                if msg is grpc.aio.EOF:
                    return
                yield msg.stdout, msg.stderr, _result(msg) if msg.done else None
        except grpc.aio.AioRpcError as exc:
            raise stream_error(exc, target) from None
        finally:
            call.cancel()

    async def merged_output(self, targets: Sequence[str], job_id: int, step_id: int, for_uid: int | None = None
                            ) -> AsyncGenerator[tuple[Piece, str], None]:
        """A step's output from each of its nodes' agents, merged: whole lines, in the order they
        come (a node's partial line waits for its end), and one last piece with the step's end once
        every node sent its own, their ends combined (the worst state, the largest exit code, a
        signal; every node's tasks). Each piece comes with the target it came from.
        AgentStreamError when one stream fails."""
        if len(targets) == 1:
            async for only in self.output(targets[0], job_id, step_id, for_uid):
                yield only, targets[0]
            return
        queue: asyncio.Queue[tuple[str, Piece | None, AgentStreamError | None]] = asyncio.Queue(maxsize=len(targets))

        async def pump(target: str) -> None:
            try:
                async for piece in self.output(target, job_id, step_id, for_uid):
                    await queue.put((target, piece, None))
            except AgentStreamError as exc:
                await queue.put((target, None, exc))
                return
            await queue.put((target, None, None))

        tasks = [asyncio.ensure_future(pump(t)) for t in targets]
        partial: dict[tuple[str, int], bytes] = {}
        end: StepResult | None = None
        left = set(targets)
        try:
            while left:
                target, piece, error = await queue.get()
                if error is not None:
                    raise error
                if piece is None:
                    left.discard(target)
                    continue
                out: list[bytes] = []
                for which, data in enumerate(piece[:2]):
                    text = partial.pop((target, which), b"") + data
                    cut = len(text) if piece[2] is not None else text.rfind(b"\n") + 1
                    if cut < len(text):
                        partial[(target, which)] = text[cut:]
                    out.append(text[:cut])
                if piece[2] is not None:
                    left.discard(target)
                    end = combine_results(end, piece[2])
                if out[0] or out[1]:
                    yield (out[0], out[1], None), target
            if end is not None:
                yield (b"", b"", end), targets[0]
        finally:
            for task in tasks:
                task.cancel()

    async def send_input(self, target: str, job_id: int, step_id: int, data: AsyncIterator[bytes],
                         for_uid: int | None = None) -> None:
        """Forward ``data`` to the step's stdin (its task 0's); its end is the EOF. AgentStreamError."""

        async def chunks() -> AsyncIterator[pb.InputChunk]:
            yield pb.InputChunk(job_id=job_id, step_id=step_id)  # names the step, also when there is nothing to send
            async for piece in data:
                if piece:
                    yield pb.InputChunk(job_id=job_id, data=piece, step_id=step_id)

        call = self._stub(target).SendInput(chunks(), metadata=self._metadata(target, for_uid))
        try:
            await call
        except grpc.aio.AioRpcError as exc:
            raise stream_error(exc, target) from None
        finally:
            call.cancel()

    async def tail(self, target: str, job_id: int, max_bytes: int, timeout: float) -> pb.TailReply:
        """The agent's TailOutput of batch job ``job_id``: a coroutine, so a slow file holds no thread
        of the API's (grpc.aio.AioRpcError when the agent refuses or does not answer in ``timeout``)."""
        reply: pb.TailReply = await self._stub(target).TailOutput(
            pb.TailRequest(job_id=job_id, max_bytes=max_bytes), metadata=self._metadata(target, None),
            timeout=timeout)
        return reply

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
