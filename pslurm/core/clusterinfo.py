"""The API's node and partition JSON read as it is: a slurmrestd ``node`` and ``partition_info``
with the attributes of a :class:`~pslurm.core.node.NodeStatus` and a
:class:`~pslurm.core.config.PartitionConfig`, by the same names.

As :mod:`pslurm.core.jobinfo` for jobs: the one place these shapes are read (:mod:`pslurm.core.restjson`
builds the dataclasses from these views), and what psinfo formats from without importing them.
"""

from __future__ import annotations

from pslurm.core.jobinfo import from_no_val, gres_from
from pslurm.core.states import NodeState

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from typing import Any

    from pslurm.core.node import GpuInfo, GpuUsage

# The NodeStatus and PartitionConfig fields the views read; tests/unit/test_restjson.py checks them.
NODE_FIELDS = (
    "name", "addr", "port", "cpus", "real_memory", "gres", "state", "drain", "reason", "reason_user", "reason_time",
    "partitions", "alloc_cpus",
    "alloc_mem", "alloc_gpus", "display_state", "running_jobs", "last_heartbeat", "gpus", "isolation",
    "gpu_usage", "features",
)
PARTITION_FIELDS = (
    "name", "nodes", "default", "max_time", "default_time", "state", "max_nodes", "priority_job_factor",
    "allow_groups",
)


def _gpu(data: dict[str, Any]) -> GpuInfo:
    from pslurm.core.node import GpuInfo

    return GpuInfo(index=int(data["index"]), name=data.get("name") or "gpu", type=data.get("type"),
                   file=data.get("file"), minor=data.get("minor"), uuid=data.get("uuid"),
                   memory_mb=data.get("memory_mb"), cores=tuple(data.get("cores") or ()),
                   shards=int(data.get("shards") or 0), mps=int(data.get("mps") or 0))


def _gpu_usage(data: dict[str, Any]) -> GpuUsage:
    from pslurm.core.node import GpuUsage

    return GpuUsage(**data)


class NodeInfo:
    """A slurmrestd ``node`` with NodeStatus's attributes (pslurm's own under its ``pslurm`` key)."""

    __slots__ = ("data", "own")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.own: dict[str, Any] = data["pslurm"]

    name = property(lambda self: self.data["name"])
    addr = property(lambda self: self.data.get("address") or "")
    port = property(lambda self: int(self.data.get("port") or 0))
    cpus = property(lambda self: int(self.data.get("cpus") or 0))
    real_memory = property(lambda self: int(self.data.get("real_memory") or 0))
    gres = property(lambda self: gres_from(self.own.get("gres")))
    state = property(lambda self: NodeState(self.own.get("state") or "UNKNOWN"))
    drain = property(lambda self: bool(self.own.get("drain")))
    reason = property(lambda self: self.data.get("reason") or "")
    reason_user = property(lambda self: self.data.get("reason_set_by_user") or "")
    reason_time = property(lambda self: float(self.data.get("reason_changed_at") or 0) or None)
    partitions = property(lambda self: tuple(self.data.get("partitions") or ()))
    features = property(lambda self: tuple(str(f) for f in self.data.get("features") or ()))  # slurmrestd's
    alloc_cpus = property(lambda self: int(self.data.get("alloc_cpus") or 0))
    alloc_mem = property(lambda self: int(self.data.get("alloc_memory") or 0))
    alloc_gpus = property(lambda self: tuple(self.own.get("alloc_gpus") or ()))
    display_state = property(lambda self: self.own.get("display_state") or "unk")
    running_jobs = property(lambda self: int(self.own.get("running_jobs") or 0))
    last_heartbeat = property(lambda self: float(self.own.get("last_heartbeat") or 0.0))
    gpus = property(lambda self: tuple(_gpu(g) for g in self.own.get("gpus") or ()))
    isolation = property(lambda self: self.own.get("isolation") or "")
    gpu_usage = property(lambda self: tuple(_gpu_usage(u) for u in self.own.get("gpu_usage") or ()))
    target = property(lambda self: f"{self.addr}:{self.port}")  # host:port of its agent, as NodeStatus's


class PartitionInfo:
    """A slurmrestd ``partition_info`` with PartitionConfig's attributes."""

    __slots__ = ("data", "own")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.own: dict[str, Any] = data["pslurm"]

    name = property(lambda self: self.data["name"])
    nodes = property(lambda self: tuple(self.own.get("nodes") or ()))
    default = property(lambda self: bool(self.own.get("default")))
    max_time = property(lambda self: self.own.get("max_time"))
    default_time = property(lambda self: self.own.get("default_time"))
    state = property(lambda self: (self.data.get("partition", {}).get("state") or ["UP"])[0])
    max_nodes = property(lambda self: from_no_val(self.data.get("maximums", {}).get("nodes")))
    priority_job_factor = property(lambda self: int(self.data.get("priority", {}).get("job_factor", 1)))
    allow_groups = property(
        lambda self: tuple(g for g in (self.data.get("groups", {}).get("allowed") or "").split(",") if g))


class ClusterInfo:
    """A ``/pslurm/v1/cluster`` reply: the cluster's name, its partitions (configuration order;
    ``default`` marks the cluster's default one) and every node with its state and allocation."""

    __slots__ = ("data", "name", "partitions", "nodes")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.name: str = str(data["cluster_name"])
        self.partitions = tuple(PartitionInfo(p) for p in data["partitions"])
        self.nodes = tuple(NodeInfo(n) for n in data["nodes"])

    def node(self, name: str) -> NodeInfo | None:
        return next((n for n in self.nodes if n.name == name), None)

    def partition(self, name: str) -> PartitionInfo | None:
        return next((p for p in self.partitions if p.name == name), None)
