"""What the commands show of a job, in one place for psqueue, pscontrol and psacct.

A job here is a :class:`~pslurm.core.jobinfo.JobInfo` (what :class:`pslurm.client.Client` returns:
the API's JSON, read on access), its request a :class:`~pslurm.core.jobinfo.JobDesc`. Standard
library only, and what a job needs only when it has it (a dependency, GRES)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Iterable

    from pslurm.core.jobinfo import JobDesc as Spec
    from pslurm.core.jobinfo import JobInfo as Job


def dependency_text(job: Job) -> str:
    """squeue's %E and scontrol's Dependency=: ``afterok:15(unfulfilled)``, ``...(failed)``, ``(null)``."""
    text = job.spec.dependency
    if not text:
        return "(null)"  # as describe() says, without importing it
    from pslurm.core.dependency import DepStatus, describe
    from pslurm.core.states import JobReason, JobState

    status = {JobReason.DEPENDENCY: DepStatus.WAITING,
              JobReason.DEPENDENCY_NEVER_SATISFIED: DepStatus.NEVER}.get(job.reason)
    return describe(text, status if job.state == JobState.PENDING else DepStatus.SATISFIED)


def gres_text(spec: Spec) -> str:
    """The GRES asked per node as Slurm prints them (``gpu:a100:2,gpu:1``); "" for none."""
    gres = spec.gres
    if not gres:
        return ""
    from pslurm.core.gres import format_gres

    return format_gres(gres)


def tres_per_node_text(job: Job) -> str:
    """squeue's %b and ``-O tres-per-node`` (TRES_PER_NODE) as Slurm 22.05 prints them: ``gres:gpu:1``,
    ``gres:gpu:a100:2,gres:gpu:1``; ``N/A`` for a job without GRES per node. (slurmrestd's JSON and Slurm
    23.02 on write ``gres/gpu:1``; squeue of 22.05 shows the ``gres:`` form.) GPUs asked with --gpus are
    the job's in all (TRES_PER_JOB, :func:`tres_per_job_text`), not per node."""
    spec = job.spec
    gres = tuple(g for g in spec.gres if not (g.name == "gpu" and tres_per_job(spec)))
    if not gres:
        return "N/A"
    from pslurm.core.gres import format_gres

    return ",".join("gres:" + item for item in format_gres(gres).split(","))


def tres_per_job(spec: Spec) -> str:
    """The request's --gpus as Slurm records it (``gres:gpu:2``); "" when not given (a light listing's
    spec never says)."""
    return str(getattr(spec, "tres_per_job", "") or "")


def tres_per_job_text(job: Job) -> str:
    """squeue's ``-O tres-per-job`` (TRES_PER_JOB): --gpus's ``gres:gpu:2``, ``N/A`` without it."""
    return tres_per_job(job.spec) or "N/A"


def time_used(job: Job, now: float | None = None) -> float:
    """Seconds the job has run (squeue's job_time_used): 0 before it starts, up to its end after."""
    if job.start_time is None:
        return 0.0
    import time

    end = job.end_time if job.end_time is not None else (time.time() if now is None else now)
    return run_time(job, end)


def run_time(job: Job, end: float) -> float:
    """How long its run ran from its start to ``end`` (its end, or now), its suspended time left out
    (Slurm's RunTime, sacct's Elapsed); 0 before it started. A suspended job's run stopped at its
    suspend."""
    if job.start_time is None:
        return 0.0
    stop = job.suspend_time if job.state.value == "SUSPENDED" and job.suspend_time is not None else end
    return max(0.0, stop - job.start_time - job.suspended_seconds)


def suspended_time(job: Job, now: float) -> float:
    """Its run's time suspended, the current stretch included while it is (sacct's Suspended)."""
    since = job.suspend_time if job.state.value == "SUSPENDED" and job.suspend_time is not None else now
    return job.suspended_seconds + max(0.0, now - since)


def time_left_text(job: Job, now: float | None = None) -> str:
    """squeue's %L (TIME_LEFT): the time limit less the time used, as ``[D-]H:MM:SS`` or ``M:SS``;
    ``UNLIMITED`` for a job without a limit; ``INVALID`` when the job has run past its limit (squeue
    prints a negative duration so)."""
    if job.time_limit is None:
        return "UNLIMITED"
    left = int(job.time_limit - time_used(job, now))
    if left < 0 or left > 365 * 86400:
        return "INVALID"
    from pslurm.core.timefmt import format_duration

    return format_duration(left)


def job_nodes(job: Job) -> tuple[str, ...]:
    """The nodes of the job's allocation, in order (the first is its batch host); () before it started."""
    return tuple(job.nodes) or ((job.node,) if job.node else ())


