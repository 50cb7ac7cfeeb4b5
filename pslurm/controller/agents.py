"""The controller's client for node agents: launch and signal jobs and steps, over cached gRPC channels.

Launches are grouped per agent as the store groups commits: :meth:`AgentClient.launch_async` queues
the job for its agent, and one sender per agent at a time takes everything queued for it and sends
it in one ``LaunchJobs`` call. A scheduler pass queues its starts in a tight loop, so a pass's
launches on one node go in one call, and launches queued while a call is on its way go in the next.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from pslurm.auth.transport import Metadata
from pslurm.core.jobspec import JobRecord
from pslurm.core.steplaunch import StepLaunch
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc
from pslurm.proto.convert import job_to_pb, step_launch_to_pb

log = logging.getLogger("psctld")
RPC_TIMEOUT = 10.0
LAUNCH_TIMEOUT_PER_JOB = 0.2  # more time for a larger batch: the agent starts its jobs one after another


class AgentUnreachable(Exception):
    """The node's agent did not answer."""


class AgentRefused(Exception):
    """The agent answered with an error (it could not start the job)."""


class _Unimplemented(AgentRefused):
    """The agent does not know the call (an older agent)."""


OnError = Callable[[JobRecord, Exception], None]


class AgentClient:
    """One channel per agent, reused; launches run on a small pool so the scheduler never waits."""

    def __init__(self, credentials: Callable[[str], Metadata], workers: int = 8) -> None:
        self._credentials = credentials  # gRPC metadata with a fresh credential for that agent, for each call
        self._stubs: dict[str, pb_grpc.NodeAgentStub] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launch")
        # per agent: the launches queued for its next call; a target is a key while its sender runs
        self._queued: dict[str, list[tuple[JobRecord, OnError, int]]] = {}

    def _stub(self, target: str) -> pb_grpc.NodeAgentStub:
        with self._lock:
            stub = self._stubs.get(target)
            if stub is None:
                stub = pb_grpc.NodeAgentStub(grpc.insecure_channel(target))
                self._stubs[target] = stub
            return stub

    def launch(self, target: str, job: JobRecord, node_index: int = 0) -> None:
        """Ask the agent to start the job (idempotent on the agent's side)."""
        self._call(lambda stub: stub.LaunchJob(pb.LaunchRequest(job=launch_pb(job, node_index)), timeout=RPC_TIMEOUT,
                                               metadata=self._credentials(target)), target)

    def launch_jobs(self, target: str, jobs: Sequence[JobRecord], node_indices: Sequence[int] = ()) -> dict[int, str]:
        """Ask the agent to start these jobs, in one call; returns the launches it refused (job id ->
        why). Raises AgentUnreachable, or AgentRefused when it refused the call as a whole. An agent
        without LaunchJobs (older) is sent one LaunchJob per job."""
        indices = list(node_indices) or [0] * len(jobs)
        request = pb.LaunchJobsRequest(launches=[pb.LaunchRequest(job=launch_pb(job, i))
                                                 for job, i in zip(jobs, indices, strict=True)])
        reply: list[pb.LaunchJobsReply] = []
        try:
            self._call(lambda stub: reply.append(stub.LaunchJobs(
                request, timeout=RPC_TIMEOUT + LAUNCH_TIMEOUT_PER_JOB * len(jobs), metadata=self._credentials(target))),
                target)
        except _Unimplemented:
            refused = {}
            for job, i in zip(jobs, indices, strict=True):
                try:
                    self.launch(target, job, i)
                except AgentRefused as exc:
                    refused[job.job_id] = str(exc)
            return refused
        return {r.job_id: r.error for r in reply[0].refused}

    def launch_async(self, target: str, job: JobRecord, on_error: OnError, node_index: int = 0) -> None:
        """Queue the job's launch for its agent's next LaunchJobs call; ``on_error(job, exc)`` when the
        agent cannot be reached (AgentUnreachable) or refuses it (AgentRefused). ``node_index``: the
        node's position in a multi-node job's allocation (``job.gpu_indices``: that node's own)."""
        with self._lock:
            queued = self._queued.get(target)
            self._queued.setdefault(target, []).append((job, on_error, node_index))
        if queued is None:  # no sender for this agent: start one
            self._pool.submit(self._send, target)

    def _send(self, target: str) -> None:
        """Send what is queued for ``target``, call after call, until nothing is left."""
        while True:
            with self._lock:
                batch = self._queued.get(target) or []
                if not batch:
                    self._queued.pop(target, None)
                    return
                self._queued[target] = []
            failed: dict[int, Exception]
            try:
                jobs, indices = [j for j, _, _ in batch], [i for _, _, i in batch]
                refused = self.launch_jobs(target, jobs, indices) if any(indices) else self.launch_jobs(target, jobs)
                failed = {i: AgentRefused(why) for i, why in refused.items()}
            except (AgentUnreachable, AgentRefused) as exc:
                failed = {job.job_id: exc for job, _, _ in batch}
            except Exception as exc:  # a sender that died would leave its agent's launches queued for ever
                log.exception("launches to %s failed", target)
                failed = {job.job_id: AgentRefused(f"{type(exc).__name__}: {exc}") for job, _, _ in batch}
            for job, on_error, _ in batch:
                if job.job_id in failed:
                    _report(on_error, job, failed[job.job_id])

    def signal(self, target: str, job_id: int, signal: int) -> None:
        """Signal a job's processes; 0 cancels it (SIGTERM, then SIGKILL after KillWait)."""
        self._call(lambda stub: stub.SignalJob(pb.SignalRequest(job_id=job_id, signal=signal),
                                               timeout=RPC_TIMEOUT, metadata=self._credentials(target)), target)

    def set_time_limit(self, target: str, job_id: int, restarts: int, time_limit: int | None) -> None:
        """A running job's new time limit (seconds from its start; None: none), which its agent enforces."""
        request = pb.TimeLimitRequest(job_id=job_id, restarts=restarts, time_limit=time_limit)
        self._call(lambda stub: stub.SetTimeLimit(request, timeout=RPC_TIMEOUT, metadata=self._credentials(target)),
                   target)

    def suspend(self, target: str, job_id: int, restarts: int, resume: bool) -> None:
        """Stop (``resume`` False) or continue the processes of a job's run on the agent's node."""
        request = pb.SuspendRequest(job_id=job_id, restarts=restarts, resume=resume)
        self._call(lambda stub: stub.SuspendJob(request, timeout=RPC_TIMEOUT, metadata=self._credentials(target)),
                   target)

    def launch_step(self, target: str, launch: StepLaunch) -> None:
        """Start a step's tasks on the agent's node (inside its job's run there). AgentUnreachable;
        AgentRefused when the agent does not run that job's run (FAILED_PRECONDITION) or cannot start it."""
        request = step_launch_to_pb(launch)
        self._call(lambda stub: stub.LaunchStep(request, timeout=RPC_TIMEOUT, metadata=self._credentials(target)),
                   target)

    def signal_step(self, target: str, job_id: int, step_id: int, signal: int) -> None:
        """Signal a step's tasks on the agent's node; 0 cancels it (SIGTERM, then SIGKILL after KillWait)."""
        request = pb.StepSignal(job_id=job_id, step_id=step_id, signal=signal)
        self._call(lambda stub: stub.SignalStep(request, timeout=RPC_TIMEOUT, metadata=self._credentials(target)),
                   target)

    def _call(self, fn: Callable[[pb_grpc.NodeAgentStub], object], target: str) -> None:
        try:
            fn(self._stub(target))
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise AgentUnreachable(f"{target}: {code.name}") from exc
            if code is grpc.StatusCode.UNIMPLEMENTED:
                raise _Unimplemented(target) from exc
            raise AgentRefused(exc.details() if isinstance(exc, grpc.Call) else str(exc)) from exc

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def launch_pb(job: JobRecord, node_index: int = 0) -> pb.Job:
    """The Job message of a launch: the job, with the receiving node's position in its allocation."""
    msg = job_to_pb(job)
    if node_index:
        msg.node_index = node_index
    return msg


def _report(on_error: OnError, job: JobRecord, error: Exception) -> None:
    """Tell the scheduler of a failed launch; its own failure must not stop the agent's sender."""
    try:
        on_error(job, error)
    except Exception:
        log.exception("job %d: its launch failure could not be handled", job.job_id)
