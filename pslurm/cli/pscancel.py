"""pscancel: cancel or signal jobs (scancel), with every option of Slurm 22.05's scancel.

As scancel: jobs named by id (``14``, ``14_3``, ``14_[1-3]``, ``14.0``), or chosen by the filters (-u, --me,
-n, -p, -w, -A, -q, -t, -R, --wckey), or both (the named ones the filters keep). A plain cancel of a job
that already ended, or of an unknown id, is no error (silent, exit 0); a signal that reaches no job is.
"""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.client import Client

PROG = prog_name("pscancel")
QUIET_ERRORS = ("Invalid job id specified", "Job/step already completing or completed")
STATES = {"PENDING": "PENDING", "PD": "PENDING", "RUNNING": "RUNNING", "R": "RUNNING", "SUSPENDED": "SUSPENDED",
          "S": "SUSPENDED"}
USAGE_TEXT = ("Usage: scancel [-A account] [--batch] [--full] [--interactive] [-n job_name]\n"
              "               [-p partition] [-Q] [-q qos] [-R reservation] [-s signal | integer]\n"
              "               [-t PENDING | RUNNING | SUSPENDED] [--usage] [-u user_name]\n"
              "               [--hurry] [-V] [-v] [-w hosts...] [--wckey=wckey]\n"
              "               [job_id[_array_id][.step_id]]")

