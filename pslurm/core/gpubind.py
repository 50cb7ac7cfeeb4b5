"""``--gpu-bind`` and ``--gpus-per-task``: which of a step's GPUs on a node each of its tasks sees
(its CUDA_VISIBLE_DEVICES), as slurmstepd's gres binding (Slurm's gres.c). Used by the controller's
step service (the per-task lists it sends in StepLaunch.task_gpus) and by psrun (checking the option)."""

from __future__ import annotations

from collections.abc import Sequence

MAX_TASKS = 100_000


def parse_gpu_bind(text: str) -> tuple[str, tuple[int, ...]] | None:
    """``--gpu-bind``'s kind and numbers (Slurm's tres_bind for gres/gpu; ``verbose,`` dropped):
    ("none"|"closest", ()), ("single"|"per_task", (N,)), ("map_gpu"|"mask_gpu", ids or masks, one a
    task, ``ID*K`` repeated K times). None for text Slurm would refuse."""
    parts = [p for p in text.split(",") if p.strip().lower() != "verbose"]
    head = ",".join(parts).strip()
    kind, _, rest = head.partition(":")
    kind = kind.lower()
    if kind in ("none", "closest") and not rest:
        return kind, ()
    try:
        if kind in ("single", "per_task") and rest.isdigit() and int(rest) > 0:
            return kind, (int(rest),)
        if kind in ("map_gpu", "mask_gpu") and rest:
            values: list[int] = []
            for tok in rest.split(","):
                value, _, times = tok.partition("*")
                n = int(times) if times else 1
                number = int(value, 0)
                if number < 0 or not 0 < n <= MAX_TASKS or len(values) + n > MAX_TASKS:
                    return None
                values += [number] * n
            return kind, tuple(values)
    except ValueError:
        return None
    return None


def task_gpus(step_gpus: Sequence[int], ntasks: int, gpus_per_task: int | None,
              gpu_bind: str) -> list[list[int]] | None:
    """Each of a node's tasks' GPUs (its CUDA_VISIBLE_DEVICES) out of the step's there, as slurmstepd's
    gres binding (gres.c: _get_usable_gres_map_or_mask, _get_gres_per_task): ``--gpus-per-task=N``
    means ``per_task:N`` unless ``--gpu-bind`` says otherwise; map_gpu/mask_gpu numbers are positions
    in the step's GPUs on the node (the local device index, as under ConstrainDevices), cycling over
    the tasks; a bind that names none of them binds to the step's first (Slurm's fallback). None:
    every task sees all of the step's GPUs (none, closest and single: no topology here)."""
    bind = parse_gpu_bind(gpu_bind) if gpu_bind else (("per_task", (gpus_per_task,)) if gpus_per_task else None)
    if bind is None or not step_gpus or bind[0] in ("none", "closest", "single"):
        return None
    kind, values = bind
    out: list[list[int]] = []
    for local in range(ntasks):
        if kind == "per_task":
            n = values[0]  # consecutive slices, cycling when there are more tasks than GPUs
            mine = [step_gpus[(local * n + k) % len(step_gpus)] for k in range(min(n, len(step_gpus)))]
        elif kind == "map_gpu":
            pos = values[local % len(values)]
            mine = [step_gpus[pos]] if pos < len(step_gpus) else []
        else:  # mask_gpu
            mask = values[local % len(values)]
            mine = [g for k, g in enumerate(step_gpus) if mask >> k & 1]
        out.append(mine or [step_gpus[0]])
    return out