def nodelist_text(job: Job) -> str:
    """squeue's %N, scontrol's NodeList=, sacct's NodeList: the allocation as a hostlist ("" before it)."""
    nodes = job_nodes(job)
    if len(nodes) <= 1:
        return nodes[0] if nodes else ""
    from pslurm.core.hostlists import collect

    return collect(nodes)


def node_count(job: Job) -> int:
    """squeue's %D, scontrol's NumNodes=: the nodes it has, or (before it starts) the nodes it asks for."""
    return len(job_nodes(job)) or job.spec.num_nodes


def total_cpus(job: Job) -> int:
    """The job's CPUs on all of its nodes (squeue's %C, sacct's AllocCPUS): each node's tasks times
    --cpus-per-task (core/layout.py's node_layout)."""
    spec = job.spec
    nodes = node_count(job)
    if nodes <= 1 and not spec.ntasks_per_node:
        return spec.cpus
    from pslurm.core.layout import tasks_per_node

    return sum(tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node)) * max(1, spec.cpus_per_task)


def total_tasks(job: Job) -> int:
    """NumTasks=: -n, or (for -N without -n) a task on each node."""
    spec = job.spec
    nodes = node_count(job)
    if spec.ntasks >= nodes:
        return spec.ntasks
    from pslurm.core.layout import tasks_per_node

    return sum(tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node))


def eligible_time(job: Job) -> float | None:
    """When it became eligible to start: pslurm notes it for a pending job; one that started was
    eligible by then (its submit time, when nothing held it)."""
    if job.eligible_time:
        return job.eligible_time
    return job.submit_time if job.start_time is not None else None


def exit_pair(job: Job) -> tuple[int, int]:
    """(exit code, signal) as Slurm shows them (``ExitCode=3:0``): 0:0 for a job that never ran, though
    it was cancelled (slurmctld keeps no signal for it)."""
    return (job.exit_code, job.exit_signal) if job.start_time is not None else (0, 0)


def wait_status(job: Job) -> int:
    """The job's end as a wait(2) status, as Slurm keeps ``exit_code``: the return code in the high byte,
    a killing signal in the low bits (``768`` is exit 3, ``9`` is SIGKILL)."""
    code, signal = exit_pair(job)
    return ((code & 0xFF) << 8) | (signal & 0x7F)


def row_id(job: Job) -> str:
    """squeue's JOBID (%i): the job's id (``14``, ``14_3``), or ``14_[3-9%2]`` for a row that stands for
    several pending tasks of an array."""
    if job.collapsed_tasks and job.array_job_id is not None:
        throttle = job.spec.array.partition("%")[2]
        return f"{job.array_job_id}_[{job.collapsed_tasks}{'%' + throttle if throttle else ''}]"
    return job.display_id


def array_task_text(job: Job) -> str:
    """squeue's %K: the task id, a collapsed row's tasks (``0-3``), ``N/A`` for a job of no array."""
    if job.array_job_id is None:
        return "N/A"
    return row_id(job).partition("_")[2].strip("[]")


def slurm_start_time(job: Job) -> float | None:
    """Slurm's start_time: when it started; a pending job's expected start; a job that ended without
    starting (cancelled while pending) has its end there, as slurmctld sets it."""
    if job.start_time is not None:
        return job.start_time
    if job.state.value == "PENDING":
        return job.start_estimate
    return job.end_time


def slurm_end_time(job: Job) -> float | None:
    """Slurm's end_time: when it ended; a running job's start plus its limit and the time it spent
    suspended (None without a limit)."""
    if job.end_time is not None:
        return job.end_time
    start = slurm_start_time(job)
    if start is None or job.time_limit is None or job.state.value == "PENDING":
        return None
    return start + job.time_limit + job.suspended_seconds


def reason_text(job: Job) -> str:
    """The reason as squeue's %r prints it: slurmctld's words for it where it gave some (state_desc),
    else its name."""
    return job.state_desc or str(job.reason)


def shows_reason(job: Job) -> bool:
    """squeue's %R shows the reason (not the nodes) for a job pending, or one that ended timed out,
    out of memory, past its deadline or failed (print.c _print_job_reason_list)."""
    return job.state.value in ("PENDING", "TIMEOUT", "OUT_OF_MEMORY", "DEADLINE", "FAILED")


def min_cpus_per_node(job: Job) -> int:
    """Slurm's pn_min_cpus (squeue %c, MinCPUsNode=): --cpus-per-task times --ntasks-per-node."""
    spec = job.spec
    return max(1, spec.cpus_per_task) * max(1, spec.ntasks_per_node)


def min_memory_text(job: Job) -> str:
    """squeue's %m: the memory asked per node (``100M``), ``0`` for none."""
    mem = job.spec.mem_mb
    return f"{mem}M" if mem else "0"


