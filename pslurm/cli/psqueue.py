"""psqueue: the job queue (squeue), with every option of Slurm 22.05's squeue."""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, print_listing, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.cli.stepview import StepRow
    from pslurm.core.jobids import JobSelector
    from pslurm.core.jobinfo import JobInfo as Job

PROG = prog_name("psqueue")
DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
STEP_FORMAT = "%.15i %.8j %.9P %.8u %.9M %N"
DEFAULT_SORT = "P,t,-p"  # squeue's default (src/squeue/sort.c): partition, state (compact code), priority down
START_SORT = "S"  # squeue --start
# what squeue lists without -t (squeue's default states: neither ended nor purged)
ACTIVE = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETING")
VALID_STATES = ("PENDING,RUNNING,SUSPENDED,COMPLETED,CANCELLED,FAILED,TIMEOUT,NODE_FAIL,PREEMPTED,BOOT_FAIL,DEADLINE,"
                "OUT_OF_MEMORY,COMPLETING,CONFIGURING,RESIZING,RESV_DEL_HOLD,REQUEUED,REQUEUE_FED,REQUEUE_HOLD,REVOKED,"
                "SIGNALING,SPECIAL_EXIT,STAGE_OUT,STOPPED")


def job_fields(now: float | None = None, cluster: str = "", client: Any = None) -> dict[str, tuple[str, Any]]:
    """Every field by -o letter and -O name (:mod:`pslurm.cli.squeue_fields`); ``client``: where a
    field that needs a node's memory asks for it."""
    import time

    from pslurm.cli.common import node_memory
    from pslurm.cli.squeue_fields import JobFields

    memory = None if client is None else (lambda: node_memory(client))
    return JobFields(time.time() if now is None else now, cluster, memory).table()


def long_format(spec: str, fields: dict[str, tuple[str, Any]], warn: bool = True) -> tuple[str, dict[str, Any]]:
    """An -O list (``JobID,Name:30,State:.10 ,TimeLeft``) as an -o format and the fields it names, as
    squeue reads it: ``name[:[.][size][suffix]]``, 20 wide left-justified without a size, no separator;
    a name squeue does not know is an error line on stderr and prints nothing (squeue goes on)."""
    out, table = [], {}
    for number, token in enumerate(t for t in spec.split(",") if t):
        name, colon, rest = token.partition(":")
        found = fields.get(name.lower())
        if found is None:
            if warn:
                print(f"{PROG}: error: Invalid job format specification: {name}", file=sys.stderr)
            continue
        right, width, suffix = False, 20, ""
        if colon:
            right = rest.startswith(".")
            digits = rest[1:] if right else rest
            size = len(digits) - len(digits.lstrip("0123456789"))
            width, suffix = int(digits[:size] or 0), digits[size:]
        key = f"_{number}"  # a column of its own: the -o letter of its field may not exist (JobID is not %i)
        table[key] = found
        out.append(f"%{'.' if right else ''}{width or ''}{{{key}}}{suffix.replace('%', '%%')}")
    return "".join(out), table


def sort_jobs(found: Sequence[Job], spec: str, fields: dict[str, tuple[str, Any]], now: float) -> list[Job]:
    """squeue's ``-S/--sort``: -o letters, comma separated, ``-`` before one for descending, the first
    the main key (squeue sorts by the last key first, then by each before it). Raises ValueError for
    a letter that is no field."""
    from pslurm.cli.jobview import node_count, slurm_priority, slurm_start_time, time_used, total_cpus

    big = float("inf")

    def start(j: Job) -> float:  # squeue's _get_start_time: none yet sorts after now
        when = slurm_start_time(j)
        return now + 100 if when is None else when

    numeric: dict[str, Any] = {
        "i": lambda j: ((j.array_job_id, j.array_task_id if j.array_task_id is not None else -1)
                        if j.array_job_id is not None else (j.job_id, -1)),
        "A": lambda j: j.job_id, "F": lambda j: j.array_job_id if j.array_job_id is not None else j.job_id,
        "p": slurm_priority, "Q": slurm_priority, "y": lambda j: j.spec.nice,
        "D": node_count, "C": total_cpus, "m": lambda j: j.spec.mem_mb or 0,
        "U": lambda j: j.spec.uid, "M": lambda j: time_used(j, now), "V": lambda j: j.submit_time or 0,
        "S": start, "e": lambda j: j.end_time or 0,
        "l": lambda j: big if j.time_limit is None else j.time_limit,
        "L": lambda j: big if j.time_limit is None else j.time_limit - time_used(j, now),
    }
    keys: list[tuple[Any, bool]] = []
    for part in (p for p in spec.split(",") if p):
        reverse = part.startswith("-")
        for letter in part.lstrip("+-"):
            if letter in numeric:
                keys.append((numeric[letter], reverse))
            elif letter in fields and len(letter) == 1:
                keys.append((fields[letter][1], reverse))
            else:
                raise ValueError(f"Invalid sort specification: {letter}")
            reverse = False  # squeue: a '-' applies to the letter right after it
    rows = list(found)
    for key, reverse in reversed(keys):
        rows.sort(key=key, reverse=reverse)  # stable: earlier keys win
    return rows


