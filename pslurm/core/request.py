"""From raw options (command line and ``#SBATCH`` directives) to a JobSpec.

The CLIs collect option strings; this module parses and checks them, so that psbatch and psrun
share one meaning for every flag.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from pslurm.core.gres import GresError, GresRequest, parse_gpus, parse_gres
from pslurm.core.jobspec import JobSpec, SpecError
from pslurm.core.timefmt import TimeFormatError, parse_time_limit

_MEM = re.compile(r"^(\d+)([KMGT]?)B?$", re.I)
_MEM_FACTOR = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True)
class JobOptions:
    """Option values as given (strings), None where not given. Names follow sbatch's long options."""

    job_name: str | None = None
    partition: str | None = None
    time: str | None = None
    output: str | None = None
    error: str | None = None
    nodes: str | None = None
    ntasks: str | None = None
    cpus_per_task: str | None = None
    mem: str | None = None
    gres: str | None = None
    gpus: str | None = None
    gpus_per_node: str | None = None
    chdir: str | None = None
    export: str | None = None
    account: str | None = None
    nice: str | None = None
    dependency: str | None = None
    array: str | None = None
    requeue: bool | None = None
    hold: bool | None = None
    kill_on_invalid_dep: str | None = None
    nodelist: str | None = None
    exclude: str | None = None

    def over(self, base: JobOptions) -> JobOptions:
        """These options where given, ``base`` (e.g. the script's directives) elsewhere."""
        return replace(base, **{f.name: getattr(self, f.name) for f in fields(self)
                                if getattr(self, f.name) is not None})


def parse_mem(text: str) -> int:
    """``--mem`` in MB: ``4096``, ``4G``, ``512M``, ``1T`` (MB when no unit, as Slurm)."""
    match = _MEM.match(text.strip())
    if not match:
        raise SpecError(f"Invalid --mem specification: {text}")
    return max(1, int(int(match.group(1)) * _MEM_FACTOR[match.group(2).upper()])) if int(match.group(1)) else 0


def _count(flag: str, text: str | None, default: int) -> int:
    if text is None:
        return default
    if not text.strip().isdigit() or int(text) < 1:
        raise SpecError(f"Invalid {flag} specification: {text}")
    return int(text)


def _nodes(text: str | None) -> int:
    if text is None:
        return 1
    low, _, high = text.partition("-")  # -N min[-max]: pslurm places single-node jobs
    if not low.isdigit() or (high and not high.isdigit()):
        raise SpecError(f"Invalid node count specification: {text}")
    return int(low)


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


def build_spec(opts: JobOptions, *, user: str, uid: int, gid: int, cwd: str, environ: Mapping[str, str],
               script: str | None = None, argv: tuple[str, ...] = (), default_name: str = "",
               interactive: bool = False, umask: int | None = None) -> JobSpec:
    """Check the options and make the JobSpec the controller will be sent. Raises SpecError.
    ``umask``: the submitting process's, passed on as SLURM_UMASK (as sbatch and srun do): the
    job's output files and processes get it."""
    try:
        gres: tuple[GresRequest, ...] = parse_gres(opts.gres) if opts.gres else ()
        for gpus in (opts.gpus, opts.gpus_per_node):  # -N 1: the same thing as --gres=gpu:N
            if gpus:
                gres += parse_gpus(gpus)
        time_limit = parse_time_limit(opts.time) if opts.time else None
    except (GresError, TimeFormatError) as exc:
        raise SpecError(str(exc)) from exc
    workdir = os.path.abspath(os.path.join(cwd, opts.chdir)) if opts.chdir else cwd
    nice = 0
    if opts.nice is not None:
        try:
            nice = int(opts.nice)
        except ValueError:
            raise SpecError(f"Invalid --nice value: {opts.nice}") from None
    if opts.dependency:
        from pslurm.core.dependency import parse_dependency

        parse_dependency(opts.dependency)
    if opts.array:
        from pslurm.core.arrays import parse_array

        parse_array(opts.array, max_array_size=2**31)  # the controller checks MaxArraySize
    hostlist_option("--nodelist", opts.nodelist or "")
    hostlist_option("--exclude", opts.exclude or "")
    kill = (opts.kill_on_invalid_dep or "no").lower()
    if kill not in ("yes", "no"):
        raise SpecError(f"Invalid --kill-on-invalid-dep value: {opts.kill_on_invalid_dep} (yes or no)")
    return JobSpec(
        name=opts.job_name or default_name or "sbatch", user=user, uid=uid, gid=gid, workdir=workdir,
        script=script, argv=argv, environment=_with_umask(export_environment(opts.export, environ), umask),
        partition=opts.partition, stdout=opts.output, stderr=opts.error, time_limit=time_limit,
        num_nodes=_nodes(opts.nodes), ntasks=_count("--ntasks", opts.ntasks, 1),
        cpus_per_task=_count("--cpus-per-task", opts.cpus_per_task, 1),
        mem_mb=parse_mem(opts.mem) if opts.mem else 0, gres=gres, interactive=interactive,
        account=opts.account or "", nice=nice, dependency=opts.dependency or "", requeue=opts.requeue,
        hold=bool(opts.hold), array=opts.array or "", kill_on_invalid_dep=kill == "yes",
        nodelist=opts.nodelist or "", exclude=opts.exclude or "",
    )


def hostlist_option(flag: str, text: str) -> list[str]:
    """The node names of a -w/--nodelist or -x/--exclude hostlist ([] for ""); SpecError when malformed."""
    from pslurm.core.hostlists import expand

    try:
        return expand(text) if text else []
    except ValueError as exc:
        raise SpecError(f"Invalid {flag} specification: {exc}") from None
