"""psbatch: submit a batch script (sbatch)."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from pslurm.cli import options as o
from pslurm.cli.common import connect, current_umask, fail, reporting, run, typer_app, user_identity

PROG = "psbatch"
WRAP_HEADER = "#!/bin/sh\n# This script was created by psbatch --wrap.\n\n"


def make_app() -> typer.Typer:
    app = typer_app("Submit a batch script to pslurm.", allow_interspersed_args=False)

    @app.command()
    def psbatch(
        script: Annotated[Optional[str], typer.Argument(help="batch script (or - for stdin)")] = None,
        script_args: Annotated[Optional[list[str]], typer.Argument(help="arguments to the script")] = None,
        job_name: o.JobName = None, partition: o.Partition = None, time: o.Time = None, output: o.Output = None,
        error: o.Error = None, nodes: o.Nodes = None, ntasks: o.Ntasks = None, cpus_per_task: o.CpusPerTask = None,
        mem: o.Mem = None, gres: o.Gres = None, gpus: o.Gpus = None, gpus_per_node: o.GpusPerNode = None,
        chdir: o.Chdir = None, export: o.Export = None, account: o.Account = None, nice: o.Nice = None,
        dependency: o.Dependency = None, array: o.Array = None, requeue: o.Requeue = None, hold: o.Hold = None,
        kill_on_invalid_dep: o.KillOnInvalidDep = None, nodelist: o.Nodelist = None, exclude: o.Exclude = None,
        wrap: Annotated[Optional[str], typer.Option("--wrap", help="run this command as the script")] = None,
        parsable: Annotated[bool, typer.Option("--parsable", help="print only the job id")] = False,
    ) -> None:
        """Submit a batch script; prints 'Submitted batch job N'."""
        opts = o.job_options(locals())
        text, default_name = _script_text(script, wrap, script_args)
        directives = _directive_params(app, text)
        opts = opts.over(o.job_options(directives))
        parsable = parsable or bool(directives.get("parsable"))
        submit(opts, text, default_name, parsable)

    return app


def _script_text(script: str | None, wrap: str | None, script_args: list[str] | None) -> tuple[str, str]:
    from pslurm.core.directives import DirectiveError, decode_script, script_problem

    if wrap is not None:
        if script is not None:
            fail(PROG, "Script arguments are not permitted with the --wrap option.")
        return WRAP_HEADER + wrap + "\n", "wrap"
    if script is None or script == "-":
        if script is None and sys.stdin.isatty():
            fail(PROG, "no batch script given: psbatch [options] script.sh, or --wrap 'command'")
        data, name = sys.stdin.buffer.read(), "sbatch"
    else:
        try:
            with open(script, "rb") as f:
                data = f.read()
        except OSError as exc:
            fail(PROG, f"Unable to open file {script}: {exc.strerror}")
        name = os.path.basename(script)
    try:
        text = decode_script(data)
    except DirectiveError as exc:
        fail(PROG, str(exc))
    problem = script_problem(text)
    if problem is not None:
        fail(PROG, problem)
    if script_args:  # sbatch passes them as $1..; run them through the script's own interpreter
        import shlex

        first, _, rest = text.partition("\n")
        text = f"{first}\nset -- {' '.join(shlex.quote(a) for a in script_args)}\n{rest}"
    return text, name


def _directive_params(app: typer.Typer, text: str) -> dict[str, object]:
    """The script's #SBATCH/#PSBATCH lines parsed by psbatch's own option parser."""
    from pslurm.cli.common import click_errors
    from pslurm.core.directives import DirectiveError, directive_lines

    try:
        lines = directive_lines(text)
    except DirectiveError as exc:
        fail(PROG, f"invalid directive: {exc}")
    if not lines:
        return {}
    command = typer.main.get_command(app)
    takes_value = {name for p in command.params if getattr(p, "opts", None) and not getattr(p, "is_flag", True)
                   for name in p.opts}
    for lineno, line in lines:  # as sbatch: a value missing at a line's end is an error, not the next line's
        if line and line[-1] in takes_value:
            fail(PROG, f"invalid #SBATCH directive on line {lineno}: option {line[-1]} requires an argument")
    tokens = [token for _, line in lines for token in line]
    try:
        with command.make_context(PROG, [*tokens, "script"], resilient_parsing=False) as ctx:
            return dict(ctx.params)
    except click_errors()[0] as exc:
        fail(PROG, f"invalid #SBATCH directive: {exc.format_message()}")  # type: ignore[attr-defined]


def submit(opts: o.JobOptions, text: str, default_name: str, parsable: bool) -> None:
    from pslurm.core.jobspec import SpecError
    from pslurm.core.request import build_spec

    user, uid, gid = user_identity()
    try:
        spec = build_spec(opts, user=user, uid=uid, gid=gid, cwd=os.getcwd(), environ=os.environ, umask=current_umask(),
                          script=text, default_name=default_name)
    except SpecError as exc:
        fail(PROG, str(exc))
    client = connect(PROG)
    with reporting(PROG, "Batch job submission failed: "):
        job_id = client.submit(spec)
    print(job_id if parsable else f"Submitted batch job {job_id}")


def main() -> None:
    run(make_app(), PROG)
