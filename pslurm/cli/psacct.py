"""psacct: accounting of finished and running jobs (sacct), GPU usage included."""

from __future__ import annotations

import sys
import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, job_id_list, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from pslurm.core.jobinfo import JobInfo as Job

PROG = prog_name("psacct")
DEFAULT_FIELDS = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
# sacct 22.05's header names and default widths (src/sacct/sacct.c's fields[]); a negative width is
# left-aligned (the ids), everything else right-aligned. GPUSeconds, GPUMem (the --gpu-mem slice),
# GPUMemPeak, GPUUtil, GPUIndices are pslurm's own. The getters are in account_fields(), by the same lower-case keys.
FIELDS: dict[str, tuple[str, int]] = {name.lower(): (name, width) for name, width in (
    ("Account", 10), ("AllocCPUS", 10), ("AllocGRES", 12), ("AllocTRES", 10), ("Comment", 14), ("CPUTime", 10),
    ("CPUTimeRAW", 10), ("Elapsed", 10), ("ElapsedRaw", 10), ("End", 19), ("ExitCode", 8), ("GID", 6),
    ("Group", 9), ("JobID", -12), ("JobIDRaw", -12), ("JobName", 10), ("MaxRSS", 10), ("NCPUS", 10),
    ("NNodes", 8), ("NodeList", 15), ("NTasks", 8), ("Partition", 10), ("QOS", 10), ("Reason", 22), ("ReqCPUS", 8),
    ("ReqMem", 10), ("ReqTRES", 10), ("Start", 19), ("State", 10), ("Submit", 19), ("Timelimit", 10),
    ("SystemComment", 15), ("UID", 6), ("User", 9), ("WorkDir", 20),
    ("GPUSeconds", 10), ("GPUMem", 10), ("GPUMemPeak", 10), ("GPUUtil", 10), ("GPUIndices", 10),
)}


# sacct prints these on a job's line only, blank on its steps' lines
STEP_BLANK = frozenset({"partition", "timelimit", "user", "uid", "group", "gid", "reason", "qos", "comment",
                        "systemcomment", "reqmem", "workdir", "gpuseconds", "gpumem", "gpumempeak", "gpuutil"})


class StepDesc:
    """A step's request as the field getters read a job's spec: its name, tasks, CPUs; the job's
    account, user, node count, memory and GPUs."""

    __slots__ = ("name", "ntasks", "cpus", "account", "user", "uid", "gid", "num_nodes", "mem_mb", "gres",
                 "workdir", "comment", "qos")

    def __init__(self, job: Job, name: str, ntasks: int, cpus: int, num_nodes: int) -> None:
        spec = job.spec
        self.name, self.ntasks, self.cpus, self.num_nodes = name, ntasks, cpus, num_nodes
        self.account, self.user, self.uid, self.gid = spec.account, spec.user, spec.uid, spec.gid
        self.mem_mb, self.gres, self.workdir, self.comment, self.qos = spec.mem_mb, spec.gres, spec.workdir, "", ""

    def gpus(self, type_: str | None = None) -> int:
        return sum(g.count for g in self.gres if g.name == "gpu" and (type_ is None or g.type == type_))


class StepLine:
    """A line of sacct for a job's step (``J.batch``, ``J.0``...), with the attributes a job's line
    has (see account_fields); ``is_step`` blanks the fields sacct prints on a job's line only."""

    __slots__ = ("display_id", "job_id", "spec", "state", "reason", "exit_code", "exit_signal", "start_time",
                 "end_time", "submit_time", "time_limit", "node", "partition", "gpu_indices", "gpu_seconds",
                 "peak_gpu_memory_mb", "mean_gpu_util", "system_comment", "is_step", "max_rss_kb")

    def __init__(self, job: Job, suffix: str, spec: StepDesc, state: Any, exit_code: int, exit_signal: int,
                 start: float | None, end: float | None, nodes: str, max_rss_kb: int | None = None) -> None:
        self.display_id, self.job_id = f"{job.display_id}.{suffix}", f"{job.job_id}.{suffix}"
        self.spec, self.state, self.reason = spec, state, ""
        self.exit_code, self.exit_signal = exit_code, exit_signal
        self.start_time, self.end_time, self.submit_time = start, end, start or 0.0
        self.time_limit, self.node, self.partition = None, nodes, ""
        self.gpu_indices = job.gpu_indices
        self.gpu_seconds = self.peak_gpu_memory_mb = self.mean_gpu_util = None
        self.system_comment, self.is_step = "", True
        self.max_rss_kb = max_rss_kb  # the batch step's memory cgroup's peak; None: not measured (psrun's steps)


