"""psbatch: submit a batch script (sbatch)."""

from __future__ import annotations

import os
import sys

from pslurm.cli.common import connect, current_umask, fail, prog_name, reporting, user_identity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pslurm.cli.options import Parsed
    from pslurm.core.jobinfo import JobDesc

PROG = prog_name("psbatch")
WRAP_HEADER = f"#!/bin/sh\n# This script was created by {PROG} --wrap.\n\n"  # sbatch: as Slurm writes it
USAGE = "psbatch [OPTIONS] [script] [script_args]..."
DESCRIPTION = "Submit a batch script; prints 'Submitted batch job N'."
ARGUMENTS = (("script", "batch script (or - for stdin)"), ("script_args...", "arguments to the script"))


def main(argv: Sequence[str] | None = None) -> None:
    """Submit a batch script (a file, stdin, or --wrap): the command line wins over its directives."""
    from pslurm.cli.options import parse_or_fail, warn_inert

    cli = parse_or_fail(PROG, "sbatch", argv, USAGE, DESCRIPTION, ARGUMENTS)
    script = cli.positional[0] if cli.positional else None
    wrap = cli.values.get("wrap")
    text, default_name = _script_text(script, wrap if isinstance(wrap, str) else None, cli.positional[1:])
    directives = _directives(text)
    warn_inert(PROG, directives, cli)
    command = os.path.abspath(script) if script not in (None, "-") and wrap is None else ""
    if cli.values.get("test_only") or directives.values.get("test_only"):
        raise SystemExit(test_only(cli.job_values(directives), text, default_name))
    clusters = cli.values.get("clusters", directives.values.get("clusters"))
    job_id = submit(cli.job_values(directives), text, default_name,
                    bool(cli.values.get("parsable") or directives.values.get("parsable")), command, clusters)
    if cli.values.get("wait") or directives.values.get("wait"):
        raise SystemExit(wait_for(job_id))


def _script_text(script: str | None, wrap: str | None, script_args: Sequence[str]) -> tuple[str, str]:
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


def _directives(text: str) -> Parsed:
    """The script's #SBATCH/#PSBATCH lines, parsed by the option table that parses the command line."""
    from pslurm.cli.options import DirectiveError as BadDirective
    from pslurm.cli.options import parse_directive_lines
    from pslurm.core.directives import DirectiveError, directive_lines

    try:
        lines = directive_lines(text)
    except DirectiveError as exc:
        fail(PROG, f"invalid directive: {exc}")
    try:
        return parse_directive_lines(lines)
    except BadDirective as exc:
        fail(PROG, str(exc))


def request(opts: Mapping[str, object], text: str, default_name: str, command: str = "") -> JobDesc:
    """The job request of the options (JobOptions' fields by name) and the script (``command``: its
    path, as given); a bad option is Slurm's one-line error."""
    from pslurm.core.errors import SpecError
    from pslurm.core.jobdesc import spec_values
    from pslurm.core.restjson import job_desc

    user, uid, gid = user_identity()
    try:
        return job_desc({**spec_values(opts, user=user, uid=uid, gid=gid, cwd=os.getcwd(), environ=os.environ,
                                       umask=current_umask(), script=text, default_name=default_name,
                                       command=command), "submit_line": submit_line()})
    except SpecError as exc:
        fail(PROG, str(exc))


def submit_line() -> str:
    """This command line as sacct's SubmitLine shows it: the words joined by blanks, the command by the
    name it was run by."""
    return " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]) if sys.argv else ""


def submit(opts: Mapping[str, object], text: str, default_name: str, parsable: bool, command: str = "",
           clusters: object = None) -> int:
    """Check the options, send the job, print its id (with ``-M``, and the cluster's name as sbatch does:
    ``N;cluster``, ``Submitted batch job N on cluster C``); the id."""
    from pslurm.cli.common import check_clusters

    job = request(opts, text, default_name, command)
    client = connect(PROG)
    cluster = client.config.cluster_name
    named = check_clusters(PROG, clusters, cluster)
    with reporting(PROG, "Batch job submission failed: "):
        job_id = client.submit(job)
    if parsable:
        print(f"{job_id};{cluster}" if named else job_id, flush=True)
    else:
        print(f"Submitted batch job {job_id}" + (f" on cluster {cluster}" if named else ""), flush=True)
    return job_id


def test_only(opts: Mapping[str, object], text: str, default_name: str) -> int:
    """--test-only: ask the controller when and where the job would start, submitting nothing; print
    it as sbatch does (``Job N to start at TIME using C processors on nodes N in partition P``, on
    stderr). N is the id the job would likely get, not one reserved. The exit status."""
    from pslurm.core.timefmt import format_timestamp

    job = request(opts, text, default_name)
    with reporting(PROG, "allocation failure: "):
        found = connect(PROG).will_run(job)
    print(f"{PROG}: Job {found.job_id} to start at {format_timestamp(found.start_time)} using "
          f"{found.proc_cnt} processors on nodes {found.node_list} in partition {found.part_name}",
          file=sys.stderr)
    return 0


def job_exit_status(exit_code: int, signal: int) -> int:
    """sbatch --wait's status for one ended job (Slurm's _job_wait): the job's exit code, or 1 when a
    signal ended it (a cancelled job, ExitCode=0:15)."""
    return 1 if signal else exit_code


def wait_for(job_id: int) -> int:
    """-W/--wait: follow the job (every task of an array) on the controller's wait stream until it
    ends; the highest of the tasks' exit statuses, as sbatch."""
    import time

    client = connect(PROG)
    with reporting(PROG):
        tasks = sorted({j.job_id for j in client.jobs(job_ids=[job_id], include_finished=True, light=True)}
                       | {job_id})
    status = 0
    for task in tasks:
        ended = None
        while ended is None:  # the stream may end before the job does (a busy controller): ask again
            with reporting(PROG):
                ended = next((job for job in client.wait(task) if job.state.is_final), None)
            if ended is None:
                time.sleep(0.5)
        status = max(status, job_exit_status(ended.exit_code, ended.exit_signal))
    return status
