"""From option values (command line and ``#SBATCH`` directives) to a job request's fields, checked.

:func:`spec_values` is the one place the options of psbatch and psrun get their meaning: it returns
the fields of a :class:`~pslurm.core.jobspec.JobSpec` as a dict, which
:func:`pslurm.core.request.build_spec` makes the JobSpec of, and which the commands send as it is
(:func:`pslurm.core.restjson.desc_to_json`). Standard library only on the common path (a job that
asks for GRES, a dependency, an array or nodes imports what reads them): the commands import this
on their path.
"""

from __future__ import annotations

import os

from pslurm.core.errors import SpecError
from pslurm.core.jobfields import FIELDS
from pslurm.core.signals import signal_name as signal_name  # --signal's names, beside the parser
from pslurm.core.signals import signal_number

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from pslurm.core.gres import GresRequest

_MEM_FACTOR = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


def mem_parts(text: str) -> tuple[int, str] | None:
    """A size's number and unit (``K``, ``M``, ``G``, ``T`` or ""), read as ``^(\\d+)([KMGT]?)B?$`` in any
    case would read it (stripped), or None: by hand, since re costs psbatch, psrun and psalloc 25 M instructions."""
    text = text.strip()
    digits = 0
    while digits < len(text) and text[digits].isdecimal():  # \d: Unicode's decimal digits, as int() reads them
        digits += 1
    unit = text[digits:].upper()
    unit = unit[:-1] if unit.endswith("B") else unit
    return (int(text[:digits]), unit) if digits and unit in _MEM_FACTOR else None


def parse_mem(text: str) -> int:
    """``--mem`` in MB: ``4096``, ``4G``, ``512M``, ``1T`` (MB when no unit, as Slurm)."""
    parts = mem_parts(text)
    if parts is None:
        raise SpecError(f"Invalid --mem specification: {text}")
    number, unit = parts
    return max(1, int(number * _MEM_FACTOR[unit])) if number else 0