def render_queue(fmt: str, found: Sequence[Any], header: bool, fields: dict[str, tuple[str, Any]] | None = None
                 ) -> list[str]:
    from pslurm.cli.formats import render

    return render(fmt, found, fields if fields is not None else job_fields(), header, PROG, _whole)


def _whole(letter: str, value: str, header: bool) -> bool:
    """squeue prints its times and node lists whole, past their width (print.c: cut_output false); of the
    headers only the node lists'."""
    if header:
        return letter in "NR"
    return letter in "LlMN" or letter == "R" and not value.startswith("(")


_S = a.Opt
OPTIONS = (
    _S(("jobs", "job"), "j", a.OPTIONAL, help="job ids: 14, 14_3, 14_[1-3], 14.0"),
    _S(("user", "users"), "u", dest="users", help="comma-separated user names"),
    _S("me", arg=a.NONE, help="only the caller's own jobs (as -u $USER)"),
    _S("states", "t", help="states (PD,R,...) or all"),
    _S(("partition", "partitions"), "p", dest="partition", help="partitions"),
    _S(("account", "accounts"), "A", dest="accounts", help="accounts"),
    _S("U", "U", dest="accounts"),  # squeue's old -U (accounts)
    _S("name", "n", dest="names", help="job names"),
    _S(("nodelist", "node", "nodes"), "w", dest="nodelist", help="jobs on these nodes (a hostlist)"),
    _S("qos", "q", help="QOS names"),
    _S(("licenses", "license"), "L", dest="licenses", help="jobs using these licenses (pslurm has none)"),
    _S("reservation", "R", help="jobs in this reservation (pslurm has none)"),
    _S("steps", "s", a.OPTIONAL, help="job steps (STEP_ID list, or all)"),
    _S("all", "a", a.NONE, help="every partition (pslurm hides none)"),
    _S("hide", arg=a.NONE, help="hide hidden partitions (pslurm has none)"),
    _S("array", "r", a.NONE, dest="expand", help="one line per array task"),
    _S("array-unique", arg=a.NONE, dest="array_unique", help="array tasks as one line each where unique"),
    a.NOHEADER,
    _S("long", "l", a.NONE, help="the long format (with the time limit)"),
    _S("format", "o", dest="fmt", help="output format (%i %j %T ...)"),
    _S("Format", "O", dest="long_fmt", help="output fields by name (JobID,Name:30,TimeLeft:.10 ...)"),
    _S("sort", "S", help="sort keys: -o letters, '-' descending (-S -t,i)"),
    _S("start", arg=a.NONE, help="pending jobs and their expected start times"),
    _S("priority", "P", a.NONE, help="sort by priority over all partitions"),
    _S("noconvert", arg=a.NONE, help="memory in MB, unconverted (pslurm's is)"),
    _S("iterate", "i", help="print again every N seconds"),
    _S(("clusters", "cluster"), "M", dest="clusters", help="this cluster's name, or all"),
    _S("federation", arg=a.NONE), _S("local", arg=a.NONE), _S(("sibling", "sib"), arg=a.NONE),
    _S("verbose", "v", a.NONE, help="print the options read"),
    _S("version", "V", a.NONE), _S("usage", arg=a.NONE),
    a.JSON, _S("yaml", arg=a.NONE, dest="yaml", help="print YAML (the JSON, which is YAML)"),
    a.HELP,
)
USAGE_TEXT = ("Usage: squeue [-A account] [--clusters names] [-i seconds] [--job jobid]\n"
              "              [-n name] [-o format] [-p partitions] [--qos qos]\n"
              "              [--reservation reservation] [--sort fields] [--start]\n"
              "              [--step step_id] [-t states] [-u user_name] [--usage]\n"
              "              [-L licenses] [-w nodes] [--federation] [--local] [--sibling]\n"
              "\t      [-ahjlrsv]")


