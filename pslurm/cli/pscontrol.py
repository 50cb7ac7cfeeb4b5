"""pscontrol: show jobs and nodes, update nodes (scontrol)."""

from __future__ import annotations

import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

    from pslurm.client import Client
    from pslurm.core.config import ClusterConfig

PROG = prog_name("pscontrol")


from pslurm.cli.jobview import std_paths as std_paths  # noqa: E402 - where the tests have found it
from pslurm.cli.scontrol_show import show_job as show_job  # noqa: E402, F401 - the same
from pslurm.cli.scontrol_show import show_node, show_partition, show_step  # noqa: E402

_O = a.Opt
OPTIONS = (
    _O("all", "a", a.NONE, help="every partition (pslurm hides none)"),
    _O("details", "d", a.NONE, dest="details", help="more detail (a job's CPUs and GRES per node)"),
    _O("future", "F", a.NONE, help="nodes in state FUTURE too (pslurm has none)"),
    _O("hide", arg=a.NONE), _O("local", arg=a.NONE), _O("federation", arg=a.NONE), _O("sibling", arg=a.NONE),
    _O(("clusters", "cluster"), "M", dest="clusters", help="this cluster's name, or all"),
    _O("oneliner", "o", a.NONE, help="one line per record"),
    _O("quiet", "Q", a.NONE, help="no error messages"),
    _O("uid", "u", help="act as this uid (root only; pslurm acts as the caller)"),
    _O("verbose", "v", a.NONE), _O("version", "V", a.NONE), _O("usage", arg=a.NONE, dest="help"),
    a.JSON, _O("yaml", arg=a.NONE), _O("help", "h", a.NONE),
)
USAGE = "pscontrol [OPTIONS] words..."
DESCRIPTION = ("show job|node|partition|step|reservation|config|daemons|licenses|topology|aliases [NAME] |\n"
               "  show hostnames|hostlist|hostlistsorted LIST | update NodeName=X State=DRAIN|RESUME Reason=.. |\n"
               "  update JobId=ID KEY=VALUE... | hold|uhold|release|requeue|requeuehold|top ID.. |\n"
               "  suspend|resume ID | listpids [ID] | notify ID MSG | wait_job ID | ping | version |\n"
               "  reconfigure | write batch_script ID [FILE|-] | takeover [INDEX] | token [lifespan=S] [username=U]")
# scontrol's keywords and how short each may be written (scontrol.c: MAX(tag_len, N))
VERBS = {"show": 3, "update": 1, "hold": 2, "uhold": 2, "release": 3, "requeue": 7, "requeuehold": 8, "suspend": 2,
         "resume": 3, "top": 3, "listpids": 5, "notify": 2, "wait_job": 2, "ping": 2, "version": 4,
         "reconfigure": 3, "write": 2, "pidinfo": 3, "takeover": 8, "token": 3}
ENTITIES = {"jobs": 1, "jobid": 4, "nodes": 1, "partitions": 2, "steps": 2, "reservations": 3, "config": 1,
            "daemons": 1, "licenses": 2, "topology": 1, "aliases": 2, "hostnames": 5, "hostname": 5,
            "hostlist": 5, "hostlistsorted": 9, "frontend": 1, "federation": 2, "burstbuffer": 2,
            "partitionname": 2, "reservationname": 1}
ENTITY_ALIASES = {"partitionname": "partitions", "reservationname": "reservations"}  # show PartitionName=gpu


def _word(word: str, table: dict[str, int]) -> str | None:
    """The keyword ``word`` names, shortened as scontrol allows (at least its minimum length)."""
    low = word.lower()
    return next((k for k, least in table.items() if len(low) >= least and k.startswith(low)), None)


