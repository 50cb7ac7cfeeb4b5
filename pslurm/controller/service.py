"""The controller's behaviour, independent of gRPC: submit, cancel, node life, job ends, scheduling.

The servicer translates RPCs to these methods; the scheduler loop calls :meth:`Controller.schedule`.
Every state change goes through the store's compare-and-set and wakes whoever waits on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from pslurm.controller.admission import admit
from pslurm.controller.agents import AgentClient, AgentUnreachable
from pslurm.controller.policy import NodeView, PendingJob, Snapshot, plan
from pslurm.controller.store import Allocation, Store
from pslurm.core.config import ClusterConfig
from pslurm.core.jobspec import JobRecord, JobSpec, SpecError
from pslurm.core.node import GpuInfo, NodeRecord
from pslurm.core.states import InvalidTransition, JobState, NodeState, node_display_state

log = logging.getLogger("psctld")

QUEUE_DEPTH = 1000  # pending jobs considered per pass, as Slurm's default_queue_depth bounds it
HEARTBEAT_INTERVAL = 2.0


class NotFound(LookupError):
    """An unknown job or node; the message is for the user."""


@dataclass
class NodeUsage:
    """What active jobs hold on one node, derived from the store's allocations."""

    cpus: int = 0
    mem_mb: int = 0
    gpus: list[int] = field(default_factory=list)
    jobs: int = 0