def main(argv: Sequence[str] | None = None) -> None:
    """Show pending and running jobs (finished ones with -t)."""
    found_opts, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False,
                                             usage="psqueue [OPTIONS]", description=main.__doc__ or "")
    v = a.values(found_opts)
    if positional and "jobs" in v and v["jobs"] is None:  # squeue -j 5 6: the words after are the ids
        v["jobs"], positional = ",".join(positional), []
    elif positional and "steps" in v and v["steps"] is None:  # squeue -s 5.0
        v["steps"], positional = ",".join(positional), []
    a.no_positionals(PROG, positional)
    from pslurm.cli.common import answer_usage_version

    answer_usage_version(v, USAGE_TEXT.replace("squeue", PROG, 1))
    order = [opt.dest for opt, _ in found_opts]
    if "long_fmt" in order and "fmt" in order:  # squeue: whichever of -o and -O comes second is refused
        fail(PROG, "-O (--Format) is incompatible with -o (--format)" if order.index("fmt") < order.index("long_fmt")
             else "-o (--format) is incompatible with -O (--Format)")
    if v.get("iterate") is not None:
        from pslurm.cli.common import iterate

        iterate(PROG, v["iterate"], lambda: listing(v))
    raise SystemExit(listing(v))


def listing(v: dict[str, object]) -> int:  # noqa: C901 - one pass over squeue's options, in its order
    """One listing as the options ask; the exit status."""
    import time

    from pslurm.cli.common import check_clusters, job_selectors, user_names
    from pslurm.cli.formats import has_minus_flag

    now = time.time()
    client = connect(PROG)
    cluster = client.config.cluster_name
    clusters = check_clusters(PROG, v.get("clusters"), cluster)
    selectors: list[JobSelector] = job_selectors(PROG, v.get("jobs"), "{prog}: error: Invalid job id: {id}")
    users = user_names(PROG, v.get("users"), bool(v.get("me")))
    states = _states(v.get("states"), bool(v.get("start")))
    as_json = a.json_format(PROG, v) or ("slurm" if v.get("yaml") else None)
    if v.get("verbose"):
        print(f"{PROG}: options: " + " ".join(f"{k}={val}" for k, val in v.items() if k != "verbose"),
              file=sys.stderr)
    steps = v.get("steps", False)
    with reporting(PROG):
        found = client.jobs(job_ids=sorted({s.job_id for s in selectors}), include_finished=True,
                            light=not _shows_request(v), steps=steps is not False,
                            collapse_arrays=not (v.get("expand") or as_json == "pslurm"
                                                 or any(s.tasks is not None for s in selectors)))
    if clusters and not v.get("noheader"):
        print(f"CLUSTER: {cluster}", flush=True)
    if len(selectors) == 1 and not as_json and not any(
            selectors[0].selects(j.job_id, j.array_job_id, j.array_task_id) for j in found):
        print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
        return 1
    found = [j for j in found if _wanted(j, v, selectors, users, states)]
    if steps is not False:
        return _steps(found, v, str(steps or ""), now)
    if as_json == "slurm":
        from pslurm.cli import slurmjson

        print(slurmjson.dumps(slurmjson.jobs_reply(found, cluster)))
        return 0
    if as_json:
        import json

        from pslurm.cli.jsonout import job_json

        print(json.dumps({"jobs": [job_json(j) for j in found]}, indent=2))
        return 0
    fields = job_fields(now, cluster, client)
    fmt, header = str(v.get("fmt") or ""), not v.get("noheader")
    if isinstance(v.get("long_fmt"), str):
        fmt, extra = long_format(str(v["long_fmt"]), fields)
        fields = {**fields, **extra}
    elif not fmt:
        fmt = START_FORMAT if v.get("start") else LONG_FORMAT if v.get("long") else DEFAULT_FORMAT
    elif has_minus_flag(fmt):  # squeue has no '-' flag: it says so, and prints "%-5t" as text
        print(f"{PROG}: error: Invalid job format specification: -", file=sys.stderr)
    if v.get("long") and not v.get("noheader"):
        print(time.strftime("%a %b %d %H:%M:%S %Y"))
    sort = str(v["sort"]) if isinstance(v.get("sort"), str) else START_SORT if v.get("start") else DEFAULT_SORT
    try:
        listed = sort_jobs(found, sort, fields, now)
    except ValueError as exc:
        fail(PROG, str(exc))
    print_listing(PROG, lambda: render_queue(fmt, listed, header, fields))
    return 0


