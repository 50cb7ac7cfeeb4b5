"""psacct: accounting of finished and running jobs (sacct), GPU usage included."""

from __future__ import annotations

import sys
import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, prog_name, reporting
from pslurm.cli.printable import escaped
from pslurm.cli.sacct_fields import SLURM_FIELDS

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
FIELDS.update({name.lower(): (name, width) for name, width in SLURM_FIELDS})


# sacct prints these on a job's line only, blank on its steps' lines
STEP_BLANK = frozenset({"partition", "timelimit", "user", "uid", "group", "gid", "reason", "qos", "comment",
                        "systemcomment", "reqmem", "reqtres", "workdir", "gpuseconds", "gpumem", "gpumempeak",
                        "gpuutil"})


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
                 "peak_gpu_memory_mb", "mean_gpu_util", "system_comment", "is_step", "max_rss_kb", "job")

    def __init__(self, job: Job, suffix: str, spec: StepDesc, state: Any, exit_code: int, exit_signal: int,
                 start: float | None, end: float | None, nodes: str, max_rss_kb: int | None = None) -> None:
        self.job = job
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
    from pslurm.cli.jobview import batch_host_cpus
    from pslurm.core.states import JobState

    out = []
    spec = job.spec
    if job.start_time is not None and job.node and not spec.interactive and not spec.allocation:  # it ran on a node
        state = job.state
        if state is JobState.TIMEOUT or job.exit_signal:
            state = JobState.CANCELLED  # a batch step killed by a signal, or at the time limit (as sacct shows it)
        elif state is JobState.COMPLETING:
            state = JobState.RUNNING
        out.append(StepLine(job, "batch", StepDesc(job, "batch", 1, batch_host_cpus(job), 1), state, job.exit_code,
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


def with_steps(jobs: Sequence[Job]) -> list[Job | StepLine]:
    """Each job followed by its step lines (the API's ``pslurm.steps``, asked with ``steps=1``)."""
    out: list[Job | StepLine] = []
    for job in jobs:
        out.append(job)
        out.extend(step_lines(job, job.steps))
    return out


def _elapsed(job: Job | StepLine, now: float) -> float:
    """sacct's Elapsed: from its start to its end (or now), a job's suspended time left out."""
    if job.start_time is None:
        return 0.0
    end = job.end_time if job.end_time is not None else now
    if isinstance(job, StepLine):
        return max(0.0, end - job.start_time)
    from pslurm.cli.jobview import run_time

    return run_time(job, end)


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
    """``billing=1,cpu=1,gres/gpu=2,mem=1000M,node=1`` (a step's: ``cpu=1,mem=0,node=1``); empty before the job
    was allocated."""
    if isinstance(job, StepLine):
        return f"cpu={job.spec.cpus},mem={job.spec.mem_mb * job.spec.num_nodes if job.spec.mem_mb else 0},node=" \
               f"{job.spec.num_nodes}"
    return tres(job, alloc=True) if _allocated(job) else ""


def tres(job: Job, alloc: bool = False, node_memory: int = 0) -> str:
    """The job's TRES, in sacct's order (by name): ``billing=1,cpu=1,gres/gpu=2,mem=1000M,node=1``; ReqTRES
    (``node_memory``: what a job that asked no memory is counted, the node's; Slurm's default), and AllocTRES
    once allocated (memory only where asked: Slurm's CR_Core does not allocate it)."""
    mem = job.spec.mem_mb * _nnodes(job) if job.spec.mem_mb else (0 if alloc else node_memory * _nnodes(job))
    parts = [f"billing={_cpus(job)}", f"cpu={_cpus(job)}"]
    gpus = _gpus(job)
    if gpus:
        parts.append(f"gres/gpu={gpus}")
        each = gpus // max(job.spec.gpus(), 1)  # the nodes
        parts += [f"gres/gpu:{g.type}={g.count * each}" for g in job.spec.gres if g.name == "gpu" and g.type]
    parts += [f"gres/{g.name}={g.count}{'M' if g.name == 'gpumem' else ''}" for g in job.spec.gres
              if g.name in ("shard", "mps", "gpumem")]  # a share of one GPU
    if mem:
        from pslurm.cli.scontrol_show import mem_text

        parts.append(f"mem={mem_text(mem)}")  # --mem is per node
    parts.append(f"node={_nnodes(job)}")
    return ",".join(sorted(parts, key=lambda part: part.partition("=")[0]))


def gpu_seconds(job: Job, now: float) -> float | None:
    """Recorded GPU-seconds, or allocated GPUs x elapsed so far for a job still running."""
    if job.gpu_seconds is not None:
        return job.gpu_seconds
    gpus = _gpus(job)
    return gpus * _elapsed(job, now) if gpus and _allocated(job) else None


def account_fields(now: float, cluster: str = "", node_memory: int = 0) -> dict[str, Callable[[Job], str]]:
    """Field key (lower case, as in FIELDS) -> getter of the value sacct prints (on a job's line; a
    step's line, :class:`StepLine`, has the fields of STEP_BLANK blank). ``node_memory``: a node's
    memory, which a job that asked none is counted (ReqMem, ReqTRES)."""
    from pslurm.cli.sacct_fields import more_fields

    fields = {**more_fields(now, cluster), **_job_fields(now, node_memory)}
    for key in STEP_BLANK:
        fields[key] = _blank_on_steps(fields[key])
    return fields


def _blank_on_steps(get: Callable[[Job], str]) -> Callable[[Job], str]:
    return lambda row: "" if getattr(row, "is_step", False) else get(row)


# long: one table, a line per sacct field
def _job_fields(now: float, node_memory: int = 0) -> dict[str, Callable[[Job], str]]:  # noqa: C901 - one table
    from pslurm.cli.jobview import group_name, row_id
    from pslurm.core.states import JobState
    from pslurm.core.timefmt import format_slurm_duration, format_timestamp

    def gpu_secs(job: Job) -> str:
        value = gpu_seconds(job, now)
        return "" if value is None else str(round(value))

    def alloc_cpus(job: Job) -> int:
        return _cpus(job)  # sacct: what a job asks while it waits, what it holds once allocated

    def time_limit(job: Job) -> str:
        # sacct: the limit in force; Partition_Limit for a job that asked none and never started (the
        # partition's limit is applied when it starts), UNLIMITED where there is none
        if job.time_limit is not None:
            return format_slurm_duration(job.time_limit)
        return "Partition_Limit" if job.start_time is None and job.spec.time_limit is None else "UNLIMITED"

    def state(job: Job) -> str:
        if job.state is JobState.CANCELLED and not isinstance(job, StepLine):
            return f"CANCELLED by {job.spec.uid}"  # by whom: its owner (pslurm keeps no other canceller)
        return job.state.value

    def exit_code(job: Job) -> str:
        # a job's line: 0:0 for one that timed out (its batch step has the signal) or never started
        if not isinstance(job, StepLine) and (job.state is JobState.TIMEOUT or job.start_time is None):
            return "0:0"
        return f"{job.exit_code}:{job.exit_signal}"

    def reason(job: Job) -> str:
        # the last reason it waited for but None, Priority and Resources: what the accounting database keeps
        return str(job.reason_prev)

    def req_mem(job: Job) -> str:
        from pslurm.cli.scontrol_show import mem_text

        mem = job.spec.mem_mb * _nnodes(job) if job.spec.mem_mb else node_memory * _nnodes(job)
        return f"{mem_text(mem)}" if mem else "0"

    def cpu_time(job: Job) -> float:
        return _elapsed(job, now) * alloc_cpus(job)

    def ntasks(job: Job) -> str:
        if isinstance(job, StepLine):
            return str(job.spec.ntasks)
        from pslurm.cli.jobview import total_tasks

        return str(total_tasks(job))

    return {
        "jobid": lambda j: j.display_id if isinstance(j, StepLine) else row_id(j),  # 3_0; 3_[1-4]: not yet split
        "jobidraw": lambda j: str(j.job_id),
        "jobname": lambda j: escaped(j.spec.name),
        "partition": lambda j: j.partition,
        "account": lambda j: j.spec.account,
        "user": lambda j: j.spec.user,
        "uid": lambda j: str(j.spec.uid),
        "group": lambda j: group_name(j.spec.gid),
        "gid": lambda j: str(j.spec.gid),
        "state": state,
        "reason": reason,
        "exitcode": exit_code,
        "elapsed": lambda j: format_slurm_duration(_elapsed(j, now)),
        "elapsedraw": lambda j: str(int(_elapsed(j, now))),
        "cputime": lambda j: format_slurm_duration(cpu_time(j)),
        "cputimeraw": lambda j: str(int(cpu_time(j))),
        "submit": lambda j: format_timestamp(j.submit_time),
        # Unknown before it starts; None for one that ended without starting
        "start": lambda j: "None" if j.start_time is None and j.state.is_final else format_timestamp(j.start_time),
        "end": lambda j: format_timestamp(j.end_time),  # Unknown while it runs
        "timelimit": time_limit,
        "nodelist": _nodelist,
        "nnodes": lambda j: str(_nnodes(j)),
        "ntasks": lambda j: ntasks(j) if isinstance(j, StepLine) else "",  # sacct: a step's tasks
        "alloccpus": lambda j: str(alloc_cpus(j)),
        "ncpus": lambda j: str(alloc_cpus(j)),
        "reqcpus": lambda j: str(_cpus(j)),
        "reqmem": req_mem,  # 22.05: no n/c suffix; a job that asked none: the node's memory
        # sacct's on steps' lines only: the batch step's, its memory cgroup's peak (ConstrainRAMSpace=yes);
        # psrun's steps are not measured
        "maxrss": lambda j: f"{j.max_rss_kb}K" if isinstance(j, StepLine) and j.max_rss_kb is not None else "",
        "alloctres": alloc_tres,
        "reqtres": lambda j: tres(j, node_memory=node_memory),
        "allocgres": lambda j: ",".join([f"gpu:{_gpus(j)}"] if _gpus(j) else [
            str(g) for g in j.spec.gres if g.name in ("shard", "mps", "gpumem")]) if _allocated(j) else "",
        "gpuindices": lambda j: ",".join(map(str, j.gpu_indices)),
        "workdir": lambda j: j.spec.workdir,
        "gpuseconds": gpu_secs,
        "gpumem": lambda j: "".join(f"{g.count}M" for g in j.spec.gres if g.name == "gpumem"),
        "systemcomment": lambda j: j.system_comment,
        "comment": lambda j: escaped(j.spec.comment),
        "qos": lambda j: j.spec.qos or "normal",  # Slurm's default QOS, the only one pslurm has
        "gpumempeak": lambda j: f"{j.peak_gpu_memory_mb}M" if j.peak_gpu_memory_mb is not None else "",
        "gpuutil": lambda j: f"{j.mean_gpu_util:.1f}%" if j.mean_gpu_util is not None else "",
    }


def parse_fields(spec: str, known: Sequence[str]) -> list[tuple[str, str, int]]:
    """``JobID,JobName%30`` -> [(header, key, width)]: sacct's header and default width (FIELDS) unless
    ``%N`` says; a negative width (the ids) is left-aligned. A name may be shortened, as sacct takes it:
    the first field in sacct's order (``sacct -e``) that it begins (``tresusageinmaxn``)."""
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, width = item.partition("%")
        key = name.lower()
        if key not in known:
            key = next((k for k in sorted(known) if k.startswith(key)), "") if key else ""
        if not key:
            raise ValueError(f'Invalid field requested: "{name}"')
        if width and not width.lstrip("-").isdigit():
            raise ValueError(f"Invalid field width: {item}")
        header, default = FIELDS.get(key, (name, 10))  # sacct prints its own spelling of the name
        out.append((header, key, int(width) if width else default))
    return out


def render(rows: Sequence[Any], columns: list[tuple[str, str, int]], fields: dict[str, Callable[[Job], str]],
           header: bool, sep: str | None, trailing: bool) -> list[str]:
    """sacct's table (fixed widths, ``+`` marks a cut value) or, with ``sep``, parsable lines."""
    table = [[escaped(fields[key](row)) for _, key, _ in columns] for row in rows]  # user text (cli/printable.py)
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


_O = a.Opt
OPTIONS = (
    _O("jobs", "j", help="job ids: 14, 14_3, 14.0, 14.batch"),
    _O(("user", "uid"), "u", dest="users", help="users (names or uids)"),
    _O("allusers", "a", a.NONE, help="jobs of every user"),
    _O(("accounts", "account"), "A", dest="accounts", help="jobs of these accounts"),
    _O("allocations", "X", a.NONE, help="only the jobs' allocations, not their steps"),
    _O("t", "t", a.NONE, dest="allocations"),  # sacct's deprecated -t (-X)
    _O("brief", "b", a.NONE, help="JobID, State and ExitCode"),
    _O("batch-script", "B", a.NONE, dest="batch_script", help="print the jobs' batch scripts"),
    _O("completion", "c", a.NONE, help="job completion records (pslurm keeps none)"),
    _O("constraints", "C", help="jobs that asked these features"),
    _O("delimiter", help="the parsable output's field separator (default '|')"),
    _O("duplicates", "D", a.NONE, help="every record of a requeued job"),
    _O(("helpformat", "help-fields"), "e", a.NONE, dest="helpformat", help="list the fields"),
    _O("endtime", "E", dest="end", help="jobs eligible before this time"),
    _O("env-vars", arg=a.NONE, dest="env_vars", help="print the jobs' environment"),
    _O("file", "f", help="a job completion file (pslurm keeps none)"),
    _O("flags", "F", help="job flags: SchedSubmit, SchedMain, SchedBackfill, StartReceived"),
    _O(("gid", "group"), "g", dest="groups", help="jobs of these groups"),
    _O("nnodes", "i", help="jobs on this many nodes: N or MIN-MAX"),
    _O("ncpus", "I", help="jobs with this many CPUs: N or MIN-MAX"),
    _O("timelimit-min", "k", dest="limit_min", help="jobs with a time limit of at least this"),
    _O("timelimit-max", "K", dest="limit_max", help="jobs with a time limit of at most this"),
    _O("long", "l", a.NONE, help="the long field set"),
    _O("allclusters", "L", a.NONE, help="every cluster (pslurm has one)"),
    _O(("clusters", "cluster"), "M", dest="clusters", help="this cluster's name, or all"),
    _O("nodelist", "N", help="jobs that ran on these nodes"),
    _O("name", dest="names", help="jobs of these names (comma-separated)"),
    _O("noconvert", arg=a.NONE, help="memory in MB, unconverted"),
    _O("units", help="memory in this unit: K, M, G, T, P"),
    _O("noheader", "n", a.NONE, help="no header lines"),
    _O(("format", "fields"), "o", dest="fmt", help="fields: JobID,JobName%30,..."),
    _O("parsable", "p", a.NONE, help="'|' after every field"),
    _O("parsable2", "P", a.NONE, help="'|' between fields"),
    _O("qos", "q", help="jobs of these QOS"),
    _O("partition", "r", help="jobs of these partitions"),
    _O("reason", help="jobs that waited for these reasons"),
    _O("state", "s", dest="states", help="states (CD,F,R,...)"),
    _O("starttime", "S", dest="start", help="jobs eligible after this time (default: midnight)"),
    _O("truncate", "T", a.NONE, help="times cut to the window"),
    _O("use-local-uid", arg=a.NONE, dest="local_uid"),
    _O("usage", "U", a.NONE), _O("verbose", "v", a.NONE), _O("version", "V", a.NONE),
    _O("wckeys", "W", help="jobs of these wckeys (pslurm has none)"),
    _O("whole-hetjob", arg=a.OPTIONAL, dest="whole_hetjob"),
    _O("associations", "x", help="jobs of these association ids"),
    _O("federation", arg=a.NONE), _O("local", arg=a.NONE),
    a.JSON, _O("yaml", arg=a.NONE), _O("help", "h", a.NONE),
)
# the options whose every use adds to one list (sacct's -j 1 -j 2 is -j 1,2)
LISTS = frozenset(("jobs", "users", "accounts", "states", "names", "partition", "qos", "groups", "constraints",
                   "wckeys", "associations", "reason", "clusters", "nodelist"))
BRIEF_FIELDS = "jobid,state,exitcode"
LONG_FIELDS = ("jobid,jobidraw,jobname,partition,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,"
               "maxrsstask,averss,maxpages,maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,"
               "ntasks,alloccpus,elapsed,state,exitcode,avecpufreq,reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,reqmem,"
               "consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,avediskread,maxdiskwrite,maxdiskwritenode,"
               "maxdiskwritetask,avediskwrite,reqtres,alloctres,tresusageinave,tresusageinmax,tresusageinmaxn,"
               "tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,tresusageintot,tresusageoutmax,"
               "tresusageoutmaxn,tresusageoutmaxt,tresusageoutave,tresusageouttot")
JOB_FLAGS = ("schedsubmit", "schedmain", "schedbackfill", "startreceived")


def main(argv: Sequence[str] | None = None) -> None:  # noqa: C901 - sacct's options, in its order
    """Show finished and running jobs from the accounting store (sacct)."""
    found_opts, positional = a.parse_or_fail(
        PROG, argv, OPTIONS, stop_at_positional=False, usage="psacct [OPTIONS]",
        description="Show finished and running jobs from the accounting store (sacct).")
    a.no_positionals(PROG, positional)
    v = a.values(found_opts, joined=LISTS)
    if _answered_alone(v):
        return
    from pslurm.cli.common import check_clusters, job_selectors, node_memory

    now = time.time()
    client = connect(PROG)
    cluster = client.config.cluster_name
    named = str(v["clusters"]).split(",") if isinstance(v.get("clusters"), str) else None
    # sacct -M OTHER asks the database for another cluster's jobs: there are none (a header, exit 0)
    elsewhere = named is not None and not any(n == cluster or n.lower() == "all" for n in named)
    if not elsewhere:
        check_clusters(PROG, v.get("clusters"), cluster)
    selectors = job_selectors(PROG, v.get("jobs"), "{prog}: fatal: Bad job/step specified: {id}")
    users = _users(v)
    since, until = _window(v, now, bool(selectors))
    wanted = _states(v.get("states"))
    fields = account_fields(now, cluster, node_memory(client))
    columns = _columns(v, fields)
    as_json = a.json_format(PROG, v) or ("slurm" if v.get("yaml") else None)
    if v.get("verbose"):
        from pslurm.core.timefmt import format_timestamp

        print(f"{PROG}: Jobs Eligible in the time window from "
              f"{format_timestamp(since) if since else 'Epoch 0'} to {format_timestamp(until or now)}", file=sys.stderr)
    with reporting(PROG):
        found = client.jobs(job_ids=sorted({s.job_id for s in selectors}), include_finished=True, since=since,
                            steps=not v.get("allocations"), collapse_arrays=True,  # as its database: one record
                            light=not as_json and _light(columns, v), users=users or ())
    found = [j for j in found if not elsewhere and _selected(j, v, selectors, wanted, until, since is None)]
    if since is not None:  # a window holds the jobs eligible in it: a held job never was (sacct's query)
        from pslurm.cli.jobview import eligible_time

        found = [j for j in found if eligible_time(j) is not None]
    if v.get("batch_script") or v.get("env_vars"):
        _scripts(found, bool(v.get("batch_script")))
        return
    if as_json == "slurm":
        from pslurm.cli import slurmjson

        steps = None if v.get("allocations") else (lambda job: step_lines(job, job.steps))
        print(slurmjson.dumps(slurmjson.accounts_reply(found, cluster, now, steps)))
        return
    if as_json:
        import json

        print(json.dumps({"jobs": [_job_json(j, now) for j in found]}, indent=2))
        return
    parsable, parsable2 = bool(v.get("parsable")), bool(v.get("parsable2"))
    sep = str(v["delimiter"]) if isinstance(v.get("delimiter"), str) and (parsable or parsable2) else (
        "|" if parsable or parsable2 else None)
    rows: list[Any] = found if v.get("allocations") else with_steps(found)
    if any(s.step is not None for s in selectors):
        rows = _named_steps(rows, selectors)
    lines = render(rows, columns, fields, not v.get("noheader"), sep, trailing=parsable and not parsable2)
    sys.stdout.write("".join(line + "\n" for line in lines))


def _answered_alone(v: dict[str, object]) -> bool:
    """--usage, --version, --helpformat: answered, True; -c, --file, a bad --flags: sacct's line, exit 1."""
    from pslurm.cli.common import answer_usage_version

    if v.get("usage"):
        print(f"Usage: {PROG} [options]\n\tUse --help for help")
        return True
    answer_usage_version(v, "")
    if v.get("helpformat"):
        names = [name for name, _ in sorted(FIELDS.values(), key=lambda f: f[0].lower())]
        print("\n".join(" ".join(f"{n:<19s}" for n in names[i:i + 4]) for i in range(0, len(names), 4)))
        return True
    if v.get("completion"):
        print("Slurm job completion is disabled", file=sys.stderr)
        raise SystemExit(1)
    if isinstance(v.get("file"), str):
        print(f"{v['file']} is not a valid file", file=sys.stderr)
        raise SystemExit(1)
    for flag in (f for f in str(v.get("flags") or "").split(",") if f):
        if flag.lower() not in JOB_FLAGS:
            fail(PROG, f"str_2_job_flags: Invalid job flag {flag}")
    return False


def _columns(v: dict[str, object], fields: dict[str, Any]) -> Any:
    """The columns -o (or -b, -l, the default) names; --units applied to the memory fields."""
    if isinstance(v.get("units"), str):
        unit = str(v["units"]).upper()[:1]
        if unit not in UNITS:
            fail(PROG, f"Invalid unit type: {v['units']}")
        for key in ("reqmem", "maxrss"):
            fields[key] = _in_unit(fields[key], unit)
    fmt = str(v.get("fmt") or (BRIEF_FIELDS if v.get("brief") else LONG_FIELDS if v.get("long") else DEFAULT_FIELDS))
    try:
        return parse_fields(fmt, list(fields))
    except ValueError as exc:
        fail(PROG, str(exc))


def _named_steps(rows: list[Any], selectors: list[Any]) -> list[Any]:
    """With ``-j J.S`` among the ids: the jobs named whole, and of the others only the steps named."""
    return [r for r in rows if not isinstance(r, StepLine) and any(s.step is None and s.job_id == r.job_id
                                                                   for s in selectors)
            or isinstance(r, StepLine) and (any(s.job_id == r.job.job_id and (s.step is None or r.display_id
                                                .endswith("." + s.step)) for s in selectors))]


# The fields a light listing gives right (the job's own columns, see Client.jobs(light=); not the CPUs, which
# need the request's tasks per node): any other, and the whole request is read. A status poll (snakemake's
# sacct -X -o JobIdRaw,State) is light.
LIGHT_FIELDS = frozenset((
    "account", "cluster", "comment", "elapsed", "elapsedraw", "eligible", "end", "exitcode", "gpuindices",
    "gpumempeak", "gpuseconds", "gpuutil", "jobid", "jobidraw", "jobname", "maxrss", "nnodes", "nodelist",
    "partition", "priority", "qos", "reason", "start", "state", "submit", "suspended", "systemcomment", "timelimit",
    "timelimitraw", "uid", "user"))


def _light(columns: Sequence[tuple[str, str, int]], v: dict[str, object]) -> bool:
    """Whether a light listing has all that is asked: the jobs alone (-X: a job's J.batch line needs to know
    whether it was a batch job), no script or environment, only LIGHT_FIELDS."""
    return bool(v.get("allocations")) and not any(
        v.get(key) for key in ("batch_script", "env_vars", "groups", "constraints")) and all(
        key in LIGHT_FIELDS for _, key, _ in columns)


UNITS = "KMGTP"


def _in_unit(get: Callable[[Job], str], unit: str) -> Callable[[Job], str]:
    """--units: a size (``4000M``) in the unit asked (``4096000K``), as Slurm's convert_num_unit writes it:
    whole, or with two decimals."""
    def converted(row: Job) -> str:
        text = get(row)
        if not text or text[-1] not in UNITS or not text[:-1].replace(".", "", 1).isdigit():
            return text
        value = float(text[:-1]) * 1024 ** (UNITS.index(text[-1]) - UNITS.index(unit))
        return f"{int(value)}{unit}" if value == int(value) else f"{value:.2f}{unit}"

    return converted


def _users(v: dict[str, object]) -> list[str]:
    """The users -u names (names or uids); the caller's own unless root, -a or -j (sacct's default)."""
    import os
    import pwd

    text = v.get("users")
    if isinstance(text, str) and text:
        names = []
        for word in (w for w in text.split(",") if w):
            try:
                names.append(pwd.getpwuid(int(word)).pw_name if word.isdigit() else pwd.getpwnam(word).pw_name)
            except KeyError:
                fail(PROG, f"Invalid user id: {word}")
        return names
    if v.get("allusers") or v.get("jobs") or os.getuid() == 0:
        return []
    from pslurm.cli.common import user_identity

    return [user_identity()[0]]


def _window(v: dict[str, object], now: float, named: bool) -> tuple[float | None, float | None]:
    """sacct's time window: -S (midnight by default; now when -s is given; none for named jobs), -E."""
    from pslurm.core.timefmt import TimeFormatError, format_timestamp, parse_time

    start, end = v.get("start"), v.get("end")
    try:  # Slurm's parse_time looking back (sacct's past flag): every form it takes
        if isinstance(start, str) and start:
            since: float | None = parse_time(start, now, past=True)
        elif named:
            since = None
        else:
            since = now if isinstance(v.get("states"), str) else parse_time("midnight", now, past=True)
        until = parse_time(end, now, past=True) if isinstance(end, str) and end else None
    except TimeFormatError as bad:
        print(bad, file=sys.stderr)
        raise SystemExit(1) from None
    if since is not None and until is not None and since > until:
        fail(PROG, f"Start time ({format_timestamp(since)}) requested is after end time ({format_timestamp(until)}).")
    return since, until


def _states(text: object) -> set[str]:
    from pslurm.core.states import JobState

    if not isinstance(text, str):
        return set()
    wanted = set()
    for word in (w for w in text.split(",") if w):
        try:
            wanted.add(JobState.parse(word).value)
        except ValueError:
            print(f"{PROG}: fatal: unrecognized job state value '{word}'", file=sys.stderr)
            raise SystemExit(1) from None
    return wanted


def _selected(job: Job, v: dict[str, object], selectors: list[Any], wanted: set[str], until: float | None,
              whole_window: bool) -> bool:
    """Whether the job is one the filters select (sacct's: every filter given must hold)."""
    from pslurm.cli.common import listed, selected

    spec = job.spec
    if not selected(job, selectors):
        return False
    if wanted and job.state.value not in wanted:
        return False
    if until is not None and (job.submit_time or 0) > until:
        return False
    if wanted and not whole_window and job.end_time is not None:
        return False  # -s without -S: the window is now, and an ended job was in no state then
    checks = ((listed(v, "names"), spec.name), (listed(v, "partition"), job.partition),
              (listed(v, "accounts"), spec.account), (listed(v, "qos"), spec.qos or "normal"),
              (listed(v, "constraints"), spec.constraint), (listed(v, "wckeys"), ""), (listed(v, "associations"), ""),
              (listed(v, "reason"), str(job.reason_prev)))
    if any(want is not None and value not in want for want, value in checks):
        return False
    groups = listed(v, "groups")
    if groups is not None:
        from pslurm.cli.jobview import group_name

        if str(spec.gid) not in groups and group_name(spec.gid) not in groups:
            return False
    nodelist = v.get("nodelist")
    if isinstance(nodelist, str) and nodelist:
        from pslurm.cli.jobview import job_nodes
        from pslurm.core.hostlists import expand

        if not set(expand(nodelist)) & set(job_nodes(job)):
            return False
    from pslurm.cli.jobview import node_count, total_cpus

    ran = job.start_time is not None  # sacct's query reads what was allocated: nothing, for a job that waits
    for key, value in (("nnodes", node_count(job) if ran else 0), ("ncpus", total_cpus(job) if ran else 0)):
        text = v.get(key)
        if isinstance(text, str) and text:
            low, _, high = text.partition("-")
            if not (int(low or 0) <= value <= int(high or low or value)):
                return False
    low_text, high_text = v.get("limit_min"), v.get("limit_max")
    if isinstance(low_text, str) and low_text:  # sacct's query: -k alone the limit itself, with -K a range
        from pslurm.core.timefmt import parse_time_limit

        shortest = parse_time_limit(low_text) or 0
        longest = parse_time_limit(high_text) if isinstance(high_text, str) and high_text else shortest
        limit = job.time_limit
        if limit is None or not shortest <= limit <= (longest if longest is not None else float("inf")):
            return False
    return True


def _scripts(found: Sequence[Job], script: bool) -> None:
    """-B / --env-vars: each job's batch script or environment, under sacct's heading."""
    for job in found:
        if script:
            print(f"Batch Script for {job.display_id}")
        else:
            print(f"Environment used for {job.display_id} (must be batch to display)")
        print("-" * 80)
        spec = job.spec
        if script:
            print(spec.script.rstrip("\n") if spec.script else "NONE")
        else:
            print("\n".join(f"{k}={val}" for k, val in spec.environment.items()) or "NONE")
        print()


if __name__ == "__main__":
    main()