def _count(flag: str, text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.strip().isdigit() or int(text) < 1:
        raise SpecError(f"Invalid {flag} specification: {text}")
    return int(text)


def _nodes(text: str | None) -> tuple[int, int]:
    """``-N MIN[-MAX]``: (MIN, MAX); ``-N N`` is ``N-N`` (as sbatch sends it), MAX 0 without -N. pslurm
    allocates MIN nodes (Slurm may give up to MAX)."""
    if text is None:
        return 1, 0
    low, dash, high = text.strip().partition("-")
    if not (low.isdigit() and low.isascii()) or (dash and not (high.isdigit() and high.isascii())):
        raise SpecError(f"Invalid node count specification: {text}")
    if int(low) < 1 or (dash and int(high) < int(low)):
        raise SpecError(f"Invalid node count specification: {text}")
    return int(low), int(high) if dash else int(low)


def _task_counts(opts: Mapping[str, Any]) -> tuple[int, int, int, int]:
    """(num_nodes, max_nodes, ntasks, ntasks_per_node) of -N, -n and --ntasks-per-node, as Slurm
    reads them together: --ntasks-per-node without -n makes the task count (nodes x per node);
    with -n, more tasks than MIN nodes hold raise the node count (up to MAX), as slurmctld does, and
    fewer tasks than nodes lower it to the task count, as sbatch and srun do."""
    num_nodes, max_nodes = _nodes(opts.get("nodes"))
    per_node = _count("--ntasks-per-node", opts.get("ntasks_per_node"), 0) if opts.get("ntasks_per_node") else 0
    if opts.get("ntasks") is None:
        return num_nodes, max_nodes, per_node * num_nodes if per_node else 1, per_node
    ntasks = _count("--ntasks", opts.get("ntasks"), 1)
    if ntasks < num_nodes:  # Slurm: "can't run 2 processes on 3 nodes, setting nnodes to 2"
        num_nodes = ntasks
    if per_node and ntasks > per_node * num_nodes:
        need = -(-ntasks // per_node)
        if opts.get("nodes") is not None and need > (max_nodes or num_nodes):
            raise SpecError("Requested node configuration is not available")
        num_nodes = need
    return num_nodes, max_nodes, ntasks, per_node


def export_environment(export: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """``--export``: ALL (default), NONE, or a list of NAME / NAME=value (with ALL to add to all)."""
    if export is None or export.upper() == "ALL":
        return dict(environ)
    items = [item for item in export.split(",") if item]
    env: dict[str, str] = {}
    if any(item.upper() == "ALL" for item in items):
        env.update(environ)
    for item in items:
        if item.upper() in ("ALL", "NONE", "NIL"):
            continue
        name, eq, value = item.partition("=")
        if eq:
            env[name] = value
        elif name in environ:
            env[name] = environ[name]
    return env


def _with_umask(env: dict[str, str], umask: int | None) -> dict[str, str]:
    if umask is not None:
        env["SLURM_UMASK"] = f"{umask:04o}"
    return env


def exclusive_option(value: object) -> bool:
    """sbatch's ``--exclusive[=user|mcs]``: None (not given) False; "", ``user``, ``mcs`` True (pslurm
    gives whole nodes for each: no node is shared with another user's or another job's work)."""
    if value is None:
        return False
    if str(value).lower() not in ("", "user", "mcs"):
        raise SpecError(f"Invalid --exclusive specification: {value} (user or mcs, or no value)")
    return True


def hostlist_option(flag: str, text: str) -> list[str]:
    """The node names of a -w/--nodelist or -x/--exclude hostlist ([] for ""); SpecError when malformed."""
    if not text:
        return []
    from pslurm.core.hostlists import expand

    try:
        return expand(text)
    except ValueError as exc:
        raise SpecError(f"Invalid {flag} specification: {exc}") from None


def open_mode_option(text: str | None) -> str:
    """``--open-mode``: "append" or "truncate" ("" when not given), read as sbatch does: by the
    first letter (``a``/``A``, ``t``/``T``)."""
    if text is None:
        return ""
    if text[:1] in ("a", "A"):
        return "append"
    if text[:1] in ("t", "T"):
        return "truncate"
    raise SpecError("Invalid --open-mode specification")


def gpu_mem_option(text: str | None) -> str:
    """``--gpu-mem``: ``auto``, or a size as ``--mem`` takes it, normalised to MB ("" when not given)."""
    if text is None:
        return ""
    if text.strip().lower() == "auto":
        return "auto"
    parts = mem_parts(text)
    if parts is None or not parts[0]:
        raise SpecError(f"Invalid --gpu-mem specification: {text} (a size such as 8G, or auto)")
    return str(parse_mem(text))


WARN_TIME_DEFAULT = 60  # --signal without @TIME: a minute before the time limit, as Slurm


def signal_option(text: str, batch: bool = True) -> tuple[int, int, bool, bool]:
    """``--signal=[{R|B}:]SIGNUM|SIGNAME[@SIGTIME]`` as Slurm's get_signal_opts reads it: (signal,
    seconds before the time limit (60 when not given), to the batch shell only (``B``), also at a
    reservation's end (``R``)). ``B`` is sbatch's alone (``batch``); ``BR`` and ``RB`` both work.
    SpecError ``Invalid --signal specification`` otherwise."""
    rest = text
    to_batch = reservation = False
    if rest[:1] in ("R", "r"):
        reservation, rest = True, rest[1:]
    if batch:
        if rest[:1] in ("B", "b"):
            to_batch, rest = True, rest[1:]
        if rest[:1] in ("R", "r"):
            reservation, rest = True, rest[1:]
    if rest[:1] == ":":
        rest = rest[1:]
    name, at, when = rest.partition("@")
    number = signal_number(name)
    if not number:
        raise SpecError("Invalid --signal specification")
    seconds = WARN_TIME_DEFAULT
    if at:
        when = when.strip()
        if when and not (when.isdigit() and int(when) <= 0xFFFF):
            raise SpecError("Invalid --signal specification")
        seconds = int(when or 0)  # "USR1@": at the limit itself, as Slurm reads it
    return number, seconds, to_batch, reservation


def time_option(flag: str, text: str | None, now: float) -> float | None:
    """``--begin`` or ``--deadline``: the time (Slurm's parse_time, see
    :func:`pslurm.core.timefmt.parse_time`), None when not given. SpecError
    ``Invalid --begin specification: TEXT`` otherwise."""
    if text is None:
        return None
    from pslurm.core.timefmt import TimeFormatError, parse_time

    try:
        return parse_time(text, now)
    except TimeFormatError:
        raise SpecError(f"Invalid {flag} specification: {text}") from None


def _gres(opts: Mapping[str, Any], num_nodes: int = 1) -> tuple[GresRequest, ...]:
    """The GRES asked per node: --gres and --gpus-per-node as given; --gpus=N is the job's total,
    ceil(N / nodes) on each node (pslurm places the same count on every node of a job)."""
    if not (opts.get("gres") or opts.get("gpus") or opts.get("gpus_per_node")):
        return ()
    from pslurm.core.gres import GresError, GresRequest, parse_gpus, parse_gres

    try:
        gres: tuple[GresRequest, ...] = parse_gres(opts["gres"]) if opts.get("gres") else ()
        if opts.get("gpus"):  # -N 1: the same thing as --gres=gpu:N
            gres += tuple(GresRequest(g.name, g.type, -(-g.count // max(num_nodes, 1)))
                          for g in parse_gpus(opts["gpus"]))
        if opts.get("gpus_per_node"):
            gres += parse_gpus(opts["gpus_per_node"])
    except GresError as exc:
        raise SpecError(str(exc)) from exc
    return gres


def _tres_per_job(gpus: str | None) -> str:
    """--gpus as slurmctld records it, the job's TRES_PER_JOB (``gres:gpu:2``, ``gres:gpu:a100:2``): a
    count for the whole job, where --gres and --gpus-per-node are TRES_PER_NODE. (Checked by _gres.)"""
    if not gpus:
        return ""
    from pslurm.core.gres import format_gres, parse_gpus

    return ",".join(f"gres:{item}" for item in format_gres(parse_gpus(gpus)).split(","))


def _time_limit(text: str | None) -> int | None:
    if not text:
        return None
    from pslurm.core.timefmt import TimeFormatError, parse_time_limit

    try:
        return parse_time_limit(text)
    except TimeFormatError as exc:
        raise SpecError(str(exc)) from exc


def _memory_options(opts: Mapping[str, Any]) -> tuple[int, int, int]:
    """(--mem, --mem-per-cpu, --mem-per-gpu) in MB, at most one of them given, as Slurm allows."""
    given = [opts.get(k) for k in ("mem", "mem_per_cpu", "mem_per_gpu")]
    if sum(v is not None for v in given) > 1:
        raise SpecError("--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.")
    mem, per_cpu, per_gpu = (parse_mem(v) if v else 0 for v in given)
    return mem, per_cpu, per_gpu


def mail_type_text(text: str | None) -> str:
    """--mail-type's list as Slurm prints it (BEGIN,END; ALL; NONE is none)."""
    if not text:
        return ""
    known = ("NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
             "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS")
    words = [w.strip().upper() for w in text.split(",") if w.strip()]
    for word in words:
        if word not in known:
            raise SpecError(f"--mail-type={text} invalid")
    return ",".join(w for w in words if w != "NONE")


def spec_values(opts: Mapping[str, Any], *, user: str, uid: int, gid: int, cwd: str, environ: Mapping[str, str],
                script: str | None = None, argv: tuple[str, ...] = (), default_name: str = "",
                interactive: bool = False, umask: int | None = None, now: float | None = None,
                command: str = "") -> dict[str, Any]:
    """Check the options (JobOptions' fields by name; a missing one is not given) and return the
    fields of the JobSpec the controller will be sent. Raises SpecError. ``umask``: the submitting
    process's, passed on as SLURM_UMASK (as sbatch and srun do): the job's output files and
    processes get it. ``now``: the clock ``--begin`` and ``--deadline`` are read against (None: the
    time now). ``command``: the batch script's path as given (Command=). A field the command sets itself
    (psbatch's SubmitLine) it adds to what this returns."""

    def o(key: str) -> Any:  # an option's value as given (a string, a flag's bool), None when not
        return opts.get(key)

    num_nodes, max_nodes, ntasks, per_node = _task_counts(opts)
    gres = _gres(opts, num_nodes)
    time_limit = _time_limit(o("time"))
    chdir = o("chdir")
    workdir = os.path.abspath(os.path.join(cwd, chdir)) if chdir else cwd
    nice = 0
    if o("nice") is not None:
        try:
            nice = int(o("nice"))
        except ValueError:
            raise SpecError(f"Invalid --nice value: {o('nice')}") from None
    if o("dependency"):
        from pslurm.core.dependency import parse_dependency

        parse_dependency(o("dependency"))
    if o("array"):
        from pslurm.core.arrays import parse_array

        parse_array(o("array"), max_array_size=2**31)  # the controller checks MaxArraySize
    hostlist_option("--nodelist", o("nodelist") or "")
    hostlist_option("--exclude", o("exclude") or "")
    if o("constraint"):
        from pslurm.core.features import parse_constraint

        parse_constraint(o("constraint"))
    open_mode = open_mode_option(o("open_mode"))
    kill = (o("kill_on_invalid_dep") or "no").lower()
    if kill not in ("yes", "no"):
        raise SpecError(f"Invalid --kill-on-invalid-dep value: {o('kill_on_invalid_dep')} (yes or no)")
    begin = deadline = None
    if o("begin") is not None or o("deadline") is not None:
        if now is None:
            import time

            now = time.time()
        begin = time_option("--begin", o("begin"), now)
        deadline = time_option("--deadline", o("deadline"), now)
        if begin is not None and deadline is not None and deadline < begin:
            raise SpecError("Incompatible begin and deadline time specification")  # sbatch's words
    warn = signal_option(o("signal"), batch=not interactive) if o("signal") is not None else (0, 0, False, False)
    mem, mem_per_cpu, mem_per_gpu = _memory_options(opts)
    values = dict(
        name=o("job_name") or default_name or "sbatch", user=user, uid=uid, gid=gid, workdir=workdir,
        script=script, argv=argv, environment=_with_umask(export_environment(o("export"), environ), umask),
        partition=o("partition"), account=o("account") or "", qos=o("qos") or "", stdout=o("output"),
        stderr=o("error"), time_limit=time_limit,
        num_nodes=num_nodes, max_nodes=max(max_nodes, num_nodes) if max_nodes else 0, ntasks=ntasks,
        ntasks_per_node=per_node,
        cpus_per_task=_count("--cpus-per-task", o("cpus_per_task"), 1),
        mem_mb=mem, mem_per_cpu_mb=mem_per_cpu, mem_per_gpu_mb=mem_per_gpu,
        cpus_per_gpu=_count("--cpus-per-gpu", o("cpus_per_gpu"), 0) if o("cpus_per_gpu") else 0,
        mail_type=mail_type_text(o("mail_type")), command=command, tres_per_job=_tres_per_job(o("gpus")),
        submit_host=os.uname().nodename.split(".")[0], submit_sid=os.getsid(0),
        gres=gres, interactive=interactive, nice=nice, dependency=o("dependency") or "", requeue=o("requeue"),
        hold=bool(o("hold")), array=o("array") or "", kill_on_invalid_dep=kill == "yes",
        nodelist=o("nodelist") or "", exclude=o("exclude") or "", constraint=o("constraint") or "",
        exclusive=exclusive_option(o("exclusive")),
        open_mode=open_mode,
        gpu_mem=gpu_mem_option(o("gpu_mem")), begin_time=begin, deadline=deadline,
        warn_signal=warn[0], warn_time=warn[1], warn_batch=warn[2], warn_reservation=warn[3],
    )
    for f in FIELDS:  # the fields that are their option's text as given (core/jobfields.py)
        if f.given:
            given = o(f.name)
            values[f.name] = f.default if given is None or given == "" else f.type(given)
    return values
