"""The agent's port to the controller: what the node says (registration, heartbeats, job and step
ends) and what the controller answers, in plain types.

The agent's behaviour calls a :class:`ControllerLink`; the one adapter that speaks the wire is
``controllers.GrpcLink`` (gRPC and protobuf, over every SlurmctldHost= line). The other direction,
the controller's calls to the node, is ``servicer.py``. Every call here may be sent again: the
controller reconciles what it hears (docs/architecture.md, Reconciliation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pslurm.core.states import JobState
from pslurm.nodeagent.gpumon import JobGpuUsage
from pslurm.nodeagent.gpus import GpuDevice

RunKey = tuple[int, int]  # (job_id, restarts): one run of a job; a requeued job runs again with restarts + 1
StepKey = tuple[int, int]  # (job_id, step_id)


class LinkDown(Exception):
    """The controller did not take the call (none reachable, or it refused): try again later."""


@dataclass(frozen=True)
class NodeReport:
    """A registration: the node as its agent found it, and the runs it holds."""

    name: str
    addr: str
    port: int
    cpus: int
    real_memory: int
    gpus: Sequence[GpuDevice]
    runs: Sequence[RunKey]
    drain_reason: str = ""
    isolation: str = ""  # how jobs' devices are isolated (pscontrol's DeviceIsolation)


@dataclass(frozen=True)
class GpuUse:
    """What one GPU has in use now."""

    index: int
    memory_used_mb: int
    util: float


@dataclass(frozen=True)
class Beat:
    """A heartbeat: the node's health, GPU use, and the runs and steps it holds."""

    name: str
    runs: Sequence[RunKey]
    steps: Sequence[StepKey]
    sent_at: float  # the agent's clock when it listed its runs
    health_reason: str = ""  # a drain reason ("" when healthy)
    gpu_use: Sequence[GpuUse] = ()


@dataclass(frozen=True)
class Orders:
    """The controller's answer to a registration or heartbeat."""

    kill: Sequence[RunKey] = ()  # runs it does not hold on this node: end them
    reregister: bool = False  # it does not know this node (restarted, or it lost it): register again
    heartbeat_interval: float | None = None  # registration's answer: how often to beat


@dataclass(frozen=True)
class RunEnded:
    """A run's end as the controller records it."""

    job_id: int
    restarts: int
    node: str
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float
    gpu_usage: JobGpuUsage | None = None  # jobs with GPUs
    max_rss_bytes: int | None = None  # jobs with a memory cgroup
    cpu_times: tuple[float, float, float] | None = None  # jobs with a cgroup: its CPU time (all, user, system)
    launch_failure: str = ""  # why it never started ("" when it did)
    comment: str = ""  # why the agent ended it (its SystemComment)


@dataclass(frozen=True)
class StepEnded:
    """A step's end on this node."""

    job_id: int
    step_id: int
    node: str
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float


class ControllerLink(Protocol):
    """The node's calls to the controller. Each raises :class:`LinkDown` when the controller did
    not take it; what it carried is then sent again later."""

    def register(self, report: NodeReport) -> Orders:
        """Register the node; the answer carries the heartbeat interval and runs to kill."""
        ...

    def heartbeat(self, beat: Beat) -> Orders:
        """One heartbeat."""
        ...

    def jobs_ended(self, ends: Sequence[RunEnded]) -> None:
        """Runs' ends, recorded by the controller in one transaction."""
        ...

    def steps_ended(self, ends: Sequence[StepEnded]) -> None:
        """Steps' ends (a controller without steps drops them: nothing to record)."""
        ...