class Controller:
    """Owns the protocol: snapshot -> plan -> compare-and-set -> launch."""

    def __init__(self, config: ClusterConfig, store: Store, agents: AgentClient,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.agents = agents
        self.clock = clock
        # Agents beat a few times per SlurmdTimeout, and at least every 2 s on small local timeouts.
        self.heartbeat_interval = max(0.5, min(HEARTBEAT_INTERVAL * 15, config.slurmd_timeout / 4))
        self._changed = threading.Condition()
        self._version = 0  # bumped on every job state change, for waiters
        self._wake = threading.Event()
        # After a restart every node gets a full SlurmdTimeout to be heard from again.
        self._started = clock()
        self._stopping = threading.Event()
        self._partitions_of: dict[str, frozenset[str]] = defaultdict(frozenset)
        for part in config.partitions.values():
            for name in part.nodes:
                self._partitions_of[name] = self._partitions_of[name] | {part.name}
        store.ensure_nodes([
            NodeRecord(n.name, n.addr, n.port, n.cpus, n.real_memory, n.gres) for n in config.nodes.values()
        ])

    # -- clients ---------------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> int:
        """Check the request, store it PENDING (committed before we answer), wake the scheduler."""
        admitted = admit(spec, self.config)
        job_id = self.store.submit(spec, admitted.partition, admitted.time_limit, self.clock())
        self._notify()
        return job_id

    def jobs(self, job_ids: Sequence[int] = (), users: Sequence[str] = (),
             states: Sequence[JobState] = (), include_finished: bool = False,
             since: float | None = None) -> list[JobRecord]:
        return self.store.get_jobs(job_ids, users, states, include_finished, since)

    def cancel(self, job_ids: Sequence[int], requester_uid: int, signal: int = 0) -> list[str]:
        """Cancel (or signal) jobs; returns one error line per job that could not be."""
        errors = []
        for job_id in job_ids:
            job = self.store.get_job(job_id)
            if job is None:
                errors.append(f"Kill job error on job id {job_id}: Invalid job id specified")
                continue
            if requester_uid not in (0, job.spec.uid):
                errors.append(f"Kill job error on job id {job_id}: Access/permission denied")
                continue
            if job.state.is_final:
                errors.append(f"Kill job error on job id {job_id}: Job/step already completing or completed")
                continue
            try:
                self._cancel_one(job, signal)
            except InvalidTransition:
                pass  # it ended meanwhile: nothing left to cancel
        return errors

    def _cancel_one(self, job: JobRecord, signal: int) -> None:
        now = self.clock()
        if job.state is JobState.PENDING and signal == 0:
            self.store.transition(job.job_id, JobState.CANCELLED, now, "cancelled while pending",
                                  end_time=now, exit_signal=15, reason="None")
            self._notify()
            return
        if job.state is JobState.PENDING:
            return  # a signal to a pending job has nothing to reach
        if signal == 0 and job.state is JobState.RUNNING:
            self.store.transition(job.job_id, JobState.COMPLETING, now, "cancel requested",
                                  cancel_requested=True)
            self._notify()
        node = self.store.get_node(job.node or "")
        if node is not None:
            try:
                self.agents.signal(node.target, job.job_id, signal)
            except AgentUnreachable as exc:
                log.warning("cannot reach %s to signal job %d: %s", node.name, job.job_id, exc)

    def wait(self, job_id: int, timeout: float | None = None) -> Iterator[JobRecord]:
        """The job now, then again each time it changes, until it reaches a final state."""
        last: tuple[JobState, str | None, str] | None = None
        deadline = None if timeout is None else self.clock() + timeout
        while not self._stopping.is_set():
            with self._changed:
                version = self._version
            job = self.store.get_job(job_id)
            if job is None:
                raise NotFound(f"Invalid job id specified: {job_id}")
            if (job.state, job.node, job.reason) != last:
                last = (job.state, job.node, job.reason)
                yield job
            if job.state.is_final or (deadline is not None and self.clock() > deadline):
                return
            self._wait_change(version)

    def _wait_change(self, seen: int, timeout: float = 1.0) -> None:
        """Block until a job state changes after version ``seen`` (or the timeout passes)."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != seen, timeout=timeout)

    # -- nodes -----------------------------------------------------------------------------

    def usage(self) -> dict[str, NodeUsage]:
        return _usage_by_node(self.store.allocations())

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
        self._notify()
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
        self._notify()
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
                self._notify()

    def _fail_jobs_on(self, node: str, now: float, why: str) -> None:
        for job_id in self.store.active_job_ids_on(node):
            self._end_job(job_id, JobState.NODE_FAIL, now, why, 0, 0)

    def _known_node(self, name: str) -> NodeRecord:
        node = self.store.get_node(name)
        if node is None:
            raise NotFound(f"Invalid node name specified: {name}")
        return node

    # -- job ends --------------------------------------------------------------------------

    def job_ended(self, job_id: int, node: str, state: JobState, exit_code: int, exit_signal: int,
                  end_time: float, usage: dict[str, float | None] | None = None) -> None:
        """The agent saw the job's processes end. Idempotent: a repeated report is ignored."""
        job = self.store.get_job(job_id)
        if job is None or job.state.is_final or job.node != node:
            return
        if job.cancel_requested and state is not JobState.TIMEOUT:
            state = JobState.CANCELLED
        self._end_job(job_id, state, end_time, f"ended on {node}", exit_code, exit_signal, usage or {})

    def _end_job(self, job_id: int, state: JobState, now: float, detail: str, exit_code: int,
                 exit_signal: int, usage: dict[str, float | None] | None = None) -> None:
        reason = {JobState.FAILED: "NonZeroExitCode", JobState.TIMEOUT: "TimeLimit",
                  JobState.NODE_FAIL: "NodeDown"}.get(state, "None")
        try:
            self.store.transition(job_id, state, now, detail, end_time=now, exit_code=exit_code,
                                  exit_signal=exit_signal, reason=reason, **(usage or {}))
        except InvalidTransition as exc:
            log.info("job %d end not recorded: %s", job_id, exc)
            return
        self._notify()

    # -- scheduling ------------------------------------------------------------------------

    def schedule(self) -> int:
        """One pass: snapshot, plan, commit each placement, launch. Returns jobs started."""
        pending = self.store.queue(QUEUE_DEPTH)
        if not pending:
            return 0
        nodes = self.store.get_nodes()
        usage = _usage_by_node(self.store.allocations())
        snapshot = Snapshot(
            pending=[PendingJob(j.job_id, j.partition, j.cpus, j.mem_mb, j.gres) for j in pending],
            nodes=[_node_view(n, usage.get(n.name, NodeUsage()), self._partitions_of[n.name]) for n in nodes],
            now=self.clock(),
            partition_up={p.name: p.state.upper() == "UP" for p in self.config.partitions.values()},
        )
        decided = plan(snapshot)
        reasons = {j.job_id: j.reason for j in pending}
        targets = {n.name: n.target for n in nodes}
        started = []
        for placement in decided.placements:
            if self.store.start_job(placement.job_id, placement.node, placement.gpu_indices, self.clock()):
                started.append(placement.job_id)
        for job in self.store.get_jobs(job_ids=started) if started else ():
            if job.state is JobState.RUNNING and job.node:
                self.agents.launch_async(targets[job.node], job, self._launch_failed)
        self.store.set_reason({k: v for k, v in decided.reasons.items() if reasons[k] != v})
        if started:
            self._notify(wake_scheduler=False)
        return len(started)

    def _launch_failed(self, job: JobRecord, error: Exception) -> None:
        """The agent could not be reached or refused: requeue the job and set the node DOWN."""
        now = self.clock()
        log.warning("launch of job %d on %s failed: %s", job.job_id, job.node, error)
        try:
            self.store.transition(job.job_id, JobState.PENDING, now, f"launch failed: {error}"[:250],
                                  node=None, gpu_indices="", start_time=None, reason="None")
        except InvalidTransition:
            return
        if job.node and isinstance(error, AgentUnreachable):
            try:
                self.store.set_node_state(job.node, NodeState.DOWN, now, reason="Not responding")
            except InvalidTransition:
                pass
        self._notify()

    # -- loop ------------------------------------------------------------------------------

    def _notify(self, wake_scheduler: bool = True) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()
        if wake_scheduler:
            self._wake.set()

    def run_loop(self, interval: float = 1.0) -> None:
        """Schedule on every change and at least every ``interval`` seconds; watch heartbeats."""
        last_check = 0.0
        while not self._stopping.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            try:
                self.schedule()
                if self.clock() - last_check >= 1.0:
                    last_check = self.clock()
                    self.check_heartbeats()
            except Exception:  # the loop must outlive a bad pass; the next one retries
                log.exception("scheduler pass failed")

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        with self._changed:
            self._changed.notify_all()


def _usage_by_node(allocations: Sequence[Allocation]) -> dict[str, NodeUsage]:
    usage: dict[str, NodeUsage] = defaultdict(NodeUsage)
    for alloc in allocations:
        used = usage[alloc.node]
        used.cpus += alloc.cpus
        used.mem_mb += alloc.mem_mb
        used.gpus.extend(alloc.gpu_indices)
        used.jobs += 1
    return usage


def _node_view(node: NodeRecord, used: NodeUsage, partitions: frozenset[str]) -> NodeView:
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
