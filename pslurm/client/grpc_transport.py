"""The client's wire: gRPC and protobuf live here and nowhere else in :mod:`pslurm.client`.

:class:`pslurm.client.Client` imports this module on its first request (``import grpc`` is most of
a command's start-up time). It turns domain objects into requests (``pslurm.core.convert``),
replies back into domain objects, and gRPC failures into :class:`~pslurm.client.ClientError`s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc

from pslurm.auth.credential import AuthError
from pslurm.auth.transport import Credentials, Metadata
from pslurm.client.errors import (
    AuthenticationFailed,
    ClientError,
    ControllerUnreachable,
    InvalidRequest,
    NodeUnreachable,
    NotFound,
    PermissionDenied,
)
from pslurm.client.models import ClusterStatus, JobPriority, OutputChunk, PriorityWeights
from pslurm.core import convert
from pslurm.core.config import ClusterConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import NodeStatus
from pslurm.core.states import JobState
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 512 * 1024 * 1024)]  # a long queue in one reply
INPUT_CLOSE_TIMEOUT = 5.0

# What a status code means to the caller; UNAVAILABLE and DEADLINE_EXCEEDED: the server is unreachable.
_ERRORS: dict[grpc.StatusCode, type[ClientError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequest,
    grpc.StatusCode.FAILED_PRECONDITION: InvalidRequest,  # not in the job's present state
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationFailed,
}
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def rpc_error(exc: grpc.RpcError, target: str, unreachable: Callable[[str], ClientError]) -> ClientError:
    """The ClientError for a failed call to ``target``."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    if code in _UNREACHABLE:
        return unreachable(target)
    details = exc.details() if isinstance(exc, grpc.Call) else None
    return _ERRORS.get(code, ClientError)(details or str(exc), remote=True)