def slurm_priority(job: Job) -> int:
    """The priority as Slurm shows it: 0 for a held job (slurmctld zeroes it), at least 1 otherwise
    (multifactor's floor: 0 would mean held)."""
    if job.hold:
        return 0
    return max(1, job.priority) if job.state.value == "PENDING" or job.start_time is not None else job.priority


def group_name(gid: int) -> str:
    """A group's name, its number when it has none."""
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except (KeyError, OverflowError):
        return str(gid)


def command_text(job: Job) -> str:
    """squeue's %o and scontrol's Command=: the batch script's path as given to sbatch (``(null)``
    for --wrap and stdin), or what psrun/srun runs."""
    spec = job.spec
    if spec.argv:
        return " ".join(spec.argv)
    return spec.command or "(null)"


from pslurm.cli.printable import escaped  # noqa: E402, F401  (the one escaping: jobview's callers say v.escaped)


def std_paths(job: Job) -> tuple[str, str, str]:
    """StdOut, StdErr and StdIn as scontrol shows them: the pattern expanded (``%j %x %u %A %a``; ``%N``
    once the job has a node) and made absolute against the working directory. A batch job's stdin is
    /dev/null; stderr defaults to stdout."""
    import os

    from pslurm.core.patterns import default_output_pattern, expand_output_pattern

    spec = job.spec
    node = job.node or ""
    if node and ("[" in node or "," in node):
        from pslurm.core.hostlists import expand

        node = expand(node)[0]

    def path(pattern: str) -> str:
        text = expand_output_pattern(pattern, job_id=job.job_id, job_name=spec.name, user=spec.user,
                                     node=node or "%N", array_job_id=job.array_job_id,
                                     array_task_id=job.array_task_id)
        return os.path.join(spec.workdir, text) if spec.workdir else text

    out = path(spec.stdout if spec.stdout is not None else default_output_pattern(job.array_job_id is not None))
    err = path(spec.stderr) if spec.stderr is not None else out
    return out, err, "/dev/null"


SHARES = ("shard", "mps", "gpumem")  # a share of one GPU (pslurm's gpumem: MB of its memory)


def job_tres(job: Job, node_memory: int = 0) -> list[tuple[str, str | None, int]]:
    """The job's trackable resources as (type, name, count), in the order slurmctld lists them
    (``cpu``, ``mem`` (MB), ``node``, ``billing``, then the GRES): ``gres/gpu`` for all its GPUs, one
    per GPU type asked (``gres/gpu:a100``), and a share of one GPU by its own name. ``node_memory``: what
    a job that waits and asked no memory is counted, a node's (Slurm's default; CR_Core allocates none)."""
    spec = job.spec
    cpus, nodes = total_cpus(job), node_count(job)
    items: list[tuple[str, str | None, int]] = [("cpu", None, cpus)]
    mem = spec.mem_mb or (node_memory if job.start_time is None else 0)
    if mem:
        items.append(("mem", None, mem * nodes))  # --mem is per node
    items += [("node", None, nodes), ("billing", None, cpus)]  # billing: Slurm's default weights
    gpus = spec.gpus() * nodes  # the GRES is asked per node
    if gpus:
        items.append(("gres", "gpu", gpus))
        items += [("gres", f"gpu:{g.type}", g.count * nodes) for g in spec.gres if g.name == "gpu" and g.type]
    items += [("gres", g.name, g.count) for g in spec.gres if g.name in SHARES]
    return items


def tres_text(items: Iterable[tuple[str, str | None, int]]) -> str:
    """``cpu=1,mem=4000M,node=1,billing=1,gres/gpu=1``: TRES as slurmctld writes them in job_info
    (the per-type ``gres/gpu:a100`` left out: Slurm counts those only where AccountingStorageTRES names
    them)."""
    parts = []
    for kind, name, count in items:
        if name is not None and ":" in name:
            continue
        key = kind if name is None else f"{kind}/{name}"
        parts.append(f"{key}={count}{'M' if kind == 'mem' or name == 'gpumem' else ''}")
    return ",".join(parts)


def tres_alloc_text(job: Job, node_memory: int = 0) -> str:
    """squeue's tres-alloc and scontrol's TRES=: ``cpu=1,mem=100M,node=1,billing=1,gres/gpu=1``
    (``node_memory``: as :func:`job_tres`)."""
    return tres_text(job_tres(job, node_memory))


def batch_host_cpus(job: Job) -> int:
    """The batch step's CPUs: the job's on its first node, where the script runs (sacct's J.batch AllocCPUS)."""
    spec = job.spec
    nodes = node_count(job)
    if nodes <= 1:
        return spec.cpus
    from pslurm.core.layout import tasks_per_node

    return tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node)[0] * max(1, spec.cpus_per_task)