def step_lines(job: Job, steps: Sequence[dict[str, Any]]) -> list[StepLine]:
    """A job's step lines as sacct prints them under its own: ``J.batch`` for a batch job that ran
    (from the job's record: its state, TIMEOUT as CANCELLED, exit code and MaxRSS), then ``J.0``, ``J.1``...
    (``steps``: the API's ``pslurm.steps``), each with its name (the command's), tasks, nodes and times."""
    from pslurm.core.states import JobState

    out = []
    spec = job.spec
    if job.start_time is not None and job.node and not spec.interactive and not spec.allocation:  # it ran on a node
        state = job.state
        if state is JobState.TIMEOUT:
            state = JobState.CANCELLED  # the batch step is killed when the job's time is out (as sacct shows it)
        elif state is JobState.COMPLETING:
            state = JobState.RUNNING
        out.append(StepLine(job, "batch", StepDesc(job, "batch", 1, _batch_host_cpus(job), 1), state, job.exit_code,
                            job.exit_signal, job.start_time, job.end_time, job.node or "",
                            None if job.max_rss_kb is None else int(job.max_rss_kb)))
    for step in steps:
        nodes = str(step.get("nodes") or "")
        out.append(StepLine(job, str(step["step_id"]),
                            StepDesc(job, str(step.get("name") or ""), int(step.get("ntasks") or 1),
                                     int(step.get("cpus") or 1), max(1, len(nodes.split(",")))),
                            JobState(step["state"]), int(step.get("exit_code") or 0),
                            int(step.get("exit_signal") or 0), step.get("start_time"), step.get("end_time"), nodes))
    return out


def _batch_host_cpus(job: Job) -> int:
    """The batch step's CPUs: the job's on its first node, where the script runs (sacct's J.batch AllocCPUS)."""
    from pslurm.cli.jobview import node_count

    spec = job.spec
    nodes = node_count(job)
    if nodes <= 1:
        return spec.cpus
    from pslurm.core.layout import tasks_per_node

    return tasks_per_node(nodes, spec.ntasks, spec.ntasks_per_node)[0] * max(1, spec.cpus_per_task)


def with_steps(jobs: Sequence[Job]) -> list[Job | StepLine]:
    """Each job followed by its step lines (the API's ``pslurm.steps``, asked with ``steps=1``)."""
    out: list[Job | StepLine] = []
    for job in jobs:
        out.append(job)
        out.extend(step_lines(job, job.steps))
    return out


def _elapsed(job: Job, now: float) -> float:
    if job.start_time is None:
        return 0.0
    end = job.end_time if job.end_time is not None else now
    return max(0.0, end - job.start_time)


def format_elapsed(seconds: float) -> str:
    """sacct's Elapsed: ``HH:MM:SS``, with ``D-`` in front past a day."""
    from pslurm.core.timefmt import format_slurm_duration

    return format_slurm_duration(seconds)


def _allocated(job: Job) -> bool:
    return job.start_time is not None


def _nnodes(job: Job) -> int:
    """The nodes of a job (those it had, else those it asks for) or of a step line."""
    if isinstance(job, StepLine):
        return job.spec.num_nodes
    from pslurm.cli.jobview import node_count

    return node_count(job)


def _gpus(job: Job) -> int:
    """GPUs in all: those asked per node times the nodes."""
    return job.spec.gpus() * (1 if isinstance(job, StepLine) else _nnodes(job))


def _cpus(job: Job) -> int:
    """CPUs in all (every node's tasks times --cpus-per-task)."""
    if isinstance(job, StepLine):
        return job.spec.cpus
    from pslurm.cli.jobview import total_cpus

    return total_cpus(job)


def _nodelist(job: Job) -> str:
    if isinstance(job, StepLine):
        return job.node or "None assigned"
    from pslurm.cli.jobview import nodelist_text

    return nodelist_text(job) or "None assigned"


