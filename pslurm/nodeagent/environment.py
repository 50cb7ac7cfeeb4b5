"""The environment a job starts with: the submitter's (as sent) plus Slurm's variables."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pslurm.core.hostlists import collect
from pslurm.core.jobspec import JobRecord
from pslurm.core.layout import compress_counts, node_layout
from pslurm.core.sharing import GpuShare
from pslurm.core.steplaunch import StepLaunch

# set only for a job on a shared (or simulated) GPU that has them: never the submitter's
SHARING_VARS = ("SLURM_SHARDS_ON_NODE", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PIPE_DIRECTORY",
                "CUDA_MPS_LOG_DIRECTORY", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "PSLURM_GPU_MEM_MB",
                "PSLURM_SIMULATED_GPU_DIR")


@dataclass(frozen=True)
class GpuSetup:
    """What the agent set up for a job's GPU beyond the GPU itself: its share, the MPS daemon it is a
    client of, its simulated GPU's directory."""

    share: GpuShare | None = None
    mps_count: int = 0  # the GPU's MPS count (gres.conf Name=mps): an mps:N job's thread percentage
    mps_pipe: str = ""  # the job runs as a client of the GPU's MPS daemon, which listens here ...
    mps_log: str = ""  # ... and logs here
    simulated_dir: str = ""  # PSLURM_SIMULATED_GPU_DIR (simulated GPUs with memory)


def sharing_environment(setup: GpuSetup) -> dict[str, str]:
    """The variables of a job's share of its GPU, as Slurm's gres/shard and gres/mps set them
    (SLURM_SHARDS_ON_NODE; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = N * 100 // the GPU's MPS count, at
    least 1), plus pslurm's own for a memory slice (PSLURM_GPU_MEM_MB, and under MPS the driver's
    limit CUDA_MPS_PINNED_DEVICE_MEM_LIMIT on device 0, the job's first visible device)."""
    env: dict[str, str] = {}
    share = setup.share
    if share is not None and share.kind == "shard":
        env["SLURM_SHARDS_ON_NODE"] = str(share.amount)
    if share is not None and share.kind == "mps":
        percentage = max(share.amount * 100 // setup.mps_count, 1) if setup.mps_count > 0 else share.amount
        env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(percentage)
    if share is not None and share.kind == "gpumem":
        env["PSLURM_GPU_MEM_MB"] = str(share.amount)
        if setup.mps_pipe:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={share.amount}M"
    if setup.mps_pipe:
        env["CUDA_MPS_PIPE_DIRECTORY"] = setup.mps_pipe
        env["CUDA_MPS_LOG_DIRECTORY"] = setup.mps_log
    if setup.simulated_dir:
        env["PSLURM_SIMULATED_GPU_DIR"] = setup.simulated_dir
    return env


def node_counts(job: JobRecord, whole: Mapping[str, int] | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(tasks, CPUs) on each node of the job's allocation, in its order (core/layout.py's
    node_layout; spread over the nodes it has where the record's count differs from the request's).
    An --exclusive job has every CPU of its nodes: ``whole`` (node -> configured CPUs) says how many."""
    spec = job.spec
    count = len(job.all_nodes) or 1
    if spec.num_nodes != count:
        spec = replace(spec, num_nodes=count)
    layout = node_layout(spec)
    cpus = tuple(n.cpus for n in layout)
    if spec.exclusive and whole:
        names = job.all_nodes or (job.node or "",)
        cpus = tuple(whole.get(name, c) for name, c in zip(names, cpus, strict=False))
    return tuple(n.tasks for n in layout), cpus


def job_environment(job: JobRecord, node: str, cluster: str, visible: list[int],
                    gpu_setup: GpuSetup | None = None, node_index: int = 0,
                    whole: Mapping[str, int] | None = None) -> dict[str, str]:
    """Slurm's job variables, on node ``node``, the ``node_index``-th of the job's allocation
    (``job.nodes``; a record without them: ``node`` alone). ``visible`` is what CUDA_VISIBLE_DEVICES lists:
    the node's GPU indices, or 0..n-1 when a device cgroup hides the other GPUs; an MPS client
    sees its GPU as device 0 whatever its index (NVIDIA: the daemon, which sees only that GPU,
    renumbers it for its clients). ``gpu_setup``: the job's share of its GPU
    (:func:`sharing_environment`). ``whole``: each node's CPUs (an --exclusive job's)."""
    env = dict(job.spec.environment)
    env.update(_allocation_vars(job, node, cluster, node_index, whole))
    _set_array_vars(env, job)
    _set_option_vars(env, job)
    _set_gpu_vars(env, job, visible, gpu_setup or GpuSetup())
    return env


def _allocation_vars(job: JobRecord, node: str, cluster: str, node_index: int,
                     whole: Mapping[str, int] | None) -> dict[str, str]:
    """The job, its user and its allocation: nodes, tasks and CPUs, this node's place in it."""
    spec = job.spec
    nodes = job.nodes or (node,)
    nodelist = collect(nodes)
    tasks, cpus = node_counts(replace(job, nodes=nodes), whole)
    here = min(max(node_index, 0), len(nodes) - 1)
    # -N 2 without -n: a task on each node (the request's count of 1 is no count: Slurm sets none)
    ntasks = spec.ntasks if spec.ntasks >= len(nodes) else sum(tasks)
    return {
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_USER": spec.user,
        "SLURM_JOB_UID": str(spec.uid),
        "SLURM_JOB_GID": str(spec.gid),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_NODELIST": nodelist,
        "SLURM_JOB_NUM_NODES": str(len(nodes)),
        "SLURM_NNODES": str(len(nodes)),
        "SLURMD_NODENAME": node,
        "SLURM_NTASKS": str(ntasks),
        "SLURM_NPROCS": str(ntasks),
        "SLURM_TASKS_PER_NODE": compress_counts(tasks),  # Slurm's 2(x3),1
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": str(here),
        "SLURM_CPUS_PER_TASK": str(spec.cpus_per_task),
        "SLURM_CPUS_ON_NODE": str(cpus[here]),
        "SLURM_JOB_CPUS_PER_NODE": compress_counts(cpus),
        "SLURM_SUBMIT_DIR": spec.workdir,
        "PWD": spec.workdir,
        "SLURM_SUBMIT_HOST": spec.environment.get("SLURM_SUBMIT_HOST", socket.gethostname()),
        "SLURM_RESTART_COUNT": str(job.restarts),
    }


