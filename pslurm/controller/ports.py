"""The small interfaces the controller's parts know each other by; app.py wires the real ones.

The job service, the scheduler and the node monitor never hold each other: a part that changed
something the scheduler should see rings the doorbell (:class:`Reschedule`); a part that must act
on a node's agent uses :class:`Agents`; the scheduler tells the node monitor of a node it could not
reach through :class:`NodeHealth`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from pslurm.core.jobspec import JobRecord
from pslurm.core.steplaunch import StepLaunch


class Reschedule(Protocol):
    def __call__(self) -> None:
        """Something changed (a submit, an end, a node): run a scheduling pass soon."""


class Agents(Protocol):
    """The node agents, as the controller calls them (pslurm.controller.agents.AgentClient)."""

    def launch_async(self, target: str, job: JobRecord,
                     on_error: Callable[[JobRecord, Exception], None], node_index: int = 0) -> None:
        """Queue the job's launch on the agent; ``node_index``: the node's position in a multi-node
        job's allocation (the launch carries it, and that node's own GPU indices as ``job.gpu_indices``)."""

    def signal(self, target: str, job_id: int, signal: int) -> None: ...

    def set_time_limit(self, target: str, job_id: int, restarts: int, time_limit: int | None) -> None:
        """A running job's new time limit (pscontrol update TimeLimit=), seconds from its start; None: none."""

    def suspend(self, target: str, job_id: int, restarts: int, resume: bool) -> None:
        """pscontrol suspend / resume: stop (``resume`` False) or continue a job's run on that node."""

    def launch_step(self, target: str, launch: StepLaunch) -> None:
        """A step's tasks on one of its nodes (AgentUnreachable, AgentRefused)."""

    def signal_step(self, target: str, job_id: int, step_id: int, signal: int) -> None:
        """Signal a step's tasks on one of its nodes; 0 cancels the step."""


class NodeHealth(Protocol):
    def unreachable(self, node: str, why: str) -> None:
        """The node's agent did not answer: set it DOWN and take its jobs as lost."""

    def gpu_measured(self, node: str) -> Mapping[int, tuple[int, float]]:
        """What the node's agent last measured on each GPU: (memory used MB, utilisation %)."""