class GrpcTransport:
    """The controller's stub (and the node agents', for a job's input and output) with this process's
    credential on every call."""

    def __init__(self, config: ClusterConfig, timeout: float) -> None:
        self.config = config
        self.timeout = timeout
        self._credentials = Credentials.for_cluster(config)
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._node_targets: dict[str, str] = {}  # node name -> its agent's host:port, as the controller said
        self._controller = pb_grpc.ControllerStub(self._channel(config.controller_target))

    def _channel(self, target: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(target)
            if channel is None:
                channel = self._channels[target] = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
            return channel

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()

    def _metadata(self) -> Metadata:
        """A credential for this process, for the next call."""
        try:
            return self._credentials.metadata()
        except AuthError as exc:
            raise AuthenticationFailed(f"cannot authenticate: {exc}") from None

    def _call(self, method: str, request: Any) -> Any:
        """A unary call to the controller."""
        metadata = self._metadata()
        try:
            return getattr(self._controller, method)(request, metadata=metadata, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise rpc_error(exc, self.config.controller_target, ControllerUnreachable) from None

    # -- the controller ----------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> int:
        return int(self._call("SubmitJob", pb.SubmitRequest(spec=convert.spec_to_pb(spec))).job_id)

    def jobs(self, job_ids: list[int], users: list[str], states: list[JobState], include_finished: bool,
             since: float | None, light: bool, collapse_arrays: bool) -> list[JobRecord]:
        query = pb.JobQuery(job_ids=job_ids, users=users, states=[convert.job_state_to_pb(s) for s in states],
                            include_finished=include_finished, light=light, collapse_arrays=collapse_arrays)
        if since is not None:
            query.since = since
        reply = self._call("GetJobs", query)
        specs: dict[bytes, JobSpec] = {}  # an array's tasks share one converted spec
        return [convert.job_from_pb(msg, specs) for msg in reply.jobs]

    def wait(self, job_id: int) -> Iterator[JobRecord]:
        call = None
        try:
            call = self._controller.WaitJob(pb.WaitRequest(job_id=job_id), metadata=self._metadata())
            for msg in call:
                if msg.node and msg.node_target:
                    self._node_targets[msg.node] = msg.node_target
                yield convert.job_from_pb(msg)
        except grpc.RpcError as exc:
            raise rpc_error(exc, self.config.controller_target, ControllerUnreachable) from None
        finally:
            if call is not None:
                call.cancel()  # the caller stopped listening: the controller stops watching the job

    def cancel(self, job_ids: list[int], signal: int, job_specs: list[str]) -> list[str]:
        reply = self._call("CancelJobs", pb.CancelRequest(job_ids=job_ids, signal=signal, job_specs=job_specs))
        return list(reply.errors)

    def update_job(self, job: str, action: str, priority: int | None, nice: int | None) -> list[str]:
        request = pb.UpdateJobRequest(job=job, action=action)
        if priority is not None:
            request.priority = priority
        if nice is not None:
            request.nice = nice
        return list(self._call("UpdateJob", request).errors)

    def priorities(self, job_ids: list[int], users: list[str]) -> tuple[list[JobPriority], PriorityWeights]:
        reply = self._call("GetPriorities", pb.PriorityQuery(job_ids=job_ids, users=users))
        jobs = [JobPriority(job_id=m.job_id, display_id=m.display_id, user=m.user, account=m.account,
                            partition=m.partition, priority=m.priority, age=m.age, fairshare=m.fairshare,
                            jobsize=m.jobsize, partition_factor=m.partition_factor, qos=m.qos, nice=m.nice,
                            admin_set=m.admin_set) for m in reply.jobs]
        w = reply.weights
        return jobs, PriorityWeights(age=w.age, fairshare=w.fairshare, jobsize=w.jobsize, partition=w.partition,
                                     qos=w.qos)

    def cluster(self) -> ClusterStatus:
        reply = self._call("GetCluster", pb.Empty())
        nodes = tuple(convert.node_status_from_pb(n) for n in reply.nodes)
        for node in nodes:
            self._node_targets[node.name] = node.target
        return ClusterStatus(name=reply.cluster_name, partitions=tuple(convert.partition_from_pb(p)
                                                                        for p in reply.partitions), nodes=nodes)

    def update_node(self, name: str, state: str, reason: str) -> NodeStatus:
        reply = self._call("UpdateNode", pb.UpdateNodeRequest(name=name, state=state, reason=reason))
        return convert.node_status_from_pb(reply)

    # -- a job's node agent --------------------------------------------------------------------

    def _agent(self, job: JobRecord) -> tuple[pb_grpc.NodeAgentStub, str]:
        """The stub of the agent that runs ``job``, at the address the controller knows for its node."""
        if not job.node:
            raise InvalidRequest(f"Job {job.display_id} is not running on any node")
        target = self._node_targets.get(job.node)
        if target is None:
            self.cluster()  # learns every node's address
            target = self._node_targets.get(job.node)
        if not target:
            raise NotFound(f"Invalid node name specified: {job.node}")
        return pb_grpc.NodeAgentStub(self._channel(target)), target

    def output(self, job: JobRecord) -> Iterator[OutputChunk]:
        call = None
        stub, target = self._agent(job)
        try:
            call = stub.StreamOutput(pb.OutputRequest(job_id=job.job_id), metadata=self._metadata())
            for msg in call:
                state = None
                if msg.done:
                    try:
                        state = convert.job_state_from_pb(msg.state)
                    except ValueError:
                        pass
                yield OutputChunk(stdout=msg.stdout, stderr=msg.stderr, done=msg.done, state=state,
                                  exit_code=msg.exit_code, exit_signal=msg.exit_signal)
        except grpc.RpcError as exc:
            raise rpc_error(exc, target, NodeUnreachable) from None
        finally:
            if call is not None:
                call.cancel()

    def send_input(self, job: JobRecord, chunks: Iterable[bytes]) -> _InputCall:
        stub, _ = self._agent(job)
        job_id = job.job_id

        def requests() -> Iterator[pb.InputChunk]:
            yield pb.InputChunk(job_id=job_id)  # names the job, also when there is nothing to send
            for data in chunks:
                if data:
                    yield pb.InputChunk(job_id=job_id, data=data)

        return _InputCall(stub.SendInput.future(requests(), metadata=self._metadata()))


class _InputCall:
    """A SendInput call in flight (pslurm.client.models.InputStream)."""

    def __init__(self, future: Any) -> None:
        self._future = future

    def close(self, timeout: float = INPUT_CLOSE_TIMEOUT) -> None:
        try:
            self._future.result(timeout=timeout)
        except (grpc.RpcError, grpc.FutureTimeoutError):
            self._future.cancel()  # the node went away, or the job's stdin was never read: nothing more to say