# The fields a light listing holds exactly (the store's job columns, Store.get_jobs(light=True)); any other
# needs each job's whole request
LIGHT_LETTERS = set("aABdDeEFHiIjJkKlLmMNOpPqQrRsStTuUvVwWXyYz")  # not %b: TRES per node needs --gpus's record
LIGHT_NAMES = {"account", "accruetime", "admin_comment", "arrayjobid", "arraytaskid", "batchhost", "cluster", "comment",
               "dependency", "eligibletime", "endtime", "exit_code", "jobarrayid", "jobid", "minmemory", "name",
               "nice", "nodelist", "partition", "priority", "prioritylong", "qos", "reason", "reasonlist",
               "starttime", "state", "statecompact", "submittime", "timeleft", "timelimit", "timeused",
               "userid", "username"}


def _shows_request(v: dict[str, object]) -> bool:
    """Whether the listing shows more of a job than a light listing holds (its working directory, command,
    files, CPUs per task...)."""
    from pslurm.cli.formats import parse_format

    if isinstance(v.get("long_fmt"), str):
        return any(t.partition(":")[0].lower() not in LIGHT_NAMES for t in str(v["long_fmt"]).split(",") if t)
    fmt = v.get("fmt")
    if "steps" in v:  # a step listing shows the steps' own fields
        return False
    return isinstance(fmt, str) and any(c.letter not in LIGHT_LETTERS for c in parse_format(fmt)[0])


def _states(text: object, start: bool) -> set[str] | None:
    """The states -t names (None: all of them), or squeue's default (not ended); --start: pending."""
    from pslurm.core.states import JobState

    if start:
        return {"PENDING"}
    if not isinstance(text, str) or not text:
        return set(ACTIVE)
    if text.lower() == "all":
        return None
    wanted = set()
    for word in (w for w in text.split(",") if w):
        try:
            wanted.add(JobState.parse(word).value)
        except ValueError:
            if word.upper() in VALID_STATES.split(",") or word.upper() in ("CF", "RQ", "ST", "SE"):
                continue  # a state pslurm's jobs are never in
            print(f"{PROG}: error: Invalid job state specified: {word}", file=sys.stderr)
            print(f"{PROG}: error: Valid job states include: {VALID_STATES}\n", file=sys.stderr)
            raise SystemExit(1) from None
    return wanted


def _wanted(job: Job, v: dict[str, object], selectors: list[JobSelector], users: list[str] | None,
            states: set[str] | None) -> bool:
    """Whether the job is one the options select."""
    from pslurm.cli.common import listed, selected

    spec = job.spec
    if not selected(job, selectors):
        return False
    if states is not None and job.state.value not in states:
        return False
    if users is not None and spec.user not in users:
        return False
    checks = ((listed(v, "partition"), job.partition), (listed(v, "accounts"), spec.account or ""),
              (listed(v, "names"), spec.name), (listed(v, "qos"), spec.qos or "normal"), (listed(v, "licenses"), ""),
              (listed(v, "reservation"), ""))
    if any(wanted is not None and value not in wanted for wanted, value in checks):
        return False
    nodelist = v.get("nodelist")
    if isinstance(nodelist, str) and nodelist:
        from pslurm.cli.jobview import job_nodes
        from pslurm.core.hostlists import expand

        try:
            nodes = set(expand(nodelist))
        except ValueError:
            fail(PROG, f"Invalid node name specified: {nodelist}")
        if not nodes & set(job_nodes(job)):
            return False
    return True


def _steps(jobs: list[Job], v: dict[str, object], which: str, now: float) -> int:
    """-s: the running steps of the jobs (their batch steps too), as squeue's step listing."""
    from pslurm.cli.stepview import step_fields, step_rows

    rows: list[StepRow] = [r for j in jobs if j.state.holds_resources for r in step_rows(j)]
    if which and which.lower() != "all":
        from pslurm.core.jobids import split_ids

        wanted = set(split_ids(which))
        rows = [r for r in rows if r.step_id in wanted]
    fields = step_fields(now)
    fmt = str(v.get("fmt") or STEP_FORMAT)
    if isinstance(v.get("long_fmt"), str):
        fmt, extra = long_format(str(v["long_fmt"]), fields)
        fields = {**fields, **extra}
    rows.sort(key=lambda r: (r.job_id, r.sort_key))
    print_listing(PROG, lambda: render_queue(fmt, rows, not v.get("noheader"), fields))
    return 0