def alloc_tres(job: Job) -> str:
    """``cpu=1,gres/gpu=2,gres/gpu:a100=2,mem=1000M,node=1``; empty before the job was allocated."""
    return tres(job) if _allocated(job) else ""


def tres(job: Job) -> str:
    """The job's TRES (``cpu=1,gres/gpu=2,mem=1000M,node=1``): sacct's ReqTRES, and AllocTRES once allocated."""
    parts = [f"cpu={_cpus(job)}"]
    gpus = _gpus(job)
    if gpus:
        parts.append(f"gres/gpu={gpus}")
        each = gpus // max(job.spec.gpus(), 1)  # the nodes
        parts += [f"gres/gpu:{g.type}={g.count * each}" for g in job.spec.gres if g.name == "gpu" and g.type]
    parts += [f"gres/{g.name}={g.count}{'M' if g.name == 'gpumem' else ''}" for g in job.spec.gres
              if g.name in ("shard", "mps", "gpumem")]  # a share of one GPU
    nodes = _nnodes(job)
    if job.spec.mem_mb:
        parts.append(f"mem={job.spec.mem_mb * nodes}M")  # --mem is per node
    parts.append(f"node={nodes}")
    return ",".join(parts)


def gpu_seconds(job: Job, now: float) -> float | None:
    """Recorded GPU-seconds, or allocated GPUs x elapsed so far for a job still running."""
    if job.gpu_seconds is not None:
        return job.gpu_seconds
    gpus = _gpus(job)
    return gpus * _elapsed(job, now) if gpus and _allocated(job) else None


def account_fields(now: float) -> dict[str, Callable[[Job], str]]:
    """Field key (lower case, as in FIELDS) -> getter of the value sacct prints (on a job's line; a
    step's line, :class:`StepLine`, has the fields of STEP_BLANK blank)."""
    fields = _job_fields(now)
    for key in STEP_BLANK:
        fields[key] = _blank_on_steps(fields[key])
    return fields


def _blank_on_steps(get: Callable[[Job], str]) -> Callable[[Job], str]:
    return lambda row: "" if getattr(row, "is_step", False) else get(row)