_O = a.Opt
OPTIONS = (
    _O("signal", "s", help="send this signal instead (a name or a number)"),
    _O("batch", "b", a.NONE, help="signal the batch shell only"),
    _O("full", "f", a.NONE, help="signal every step, the batch shell too"),
    _O("user", "u", dest="users", help="the jobs of this user"),
    _O("me", arg=a.NONE, help="the caller's own jobs"),
    _O(("name", "jobname"), "n", dest="names", help="the jobs of these names"),
    _O("partition", "p", help="the jobs in these partitions"),
    _O("nodelist", "w", help="the jobs on these nodes"),
    _O("account", "A", dest="accounts", help="the jobs of these accounts"),
    _O("qos", "q", help="the jobs of these QOS"),
    _O("state", "t", dest="states", help="the jobs in this state: PENDING, RUNNING or SUSPENDED"),
    _O("reservation", "R", help="the jobs in this reservation (pslurm has none)"),
    _O("wckey", help="the jobs of this wckey (pslurm has none)"),
    _O("interactive", "i", a.NONE, help="confirm each job"),
    _O("quiet", "Q", a.NONE, help="no error messages"),
    _O("verbose", "v", a.NONE, help="say each job signalled"),
    _O("hurry", "H", a.NONE, help="no burst buffer stage-out (pslurm has none)"),
    _O("ctld", arg=a.NONE), _O("sibling", arg=a.REQUIRED),
    _O(("clusters", "cluster"), "M", dest="clusters", help="this cluster's name, or all"),
    _O("version", "V", a.NONE), _O("usage", arg=a.NONE), a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal."""
    found, words = a.parse_or_fail(
        PROG, argv, OPTIONS, stop_at_positional=False, usage="pscancel [OPTIONS] [job_ids...]",
        description="Cancel the jobs (SIGTERM, then SIGKILL after KillWait), or send them a signal.",
        arguments=(("job_ids...", "job ids: 14, 14_3, 14_[5-9] (an array's id: all tasks), 14.2 (a step)"),))
    v = a.values(found)
    from pslurm.cli.common import answer_usage_version, check_clusters, job_selectors

    answer_usage_version(v, USAGE_TEXT.replace("scancel", PROG, 1))
    signum = _signal(v.get("signal"))
    if v.get("batch"):
        signum = signum or 9  # scancel -b: SIGKILL unless -s says another
    states = _states(v.get("states"))
    filters = any(v.get(k) is not None for k in ("users", "me", "names", "partition", "nodelist", "accounts", "qos",
                                                 "states", "reservation", "wckey"))
    if not words and not filters:
        fail(PROG, "No job identification provided")
    selectors = []
    for word in words:
        for selector in job_selectors(PROG, word, "{prog}: error: Invalid job id {id}"):
            if selector.step is not None and not selector.step.isdigit():  # scancel reads a step's number only
                fail(PROG, f"Invalid job id {word}")
            selectors.append(selector)
    client = connect(PROG)
    check_clusters(PROG, v.get("clusters"), client.config.cluster_name)
    if filters:
        targets = _chosen(client, v, selectors, states)
        steps: list[Any] = []
    else:
        targets = [(str(s.job_id) if s.tasks is None else _task_text(s), None) for s in selectors
                   if s.step is None and s.het in (None, 0)]
        steps = [s for s in selectors if s.step is not None]
    if v.get("interactive"):
        targets = [t for t in targets if _confirm(t)]
    failed = _cancel(client, targets, steps, signum, v)
    if failed:
        raise SystemExit(1)


def _task_text(selector: Any) -> str:
    return f"{selector.job_id}_[{selector.tasks.text()}]"  # as ranges: the controller bounds them by the array


def _signal(text: object) -> int:
    """-s: a signal by Slurm's names or its number; 0 and names Slurm does not know are its one line."""
    if not isinstance(text, str):
        return 0
    from pslurm.core.signals import signal_number

    word = text.strip()
    number = signal_number(word)
    if not number and not word.isdigit():
        import signal

        name = word.upper().removeprefix("SIG")
        number = int(getattr(signal, f"SIG{name}", 0)) if name.isalnum() else 0
    if not number:
        print(f"Unknown job signal: {text}", file=sys.stderr)
        raise SystemExit(1)
    return number


def _states(text: object) -> set[str] | None:
    if not isinstance(text, str):
        return None
    wanted = set()
    for word in (w for w in text.split(",") if w):
        state = STATES.get(word.upper())
        if state is None:
            print(f"Invalid job state specified: {word}", file=sys.stderr)
            print("Valid job states are PENDING, RUNNING, and SUSPENDED", file=sys.stderr)
            raise SystemExit(1)
        wanted.add(state)
    return wanted


def _chosen(client: Client, v: dict[str, object], selectors: list[Any], states: set[str] | None
            ) -> list[tuple[str, Any]]:
    """The pending and running jobs every filter keeps (and of the ids, when some are named)."""
    from pslurm.cli.common import listed, selected, user_names
    from pslurm.cli.jobview import job_nodes

    users = user_names(PROG, v.get("users"), bool(v.get("me")))
    nodes: set[str] | None = None
    if isinstance(v.get("nodelist"), str):
        from pslurm.core.hostlists import expand

        nodes = set(expand(str(v["nodelist"])))
    with reporting(PROG):
        jobs = client.jobs(job_ids=sorted({s.job_id for s in selectors}), states=["PENDING", "RUNNING", "SUSPENDED"],
                           light=True)
    out = []
    for job in jobs:
        spec = job.spec
        checks = ((listed(v, "names"), spec.name), (listed(v, "partition"), job.partition),
                  (listed(v, "accounts"), spec.account), (listed(v, "qos"), spec.qos or "normal"),
                  (listed(v, "reservation"), ""), (listed(v, "wckey"), ""), (states, job.state.value))
        if any(want is not None and value not in want for want, value in checks):
            continue
        if users is not None and spec.user not in users:
            continue
        if nodes is not None and not nodes & set(job_nodes(job)):
            continue
        if selected(job, selectors):
            out.append((job.display_id, job))
    return out


def _confirm(target: tuple[str, Any]) -> bool:
    """-i: ask, as scancel does; ``y`` cancels."""
    text, job = target
    what = f"job_id={text}" + (f" name={job.spec.name} partition={job.partition}" if job is not None else "")
    sys.stdout.write(f"Cancel {what} [y/n]? ")
    sys.stdout.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower().startswith("y")


def _cancel(client: Client, targets: list[tuple[str, Any]], steps: list[Any], signum: int,
            v: dict[str, object]) -> bool:
    """Cancel (or signal) the jobs and steps; print what scancel prints. True when it failed somewhere."""
    failed = False
    quiet = bool(v.get("quiet"))
    specs = [text for text, _ in targets]
    for text in specs if v.get("verbose") else ():
        print(f"{PROG}: {'Signal ' + str(signum) + ' to' if signum else 'Terminating'} job {text}", file=sys.stderr)
    errors: list[str] = []
    with reporting(PROG):
        if specs:
            scope = "full" if v.get("full") else "batch" if v.get("batch") else ""  # a signal's reach: scancel's
            errors = client.cancel([int(t) for t in specs if t.isdigit()], signum,
                                   [t for t in specs if not t.isdigit()], scope)
        for step in steps:
            errors += _cancel_step(client, step, signum)
    if signum and (v.get("full") or v.get("batch")):  # slurmctld: the batch shell of an ended job is no job
        errors = [line.replace("Job/step already completing or completed", "Invalid job id specified")
                  for line in errors]
    for line in errors:
        harmless = not signum and any(line.endswith(words) for words in QUIET_ERRORS) and " step id " not in line
        if harmless and not v.get("verbose"):
            continue
        failed = failed or not harmless
        if not quiet:
            print(f"{PROG}: error: {line}", file=sys.stderr)
    return failed


def _cancel_step(client: Client, step: Any, signum: int) -> list[str]:
    """Cancel (or signal) step J.S; scancel's error line when it could not be."""
    from pslurm.client.errors import ClientError

    name = f"{step.job_id}.{step.step}"
    try:
        client.cancel_step(step.job_id, int(step.step), signum)
    except ClientError as exc:
        if not exc.remote:
            raise
        return [f"Kill job error on job step id {name}: {exc}"]
    return []
