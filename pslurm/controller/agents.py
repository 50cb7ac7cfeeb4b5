"""The controller's client for node agents: launch and signal, over cached gRPC channels."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc

from pslurm.auth.transport import Metadata
from pslurm.core.convert import job_to_pb
from pslurm.core.jobspec import JobRecord
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

RPC_TIMEOUT = 10.0


class AgentUnreachable(Exception):
    """The node's agent did not answer."""


class AgentRefused(Exception):
    """The agent answered with an error (it could not start the job)."""


class AgentClient:
    """One channel per agent, reused; launches run on a small pool so the scheduler never waits."""

    def __init__(self, credentials: Callable[[], Metadata], workers: int = 8) -> None:
        self._credentials = credentials  # gRPC metadata with a fresh credential, for each call
        self._stubs: dict[str, pb_grpc.NodeAgentStub] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="launch")

    def _stub(self, target: str) -> pb_grpc.NodeAgentStub:
        with self._lock:
            stub = self._stubs.get(target)
            if stub is None:
                stub = pb_grpc.NodeAgentStub(grpc.insecure_channel(target))
                self._stubs[target] = stub
            return stub

    def launch(self, target: str, job: JobRecord) -> None:
        """Ask the agent to start the job (idempotent on the agent's side)."""
        self._call(lambda stub: stub.LaunchJob(pb.LaunchRequest(job=job_to_pb(job)), timeout=RPC_TIMEOUT,
                                               metadata=self._credentials()), target)

    def launch_async(self, target: str, job: JobRecord,
                     on_error: Callable[[JobRecord, Exception], None]) -> None:
        def run() -> None:
            try:
                self.launch(target, job)
            except (AgentUnreachable, AgentRefused) as exc:
                on_error(job, exc)

        self._pool.submit(run)

    def signal(self, target: str, job_id: int, signal: int) -> None:
        """Signal a job's processes; 0 cancels it (SIGTERM, then SIGKILL after KillWait)."""
        self._call(lambda stub: stub.SignalJob(pb.SignalRequest(job_id=job_id, signal=signal),
                                               timeout=RPC_TIMEOUT, metadata=self._credentials()), target)

    def _call(self, fn: Callable[[pb_grpc.NodeAgentStub], object], target: str) -> None:
        try:
            fn(self._stub(target))
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise AgentUnreachable(f"{target}: {code.name}") from exc
            raise AgentRefused(exc.details() if isinstance(exc, grpc.Call) else str(exc)) from exc

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
