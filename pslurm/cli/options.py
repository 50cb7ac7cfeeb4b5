"""Job options shared by psbatch and psrun, with sbatch's short and long names."""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Optional

import typer

from pslurm.core.request import JobOptions

JobName = Annotated[Optional[str], typer.Option("-J", "--job-name", help="name of the job")]
Partition = Annotated[Optional[str], typer.Option("-p", "--partition", help="partition to run in")]
Time = Annotated[Optional[str], typer.Option("-t", "--time", help="time limit: M, M:S, H:M:S, D-H[:M[:S]]")]
Output = Annotated[Optional[str], typer.Option("-o", "--output", help="stdout file pattern (%j %x %u %N %A %a)")]
Error = Annotated[Optional[str], typer.Option("-e", "--error", help="stderr file pattern")]
Nodes = Annotated[Optional[str], typer.Option("-N", "--nodes", help="number of nodes (1)")]
Ntasks = Annotated[Optional[str], typer.Option("-n", "--ntasks", help="number of tasks")]
CpusPerTask = Annotated[Optional[str], typer.Option("-c", "--cpus-per-task", help="CPUs per task")]
Mem = Annotated[Optional[str], typer.Option("--mem", help="memory per node (MB, or with K/M/G/T)")]
Gres = Annotated[Optional[str], typer.Option("--gres", help="generic resources per node, e.g. gpu:a100:2")]
Gpus = Annotated[Optional[str], typer.Option("-G", "--gpus", help="GPUs for the job: N or TYPE:N")]
GpusPerNode = Annotated[Optional[str], typer.Option("--gpus-per-node", help="GPUs per node: N or TYPE:N")]
Chdir = Annotated[Optional[str], typer.Option("-D", "--chdir", help="working directory of the job")]
Export = Annotated[Optional[str], typer.Option("--export", help="ALL (default), NONE, or NAME[=value],...")]
Account = Annotated[Optional[str], typer.Option("-A", "--account", help="account to charge (fair share)")]
Nice = Annotated[Optional[str], typer.Option("--nice", help="lower the job's priority by N (negative: operators)")]
Dependency = Annotated[Optional[str], typer.Option(
    "-d", "--dependency", help="after|afterok|afternotok|afterany|aftercorr:ID[:ID],... (? for OR), singleton")]
Array = Annotated[Optional[str], typer.Option("-a", "--array", help="job array: 0-99, 1,3,5-7, 0-15:4, %N throttle")]
Requeue = Annotated[Optional[bool], typer.Option("--requeue/--no-requeue", help="may the job be requeued")]
Hold = Annotated[Optional[bool], typer.Option("-H", "--hold", help="submit held (release: pscontrol release)")]
KillOnInvalidDep = Annotated[Optional[str], typer.Option(
    "--kill-on-invalid-dep", help="yes: cancel the job when its dependency can never be met")]
Nodelist = Annotated[Optional[str], typer.Option("-w", "--nodelist", help="run on this node (a hostlist)")]
Exclude = Annotated[Optional[str], typer.Option("-x", "--exclude", help="never run on these nodes (a hostlist)")]
Json = Annotated[bool, typer.Option("--json", help="print JSON for programs")]
# The read commands' shared filters (psqueue, psacct, psprio, psinfo).
Jobs = Annotated[Optional[str], typer.Option("-j", "--jobs", help="comma-separated job ids")]
Users = Annotated[Optional[str], typer.Option("-u", "--user", help="comma-separated user names")]
NoHeader = Annotated[bool, typer.Option("-h", "--noheader", help="no header line")]

JOB_OPTION_NAMES = tuple(f.name for f in fields(JobOptions))


def job_options(params: dict[str, Any]) -> JobOptions:
    """The JobOptions part of a command's parameters (its locals() or a click context's params)."""
    return JobOptions(**{name: params.get(name) for name in JOB_OPTION_NAMES})
