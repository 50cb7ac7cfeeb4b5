"""From raw options (command line and ``#SBATCH`` directives) to a JobSpec.

The CLIs collect option strings; :mod:`pslurm.core.jobdesc` parses and checks them (psbatch and
psrun share one meaning for every flag), and :func:`build_spec` makes the JobSpec of them for a
program that submits through :class:`pslurm.client.Client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from pslurm.core.jobdesc import export_environment, hostlist_option, parse_mem, spec_values
from pslurm.core.jobspec import JobSpec

__all__ = ["JobOptions", "build_spec", "export_environment", "hostlist_option", "parse_mem"]


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
    constraint: str | None = None
    exclusive: str | None = None  # "" (--exclusive), "user", "mcs": all taken as plain exclusive
    open_mode: str | None = None
    gpu_mem: str | None = None
    begin: str | None = None
    deadline: str | None = None
    comment: str | None = None
    signal: str | None = None
    qos: str | None = None
    ntasks_per_node: str | None = None
    mem_per_cpu: str | None = None
    mem_per_gpu: str | None = None
    cpus_per_gpu: str | None = None
    mail_type: str | None = None
    mail_user: str | None = None

    def over(self, base: JobOptions) -> JobOptions:
        """These options where given, ``base`` (e.g. the script's directives) elsewhere."""
        return replace(base, **{f.name: getattr(self, f.name) for f in fields(self)
                                if getattr(self, f.name) is not None})


def build_spec(opts: JobOptions, *, user: str, uid: int, gid: int, cwd: str, environ: Mapping[str, str],
               script: str | None = None, argv: tuple[str, ...] = (), default_name: str = "",
               interactive: bool = False, umask: int | None = None, now: float | None = None) -> JobSpec:
    """Check the options and make the JobSpec the controller will be sent. Raises SpecError.
    ``umask``: the submitting process's, passed on as SLURM_UMASK (as sbatch and srun do): the
    job's output files and processes get it. ``now``: the clock --begin and --deadline are read
    against (None: the time now)."""
    return JobSpec(**spec_values(vars(opts), user=user, uid=uid, gid=gid, cwd=cwd, environ=environ, script=script,
                                 argv=argv, default_name=default_name, interactive=interactive, umask=umask,
                                 now=now))
