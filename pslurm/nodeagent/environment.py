"""The environment a job starts with: the submitter's (as sent) plus Slurm's variables."""

from __future__ import annotations

import socket

from pslurm.core.jobspec import JobRecord


def job_environment(job: JobRecord, node: str, cluster: str, visible: list[int]) -> dict[str, str]:
    """Slurm's job variables for a single-node job. ``visible`` is what CUDA_VISIBLE_DEVICES lists:
    the node's GPU indices, or 0..n-1 when a device cgroup hides the other GPUs."""
    spec = job.spec
    gpus = ",".join(str(i) for i in job.gpu_indices)
    env = dict(spec.environment)
    env.update({
        "SLURM_JOB_ID": str(job.job_id),
        "SLURM_JOBID": str(job.job_id),
        "SLURM_JOB_NAME": spec.name,
        "SLURM_JOB_USER": spec.user,
        "SLURM_JOB_UID": str(spec.uid),
        "SLURM_JOB_GID": str(spec.gid),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_CLUSTER_NAME": cluster,
        "SLURM_JOB_NODELIST": node,
        "SLURM_NODELIST": node,
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_NNODES": "1",
        "SLURMD_NODENAME": node,
        "SLURM_NTASKS": str(spec.ntasks),
        "SLURM_NPROCS": str(spec.ntasks),
        "SLURM_TASKS_PER_NODE": str(spec.ntasks),  # one node: its task count (Slurm's N(xK) is for several)
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "SLURM_CPUS_PER_TASK": str(spec.cpus_per_task),
        "SLURM_CPUS_ON_NODE": str(spec.cpus),
        "SLURM_JOB_CPUS_PER_NODE": str(spec.cpus),
        "SLURM_SUBMIT_DIR": spec.workdir,
        "PWD": spec.workdir,
        "SLURM_SUBMIT_HOST": spec.environment.get("SLURM_SUBMIT_HOST", socket.gethostname()),
        "SLURM_GPUS_ON_NODE": str(len(job.gpu_indices)),
        "SLURM_RESTART_COUNT": str(job.restarts),
    })
    if job.array_job_id is not None and spec.array:
        from pslurm.core.arrays import parse_array

        tasks, _ = parse_array(spec.array, max_array_size=2**31)
        gaps = {b - a for a, b in zip(tasks, tasks[1:], strict=False)}
        step = gaps.pop() if len(gaps) == 1 else 1
        env.update({
            "SLURM_ARRAY_JOB_ID": str(job.array_job_id),
            "SLURM_ARRAY_TASK_ID": str(job.array_task_id),
            "SLURM_ARRAY_TASK_COUNT": str(len(tasks)),
            "SLURM_ARRAY_TASK_MIN": str(tasks[0]),
            "SLURM_ARRAY_TASK_MAX": str(tasks[-1]),
            "SLURM_ARRAY_TASK_STEP": str(step),
        })
    else:
        for name in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                     "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP"):
            env.pop(name, None)
    # not the submitter's (sbatch inside a job): set where this job has one, else unset
    for name in ("SLURM_JOB_ACCOUNT", "SLURM_NTASKS_PER_NODE", "SLURM_OPEN_MODE"):
        env.pop(name, None)
    if spec.account:
        env["SLURM_JOB_ACCOUNT"] = spec.account
    if spec.open_mode:  # as slurmctld passes it on to the job's steps
        env["SLURM_OPEN_MODE"] = "a" if spec.open_mode == "append" else "t"
    # SLURM_NTASKS_PER_NODE: only for --ntasks-per-node, which has no effect here yet
    if spec.mem_mb:
        env["SLURM_MEM_PER_NODE"] = str(spec.mem_mb)
    if job.time_limit is not None:
        env["SLURM_TIMELIMIT"] = str(max(1, job.time_limit // 60))
    if spec.interactive:
        env["SLURM_STEP_ID"] = "0"
        env["SLURM_STEPID"] = "0"
        if gpus:
            env["SLURM_STEP_GPUS"] = gpus
    else:
        env["ENVIRONMENT"] = "BATCH"
    if job.gpu_indices:
        visible_text = ",".join(str(i) for i in visible)
        env["SLURM_JOB_GPUS"] = gpus
        env["CUDA_VISIBLE_DEVICES"] = visible_text
        env["NVIDIA_VISIBLE_DEVICES"] = visible_text
        env["GPU_DEVICE_ORDINAL"] = visible_text
    else:
        # a GPU-less job must not inherit the submitter's GPU selection
        for name in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
                     "SLURM_JOB_GPUS"):
            env.pop(name, None)
    return env
