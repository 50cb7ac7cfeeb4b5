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
from pslurm.core.convert import job_state_from_pb, job_state_to_pb
from pslurm.core.lifecycle import combine_step_ends
from pslurm.core.states import JobState
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

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

    async def output(self, target: str, job_id: int, step_id: int | None = None
                     ) -> AsyncGenerator[pb.OutputChunk, None]:
        """The agent's output stream for the job (or its step ``step_id``); AgentStreamError when it
        fails. Leaving the iteration cancels the call."""
        call = self._stub(target).StreamOutput(pb.OutputRequest(job_id=job_id, step_id=step_id),
                                               metadata=self._credentials(target))
        try:
            while True:
                msg = await call.read()
                if msg is grpc.aio.EOF:
                    return
                yield msg
        except grpc.aio.AioRpcError as exc:
            raise stream_error(exc, target) from None
        finally:
            call.cancel()

    async def merged_output(self, targets: Sequence[str], job_id: int, step_id: int
                            ) -> AsyncGenerator[tuple[pb.OutputChunk, str], None]:
        """A step's output from each of its nodes' agents, merged: whole lines, in the order they
        come (a node's partial line waits for its end), and one last ``done`` chunk once every node
        sent its own, with their ends combined (the worst state, the largest exit code, a signal).
        Each chunk comes with the target it came from. AgentStreamError when one stream fails."""
        if len(targets) == 1:
            async for only in self.output(targets[0], job_id, step_id):
                yield only, targets[0]
            return
        queue: asyncio.Queue[tuple[str, pb.OutputChunk | None, AgentStreamError | None]] = asyncio.Queue()

        async def pump(target: str) -> None:
            try:
                async for msg in self.output(target, job_id, step_id):
                    await queue.put((target, msg, None))
            except AgentStreamError as exc:
                await queue.put((target, None, exc))
                return
            await queue.put((target, None, None))

        tasks = [asyncio.ensure_future(pump(t)) for t in targets]
        partial: dict[tuple[str, int], bytes] = {}
        end: tuple[JobState, int, int] | None = None
        left = set(targets)
        try:
            while left:
                target, msg, error = await queue.get()
                if error is not None:
                    raise error
                if msg is None:
                    left.discard(target)
                    continue
                out = pb.OutputChunk()
                for which, data in ((0, msg.stdout), (1, msg.stderr)):
                    text = partial.pop((target, which), b"") + data
                    cut = len(text) if msg.done else text.rfind(b"\n") + 1
                    if cut < len(text):
                        partial[(target, which)] = text[cut:]
                    if which == 0:
                        out.stdout = text[:cut]
                    else:
                        out.stderr = text[:cut]
                if msg.done:
                    left.discard(target)
                    try:
                        state = job_state_from_pb(msg.state)
                    except ValueError:
                        state = JobState.COMPLETED
                    end = combine_step_ends(end, (state, msg.exit_code, msg.exit_signal))
                if out.stdout or out.stderr:
                    yield out, target
            if end is not None:
                yield pb.OutputChunk(done=True, state=job_state_to_pb(end[0]), exit_code=end[1],
                                     exit_signal=end[2]), targets[0]
        finally:
            for task in tasks:
                task.cancel()

    async def send_input(self, target: str, job_id: int, data: AsyncIterator[bytes],
                         step_id: int | None = None) -> None:
        """Forward ``data`` to the job's stdin (or its step's: task 0's); its end is the EOF.
        AgentStreamError."""

        async def chunks() -> AsyncIterator[pb.InputChunk]:
            yield pb.InputChunk(job_id=job_id, step_id=step_id)  # names the job, also when there is nothing to send
            async for piece in data:
                if piece:
                    yield pb.InputChunk(job_id=job_id, data=piece, step_id=step_id)

        call = self._stub(target).SendInput(chunks(), metadata=self._credentials(target))
        try:
            await call
        except grpc.aio.AioRpcError as exc:
            raise stream_error(exc, target) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
