"""The agent's gRPC link to the controller (``controllers.GrpcLink``), over a real socket to a real
gRPC server: the port's plain types reach the controller's wire and back, a controller without
JobsEnded gets one JobEnded per end, one without StepsEnded has the step ends dropped, and one that
is not there makes every call raise LinkDown."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any, TypeVar

import grpc
import pytest

from pslurm.cluster.local import free_ports
from pslurm.core.states import JobState
from pslurm.nodeagent.controllers import GrpcLink
from pslurm.nodeagent.gpumon import JobGpuUsage
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.link import Beat, GpuUse, LinkDown, NodeReport, RunEnded, StepEnded
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc


class OldController(pb_grpc.ControllerServicer):
    """A controller from before JobsEnded and StepsEnded: those two answer UNIMPLEMENTED (the
    generated base class's answer), the rest record what came."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.metadata: list[dict[str, str]] = []

    def _keep(self, request: Any, context: grpc.ServicerContext) -> None:
        self.requests.append(request)
        self.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})

    def RegisterNode(self, request: pb.RegisterRequest, context: grpc.ServicerContext) -> pb.RegisterReply:  # noqa: N802
        self._keep(request, context)
        return pb.RegisterReply(heartbeat_interval=0.5, kill=[pb.JobRun(job_id=7, restarts=1)])

    def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.ServicerContext) -> pb.HeartbeatReply:  # noqa: N802
        self._keep(request, context)
        return pb.HeartbeatReply(reregister=True, kill=[pb.JobRun(job_id=8, restarts=0)])

    def JobEnded(self, request: pb.JobEndedRequest, context: grpc.ServicerContext) -> pb.Empty:  # noqa: N802
        self._keep(request, context)
        return pb.Empty()


class NewController(OldController):
    def JobsEnded(self, request: pb.JobsEndedRequest, context: grpc.ServicerContext) -> pb.Empty:  # noqa: N802
        self._keep(request, context)
        return pb.Empty()

    def StepsEnded(self, request: pb.StepsEndedRequest, context: grpc.ServicerContext) -> pb.Empty:  # noqa: N802
        self._keep(request, context)
        return pb.Empty()


Served = TypeVar("Served", bound=OldController)


def served(servicer: Served) -> Iterator[tuple[Served, GrpcLink]]:
    """``servicer`` behind a real gRPC server on loopback, and a link to it, until the test ends."""
    port = free_ports(1)[0]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_ControllerServicer_to_server(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    stub = pb_grpc.ControllerStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    yield servicer, GrpcLink(stub, credentials=lambda: (("x-test", "fresh"),))
    server.stop(None)


@pytest.fixture
def old() -> Iterator[tuple[OldController, GrpcLink]]:
    yield from served(OldController())


@pytest.fixture
def new() -> Iterator[tuple[NewController, GrpcLink]]:
    yield from served(NewController())


END = RunEnded(5, 1, "c000", JobState.FAILED, 3, 0, 99.5, gpu_usage=JobGpuUsage(1, 4.0, 300, 50.0),
               max_rss_bytes=2048 * 1024, cpu_times=(1.5, 1.0, 0.5), launch_failure="", comment="why")


def test_registration_and_heartbeats_carry_the_node_and_bring_the_orders(new: tuple[NewController, GrpcLink]) -> None:
    controller, link = new
    gpu = GpuDevice(0, "gpu", "a100", "/dev/nvidia0", 0, memory_mb=40000, cores=(0, 1))
    orders = link.register(NodeReport("c000", "127.0.0.1", 6818, 8, 1000, [gpu], [(3, 0)], "bad", "none: x"))
    assert (orders.heartbeat_interval, list(orders.kill)) == (0.5, [(7, 1)])
    sent = controller.requests[-1]
    assert (sent.name, sent.cpus, sent.drain_reason, sent.isolation) == ("c000", 8, "bad", "none: x")
    assert [(r.job_id, r.restarts) for r in sent.runs] == [(3, 0)]
    assert [(g.type, g.minor, g.memory_mb, list(g.cores)) for g in sent.gpus] == [("a100", 0, 40000, [0, 1])]
    assert controller.metadata[-1]["x-test"] == "fresh"  # a credential on every call
    orders = link.heartbeat(Beat("c000", [(3, 0)], [(3, 1)], 12.5, "hot", [GpuUse(0, 100, 7.0)]))
    assert orders.reregister and list(orders.kill) == [(8, 0)]
    beat = controller.requests[-1]
    assert (beat.health_reason, beat.sent_at, [(s.job_id, s.step_id) for s in beat.steps]) == ("hot", 12.5, [(3, 1)])
    assert [(u.index, u.memory_used_mb, u.util) for u in beat.gpu_use] == [(0, 100, 7.0)]


def test_ends_go_in_one_call_with_their_usage(new: tuple[NewController, GrpcLink]) -> None:
    controller, link = new
    link.jobs_ended([END, RunEnded(6, 0, "c000", JobState.COMPLETED, 0, 0, 100.0)])
    sent = controller.requests[-1]
    assert isinstance(sent, pb.JobsEndedRequest) and sent.node == "c000" and len(sent.ends) == 2
    first, second = sent.ends
    assert (first.job_id, first.restarts, convert.job_state_from_pb(first.state), first.exit_code) == (
        5, 1, JobState.FAILED, 3)
    assert (first.usage.gpu_seconds, first.usage.peak_gpu_memory_mb, first.usage.max_rss_kb,
            first.usage.total_cpu_usec, first.usage.user_cpu_usec, first.usage.system_cpu_usec,
            first.comment) == (4.0, 300, 2048, 1_500_000, 1_000_000, 500_000, "why")
    assert not second.HasField("usage")  # nothing measured: no usage at all
    link.steps_ended([StepEnded(5, 0, "c000", JobState.CANCELLED, 0, 9, 101.0)])
    steps = controller.requests[-1]
    assert [(e.job_id, e.step_id, convert.job_state_from_pb(e.state), e.exit_signal) for e in steps.ends] == [
        (5, 0, JobState.CANCELLED, 9)]


def test_an_older_controller_gets_one_call_per_end_and_no_step_ends(old: tuple[OldController, GrpcLink]) -> None:
    controller, link = old
    link.jobs_ended([END, RunEnded(6, 0, "c000", JobState.COMPLETED, 0, 0, 100.0)])
    link.jobs_ended([RunEnded(7, 0, "c000", JobState.COMPLETED, 0, 0, 100.0)])  # JobEnded at once now
    assert [(type(r).__name__, r.job_id) for r in controller.requests] == [
        ("JobEndedRequest", 5), ("JobEndedRequest", 6), ("JobEndedRequest", 7)]
    link.steps_ended([StepEnded(5, 0, "c000", JobState.CANCELLED, 0, 9, 101.0)])  # dropped, not raised
    assert len(controller.requests) == 3


def test_a_controller_that_is_not_there_is_link_down() -> None:
    port = free_ports(1)[0]
    link = GrpcLink(pb_grpc.ControllerStub(grpc.insecure_channel(f"127.0.0.1:{port}")))
    with pytest.raises(LinkDown, match="UNAVAILABLE"):
        link.jobs_ended([END])
    with pytest.raises(LinkDown):
        link.steps_ended([StepEnded(5, 0, "c000", JobState.CANCELLED, 0, 9, 101.0)])
    with pytest.raises(LinkDown):
        link.heartbeat(Beat("c000", [], [], 1.0))
