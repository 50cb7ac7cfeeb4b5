"""The values the client returns that are not views of the API's JSON: sprio's rows, sbatch
--test-only's answer and a job's output stream. Plain frozen dataclasses, no wire types."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pslurm.core.states import JobState
from pslurm.core.steps import TaskEnd


@dataclass(frozen=True)
class JobPriority:
    """A pending job's priority and its normalised factors (0..1), as sprio shows them; the
    weighted value of a factor is its weight (:class:`PriorityWeights`) times the factor."""

    job_id: int
    display_id: str  # ``14`` or ``14_3`` (pslurm.core.jobspec.display_id)
    user: str
    account: str
    partition: str
    priority: int
    age: float = 0.0
    fairshare: float = 0.0
    jobsize: float = 0.0
    partition_factor: float = 0.0
    qos: float = 0.0
    nice: int = 0
    admin_set: bool = False  # an operator set the priority


@dataclass(frozen=True)
class PriorityWeights:
    """The configured PriorityWeight* values."""

    age: int = 0
    fairshare: int = 0
    jobsize: int = 0
    partition: int = 0
    qos: int = 0


@dataclass(frozen=True)
class WillRun:
    """When and where a job would start if submitted now (:meth:`pslurm.client.Client.will_run`,
    sbatch --test-only; Slurm's will_run_response_msg). Nothing was stored: ``job_id`` is the id the
    job would likely get, not one reserved for it."""

    job_id: int
    start_time: float
    node_list: str
    proc_cnt: int  # its CPUs
    part_name: str


@dataclass(frozen=True)
class OutputChunk:
    """A piece of a running step's output, from its nodes' agents. The last one has ``done`` set and
    how the step ended (``state``, ``exit_code``, ``exit_signal``, each task's end in ``tasks``);
    ``state`` is None before that."""

    stdout: bytes = b""
    stderr: bytes = b""
    done: bool = False
    state: JobState | None = None
    exit_code: int = 0
    exit_signal: int = 0
    tasks: tuple[TaskEnd, ...] = ()


class InputStream(Protocol):
    """Input being sent to a job's stdin in the background (:meth:`pslurm.client.Client.send_input`)."""

    def close(self, timeout: float = 5.0) -> None:
        """Once the chunks' iterator has ended (the job's EOF), wait up to ``timeout`` seconds for
        the agent to take it all; cancel the call if it does not. Never raises: how the job ended
        is the controller's to say."""
        ...