def _job_fields(now: float) -> dict[str, Callable[[Job], str]]:
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import format_slurm_duration, format_timestamp

    def gpu_secs(job: Job) -> str:
        value = gpu_seconds(job, now)
        return "" if value is None else str(round(value))

    def alloc_cpus(job: Job) -> int:
        return _cpus(job) if _allocated(job) else 0

    def time_limit(job: Job) -> str:
        # sacct: the limit in force; Partition_Limit while a job that asked none waits (the partition's
        # limit is applied when it starts), UNLIMITED where there is none
        if job.time_limit is not None:
            return format_slurm_duration(job.time_limit)
        return "Partition_Limit" if job.state == JobState.PENDING and job.spec.time_limit is None else "UNLIMITED"

    def cpu_time(job: Job) -> float:
        return _elapsed(job, now) * alloc_cpus(job)

    def ntasks(job: Job) -> str:
        if isinstance(job, StepLine):
            return str(job.spec.ntasks)
        from pslurm.cli.jobview import total_tasks

        return str(total_tasks(job))

    return {
        "jobid": lambda j: j.display_id,  # 3_0 for task 0 of array 3, as sacct
        "jobidraw": lambda j: str(j.job_id),
        "jobname": lambda j: j.spec.name,
        "partition": lambda j: j.partition,
        "account": lambda j: j.spec.account,
        "user": lambda j: j.spec.user,
        "uid": lambda j: str(j.spec.uid),
        "group": lambda j: str(j.spec.gid),
        "gid": lambda j: str(j.spec.gid),
        "state": lambda j: j.state.value,
        "reason": lambda j: str(j.reason),
        "exitcode": lambda j: f"{j.exit_code}:{j.exit_signal}",
        "elapsed": lambda j: format_slurm_duration(_elapsed(j, now)),
        "elapsedraw": lambda j: str(int(_elapsed(j, now))),
        "cputime": lambda j: format_slurm_duration(cpu_time(j)),
        "cputimeraw": lambda j: str(int(cpu_time(j))),
        "submit": lambda j: format_timestamp(j.submit_time),
        "start": lambda j: format_timestamp(j.start_time),  # Unknown before it starts
        "end": lambda j: format_timestamp(j.end_time),  # Unknown while it runs
        "timelimit": time_limit,
        "nodelist": _nodelist,
        "nnodes": lambda j: str(_nnodes(j)),
        "ntasks": ntasks,  # a job's line: the tasks it asked; a step's: its tasks
        "alloccpus": lambda j: str(alloc_cpus(j)),
        "ncpus": lambda j: str(alloc_cpus(j)),
        "reqcpus": lambda j: str(_cpus(j)),
        "reqmem": lambda j: f"{j.spec.mem_mb}M" if j.spec.mem_mb else "0",  # 22.05: no n/c suffix
        # sacct's on steps' lines only: the batch step's, its memory cgroup's peak (ConstrainRAMSpace=yes);
        # psrun's steps are not measured
        "maxrss": lambda j: f"{j.max_rss_kb}K" if isinstance(j, StepLine) and j.max_rss_kb is not None else "",
        "alloctres": alloc_tres,
        "reqtres": tres,
        "allocgres": lambda j: ",".join([f"gpu:{_gpus(j)}"] if _gpus(j) else [
            str(g) for g in j.spec.gres if g.name in ("shard", "mps", "gpumem")]) if _allocated(j) else "",
        "gpuindices": lambda j: ",".join(map(str, j.gpu_indices)),
        "workdir": lambda j: j.spec.workdir,
        "gpuseconds": gpu_secs,
        "gpumem": lambda j: "".join(f"{g.count}M" for g in j.spec.gres if g.name == "gpumem"),
        "systemcomment": lambda j: j.system_comment,
        "comment": lambda j: j.spec.comment,
        "qos": lambda j: j.spec.qos or "normal",  # Slurm's default QOS, the only one pslurm has
        "gpumempeak": lambda j: f"{j.peak_gpu_memory_mb}M" if j.peak_gpu_memory_mb is not None else "",
        "gpuutil": lambda j: f"{j.mean_gpu_util:.1f}%" if j.mean_gpu_util is not None else "",
    }


def parse_fields(spec: str, known: Sequence[str]) -> list[tuple[str, str, int]]:
    """``JobID,JobName%30`` -> [(header, key, width)]: sacct's header and default width (FIELDS) unless
    ``%N`` says; a negative width (the ids) is left-aligned."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, width = item.partition("%")
        key = name.lower()
        if key not in known:
            raise ValueError(f'Invalid field requested: "{name}"')
        if width and not width.lstrip("-").isdigit():
            raise ValueError(f"Invalid field width: {item}")
        header, default = FIELDS.get(key, (name, 10))  # sacct prints its own spelling of the name
        out.append((header, key, int(width) if width else default))
    return out


def render(rows: Sequence[Any], columns: list[tuple[str, str, int]], fields: dict[str, Callable[[Job], str]],
           header: bool, sep: str | None, trailing: bool) -> list[str]:
    """sacct's table (fixed widths, ``+`` marks a cut value) or, with ``sep``, parsable lines."""
    table = [[fields[key](row) for _, key, _ in columns] for row in rows]
    if sep is not None:
        lines = ([[name for name, _, _ in columns]] if header else []) + table
        return [sep.join(values) + (sep if trailing else "") for values in lines]

    def cell(value: str, key: str, width: int, mark: str = "+") -> str:
        left, width = width < 0, abs(width)
        if len(value) > width:
            value = value[: width - len(mark)] + mark
        return value.ljust(width) if left else value.rjust(width)

    out = []
    if header:
        out.append(" ".join(cell(name, key, w, mark="") for name, key, w in columns))
        out.append(" ".join("-" * abs(w) for _, _, w in columns))
    out += [" ".join(cell(v, key, w) for v, (_, key, w) in zip(values, columns, strict=True)) for values in table]
    return [line.rstrip() for line in out]


