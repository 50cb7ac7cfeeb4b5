"""sstat's figures: what each task of a running job uses now, read from /proc and the job's cgroup.

A task is a session: the batch script's shell leads one, and each task of a step (psrun) another, all
inside the job's cgroup. So the processes of the job's cgroup (or, without one, every process) are
grouped by their session, and each session whose leader is a task the agent started is that task:
its processes' CPU time, resident and virtual memory, major faults and I/O added up, as
jobacct_gather/linux adds up a task's process tree. The job's cgroup gives its memory and CPU time
in all, the node's GPU monitor its GPUs' use. The servicer puts them on the wire (JobStats).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pslurm.nodeagent.link import GpuUse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pslurm.nodeagent.agent import Agent

_TICK = os.sysconf("SC_CLK_TCK")
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass
class ProcStat:
    pid: int
    session: int
    cpu_seconds: float
    rss_kb: int
    vmsize_kb: int
    pages: int
    read_bytes: int = 0
    write_bytes: int = 0


def read_proc(pid: int, root: str = "/proc") -> ProcStat | None:
    """One process's figures (None once it is gone)."""
    try:
        with open(f"{root}/{pid}/stat") as fh:
            text = fh.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3
    stat = ProcStat(pid, int(fields[3]), (int(fields[11]) + int(fields[12])) / _TICK, int(fields[21]) * _PAGE_KB,
                    int(fields[20]) // 1024, int(fields[9]))
    try:
        with open(f"{root}/{pid}/io") as fh:
            io = dict(line.split(": ", 1) for line in fh.read().splitlines() if ": " in line)
        stat.read_bytes, stat.write_bytes = int(io.get("read_bytes", 0)), int(io.get("write_bytes", 0))
    except (OSError, ValueError):
        pass  # another user's process, for an agent that is not root: no I/O figures
    return stat


@dataclass
class TaskStats:
    """One task's sums: its processes' figures added up."""

    step: str  # "batch", or the step's number
    rank: int  # the task's rank in its step
    pid: int  # its leader
    cpu_seconds: float = 0.0
    rss_kb: int = 0
    vmsize_kb: int = 0
    pages: int = 0  # major page faults
    read_bytes: int = 0
    write_bytes: int = 0
    pids: list[int] = field(default_factory=list)  # every process of the task (sstat's Pids)


@dataclass
class JobStats:
    """A running job's figures on this node now."""

    node: str
    tasks: list[TaskStats]
    memory_kb: int | None = None  # the job's memory cgroup now
    cpu_seconds: float | None = None  # the job's cgroup's CPU time
    gpus: list[GpuUse] = field(default_factory=list)  # its GPUs' use now


def task_stats(leaders: Mapping[int, tuple[str, int]], pids: Iterable[int], root: str = "/proc") -> list[TaskStats]:
    """Each task's sums: ``leaders`` maps a task's leader pid (its session) to (step, rank)."""
    sums = {pid: TaskStats(step=step, rank=rank, pid=pid) for pid, (step, rank) in leaders.items()}
    for pid in pids:
        found = read_proc(pid, root)
        task = sums.get(found.session) if found is not None else None
        if found is None or task is None:
            continue
        task.cpu_seconds += found.cpu_seconds
        task.rss_kb += found.rss_kb
        task.vmsize_kb += found.vmsize_kb
        task.pages += found.pages
        task.read_bytes += found.read_bytes
        task.write_bytes += found.write_bytes
        task.pids.append(pid)
    return sorted(sums.values(), key=lambda t: (t.step != "batch", t.step, t.rank))


def all_pids(root: str = "/proc") -> list[int]:
    return [int(name) for name in os.listdir(root) if name.isdigit()]


def job_stats(agent: Agent, job_id: int) -> JobStats:
    """The agent's running run of ``job_id`` measured now; LookupError when it runs none here."""
    run = agent.run_of(job_id)
    if run is None or run.end is not None:
        raise LookupError(f"job {job_id} is not running on this node")
    leaders: dict[int, tuple[str, int]] = {}
    spec = run.job.spec
    if run.proc is not None and not spec.allocation:  # an allocation's placeholder is nobody's task
        leaders[run.proc.pid] = ("0" if spec.interactive else "batch", 0)
    for step in agent.steps.of_run(run):
        for task in step.tasks:
            if task.proc is not None and task.returncode is None:
                leaders[task.proc.pid] = (str(step.step_id), task.rank)
    cgroup = run.cgroup
    stats = JobStats(agent.node.name, task_stats(leaders, cgroup.pids() if cgroup is not None else all_pids()))
    if cgroup is not None:
        memory = cgroup.memory_bytes()
        stats.memory_kb = memory // 1024 if memory is not None else None
        stats.cpu_seconds = cgroup.cpu_seconds()
    mine = set(run.job.gpu_indices)
    stats.gpus = [g for g in agent.gpus.use() if g.index in mine]
    return stats