def main(argv: Sequence[str] | None = None) -> None:
    """Show and update pslurm's state (scontrol)."""
    found, words = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage=USAGE,
                                   description=DESCRIPTION,
                                   arguments=(("words...", "show job ID | show node [NAME] | update NodeName=.. | "
                                               "update JobId=.. | hold|release|requeue ID"),))
    v = a.values(found)
    from pslurm.cli.common import answer_usage_version, check_clusters

    answer_usage_version(v, "")
    if v.get("help"):
        import sys

        sys.stdout.write(f"Usage: {USAGE}\n\n  {DESCRIPTION}\n")
        return
    if not words:
        fail(PROG, "Missing argument 'words'.")
    opts = Options(v)
    verb = _word(words[0], VERBS)
    if verb is None:
        _quiet_error(opts, f"invalid keyword: {words[0]}")
        return
    if verb == "version":
        from pslurm.cli.common import version_line

        print(version_line())
        return
    if verb == "show":
        if len(words) < 2:
            _quiet_error(opts, "too few arguments for keyword:show")
        entity_word, _, first = words[1].partition("=")
        entity = _word(entity_word, ENTITIES) if not entity_word.lower().startswith("nodename") else None
        entity = ENTITY_ALIASES.get(entity or "", entity)
        if entity is None:
            _quiet_error(opts, f"invalid entity:{words[1]} for keyword:show")
            return
        names = ([first] if first else []) + words[2:]
        if entity in ("hostnames", "hostname", "hostlist", "hostlistsorted", "config"):
            _show_local(entity, names)
            return
        client = connect(PROG)
        check_clusters(PROG, v.get("clusters"), client.config.cluster_name)
        _show(client, entity, names, opts)
        return
    if verb == "write":
        _write(words[1:])
        return
    if verb == "update":
        _update(words[1:])
        return
    if verb in ("ping", "takeover"):  # the controllers themselves (SlurmctldHost= lines)
        from pslurm.cli import controllers_cmd

        controllers_cmd.run(PROG, verb, words[1:])
        return
    if verb == "token":  # scontrol token: cli/token_cmd.py
        from pslurm.cli import token_cmd

        token_cmd.token(PROG, words[1:])
        return
    from pslurm.cli import scontrol_verbs

    scontrol_verbs.run(verb, words[1:], opts)


class Options:
    """The options every keyword reads: -o, -d, -Q, --json."""

    def __init__(self, v: dict[str, object]) -> None:
        self.one_liner, self.details, self.quiet = bool(v.get("oneliner")), bool(v.get("details")), bool(v.get("quiet"))
        self.as_json = a.json_format(PROG, v) or ("slurm" if v.get("yaml") else None)


def _refuse(message: str) -> NoReturn:
    """scontrol's line for words it cannot take: on stderr, without the command's name; exit 1."""
    import sys

    print(message, file=sys.stderr)
    raise SystemExit(1)


def _quiet_error(opts: Options, message: str) -> None:
    """scontrol's error line (without the command's name, as scontrol writes these), exit 1; -Q: nothing."""
    import sys

    if not opts.quiet:
        print(message, file=sys.stderr)
    raise SystemExit(1)


def _show(client: Client, what: str, names: list[str], opts: Options) -> None:  # noqa: C901 - one per entity
    """show ENTITY [NAME...]."""
    if what in ("jobs", "jobid"):
        _show_jobs(client, names, opts)  # first: json, which the others import, costs `show job` its start
        return
    import json
    import sys

    from pslurm.cli import jsonout, slurmjson

    if what == "nodes":
        with reporting(PROG):
            nodes = [n for n in client.nodes() if not names or n.name in names]
        if names and not nodes:
            print(f"Node {names[0]} not found")  # on stdout, as scontrol
            raise SystemExit(1)
        if opts.as_json == "slurm":
            print(slurmjson.dumps(slurmjson.nodes_reply(nodes)))
        elif opts.as_json:
            print(json.dumps({"nodes": [jsonout.node_json(n) for n in nodes]}, indent=2))
        else:
            sys.stdout.write("".join(show_node(n, opts.one_liner) for n in nodes))
    elif what == "partitions":
        with reporting(PROG):
            cluster = client.cluster()
        parts = [p for p in cluster.partitions if not names or p.name in names]
        if names and not parts:
            print(f"Partition {names[0]} not found")
            raise SystemExit(1)
        if opts.as_json == "slurm":
            print(slurmjson.dumps(slurmjson.partitions_reply(parts, list(cluster.nodes))))
        elif opts.as_json:
            print(json.dumps({"partitions": [jsonout.partition_json(p) for p in parts]}, indent=2))
        else:
            sys.stdout.write("".join(show_partition(p, list(cluster.nodes), opts.one_liner) for p in parts))
    elif what == "steps":
        _show_steps(client, names, opts)
    elif what == "aliases":
        with reporting(PROG):
            print(" ".join(n.name for n in client.nodes()))
    else:  # entities pslurm has none of, answered as scontrol answers a cluster without them
        answers = {"reservations": "No reservations in the system", "licenses": "No licenses configured in Slurm.",
                   "frontend": "No nodes in the system", "daemons": "psctld psd"}
        if what == "topology":
            print(f"{PROG}: error: No topology information available", file=sys.stderr)
        elif what in answers:
            print(answers[what])