def _job_json(job: Job, now: float) -> dict[str, Any]:
    from pslurm.cli.jsonout import job_json

    data = job_json(job)
    data["elapsed"] = int(_elapsed(job, now))
    data["alloc_tres"] = alloc_tres(job)
    data["gpu_seconds"] = gpu_seconds(job, now)
    data.setdefault("peak_gpu_memory_mb", None)
    data.setdefault("mean_gpu_util", None)
    data.setdefault("max_rss_kb", None)
    for key in ("peak_gpu_memory_mb", "max_rss_kb"):
        if data[key] is not None:
            data[key] = int(data[key])
    return data


OPTIONS = (
    a.JOBS, a.USERS,
    a.Opt("allusers", "a", a.NONE, help="jobs of every user"),
    a.Opt("state", "s", dest="states", help="states (CD,F,R,...)"),
    a.Opt("starttime", "S", dest="start", help="jobs in any state after this time (default: midnight)"),
    a.Opt("endtime", "E", dest="end", help="jobs submitted before this"),
    a.Opt("format", "o", dest="fmt", help="fields: JobID,JobName%30,..."),
    a.Opt("parsable", "p", a.NONE, help="'|' after every field"),
    a.Opt("parsable2", "P", a.NONE, help="'|' between fields"),
    a.Opt("noheader", "n", a.NONE, help="no header lines"),
    a.Opt("name", dest="names", help="jobs of these names (comma-separated)"),
    a.Opt("allocations", "X", a.NONE, help="only the jobs' allocations, not their steps"),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Show finished and running jobs from the accounting store (sacct)."""
    found_opts, positional = a.parse_or_fail(
        PROG, argv, OPTIONS, stop_at_positional=False, usage="psacct [OPTIONS]",
        description="Show finished and running jobs from the accounting store (sacct).")
    a.no_positionals(PROG, positional)
    v = a.values(found_opts)
    as_json = a.json_format(PROG, v)  # None, "slurm" or "pslurm"
    jobs, users, states, start, end, fmt = (v.get(k) for k in ("jobs", "users", "states", "start", "end", "fmt"))
    parsable, parsable2 = bool(v.get("parsable")), bool(v.get("parsable2"))
    import os

    from pslurm.cli.common import user_identity
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import TimeFormatError, parse_timestamp

    now = time.time()
    job_ids = job_id_list(PROG, jobs)
    wanted_users = []
    if isinstance(users, str) and users:
        wanted_users = [u for u in users.split(",") if u]
    elif not v.get("allusers") and not jobs and os.getuid() != 0:  # sacct: your own jobs unless root or -a
        wanted_users = [user_identity()[0]]
    since = None
    try:
        wanted = {JobState.parse(s) for s in states.split(",") if s} if isinstance(states, str) else set()
        if start or not jobs:  # sacct's window starts at midnight unless jobs are named
            since = parse_timestamp(str(start or "midnight"), now)
        until = parse_timestamp(end, now) if isinstance(end, str) and end else None
    except (TimeFormatError, ValueError) as exc:
        fail(PROG, str(exc))
    fields = account_fields(now)
    try:
        columns = parse_fields(str(fmt or DEFAULT_FIELDS), list(fields))
    except ValueError as exc:
        fail(PROG, str(exc))
    client = connect(PROG)
    with reporting(PROG):
        found = client.jobs(job_ids=job_ids, users=wanted_users, include_finished=True, since=since,
                            steps=not v.get("allocations"))
    names = set(filter(None, str(v.get("names") or "").split(",")))
    found = [j for j in found if (not wanted or j.state in wanted)
             and (until is None or j.submit_time <= until) and (not names or j.spec.name in names)]
    if as_json == "slurm":
        from pslurm.cli import slurmjson

        steps = None if v.get("allocations") else (lambda job: step_lines(job, job.steps))
        print(slurmjson.dumps(slurmjson.accounts_reply(found, client.config.cluster_name, now, steps)))
        return
    if as_json:
        import json

        print(json.dumps({"jobs": [_job_json(j, now) for j in found]}, indent=2))
        return
    sep = "|" if parsable or parsable2 else None
    rows = found if v.get("allocations") else with_steps(found)
    lines = render(rows, columns, fields, not v.get("noheader"), sep, trailing=parsable and not parsable2)
    sys.stdout.write("".join(line + "\n" for line in lines))


if __name__ == "__main__":
    main()