ARRAY_VARS = ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
              "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP")


def _set_array_vars(env: dict[str, str], job: JobRecord) -> None:
    """An array task's variables; none for any other job (not even the submitter's)."""
    spec = job.spec
    for name in ARRAY_VARS:
        env.pop(name, None)
    if job.array_job_id is None or not spec.array:
        return
    from pslurm.core.arrays import parse_array

    tasks, _ = parse_array(spec.array, max_array_size=2**31)
    gaps = {b - a for a, b in zip(tasks, tasks[1:], strict=False)}
    env.update({
        "SLURM_ARRAY_JOB_ID": str(job.array_job_id),
        "SLURM_ARRAY_TASK_ID": str(job.array_task_id),
        "SLURM_ARRAY_TASK_COUNT": str(len(tasks)),
        "SLURM_ARRAY_TASK_MIN": str(tasks[0]),
        "SLURM_ARRAY_TASK_MAX": str(tasks[-1]),
        "SLURM_ARRAY_TASK_STEP": str(gaps.pop() if len(gaps) == 1 else 1),
    })


def _set_option_vars(env: dict[str, str], job: JobRecord) -> None:
    """The variables of the job's options (account, QOS, memory, time limit...) and its kind."""
    spec = job.spec
    # not the submitter's (sbatch inside a job): set where this job has one, else unset
    for name in ("SLURM_JOB_ACCOUNT", "SLURM_NTASKS_PER_NODE", "SLURM_OPEN_MODE"):
        env.pop(name, None)
    if spec.account:
        env["SLURM_JOB_ACCOUNT"] = spec.account
    if spec.open_mode:  # as slurmctld passes it on to the job's steps
        env["SLURM_OPEN_MODE"] = "a" if spec.open_mode == "append" else "t"
    env["SLURM_JOB_QOS"] = spec.qos or "normal"  # Slurm's default QOS, the only one pslurm has
    if spec.ntasks_per_node:
        env["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    if spec.mem_mb:
        env["SLURM_MEM_PER_NODE"] = str(spec.mem_mb)
    if job.time_limit is not None:
        env["SLURM_TIMELIMIT"] = str(max(1, job.time_limit // 60))
    if spec.interactive:
        env["SLURM_STEP_ID"] = "0"
        env["SLURM_STEPID"] = "0"
        if job.gpu_indices:
            env["SLURM_STEP_GPUS"] = ",".join(str(i) for i in job.gpu_indices)
    else:
        env["ENVIRONMENT"] = "BATCH"


def _set_gpu_vars(env: dict[str, str], job: JobRecord, visible: list[int], setup: GpuSetup) -> None:
    """The job's GPUs and its share of them; none of the submitter's."""
    for name in SHARING_VARS:
        env.pop(name, None)
    env.update(sharing_environment(setup))
    if job.gpu_indices:
        visible_text = ",".join(str(i) for i in visible)
        env["SLURM_JOB_GPUS"] = ",".join(str(i) for i in job.gpu_indices)
        env["SLURM_GPUS_ON_NODE"] = str(len(job.gpu_indices))
        env["CUDA_VISIBLE_DEVICES"] = "0" if setup.mps_pipe else visible_text
        env["NVIDIA_VISIBLE_DEVICES"] = visible_text
        env["GPU_DEVICE_ORDINAL"] = visible_text
    else:
        # a GPU-less job must not inherit the submitter's GPU selection; Slurm sets no SLURM_GPUS_ON_NODE for it
        for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                     "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE"):
            env.pop(name, None)


def task_environment(job_env: Mapping[str, str], launch: StepLaunch, local: int, job_gpus: Sequence[int],
                     job_visible: Sequence[int], mps: bool = False) -> dict[str, str]:
    """One step task's environment: ``job_env`` (the job's Slurm variables built over psrun's exported
    environment) and the step's, as srun (env_array_for_step) and slurmstepd set them.
    ``job_visible``: the job's CUDA_VISIBLE_DEVICES, position by position for ``job_gpus`` (0..n-1
    behind a device cgroup); the step's GPUs are renumbered the same way. With per-task GPUs
    (``launch.task_gpus``, --gpus-per-task/--gpu-bind) CUDA_VISIBLE_DEVICES (and GPU_DEVICE_ORDINAL,
    NVIDIA_VISIBLE_DEVICES) is the task's own, SLURM_STEP_GPUS the step's."""
    from pslurm.core import hostlists

    env = dict(job_env)
    total = launch.total_tasks or launch.ntasks
    nodes = hostlists.expand(launch.step_nodelist) if launch.step_nodelist else []
    tasks_per_node = launch.tasks_per_node or str(launch.ntasks)
    rank = launch.task_offset + local
    env.update({
        "SLURM_STEP_ID": str(launch.step_id),
        "SLURM_STEPID": str(launch.step_id),
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(launch.node_index),
        "SLURM_STEP_NODELIST": launch.step_nodelist,
        "SLURM_NODELIST": launch.step_nodelist or env.get("SLURM_NODELIST", ""),  # srun's: the step's nodes
        "SLURM_STEP_NUM_NODES": str(len(nodes) or 1),
        "SLURM_STEP_NUM_TASKS": str(total),
        "SLURM_STEP_TASKS_PER_NODE": tasks_per_node,
        "SLURM_NTASKS": str(total),
        "SLURM_NPROCS": str(total),
        "SLURM_TASKS_PER_NODE": tasks_per_node,
        "SLURM_NNODES": str(len(nodes) or 1),
        "SLURM_GTIDS": ",".join(str(launch.task_offset + i) for i in range(launch.ntasks)),
        "PWD": launch.workdir,
    })
    if launch.cpus_per_task > 0:
        env["SLURM_CPUS_PER_TASK"] = str(launch.cpus_per_task)
    gpus = launch.gpus(list(job_gpus))
    if gpus:
        renumber = dict(zip(job_gpus, job_visible, strict=False))
        mine = list(launch.task_gpus[local]) if local < len(launch.task_gpus) else []
        visible = ",".join(str(renumber.get(g, g)) for g in (mine or gpus))  # --gpus-per-task: the task's own
        env["SLURM_STEP_GPUS"] = ",".join(str(g) for g in gpus)
        env["CUDA_VISIBLE_DEVICES"] = "0" if mps else visible
        env["NVIDIA_VISIBLE_DEVICES"] = visible
        env["GPU_DEVICE_ORDINAL"] = visible
    else:
        for name in ("SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"):
            env.pop(name, None)
    return env
