"""The node monitor: registration, heartbeats, timeouts, operators' node updates, reconciliation.

Every heartbeat carries the runs its agent has (job id and restart count). Reconciliation compares
them with the runs the store holds RUNNING or COMPLETING on the node, both ways:

- a run the controller holds that the agent does not have, once ``BatchStartTimeout`` has passed
  since it started (its launch may still be on the way), is lost: ``node_lost`` ends it NODE_FAIL, or
  requeues it when it may be requeued;
- a run the agent has that the controller does not hold there (ended, requeued, cancelled while
  the controller was away, an earlier run of a requeued job) goes back in the reply: the agent kills it.

A node silent for ``SlurmdTimeout`` goes DOWN and its jobs are lost the same way.

Heartbeats list the agent's steps too (job id, step id): a step the controller holds RUNNING on the
node that the agent does not list, once the same grace has passed since it started, ends NODE_FAIL.
A step the agent lists that the controller does not hold is left to the agent (it kills a step whose
job's run it no longer has).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from pslurm.controller.allocations import NodeUsage, usage_by_node
from pslurm.controller.errors import NotFound
from pslurm.controller.gpuuse import Measured, gpu_usage
from pslurm.controller.ports import Reschedule
from pslurm.controller.store import Allocation, RunEnd, StepEnd, Store, StoreError
from pslurm.core.config import ClusterConfig
from pslurm.core.hostlists import expand
from pslurm.core.jobspec import SpecError
from pslurm.core.lifecycle import Change
from pslurm.core.node import GpuInfo, GpuUsage, NodeRecord
from pslurm.core.states import InvalidTransition, JobState, NodeState, node_display_state

log = logging.getLogger("psctld")

HEARTBEAT_INTERVAL = 2.0
NOT_RESPONDING = "Not responding"  # the reason of a node the monitor set DOWN (not an operator)
SYSTEM_UID = 0  # who set a reason the controller set (slurmctld's SlurmUser: root here)


@dataclass(frozen=True)
class Run:
    """One run of a job, as agents report them: a requeued job runs again with one more restart."""

    job_id: int
    restarts: int


@dataclass(frozen=True)
class NodeStatus:
    """A node with what is allocated on it and its sinfo state word."""

    node: NodeRecord
    used: NodeUsage
    word: str
    gpus: tuple[GpuUsage, ...] = ()


class NodeMonitor:
    def __init__(self, config: ClusterConfig, store: Store, reschedule: Reschedule,
                 clock: Callable[[], float]) -> None:
        self.config = config
        self.store = store
        self.reschedule = reschedule
        self.clock = clock
        # Agents beat a few times per SlurmdTimeout, and at least every 2 s on small local timeouts.
        self.heartbeat_interval = max(0.5, min(HEARTBEAT_INTERVAL * 15, config.slurmd_timeout / 4))
        self.launch_grace = float(config.batch_start_timeout)
        self._started = clock()  # after a restart every node gets a full SlurmdTimeout to be heard again
        # one reconciliation of a node at a time (its heartbeats and registration); nodes go in parallel
        self._locks = {name: threading.Lock() for name in config.nodes}
        # When each node was last heard, kept here and written to the store once a second (flush_heard):
        # a write per heartbeat was most of a heartbeat's cost (1000 nodes: 400 commits a second).
        self._seen_lock = threading.Lock()  # the figures below: heartbeats and store notices come from any thread
        self._heard: dict[str, float] = {}
        self._unwritten: dict[str, float] = {}
        # Reconciliation is skipped while nothing could have changed its outcome: a node whose runs
        # and steps agreed with the store, reporting the same again, with no job changed since (the
        # store's change notices count up ``_changes``). node -> (changes then, runs, steps) reported.
        self._changes = 0
        self._agreed: dict[str, tuple[int, frozenset[tuple[int, int]], frozenset[tuple[int, int]] | None]] = {}
        store.subscribe(self._jobs_changed)
        self.measured: dict[str, Measured] = {}  # per node, per GPU: (memory used MB, util %) at its last heartbeat
        # a multi-node job's run ended: end its runs on these other nodes (JobService.end_on_nodes)
        self.end_on_nodes: Callable[[int, Sequence[str]], None] = lambda job_id, nodes: None
        # each heartbeat, with what it measured (None: nothing said): observe.py's GPU history and counts
        self.on_heartbeat: Callable[[str, Measured | None, float], None] = lambda name, measured, now: None
        partitions: dict[str, frozenset[str]] = defaultdict(frozenset)
        for part in config.partitions.values():
            for name in part.nodes:
                partitions[name] = partitions[name] | {part.name}
        self._partitions_of = partitions
        store.ensure_nodes([
            NodeRecord(n.name, n.addr, n.port, n.cpus, n.real_memory, n.gres) for n in config.nodes.values()
        ])

    def _jobs_changed(self, job_ids: Collection[int]) -> None:
        with self._seen_lock:
            self._changes += 1

    def partitions_of(self, node: str) -> frozenset[str]:
        return self._partitions_of[node]

    # -- agents ----------------------------------------------------------------------------

    def register(self, name: str, addr: str, port: int, gpus: Sequence[GpuInfo], runs: Sequence[Run],
                 drain_reason: str, isolation: str) -> list[Run]:
        """An agent (re)starts: record its inventory, mark it UP (unless an operator set it DOWN),
        reconcile its runs. Returns the runs it must kill."""
        node = self._known(name)
        now = self.clock()
        values: dict[str, object] = dict(addr=addr, port=port, gpus=list(gpus), isolation=isolation,
                                         last_heartbeat=now)
        if drain_reason:
            values.update(drain=True, **reason_by(SYSTEM_UID, drain_reason, now))
        elif node.state is NodeState.DOWN and node.reason == NOT_RESPONDING:
            values.update(reason_by(None, "", now))
        self.store.update_node(name, **values)
        if not _down_by_operator(node):
            self.store.set_node_state(name, NodeState.UP, now)
        log.info("node %s registered at %s:%d with %d GPUs", name, addr, port, len(gpus))
        kill = self.reconcile(name, runs, now)
        self.reschedule()
        return kill

    def heartbeat(self, name: str, runs: Sequence[Run], health_reason: str,
                  measured: Measured | None = None,
                  steps: Collection[tuple[int, int]] | None = None,
                  sent_at: float | None = None) -> tuple[bool, list[Run]]:
        """Returns (register again?, runs to kill). A node the controller does not hold UP is asked to
        register again; its runs are reconciled all the same. ``measured``: what the agent measured on
        each GPU (kept in memory, for psinfo and the packing policy's tie-break). ``steps``: the
        (job id, step id) of the steps the agent runs, reconciled too (None: not said). ``sent_at``:
        when the agent listed them (its clock; None: now): a run started less than the launch grace
        before then may not have reached it yet, however late the heartbeat is handled."""
        node = self._known(name)
        now = self.clock()
        if measured is not None:
            self.measured[name] = measured
        self.on_heartbeat(name, measured, now)
        if health_reason and not node.drain and node.state is NodeState.UP:
            self.store.update_node(name, drain=True, last_heartbeat=now, **reason_by(SYSTEM_UID, health_reason, now))
            self.reschedule()
        reported = frozenset((r.job_id, r.restarts) for r in runs)
        listed = frozenset(steps) if steps is not None else None
        with self._seen_lock:
            self._heard[name] = self._unwritten[name] = now
            agreed = self._agreed.get(name)
            changes = self._changes  # taken before the store is read: a change after it is not missed
        if agreed is not None and agreed[:2] == (changes, reported) and (listed is None or agreed[2] == listed):
            kill: list[Run] = []
        else:
            listed_at = now if sent_at is None else min(now, sent_at)  # an agent's clock ahead of ours: ours
            kill, runs_agree = self._reconcile(name, runs, now, listed_at)
            steps_agree = self._reconcile_steps(name, steps, now, listed_at) if steps is not None else True
            with self._seen_lock:
                if runs_agree and steps_agree:
                    self._agreed[name] = (changes, reported, listed)
                else:
                    self._agreed.pop(name, None)
        return node.state is not NodeState.UP and not _down_by_operator(node), kill

    def last_heard(self, node: NodeRecord) -> float:
        """When the node's agent was last heard: this controller's heartbeats, else the store's."""
        return max(node.last_heartbeat, self._heard.get(node.name, 0.0))

    def flush_heard(self) -> None:
        """Write the heartbeats heard since the last flush to the store, in one transaction."""
        with self._seen_lock:
            times, self._unwritten = self._unwritten, {}
        try:
            self.store.heard(times)
        except Exception:
            with self._seen_lock:  # written with the next flush, unless a newer heartbeat came meanwhile
                self._unwritten = {**times, **self._unwritten}
            raise

    def gpu_measured(self, node: str) -> Measured:
        """What the node's agent measured on each GPU at its last heartbeat ({} when nothing)."""
        return self.measured.get(node, {})

    def reconcile(self, name: str, runs: Sequence[Run], now: float) -> list[Run]:
        """Compare what the agent runs with what the controller holds on the node (see the module's
        docstring). Returns the runs the agent must kill."""
        with self._seen_lock:
            self._agreed.pop(name, None)
        return self._reconcile(name, runs, now)[0]

    def _reconcile(self, name: str, runs: Sequence[Run], now: float,
                   listed_at: float | None = None) -> tuple[list[Run], bool]:
        """:meth:`reconcile`, and whether the agent runs exactly the runs held on the node.
        ``listed_at``: when the agent listed ``runs`` (default ``now``)."""
        reported = {run.job_id: run.restarts for run in runs}
        since = now if listed_at is None else listed_at
        with self._locks.setdefault(name, threading.Lock()):
            held = self.store.runs_on(name)
            lost = [r for r in held
                    if reported.get(r.job_id) != r.restarts and since - r.start_time > self.launch_grace]
            for run in lost:
                why = (f"the agent on {name} does not run it" if run.job_id not in reported
                       else f"the agent on {name} runs an earlier run of it")
                self._lose(run.job_id, name, now, why)
        mine = {(r.job_id, r.restarts) for r in held}
        kill = [run for run in runs if (run.job_id, run.restarts) not in mine]
        if kill:
            log.info("node %s runs %s, which the controller has ended: the agent kills them", name,
                     ", ".join(f"{r.job_id}.{r.restarts}" for r in kill))
        return kill, not kill and mine == {(run.job_id, run.restarts) for run in runs}

    def reconcile_steps(self, name: str, steps: Collection[tuple[int, int]], now: float) -> None:
        """End NODE_FAIL the steps held RUNNING on the node that its agent does not list (once the
        launch grace has passed since they started: a launch may still be on its way)."""
        with self._seen_lock:
            self._agreed.pop(name, None)
        self._reconcile_steps(name, steps, now)

    def _reconcile_steps(self, name: str, steps: Collection[tuple[int, int]], now: float,
                         listed_at: float | None = None) -> bool:
        """:meth:`reconcile_steps`, and whether the agent lists exactly the steps held on the node."""
        reported = set(steps)
        since = now if listed_at is None else listed_at
        with self._locks.setdefault(name, threading.Lock()):
            held = self.store.running_steps_on(name)
            lost = [s for s in held
                    if (s.job_id, s.step_id) not in reported and since - s.start_time > self.launch_grace]
            if not lost:
                return reported == {(s.job_id, s.step_id) for s in held}
            ends = [StepEnd(s.job_id, s.step_id, name, JobState.NODE_FAIL, 0, 0, now) for s in lost]
            for end, outcome in zip(ends, self.store.end_steps(ends), strict=True):
                if not isinstance(outcome, InvalidTransition):
                    log.warning("step %d.%d on %s: the agent does not run it; NODE_FAIL", end.job_id, end.step_id,
                                name)
        return False

    def runs_ended(self, name: str, ends: Sequence[RunEnd]) -> None:
        """An agent's batch of ends (JobsEnded), applied in one transaction; the doorbell rings once.
        Idempotent as JobService.job_ended: a repeated report, or one of an earlier run, is logged
        and ignored. Raises StoreError when the store could not record them all (the agent sends
        them again): a batch the database refuses is applied end by end, so that one bad end
        cannot keep the others from being recorded."""
        try:
            outcomes = list(zip(ends, self.store.end_runs(ends), strict=True))
        except StoreError:
            if len(ends) == 1:
                raise
            outcomes = []  # the database refused the batch: end by end below
        failed = None
        if len(outcomes) != len(ends):
            for end in ends:
                try:
                    outcomes.extend(zip([end], self.store.end_runs([end]), strict=True))
                except StoreError as exc:
                    failed = failed or exc
        self._ended(name, outcomes)
        if failed is not None:
            raise failed

    def _ended(self, name: str, outcomes: Sequence[tuple[RunEnd, object]]) -> None:
        changed = False
        for end, outcome in outcomes:
            if isinstance(outcome, InvalidTransition):
                # an agent repeats a report whose answer it did not get, or a multi-node job's other node
                # reports the end of its part, which the controller ended
                log.info("job %d: end of run %d reported by %s, ignored: %s", end.job_id, end.restarts, name, outcome)
            else:
                changed = True
                self._end_others(outcome, name)
        if changed:
            self.reschedule()

    def check_heartbeats(self) -> None:
        """Nodes silent for longer than SlurmdTimeout go DOWN; their jobs are lost."""
        now = self.clock()
        for node in self.store.get_nodes():
            heard = max(self.last_heard(node), self._started)
            if node.state is NodeState.UP and now - heard > self.config.slurmd_timeout:
                self.unreachable(node.name, "node not responding")

    def unreachable(self, node: str, why: str) -> None:
        """The node's agent is not heard from (heartbeats, or a launch): DOWN, its jobs lost."""
        now = self.clock()
        try:
            self.store.set_node_state(node, NodeState.DOWN, now, **reason_by(SYSTEM_UID, NOT_RESPONDING, now))
        except InvalidTransition:
            return  # already DOWN: its jobs were handled then
        log.warning("node %s not responding (%s), setting DOWN", node, why)
        self._lose_all(node, now, why)

    def run_loop(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Watch heartbeats every ``interval`` seconds until ``stop``."""
        while not stop.wait(interval):
            try:
                self.flush_heard()
                self.check_heartbeats()
            except Exception:  # the loop must outlive a failing check; the next one retries
                log.exception("heartbeat check failed")

    # -- operators -------------------------------------------------------------------------

    def update_node(self, name: str, state: str, reason: str, uid: int = SYSTEM_UID) -> NodeStatus:
        """pscontrol update NodeName=X State=DRAIN|RESUME|UNDRAIN|DOWN Reason=..., asked by ``uid`` (who
        set the reason: sinfo -R's USER)."""
        node = self._known(name)
        now = self.clock()
        state = state.upper()
        if state in ("DRAIN", "DOWN") and not reason:
            raise SpecError("You must specify a reason when DOWNING or DRAINING a node. Request denied")
        if state == "DRAIN":
            self.store.update_node(name, drain=True, **reason_by(uid, reason, now))
        elif state in ("RESUME", "UNDRAIN", "IDLE"):
            self.store.update_node(name, drain=False, **reason_by(None, "", now))
            if node.state is NodeState.DOWN and now - self.last_heard(node) < self.config.slurmd_timeout:
                self.store.set_node_state(name, NodeState.UP, now)
        elif state == "DOWN":
            if node.state is not NodeState.DOWN:
                self.store.set_node_state(name, NodeState.DOWN, now, **reason_by(uid, reason, now))
            self._lose_all(name, now, f"node set DOWN: {reason}")
        else:
            raise SpecError(f"Invalid node state specified: {state}")
        self.reschedule()
        return next(s for s in self.nodes() if s.node.name == name)

    def nodes(self) -> list[NodeStatus]:
        """Each configured node with what is allocated on it and its sinfo state word."""
        allocations = self.store.allocations()
        usage = usage_by_node(allocations)
        on_node: dict[str, list[Allocation]] = defaultdict(list)
        for alloc in allocations:
            on_node[alloc.node].append(alloc)
        out = []
        for node in self.store.get_nodes():
            if node.name not in self.config.nodes:  # removed from pslurm.conf: its row stays, unshown
                continue
            if (heard := self.last_heard(node)) != node.last_heartbeat:  # not flushed to the store yet
                node = dataclasses.replace(node, last_heartbeat=heard)
            used = usage.get(node.name, NodeUsage())
            total_gpus = len(node.gpus) or sum(g.count for g in node.gres if g.name == "gpu")
            word = node_display_state(node.state, node.drain, len(set(used.gpus)), total_gpus, used.cpus,
                                      node.cpus, used.jobs)
            gpus = gpu_usage(node, on_node[node.name], self.measured.get(node.name, {}))
            out.append(NodeStatus(node, used, word, gpus))
        return out

    # -- jobs of lost nodes ----------------------------------------------------------------

    def _lose_all(self, node: str, now: float, why: str) -> None:
        for run in self.store.runs_on(node):
            self._lose(run.job_id, node, now, why)

    def _lose(self, job_id: int, node: str, now: float, why: str) -> None:
        try:
            change = self.store.node_lost(job_id, node, now, why)
        except InvalidTransition as exc:
            log.info("job %d: not lost after all (%s)", job_id, exc)
            return
        log.warning("job %d on %s: %s; %s", job_id, node, why,
                    "requeued" if change.to.value == "PENDING" else "NODE_FAIL")
        self._end_others(change, node)
        self.reschedule()

    def _end_others(self, change: object, node: str) -> None:
        """After a change that ended a multi-node job's run (``Change.nodes`` set) on ``node``."""
        if not isinstance(change, Change) or not change.nodes or change.to.holds_resources:
            return
        try:
            self.end_on_nodes(change.job_id, [n for n in expand(change.nodes) if n != node])
        except Exception:  # reconciliation ends what is left
            log.exception("job %d: its other nodes' runs could not be ended", change.job_id)

    def _known(self, name: str) -> NodeRecord:
        node = self.store.get_node(name)
        if node is None:
            raise NotFound(f"Invalid node name specified: {name}")
        return node


def reason_by(uid: int | None, reason: str, now: float) -> dict[str, object]:
    """A node's reason columns: ``reason`` set by ``uid`` at ``now`` (slurmctld's reason, reason_uid and
    reason_time), or none ("")."""
    if not reason:
        return dict(reason="", reason_uid=None, reason_time=None)
    return dict(reason=reason, reason_uid=uid, reason_time=now)


def _down_by_operator(node: NodeRecord) -> bool:
    """Set DOWN by pscontrol (stays DOWN until RESUME), not by missed heartbeats."""
    return node.state is NodeState.DOWN and node.reason not in ("", NOT_RESPONDING)