def _show_steps(client: Client, names: list[str], opts: Options) -> None:
    """show step [J.S]: the running steps (batch steps too), or the one named."""
    import sys

    from pslurm.cli.stepview import step_rows
    from pslurm.core.jobids import parse_job_id

    selector = None
    if names:
        try:
            selector = parse_job_id(names[0])
        except ValueError:
            _quiet_error(opts, f"Invalid job step id: {names[0]}")
    with reporting(PROG):
        jobs = client.jobs(job_ids=[selector.job_id] if selector else (), steps=True)
    if selector is not None and not jobs:
        _quiet_error(opts, "slurm_get_job_steps error: Invalid job id specified")
    rows = [r for j in jobs if j.state.holds_resources for r in step_rows(j)
            if selector is None or selector.step is None or r.step_id.endswith("." + selector.step)]
    rows.sort(key=lambda r: r.job_id)  # each job's steps as slurmctld made them: its batch step first
    if not rows:
        print("No job steps in the system" if selector is None else f"Job step {names[0]} not found")
        return
    sys.stdout.write("".join(show_step(r, opts.one_liner) for r in rows))


def _show_local(what: str, args: list[str]) -> None:
    import os
    import sys

    if what == "config":
        from pslurm.core.clientconf import find_config_path
        from pslurm.core.config import ConfigError, load_cluster_config

        path = find_config_path()
        try:
            cfg = load_cluster_config(path)
        except ConfigError as exc:
            fail(PROG, str(exc))
        print(show_config(cfg), end="")
        return
    if what in ("hostlist", "hostlistsorted"):
        if not args:  # scontrol's words and status
            print("invalid encode argument", file=sys.stderr)
            raise SystemExit(1)
        print(encode_hostlist(",".join(args), sort=what == "hostlistsorted"))
        return
    text = args[0] if args else os.environ.get("SLURM_NODELIST") or os.environ.get("SLURM_JOB_NODELIST")
    if not text:
        print(f"{PROG}: error: host list is empty", file=sys.stderr)  # scontrol: this message, status 0
        return
    try:
        print("\n".join(hostnames(text)))
    except ValueError:
        print(f"Invalid hostlist: {text}", file=sys.stderr)  # scontrol's words (status 0, as scontrol)


def hostnames(text: str) -> list[str]:
    """``show hostnames``: one name a line, in the expression's order (ValueError when malformed)."""
    from pslurm.core.hostlists import expand

    return expand(text)


def encode_hostlist(text: str, sort: bool = False) -> str:
    """``show hostlist``: names (or hostlists), commas or blanks between, as one hostlist expression
    (``sort``: hostlistsorted, the names in order first)."""
    from pslurm.core.hostlists import collect, expand

    names: list[str] = []
    for word in text.replace("\n", ",").replace(" ", ",").split(","):
        if word:
            names.extend(expand(word) if "[" in word else [word])
    return collect(sorted(dict.fromkeys(names)) if sort else dict.fromkeys(names))


