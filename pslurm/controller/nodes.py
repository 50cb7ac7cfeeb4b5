"""Node life in the controller: registration, heartbeats, drain/resume, what each node holds."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pslurm.controller.agents import AgentClient
from pslurm.controller.policy import NodeView
from pslurm.controller.store import Allocation, Store
from pslurm.core.config import ClusterConfig
from pslurm.core.jobspec import SpecError
from pslurm.core.node import GpuInfo, NodeRecord
from pslurm.core.states import InvalidTransition, JobState, NodeState, node_display_state

log = logging.getLogger("psctld")


class NotFound(LookupError):
    """An unknown job or node; the message is for the user."""


class PermissionDenied(Exception):
    """The caller may not do this (Slurm's "Access/permission denied"); the message is for the user."""


@dataclass
class NodeUsage:
    """What active jobs hold on one node, derived from the store's allocations."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: list[int] = field(default_factory=list)
    jobs: int = 0


class NodeLife:
    """The Controller's node methods (a mixin: the Controller owns the state they use)."""

    config: ClusterConfig
    store: Store
    agents: AgentClient
    clock: Callable[[], float]
    _partitions_of: dict[str, frozenset[str]]
    _started: float
    _wake: threading.Event

    def _end_job(self, job_id: int, state: JobState, now: float, detail: str, exit_code: int,
                 exit_signal: int, usage: dict[str, float | None] | None = None) -> None:
        raise NotImplementedError

    def _reschedule(self) -> None:
        raise NotImplementedError

    def usage(self) -> dict[str, NodeUsage]:
        return usage_by_node(self.store.allocations())

    def nodes(self) -> list[tuple[NodeRecord, NodeUsage, str]]:
        """Each node with what is allocated on it and its sinfo state word."""
        usage = self.usage()
        out = []
        for node in self.store.get_nodes():
            used = usage.get(node.name, NodeUsage())
            total_gpus = len(node.gpus) or sum(g.count for g in node.gres if g.name == "gpu")
            word = node_display_state(node.state, node.drain, len(used.gpus), total_gpus, used.cpus,
                                      node.cpus, used.jobs)
            out.append((node, used, word))
        return out

    def partitions_of(self, node: str) -> frozenset[str]:
        return self._partitions_of[node]

    def update_node(self, name: str, state: str, reason: str) -> NodeRecord:
        """pscontrol update NodeName=X State=DRAIN|RESUME|DOWN|UNDRAIN Reason=..."""
        node = self._known_node(name)
        now = self.clock()
        state = state.upper()
        if state in ("DRAIN", "DOWN") and not reason:
            raise SpecError("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        if state == "DRAIN":
            self.store.update_node(name, drain=True, reason=reason)
        elif state in ("RESUME", "UNDRAIN", "IDLE"):
            self.store.update_node(name, drain=False, reason="")
            if node.state is NodeState.DOWN and now - node.last_heartbeat < self.config.slurmd_timeout:
                self.store.set_node_state(name, NodeState.UP, now)
        elif state == "DOWN":
            if node.state is not NodeState.DOWN:
                self.store.set_node_state(name, NodeState.DOWN, now, reason=reason)
            self._fail_jobs_on(name, now, reason)
        else:
            raise SpecError(f"Invalid node state specified: {state}")
        self._reschedule()
        return self._known_node(name)

    def register(self, name: str, addr: str, port: int, gpus: Sequence[GpuInfo], running: Sequence[int],
                 drain_reason: str, isolation: str) -> list[int]:
        """An agent (re)starts: record its inventory, mark it UP, reconcile jobs. Returns the
        jobs it runs that the controller has already ended (the agent kills them)."""
        node = self._known_node(name)
        now = self.clock()
        values: dict[str, object] = dict(addr=addr, port=port, gpus=list(gpus), isolation=isolation,
                                         last_heartbeat=now)
        if drain_reason:
            values.update(drain=True, reason=drain_reason)
        elif node.state is NodeState.DOWN and node.reason == "Not responding":
            values.update(reason="")
        self.store.update_node(name, **values)
        self.store.set_node_state(name, NodeState.UP, now)
        lost = set(self.store.active_job_ids_on(name)) - set(running)
        for job_id in lost:  # the agent restarted and no longer runs them
            self._end_job(job_id, JobState.NODE_FAIL, now, "agent restarted without the job", 0, 0)
        log.info("node %s registered at %s:%d with %d GPUs", name, addr, port, len(gpus))
        self._reschedule()
        return self._stale(name, running)

    def heartbeat(self, name: str, running: Sequence[int], health_reason: str) -> tuple[bool, list[int]]:
        """Returns (re-register?, jobs to kill)."""
        node = self._known_node(name)
        if node.state is not NodeState.UP:
            return True, []
        values: dict[str, object] = {"last_heartbeat": self.clock()}
        if health_reason and not node.drain:
            values.update(drain=True, reason=health_reason)
            self._wake.set()
        self.store.update_node(name, **values)
        return False, self._stale(name, running)

    def _stale(self, name: str, running: Sequence[int]) -> list[int]:
        if not running:
            return []
        active = {j.job_id for j in self.store.get_jobs(job_ids=running)
                  if j.state.holds_resources and j.node == name}
        return [j for j in running if j not in active]

    def check_heartbeats(self) -> None:
        """Nodes silent for longer than SlurmdTimeout go DOWN; their jobs end NODE_FAIL."""
        now = self.clock()
        for node in self.store.get_nodes():
            heard = max(node.last_heartbeat, self._started)
            if node.state is NodeState.UP and now - heard > self.config.slurmd_timeout:
                log.warning("node %s not responding, setting DOWN", node.name)
                try:
                    self.store.set_node_state(node.name, NodeState.DOWN, now, reason="Not responding")
                except InvalidTransition:
                    continue
                self._fail_jobs_on(node.name, now, "node not responding")
                self._reschedule()

    def _fail_jobs_on(self, node: str, now: float, why: str) -> None:
        for job_id in self.store.active_job_ids_on(node):
            self._end_job(job_id, JobState.NODE_FAIL, now, why, 0, 0)

    def _known_node(self, name: str) -> NodeRecord:
        node = self.store.get_node(name)
        if node is None:
            raise NotFound(f"Invalid node name specified: {name}")
        return node


def usage_by_node(allocations: Sequence[Allocation]) -> dict[str, NodeUsage]:
    usage: dict[str, NodeUsage] = defaultdict(NodeUsage)
    for alloc in allocations:
        used = usage[alloc.node]
        used.cpus += alloc.cpus
        used.mem_mb += alloc.mem_mb
        used.gpus.extend(alloc.gpu_indices)
        used.jobs += 1
    return usage


def node_view(node: NodeRecord, used: NodeUsage, partitions: frozenset[str]) -> NodeView:
    if node.gpus:
        inventory = [(g.index, g.type) for g in node.gpus]
    else:  # not registered yet: the configured Gres, numbered in order
        inventory = []
        for g in node.gres:
            if g.name == "gpu":
                inventory.extend((len(inventory) + i, g.type) for i in range(g.count))
    busy = set(used.gpus)
    return NodeView(
        name=node.name, partitions=partitions, free_cpus=node.cpus - used.cpus,
        free_mem_mb=node.real_memory - used.mem_mb,
        free_gpus=tuple(g for g in inventory if g[0] not in busy), available=node.available,
    )
