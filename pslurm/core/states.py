"""Job and node states, with the one transition table every component goes through."""

from __future__ import annotations

import enum


class JobState(enum.StrEnum):
    """A job's state, named as Slurm names it."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"

    @property
    def short(self) -> str:
        """Slurm's two-letter code (squeue %t)."""
        return _SHORT[self]

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES

    @property
    def holds_resources(self) -> bool:
        """RUNNING and COMPLETING jobs keep their GPUs until the agent reports the end."""
        return self in (JobState.RUNNING, JobState.COMPLETING)

    @classmethod
    def parse(cls, text: str) -> JobState:
        """Accept a long name (``RUNNING``) or a short code (``R``), any case."""
        key = text.strip().upper()
        for state in cls:
            if key in (state.value, state.short):
                return state
        raise ValueError(f"Invalid job state specified: {text}")


_SHORT = {
    JobState.PENDING: "PD",
    JobState.RUNNING: "R",
    JobState.COMPLETING: "CG",
    JobState.COMPLETED: "CD",
    JobState.FAILED: "F",
    JobState.CANCELLED: "CA",
    JobState.TIMEOUT: "TO",
    JobState.NODE_FAIL: "NF",
}

FINAL_STATES = frozenset(
    {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL}
)

# to_state -> the states it may be entered from. The store applies a transition as
# ``UPDATE ... WHERE state IN (JOB_TRANSITIONS[to])`` and fails loudly when no row matched.
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    # requeue: launch failed, node lost (with --requeue), pscontrol requeue of a running job (once its
    # end is seen, from COMPLETING) or of a finished batch job (as scontrol requeue); the job keeps
    # its id and its events keep every run. A final state is left only this way.
    JobState.PENDING: frozenset({JobState.RUNNING, JobState.COMPLETING} | FINAL_STATES),
    JobState.RUNNING: frozenset({JobState.PENDING}),
    JobState.COMPLETING: frozenset({JobState.RUNNING}),  # cancel or node drain asked, end not seen yet
    JobState.COMPLETED: frozenset({JobState.RUNNING, JobState.COMPLETING}),
    JobState.FAILED: frozenset({JobState.RUNNING, JobState.COMPLETING}),
    JobState.CANCELLED: frozenset({JobState.PENDING, JobState.RUNNING, JobState.COMPLETING}),
    JobState.TIMEOUT: frozenset({JobState.RUNNING, JobState.COMPLETING}),
    JobState.NODE_FAIL: frozenset({JobState.RUNNING, JobState.COMPLETING}),
}


def can_transition(from_state: JobState, to_state: JobState) -> bool:
    """True when the table allows ``from_state -> to_state``."""
    return from_state in JOB_TRANSITIONS[to_state]


class InvalidTransition(Exception):
    """A state change the table forbids, or one that lost a race (the row had moved on)."""


class NodeState(enum.StrEnum):
    """A node's base state as the controller keeps it; drain is a flag beside it."""

    UNKNOWN = "UNKNOWN"  # configured, never registered
    UP = "UP"  # registered and heartbeating
    DOWN = "DOWN"  # missed its heartbeats, or set down by an operator


NODE_TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    NodeState.UP: frozenset({NodeState.UNKNOWN, NodeState.DOWN, NodeState.UP}),
    NodeState.DOWN: frozenset({NodeState.UNKNOWN, NodeState.UP}),
    NodeState.UNKNOWN: frozenset(),
}


def node_display_state(state: NodeState, drain: bool, busy_gpus: int, total_gpus: int,
                       busy_cpus: int, total_cpus: int, running_jobs: int) -> str:
    """The state word sinfo shows: idle, mix, alloc, drain, drng, down, unk."""
    if state is NodeState.DOWN:
        return "down"
    if state is NodeState.UNKNOWN:
        return "unk"
    if drain:
        return "drng" if running_jobs else "drain"
    if running_jobs == 0:
        return "idle"
    full = (total_gpus > 0 and busy_gpus >= total_gpus) or busy_cpus >= total_cpus
    return "alloc" if full else "mix"
