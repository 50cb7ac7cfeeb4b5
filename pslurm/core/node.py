"""A node as the controller knows it."""

from __future__ import annotations

from dataclasses import dataclass, field

from pslurm.core.gres import GresRequest
from pslurm.core.states import NodeState


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as the node's agent reported it."""

    index: int
    name: str = "gpu"
    type: str | None = None
    file: str | None = None
    minor: int | None = None
    uuid: str | None = None
    memory_mb: int | None = None
    cores: tuple[int, ...] = ()
    shards: int = 0  # gres.conf Name=shard: this GPU's share of the node's shards (0: not shared by shards)
    mps: int = 0  # gres.conf Name=mps: this GPU's MPS count (0: no MPS)


@dataclass(frozen=True)
class GpuUsage:
    """One GPU of a node as psinfo and pscontrol show it: how it is held now, and what was measured."""

    index: int
    mode: str = ""  # "": free; "gpu": held whole; "shard", "mps", "gpumem": shared that way
    allocated: int = 0  # shards, MPS units or MB held in that mode (whole: 1)
    capacity: int = 0  # the GPU's shards, MPS units or MB in that mode (0: unknown)
    jobs: int = 0
    memory_mb: int = 0  # the GPU's memory (0: unknown)
    memory_alloc_mb: int = 0  # memory promised to its jobs: their slices, or all of it when held whole
    memory_used_mb: int | None = None  # measured at the last heartbeat (None: not measured)
    util: float | None = None  # percent, measured


@dataclass
class NodeRecord:
    """A configured node with the state the store keeps for it."""

    name: str
    addr: str
    port: int
    cpus: int
    real_memory: int
    gres: tuple[GresRequest, ...] = ()
    state: NodeState = NodeState.UNKNOWN
    drain: bool = False
    reason: str = ""
    last_heartbeat: float = 0.0
    gpus: tuple[GpuInfo, ...] = field(default_factory=tuple)
    isolation: str = ""
    reason_uid: int | None = None  # who set the reason (slurmctld's reason_uid; 0 when the system did)
    reason_time: float | None = None  # when

    @property
    def target(self) -> str:
        """host:port of the node's agent."""
        return f"{self.addr}:{self.port}"

    @property
    def available(self) -> bool:
        """The scheduler may place new work here."""
        return self.state is NodeState.UP and not self.drain


@dataclass(frozen=True)
class NodeStatus:
    """A node as the controller reports it to clients (``psinfo``, ``pscontrol show node``): its
    configuration, its state, what is allocated on it now, and the word sinfo shows for it."""

    name: str
    addr: str = ""
    port: int = 0
    cpus: int = 0
    real_memory: int = 0  # MB
    gres: tuple[GresRequest, ...] = ()  # configured
    state: NodeState = NodeState.UNKNOWN
    drain: bool = False
    reason: str = ""
    partitions: tuple[str, ...] = ()
    alloc_cpus: int = 0
    alloc_mem: int = 0  # MB
    alloc_gpus: tuple[int, ...] = ()  # the node's own GPU indices in use
    display_state: str = "unk"  # idle, mix, alloc, drain, drng, down, unk (core.states.node_display_state)
    running_jobs: int = 0
    last_heartbeat: float = 0.0
    gpus: tuple[GpuInfo, ...] = ()  # what the agent reported
    isolation: str = ""  # "devices", or why there is none
    gpu_usage: tuple[GpuUsage, ...] = ()  # per GPU: how it is held and what its memory is used for
    features: tuple[str, ...] = ()  # Features= (AvailableFeatures, and ActiveFeatures: pslurm changes none)
    reason_user: str = ""  # the name of who set the reason ("" none: sinfo's Unknown)
    reason_time: float | None = None  # when the reason was set

    @property
    def target(self) -> str:
        """host:port of the node's agent."""
        return f"{self.addr}:{self.port}"
