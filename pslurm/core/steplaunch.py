"""A step's launch on one node, as the controller sends it to that node's agent (the wire's
``StepLaunch``, which only the adapters read). Apart from :mod:`pslurm.core.steps`, which the commands
read: this is a dataclass."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StepLaunch:
    """A step's tasks on one of its nodes, as the controller sends them to that node's agent (the
    wire's ``StepLaunch``, which only the adapters read)."""

    job_id: int
    step_id: int
    restarts: int = 0  # the job's run the step belongs to
    argv: tuple[str, ...] = ()
    name: str = ""  # the step's name (the command's basename, as srun)
    environment: Mapping[str, str] = field(default_factory=dict)  # psrun's environment as exported
    workdir: str = ""
    uid: int = 0
    gid: int = 0
    user: str = ""
    ntasks: int = 1  # tasks on this node
    task_offset: int = 0  # SLURM_PROCID of this node's first task
    total_tasks: int = 0  # SLURM_STEP_NUM_TASKS (0: ntasks)
    node_index: int = 0  # SLURM_NODEID
    step_nodelist: str = ""  # SLURM_STEP_NODELIST
    tasks_per_node: str = ""  # SLURM_STEP_TASKS_PER_NODE, Slurm's 2(x3),1 form
    cpus_per_task: int = 0
    gpu_indices: tuple[int, ...] = ()  # the node's GPUs the step may use (empty: all of the job's there)
    label: bool = False  # --label: each output line prefixed with its task's rank
    pty: bool = False  # --pty: task 0 on a pseudo-terminal
    task_gpus: tuple[tuple[int, ...], ...] = ()  # --gpus-per-task / --gpu-bind: each local task's own GPUs
    no_gpus: bool = False  # the step has none of the job's GPUs here (--gres=none, gpu:0)

    def gpus(self, job_gpus: tuple[int, ...] | list[int]) -> list[int]:
        """The node's GPUs the step may use: its own, or (none named) all of the job's there; none
        when it asked none."""
        if self.no_gpus:
            return []
        return list(self.gpu_indices) if self.gpu_indices else list(job_gpus)
