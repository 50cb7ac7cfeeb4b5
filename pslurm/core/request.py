"""From raw options (command line and ``#SBATCH`` directives) to a JobSpec.

The CLIs collect option strings; :mod:`pslurm.core.jobdesc` parses and checks them (psbatch and
psrun share one meaning for every flag), and :func:`build_spec` makes the JobSpec of them for a
program that submits through :class:`pslurm.client.Client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, make_dataclass, replace
from typing import TYPE_CHECKING, Any

from pslurm.core.jobdesc import export_environment, hostlist_option, parse_mem, spec_values
from pslurm.core.jobfields import option_fields
from pslurm.core.jobspec import JobSpec

__all__ = ["JobOptions", "build_spec", "export_environment", "hostlist_option", "parse_mem"]


def _over(self: JobOptions, base: JobOptions) -> JobOptions:
    """These options where given, ``base`` (e.g. the script's directives) elsewhere."""
    return replace(base, **{f.name: getattr(self, f.name)  # type: ignore[type-var]
                            for f in fields(self) if getattr(self, f.name) is not None})  # type: ignore[arg-type]


if TYPE_CHECKING:
    class JobOptions:
        """Option values as given (strings; a flag's bool), None where not given; one field per
        :func:`pslurm.core.jobfields.option_fields` name (sbatch's long options)."""

        def __init__(self, **given: str | bool | None) -> None: ...
        def __getattr__(self, name: str) -> Any: ...
        def over(self, base: JobOptions) -> JobOptions: ...
else:
    JobOptions = make_dataclass(
        "JobOptions", [(name, "str | bool | None", None) for name in option_fields()], frozen=True,
        namespace={"over": _over, "__module__": __name__,
                   "__doc__": "Option values as given, None where not given (sbatch's long options)."})


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
