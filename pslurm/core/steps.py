"""Job steps in the domain: which step a thing is, and how a step ended on a node.

A step is the only unit of execution on a node. A batch job's script runs as its ``batch`` step, a
psrun job's command as its step 0, an allocation (psalloc, and a multi-node job's nodes after the
first) is held by its ``extern`` step, and psrun inside a job adds steps 0, 1, ... (a psrun job's
own steps start at 1: its command is step 0). Slurm numbers the special steps from the top of the
32-bit range (SLURM_BATCH_SCRIPT = 0xfffffffb, SLURM_EXTERN_CONT = 0xfffffffc); read as the signed
32-bit numbers that the wire carries, they are -5 and -4.
"""

from __future__ import annotations

from pslurm.core.states import JobState

BATCH_STEP = -5  # 0xfffffffb as int32: the batch script (J.batch)
EXTERN_STEP = -4  # 0xfffffffc as int32: the allocation's holder (J.extern)
INTERACTIVE_STEP = 0  # a psrun job's command (J.0)

_NAMES = {BATCH_STEP: "batch", EXTERN_STEP: "extern"}


def step_name(step_id: int) -> str:
    """The step's name after the job id, as Slurm writes it (``batch``, ``extern``, ``0``)."""
    return _NAMES.get(step_id, str(step_id))


class _Record:
    """A small immutable record with equality. Not a dataclass: psrun reads these, and a command's
    start imports neither ``dataclasses`` nor ``typing`` (tests/acceptance/test_cli_imports.py)."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self._values()!r}"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


class TaskEnd(_Record):
    """How one task of a step ended on its node: its rank, exit code (0-255) and the signal that
    killed it (0: none), and the node. A task that could not start exits 2, as slurmstepd reports it."""

    __slots__ = ("rank", "exit_code", "signal", "node")
    rank: int
    exit_code: int
    signal: int
    node: str

    def __init__(self, rank: int, exit_code: int = 0, signal: int = 0, node: str = "") -> None:
        for name, value in zip(self.__slots__, (rank, exit_code, signal, node), strict=True):
            object.__setattr__(self, name, value)


class StepResult(_Record):
    """How a step ended on a node: its state, exit code (the largest of its tasks') and the signal
    that killed a task (0: none), when, and each task's own end."""

    __slots__ = ("state", "exit_code", "exit_signal", "end_time", "tasks")
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float
    tasks: tuple[TaskEnd, ...]

    def __init__(self, state: JobState, exit_code: int = 0, exit_signal: int = 0, end_time: float = 0.0,
                 tasks: tuple[TaskEnd, ...] = ()) -> None:
        for name, value in zip(self.__slots__, (state, exit_code, exit_signal, end_time, tasks), strict=True):
            object.__setattr__(self, name, value)