def config_pairs(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """``show config``'s keys (the ones tools read), in scontrol's alphabetical order."""
    from pslurm.core.config import scheduler_config
    from pslurm.core.timefmt import format_duration

    sched = scheduler_config(cfg)
    extra = {k.lower(): v for k, v in cfg.extra.items()}
    ports = sorted({n.port for n in cfg.nodes.values()})
    weights = (("PriorityWeightAge", sched.weight_age), ("PriorityWeightAssoc", 0),
               ("PriorityWeightFairShare", sched.weight_fairshare), ("PriorityWeightJobSize", sched.weight_jobsize),
               ("PriorityWeightPartition", sched.weight_partition), ("PriorityWeightQOS", sched.weight_qos))
    pairs = [
        ("BatchStartTimeout", f"{cfg.batch_start_timeout} sec"),
        ("ClusterName", cfg.cluster_name),
        ("EnforcePartLimits", "ALL" if sched.enforce_part_limits else "NO"),
        ("JobRequeue", "1" if sched.job_requeue else "0"),
        ("KillWait", f"{cfg.kill_wait} sec"),
        ("MaxArraySize", str(sched.max_array_size)),
        ("MaxJobCount", str(sched.max_job_count)),
        # pslurm purges no ended job, so each stays at least this long (Slurm's default 300)
        ("MinJobAge", f"{extra.get('minjobage') or 300} sec"),
        ("PriorityDecayHalfLife", format_duration(sched.decay_half_life)),
        ("PriorityFavorSmall", "Yes" if sched.favor_small else "No"),
        ("PriorityMaxAge", format_duration(sched.max_age)),
        ("PriorityType", "priority/multifactor"),
        *((key, str(value)) for key, value in weights),
        ("RestPort", str(cfg.rest_port)),
        ("SchedulerParameters", extra.get("schedulerparameters") or "(null)"),
        *((f"SlurmctldHost[{i}]", f"{name}({addr})") for i, (name, addr) in enumerate(cfg.controller_hosts)),
        ("SlurmctldPort", str(cfg.controller_port)),
        ("SlurmctldTimeout", f"{cfg.slurmctld_timeout} sec"),
        ("SlurmdPort", str(ports[0]) if ports else "6818"),
        ("SlurmdSpoolDir", cfg.spool_dir),
        ("SlurmdTimeout", f"{cfg.slurmd_timeout} sec"),
        ("StateSaveLocation", cfg.state_dir),
    ]
    return pairs


def show_config(cfg: ClusterConfig, now: float | None = None) -> str:
    """scontrol show config: ``Configuration data as of <time>``, then ``Key = value`` (keys padded to 23)."""
    from pslurm.core.timefmt import format_timestamp

    head = f"Configuration data as of {format_timestamp(time.time() if now is None else now)}\n"
    return head + "".join(f"{key:<23} = {value}\n" for key, value in config_pairs(cfg))


def _show_jobs(client: Client, names: list[str], opts: Options) -> None:
    """show job [ID...]: every job, or the named ones (finished ones too, ids as Slurm reads them)."""
    import sys

    from pslurm.core.jobids import parse_job_id, split_ids

    selectors = []
    for word in (w for name in names for w in split_ids(name)):
        try:
            selectors.append(parse_job_id(word))
        except ValueError:
            _quiet_error(opts, "scontrol_print_job error: Invalid job id specified")
    with reporting(PROG):
        jobs = client.jobs(job_ids=sorted({s.job_id for s in selectors}), include_finished=True,
                           collapse_arrays=not any(s.tasks for s in selectors))
    if selectors:
        jobs = [j for j in jobs if any(s.selects(j.job_id, j.array_job_id, j.array_task_id) for s in selectors)]
    if names and not jobs:
        _quiet_error(opts, "slurm_load_jobs error: Invalid job id specified")
    if opts.as_json == "slurm":  # as squeue --json (scontrol show job --json of Slurm 23.02 on)
        from pslurm.cli import slurmjson

        print(slurmjson.dumps(slurmjson.jobs_reply(jobs, client.config.cluster_name)))
    elif opts.as_json:
        import json

        from pslurm.cli import jsonout

        print(json.dumps({"jobs": [{**jsonout.job_json(j, full=True), "job_id": str(j.job_id)} for j in jobs]},
                         indent=2))
    elif not jobs:
        print("No jobs in the system")
    else:
        from pslurm.cli.common import node_memory

        memory = node_memory(client) if any(j.start_time is None for j in jobs) else 0
        sys.stdout.write("".join(show_job(j, opts.one_liner, opts.details, node_memory=memory) for j in jobs))


# What slurmctld answers REQUEST_BATCH_SCRIPT with (Slurm 22.05, _slurm_rpc_dump_batch_script), as
# slurm_strerror words them.
NO_SUCH_JOB = "Invalid job id specified"  # ESLURM_INVALID_JOB_ID
NOT_ALLOWED = "Invalid user id"  # ESLURM_USER_ID_MISSING: neither the owner nor an operator
NO_SCRIPT = "Job script not specified"  # ESLURM_JOB_SCRIPT_MISSING: a psrun job


def _write(args: list[str]) -> None:
    """``write batch_script JOBID [FILE|-]``, as scontrol: the script to ``slurm-JOBID.sh`` (or FILE, or
    stdout for ``-``). A script that cannot be had is ``job script retrieval failed: <why>`` on stderr,
    and, as scontrol, status 0."""
    import sys

    if not args:
        _refuse("too few arguments for keyword:write")
    if not "batch_script".startswith(args[0].lower()) or len(args[0]) < 5:
        _refuse(f"invalid write argument:{args[0]}")
    if len(args) > 3:
        _refuse("too many arguments for keyword:write")
    if len(args) < 2:
        _refuse("too few arguments for keyword:write")  # scontrol says nothing here (and exits 0)
    digits = ""
    for ch in args[1]:  # atoll: the leading digits (14_3 is job 14)
        if not ch.isdigit():
            break
        digits += ch
    job_id = int(digits or "0")
    filename = args[2] if len(args) > 2 else f"slurm-{job_id}.sh"
    script, why = batch_script(job_id)
    if script is None:
        print(f"job script retrieval failed: {why}", file=sys.stderr)
        return
    if filename == "-":
        sys.stdout.write(script)
        return
    try:
        with open(filename, "w") as f:
            f.write(script)
    except OSError as exc:
        print(f"failed to open file `{filename}`: {exc.strerror}", file=sys.stderr)
        raise SystemExit(0) from None  # scontrol ignores it too
    print(f"batch script for job {job_id} written to {filename}")


def batch_script(job_id: int) -> tuple[str | None, str]:
    """The job's batch script as the caller may have it, or None and slurmctld's reason."""
    import os

    if job_id <= 0:
        return None, NO_SUCH_JOB
    with reporting(PROG):
        job = connect(PROG).job(job_id)
    if job is None:
        return None, NO_SUCH_JOB
    spec = job.spec
    if spec.script is not None:
        return spec.script, ""
    # The controller leaves out another user's script (and environment) unless the caller is an
    # operator; a psrun job has none: tell the two apart as slurmctld does (access first).
    mine = spec.uid == os.getuid()
    if not mine and not (spec.interactive and spec.environment):
        return None, NOT_ALLOWED
    return None, NO_SCRIPT


def _update(words: list[str]) -> None:
    """``update NodeName=.. State=.. [Reason=..]`` or ``update JobId=ID KEY=VALUE...`` (scontrol's keys:
    :mod:`pslurm.core.jobupdate`), by the words' keys as scontrol tells them apart."""
    if not words:
        _refuse("too few arguments for update keyword")
    if any(len(key) >= 3 and "nodename".startswith(key.lower()) for key in (w.partition("=")[0] for w in words)):
        _update_nodes(words)
    else:
        _update_jobs(words)


def _update_jobs(words: list[str]) -> None:
    """scontrol update JobId=..: the words checked here (scontrol's refusals, nothing sent), then
    each job of the id list changed, all its changes or none; scontrol's lines for the refused, exit 1."""
    import sys

    from pslurm.core.jobids import split_ids as split_job_list
    from pslurm.core.jobupdate import UpdateError, parse_job_update

    try:
        job, changes = parse_job_update(words)
    except UpdateError as exc:
        if exc.prefixed:
            fail(PROG, exc.lines[0])
        print("\n".join(exc.lines), file=sys.stderr)
        raise SystemExit(1) from None
    client = connect(PROG)
    errors: list[str] = []
    for text in split_job_list(job) or [job]:
        with reporting(PROG):
            errors.extend(client.update_job(text, changes=changes))
    for line in errors:
        print(line, file=sys.stderr)  # as scontrol: "Job is no longer pending execution for job 14"
    if errors:
        raise SystemExit(1)


def _update_nodes(pairs: list[str]) -> None:
    values: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq:
            fail(PROG, f"Invalid input: {pair} (expected Key=Value)")
        values[key.lower()] = value
    name = values.get("nodename")
    if not name:
        fail(PROG, "update needs NodeName=... or JobId=...")
    from pslurm.core.hostlists import expand

    client = connect(PROG)
    for node in expand(name):
        with reporting(PROG):
            client.update_node(node, values.get("state", ""), values.get("reason", ""))
