"""What the node tells the controller of itself, and when: its registration (until the controller
answers: it may start after us), then a heartbeat every interval with its health, GPU use and the
runs and steps it holds; the controller's orders (runs to kill, register again) go to the agent."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from pslurm.core.config import NodeConfig
from pslurm.nodeagent.ends import EndReporter
from pslurm.nodeagent.link import Beat, ControllerLink, LinkDown, NodeReport, RunKey
from pslurm.nodeagent.nodegpus import NodeGpus
from pslurm.nodeagent.steps import Steps

log = logging.getLogger("psd")

HEARTBEAT_INTERVAL = 2.0  # seconds, until the controller's registration answer says otherwise


class Heartbeats:
    """One node's registration and heartbeats (see the module's docstring). ``runs`` lists the runs
    a heartbeat reports; ``kill`` ends the runs the controller does not hold here; ``after_beat`` runs after each
    heartbeat the controller answered (forgetting what it has acknowledged)."""

    def __init__(self, link: ControllerLink, node: NodeConfig, gpus: NodeGpus, steps: Steps, ends: EndReporter,
                 runs: Callable[[], list[RunKey]], kill: Callable[[Sequence[RunKey]], None],
                 after_beat: Callable[[], None], stop: threading.Event, drain_reason: str = "",
                 isolation: str = "") -> None:
        self.link = link
        self.node = node
        self.gpus = gpus
        self.steps = steps
        self.ends = ends
        self.runs = runs
        self.kill = kill
        self.after_beat = after_beat
        self.stop = stop
        self.drain_reason = drain_reason
        self.isolation = isolation
        self.interval = HEARTBEAT_INTERVAL

    def report(self) -> NodeReport:
        """The node as registration tells it."""
        node = self.node
        return NodeReport(name=node.name, addr=node.addr, port=node.port, cpus=node.cpus,
                          real_memory=node.real_memory, gpus=self.gpus.devices, runs=self.runs(),
                          drain_reason=self.drain_reason, isolation=self.isolation)

    def register(self) -> None:
        """Register until the controller answers (or the agent stops)."""
        delay = 0.05
        while not self.stop.is_set():
            try:
                orders = self.link.register(self.report())
            except LinkDown as exc:
                log.info("controller not reachable yet (%s), retrying", exc)
                self.stop.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            self.interval = orders.heartbeat_interval or HEARTBEAT_INTERVAL
            self.kill(orders.kill)
            log.info("registered %s with %d GPUs", self.node.name, len(self.gpus.devices))
            return

    def loop(self) -> None:
        """Beat every interval until the agent stops."""
        while not self.stop.wait(self.interval):
            self.beat()

    def beat(self) -> None:
        """One heartbeat: report ends, send health, GPU use, runs and steps, act on the reply."""
        self.ends.report()
        health = self.gpus.health()
        sent_at = time.time()  # before the runs are listed: a run launched after it may be missing
        beat = Beat(name=self.node.name, runs=self.runs(), steps=self.steps.refs(), sent_at=sent_at,
                    health_reason=health or "", gpu_use=self.gpus.use())
        try:
            orders = self.link.heartbeat(beat)
        except LinkDown:
            return
        if health:
            self.gpus.drain_sent()
        if orders.reregister:
            self.register()
        self.kill(orders.kill)
        self.after_beat()
