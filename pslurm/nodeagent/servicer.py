"""psd's gRPC face: launches and signals from the controller, psrun's output and input streams.

Launches and signals come only from the controller (root or the user the daemons run as: a root
agent runs a job as whatever user it names); a job's streams go to its owner, within the bounds
of :class:`_UserStreams`, so that the controller's calls always find a thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

import grpc

from pslurm.auth.transport import Authenticator
from pslurm.core.jobspec import JobSpec
from pslurm.core.steps import INTERACTIVE_STEP, step_name
from pslurm.nodeagent import stepstats
from pslurm.nodeagent.agent import Agent, StepRefused
from pslurm.nodeagent.stepd import StepSupervisor
from pslurm.nodeagent.streams import (
    FIRST_INPUT_WAIT,
    INPUT_LINGER,
    LAUNCH_GRACE,
    LAUNCH_WAITS,
    LAUNCH_WAITS_PER_USER,
    JobNotHere,
)
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

STREAM_SLOTS = 48  # psrun streams that may hold one of the server's threads at once (the server has more)
STREAMS_PER_USER = 16  # ... of one user
STREAMS_PER_STEP = 2  # of each kind (output, input) per step: psrun's, and a reconnect's
FOR_UID = "x-pslurm-for-uid"  # the user the controller relays a stream for


class _UserStreams:
    """What psrun's streams may hold of the agent's RPC threads, so that the controller's launches
    and signals always find one, and one user's streams never crowd out another's: ``slots`` streams
    at once in all, STREAMS_PER_USER of one user, STREAMS_PER_STEP of each kind per step (more are
    refused at once, RESOURCE_EXHAUSTED); LAUNCH_WAITS waits for a job not launched yet,
    LAUNCH_WAITS_PER_USER of them per user (further ones do not wait: a flood of streams for jobs
    that never come leaves the slots to the streams of jobs that run); and an end to input streams
    that would block a thread for ever in their next chunk (one that never names its step, or whose
    step has ended and whose client keeps it open): a watcher cancels them.

    A stream's user is the one the controller relays it for (its ``x-pslurm-for-uid`` metadata,
    taken from an operator's call only), else its caller."""

    def __init__(self, slots: int | threading.BoundedSemaphore) -> None:
        # a number, or the semaphore of a process whose nodes share their threads (pslurm.nodeagent.virtual)
        self._slots = threading.BoundedSemaphore(slots) if isinstance(slots, int) else slots
        self._lock = threading.Lock()
        self._per_step: dict[tuple[int, int, str], int] = {}
        self._per_user: dict[int, int] = {}
        self._waits: dict[int, int] = {}  # uid -> its streams waiting for a launch
        self._deadlines: dict[int, tuple[grpc.ServicerContext, Callable[[], bool]]] = {}  # by id(context)
        self._watcher: threading.Thread | None = None

    @contextlib.contextmanager
    def slot(self, uid: int | None, context: grpc.ServicerContext) -> Iterator[None]:
        """A thread for one stream of ``uid`` (None: an operator's own, bounded in all only); aborts
        the call when none is left."""
        if not self._slots.acquire(blocking=False):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "too many output and input streams on this node at once: try again shortly")
        try:
            if uid is not None:
                with self._lock:
                    taken = self._per_user.get(uid, 0) < STREAMS_PER_USER
                    if taken:
                        self._per_user[uid] = self._per_user.get(uid, 0) + 1
                if not taken:
                    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  f"user {uid} has {STREAMS_PER_USER} streams open on this node already")
            try:
                yield
            finally:
                if uid is not None:
                    with self._lock:
                        left = self._per_user.pop(uid, 1) - 1
                        if left:
                            self._per_user[uid] = left
        finally:
            self._slots.release()

    @contextlib.contextmanager
    def step(self, job_id: int, step_id: int, kind: str, context: grpc.ServicerContext) -> Iterator[None]:
        """One of the step's streams of ``kind``; aborts the call when it has its share."""
        key = (job_id, step_id, kind)
        with self._lock:
            count = self._per_step.get(key, 0)
            if count < STREAMS_PER_STEP:
                self._per_step[key] = count + 1
        if count >= STREAMS_PER_STEP:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"step {job_id}.{step_name(step_id)} has {STREAMS_PER_STEP} {kind} streams open already")
        try:
            yield
        finally:
            with self._lock:
                left = self._per_step.pop(key, 1) - 1
                if left:
                    self._per_step[key] = left

    def take_wait(self, uid: int) -> Callable[[], None] | None:
        """One of ``uid``'s waits for a launch: the function that gives it back (idempotent), or
        None when the user has LAUNCH_WAITS_PER_USER already, or all users LAUNCH_WAITS."""
        with self._lock:
            if self._waits.get(uid, 0) >= LAUNCH_WAITS_PER_USER or sum(self._waits.values()) >= LAUNCH_WAITS:
                return None
            self._waits[uid] = self._waits.get(uid, 0) + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if given_back:
                return
            given_back = True
            with self._lock:
                left = self._waits.pop(uid, 1) - 1
                if left:
                    self._waits[uid] = left

        return give_back

    def cancel_when(self, context: grpc.ServicerContext, expired: Callable[[], bool]) -> None:
        """Cancel the call once ``expired()`` (checked every half second) until :meth:`forget`."""
        with self._lock:
            self._deadlines[id(context)] = (context, expired)
            if self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="stream-deadlines", daemon=True)
                self._watcher.start()

    def forget(self, context: grpc.ServicerContext) -> None:
        with self._lock:
            self._deadlines.pop(id(context), None)

    def _watch(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                due = [(key, ctx) for key, (ctx, expired) in self._deadlines.items() if expired()]
                for key, _ in due:
                    del self._deadlines[key]
            for _, ctx in due:
                ctx.cancel()  # the handler's wait for the next chunk ends (grpc.RpcError)


class AgentServicer(pb_grpc.NodeAgentServicer):
    """Launches and signals come only from the controller (root or the user the daemons run as:
    a root agent runs a job as whatever user it names); a job's output goes to its owner.

    ``stream_slots``: how many psrun streams may hold one of the server's threads at once; the
    server's other threads stay free for the controller."""

    def __init__(self, agent: Agent, auth: Authenticator,
                 stream_slots: int | threading.BoundedSemaphore = STREAM_SLOTS) -> None:
        self.agent = agent
        self.auth = auth
        self.operators = frozenset({0, os.getuid()})
        self.streams = _UserStreams(stream_slots)

    def _caller_uid(self, context: grpc.ServicerContext) -> int:
        from pslurm.auth.credential import AuthError

        try:
            return self.auth.identity(context).uid
        except AuthError as exc:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, f"authentication failed: {exc}")
        raise AssertionError("unreachable")

    def _from_controller(self, context: grpc.ServicerContext) -> None:
        if self._caller_uid(context) not in self.operators:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          "Access/permission denied: launches and signals come only from the controller")

    def LaunchJob(self, request: pb.LaunchRequest, context: grpc.ServicerContext) -> pb.Empty:
        self._from_controller(context)
        self.agent.launch(convert.job_from_pb(request.job), request.job.node_index)
        return pb.Empty()

    def LaunchJobs(self, request: pb.LaunchJobsRequest, context: grpc.ServicerContext) -> pb.LaunchJobsReply:
        """A scheduler pass's launches on this node, each as :meth:`LaunchJob`: a run that cannot
        start ends FAILED and is reported with its end; a launch that cannot even be read is
        refused alone, in the reply, so the others still start."""
        self._from_controller(context)
        refused = []
        for launch in request.launches:
            try:
                job = convert.job_from_pb(launch.job)
            except Exception as exc:  # as LaunchJob's error would be, for this job alone
                refused.append(pb.LaunchRefusal(job_id=launch.job.job_id, error=f"{type(exc).__name__}: {exc}"))
                continue
            self.agent.launch(job, launch.job.node_index)
        return pb.LaunchJobsReply(refused=refused)

    def SignalJob(self, request: pb.SignalRequest, context: grpc.ServicerContext) -> pb.Empty:
        self._from_controller(context)
        self.agent.signal(request.job_id, request.signal)
        return pb.Empty()

    def SetTimeLimit(self, request: pb.TimeLimitRequest, context: grpc.ServicerContext) -> pb.Empty:
        self._from_controller(context)
        self.agent.set_time_limit(request.job_id, request.restarts,
                                  request.time_limit if request.HasField("time_limit") else None)
        return pb.Empty()

    def SuspendJob(self, request: pb.SuspendRequest, context: grpc.ServicerContext) -> pb.Empty:
        self._from_controller(context)
        self.agent.suspend(request.job_id, request.restarts, request.resume)
        return pb.Empty()

    def LaunchStep(self, request: pb.StepLaunch, context: grpc.ServicerContext) -> pb.Empty:
        """A step's tasks on this node: FAILED_PRECONDITION when the agent does not run its job's run."""
        self._from_controller(context)
        try:
            self.agent.launch_step(convert.step_launch_from_pb(request))
        except StepRefused as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return pb.Empty()

    def SignalStep(self, request: pb.StepSignal, context: grpc.ServicerContext) -> pb.Empty:
        self._from_controller(context)
        self.agent.signal_step(request.job_id, request.step_id, request.signal)
        return pb.Empty()

    def JobStats(self, request: pb.JobStatsRequest, context: grpc.ServicerContext) -> pb.JobStatsReply:
        """sstat: the controller asks what the job's tasks use now (nodeagent/stepstats.py)."""
        self._from_controller(context)
        try:
            stats = stepstats.job_stats(self.agent, request.job_id)
        except LookupError as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
            raise  # abort raised already
        return _stats_pb(stats)

    def _stream_user(self, context: grpc.ServicerContext) -> tuple[int, int | None]:
        """Whose stream this is: (the uid whose rights it has, the uid whose share of the slots it
        takes: None for an operator's call). The controller relays psrun's streams under its own
        credential, naming the user in ``x-pslurm-for-uid`` (only an operator may name one); it
        bounds each user's relayed streams itself, so only a user's own calls count here."""
        caller = self._caller_uid(context)
        if caller not in self.operators:
            return caller, caller
        named = dict(context.invocation_metadata()).get(FOR_UID)
        return (int(named) if isinstance(named, str) and named.isdigit() else caller), None

    def _allowed(self, uid: int) -> Callable[[JobSpec], bool]:
        return lambda spec: uid in self.operators or uid == spec.uid

    def TailOutput(self, request: pb.TailRequest, context: grpc.ServicerContext) -> pb.TailReply:
        """The dashboard (through the controller, which checked that the caller may see it)."""
        from pslurm.nodeagent.tail import NothingToTail, tail_output

        self._from_controller(context)
        try:
            data, path, truncated = tail_output(self.agent, request.job_id, request.max_bytes)
        except NothingToTail as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        return pb.TailReply(data=data, path=path, truncated=truncated)

    def _launch_wait(self, uid: int, job_id: int) -> tuple[float, Callable[[], None]]:
        """How long a stream of ``uid`` may wait for the launch of ``job_id``, and what to call once
        it waits no more. A user's stream for a job not launched here takes one of the waits
        (LAUNCH_WAITS, LAUNCH_WAITS_PER_USER); without one left, it is NOT_FOUND at once: a flood of
        streams for jobs that never come holds a few threads for LAUNCH_GRACE, no more."""
        if uid in self.operators or job_id in self.agent.jobs:
            return LAUNCH_GRACE, lambda: None
        give_back = self.streams.take_wait(uid)
        return (LAUNCH_GRACE, give_back) if give_back is not None else (0.0, lambda: None)

    def StreamOutput(self, request: pb.OutputRequest,
                     context: grpc.ServicerContext) -> Iterator[pb.OutputChunk]:
        """psrun's output of a step (unset: step 0, a psrun job's command), in chunks of at most
        stepd.CHUNK_MAX bytes, then its end: NOT_FOUND at once for a step this agent does not run
        (after LAUNCH_GRACE for a job it has not heard of yet), PERMISSION_DENIED for another user's
        job, before any wait."""
        uid, counted = self._stream_user(context)
        job_id = request.job_id
        step_id = request.step_id if request.HasField("step_id") else INTERACTIVE_STEP
        try:
            with self.streams.slot(counted, context), self.streams.step(job_id, step_id, "output", context):
                grace, waited = self._launch_wait(uid, job_id)
                try:
                    streams = self.agent.streams
                    for out, err, end in streams.output(job_id, step_id, self._allowed(uid), context.is_active,
                                                        grace, lambda step: waited()):
                        if end is None:
                            yield pb.OutputChunk(stdout=out, stderr=err)
                        else:
                            yield pb.OutputChunk(done=True, state=convert.job_state_to_pb(end.state),
                                                 exit_code=end.exit_code, exit_signal=end.exit_signal,
                                                 tasks=convert.task_ends_to_pb(end.tasks))
                finally:
                    waited()
        except PermissionError as exc:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        except JobNotHere as exc:
            context.abort(grpc.StatusCode.NOT_FOUND, str(exc))

    def SendInput(self, request_iterator: Iterator[pb.InputChunk], context: grpc.ServicerContext) -> pb.Empty:
        """psrun's stdin for a step's task 0: the first chunk names the step; the end of the stream is
        its EOF. The stream is cancelled when its first chunk does not come within FIRST_INPUT_WAIT,
        and INPUT_LINGER after its step ended."""
        uid, counted = self._stream_user(context)
        with self.streams.slot(counted, context):
            begun = time.monotonic()
            self.streams.cancel_when(context, lambda: time.monotonic() - begun > FIRST_INPUT_WAIT)
            try:
                first = next(request_iterator, None)
            except grpc.RpcError:  # cancelled: no first chunk in time, or the client went
                return pb.Empty()
            finally:
                self.streams.forget(context)
            if first is not None:
                self._input(first, request_iterator, uid, context)
        return pb.Empty()

    def _input(self, first: pb.InputChunk, rest: Iterator[pb.InputChunk], uid: int,
               context: grpc.ServicerContext) -> None:
        def chunks() -> Iterator[bytes]:
            yield first.data
            try:
                for chunk in rest:
                    yield chunk.data
            except grpc.RpcError:
                return  # cancelled: the step ended (INPUT_LINGER ago), or the client went

        def opened(step: StepSupervisor) -> None:
            def over() -> bool:
                return step.end is not None and time.time() - step.end.end_time > INPUT_LINGER

            waited()
            self.streams.cancel_when(context, over)

        job_id = first.job_id
        step_id = first.step_id if first.HasField("step_id") else INTERACTIVE_STEP
        with self.streams.step(job_id, step_id, "input", context):
            grace, waited = self._launch_wait(uid, job_id)
            try:
                self.agent.streams.input(job_id, step_id, chunks(), self._allowed(uid), opened, grace)
            except PermissionError as exc:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
            except JobNotHere as exc:
                context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
            finally:
                waited()
                self.streams.forget(context)


def _stats_pb(stats: stepstats.JobStats) -> pb.JobStatsReply:
    reply = pb.JobStatsReply(node=stats.node, tasks=[pb.TaskStats(
        step=t.step, rank=t.rank, pid=t.pid, cpu_seconds=t.cpu_seconds, rss_kb=t.rss_kb, vmsize_kb=t.vmsize_kb,
        pages=t.pages, read_bytes=t.read_bytes, write_bytes=t.write_bytes, pids=t.pids) for t in stats.tasks],
        gpus=[pb.GpuUse(index=g.index, memory_used_mb=g.memory_used_mb, util=g.util) for g in stats.gpus])
    if stats.memory_kb is not None:
        reply.memory_kb = stats.memory_kb
    if stats.cpu_seconds is not None:
        reply.cpu_seconds = stats.cpu_seconds
    return reply
