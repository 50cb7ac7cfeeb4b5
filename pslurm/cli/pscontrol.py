"""pscontrol: show jobs and nodes, update nodes (scontrol)."""

from __future__ import annotations

import time

from pslurm.cli import argv as a
from pslurm.cli import token_cmd
from pslurm.cli.common import connect, connect_api, fail, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pslurm.client import Client
    from pslurm.core.config import ClusterConfig, PartitionConfig
    from pslurm.core.jobinfo import JobInfo
    from pslurm.core.jobspec import JobRecord
    from pslurm.core.node import NodeStatus

PROG = prog_name("pscontrol")


def show_job(job: JobRecord | JobInfo) -> str:
    """scontrol show job's Key=Value block."""
    from pslurm.cli.jobview import dependency_text, gres_text, node_count, nodelist_text, total_cpus, total_tasks
    from pslurm.core.timefmt import format_duration, format_timestamp

    spec = job.spec
    start, end = job.start_time, job.end_time
    expected = start if start is not None else job.start_estimate
    run_time = 0.0 if start is None else (end or time.time()) - start
    gres = gres_text(spec)
    nodes, cpus = node_count(job), total_cpus(job)
    started = bool(job.node)
    num_nodes = str(nodes) if started or not spec.max_nodes else f"{nodes}-{spec.max_nodes}"  # Slurm's MIN-MAX
    tres = f"cpu={cpus},mem={spec.mem_mb * nodes}M,node={nodes}" + (
        f",gres/gpu={sum(g.count for g in spec.gres) * nodes}" if gres else "")  # the GRES asked per node, in all
    dependency = dependency_text(job)
    array = (f" ArrayJobId={job.array_job_id} ArrayTaskId={job.array_task_id}"
             if job.array_job_id is not None else "")
    held = {"user": " (held by user)", "admin": " (held by an operator)"}.get(job.hold, "")
    lines = [
        f"JobId={job.job_id}{array} JobName={spec.name}",
        f"UserId={spec.user}({spec.uid}) GroupId={spec.gid}",
        f"Priority={job.priority}{held} Nice={spec.nice} Account={spec.account or '(null)'} "
        f"QOS={spec.qos or 'normal'}",
        f"JobState={job.state.value} Reason={job.reason} Dependency={dependency}",
        f"Requeue={1 if job.requeue else 0} Restarts={job.restarts}",
        f"ExitCode={job.exit_code}:{job.exit_signal}",
        f"RunTime={format_duration(run_time)} TimeLimit={format_duration(job.time_limit)}",
        f"SubmitTime={format_timestamp(job.submit_time)} EligibleTime={format_timestamp(job.eligible_time)}",
        f"StartTime={format_timestamp(expected)} EndTime={format_timestamp(end)} "
        f"Deadline={format_timestamp(spec.deadline) if spec.deadline else 'N/A'}",
        f"Partition={job.partition} NodeList={nodelist_text(job) or '(null)'}",
        f"ReqNodeList={spec.nodelist or '(null)'} ExcNodeList={spec.exclude or '(null)'}",
        f"Features={spec.constraint or '(null)'} OverSubscribe={'NO' if spec.exclusive else 'OK'}",
        *([f"BatchHost={job.node}"] if started else []),
        f"NumNodes={num_nodes} NumCPUs={cpus} NumTasks={total_tasks(job)} CPUs/Task={spec.cpus_per_task}",
        f"TRES={tres}",
        f"TresPerNode={'gres/' + gres if gres else '(null)'} "
        f"GpuIndices={','.join(map(str, job.gpu_indices)) or '(null)'}",
        f"Command={' '.join(spec.argv) if spec.argv else '(batch script)'}",
        f"WorkDir={spec.workdir}",
    ]
    if job.system_comment:
        lines.append(f"SystemComment={job.system_comment}")
    if spec.comment:
        lines.append(f"Comment={spec.comment}")
    if not spec.interactive:
        stdout, stderr, stdin = std_paths(job)
        lines.append(f"StdErr={stderr}")
        lines.append(f"StdIn={stdin}")
        lines.append(f"StdOut={stdout}")
    return lines[0] + "\n" + "".join(f"   {line}\n" for line in lines[1:])


def std_paths(job: JobRecord | JobInfo) -> tuple[str, str, str]:
    """StdOut, StdErr and StdIn as scontrol shows them: the pattern expanded (``%j %x %u %A %a``; ``%N``
    once the job has a node) and made absolute against the working directory. A batch job's stdin is
    /dev/null; stderr defaults to stdout."""
    import os

    from pslurm.core.patterns import default_output_pattern, expand_output_pattern

    spec = job.spec
    node = job.node or ""
    if node and ("[" in node or "," in node):
        from pslurm.core.hostlists import expand

        node = expand(node)[0]

    def path(pattern: str) -> str:
        text = expand_output_pattern(pattern, job_id=job.job_id, job_name=spec.name, user=spec.user,
                                     node=node or "%N", array_job_id=job.array_job_id,
                                     array_task_id=job.array_task_id)
        return os.path.join(spec.workdir, text) if spec.workdir else text

    out = path(spec.stdout if spec.stdout is not None else default_output_pattern(job.array_job_id is not None))
    err = path(spec.stderr) if spec.stderr is not None else out
    return out, err, "/dev/null"


def show_node(node: NodeStatus) -> str:
    from pslurm.cli.gpushow import gpu_mem, gres_used
    from pslurm.core.gres import format_gres
    from pslurm.core.timefmt import format_timestamp

    drained = node.drain and node.display_state not in ("drain", "drng")
    state = node.display_state.upper() + ("+DRAIN" if drained else "")
    gpus = ", ".join(f"{g.index}:{g.type or g.name}{'@' + g.file if g.file else ''}" for g in node.gpus) or "(null)"
    lines = [
        f"NodeName={node.name} NodeAddr={node.addr} Port={node.port}",
        f"CPUAlloc={node.alloc_cpus} CPUTot={node.cpus}",
        f"RealMemory={node.real_memory} AllocMem={node.alloc_mem}",
        f"AvailableFeatures={','.join(node.features) or '(null)'} ActiveFeatures={','.join(node.features) or '(null)'}",
        f"Gres={format_gres(node.gres) or '(null)'} GresUsed={gres_used(node.alloc_gpus, node.gpu_usage)}",
        f"Gpus={gpus}",
        f"GpuMem={gpu_mem(node.gpu_usage)}" if node.gpu_usage else "",
        f"State={state} Partitions={','.join(node.partitions)}",
        f"LastHeartbeat={format_timestamp(node.last_heartbeat)}",
        f"DeviceIsolation={node.isolation or 'unknown'}",
        f"Reason={node.reason or '(null)'}" if node.reason else "",
    ]
    return lines[0] + "\n" + "".join(f"   {line}\n" for line in lines[1:] if line)


def show_partition(p: PartitionConfig) -> str:
    from pslurm.core.timefmt import format_duration

    max_time = format_duration(p.max_time) if p.max_time is not None else "UNLIMITED"
    default_time = format_duration(p.default_time) if p.default_time is not None else "NONE"
    return (f"PartitionName={p.name}\n   AllowGroups={','.join(p.allow_groups) or 'ALL'} "
            f"Default={'YES' if p.default else 'NO'}\n"
            f"   MaxNodes={p.max_nodes if p.max_nodes is not None else 'UNLIMITED'} MaxTime={max_time} "
            f"DefaultTime={default_time}\n"
            f"   PriorityJobFactor={p.priority_job_factor} State={p.state}\n"
            f"   Nodes={','.join(p.nodes)}\n")


OPTIONS = (a.JSON, a.HELP)
USAGE = "pscontrol [OPTIONS] words..."
DESCRIPTION = ("show job ID | show node [NAME] | show partition | update NodeName=X State=DRAIN|RESUME Reason=.. |\n"
               "  update JobId=ID TimeLimit=[+|-]T Partition=P JobName=N Account=A Comment=C NumTasks=N\n"
               "  MinMemoryNode=MB Priority=P Nice=N | hold ID.. | uhold ID.. | release ID.. | requeue ID.. |\n"
               "  show hostnames [HOSTLIST] (default $SLURM_NODELIST) | show hostlist NAME,NAME.. (neither asks the\n"
               "  controller) | show config (read from the local pslurm.conf, not from the controller) |\n"
               "  write batch_script ID [FILE|-] (default slurm-ID.sh; - for stdout; the owner or an operator) |\n"
               "  ping (each controller: UP or DOWN) | takeover [INDEX] (backup INDEX, default 1, takes control)")


def main(argv: Sequence[str] | None = None) -> None:
    """Show and update pslurm's state (scontrol)."""
    found, words = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage=USAGE,
                                   description=DESCRIPTION,
                                   arguments=(("words...", "show job ID | show node [NAME] | update NodeName=.. | "
                                               "update JobId=.. | hold|release|requeue ID"),))
    if not words:
        fail(PROG, "Missing argument 'words'.")
    as_json = a.json_format(PROG, a.values(found))  # None, "slurm" or "pslurm"
    verb = words[0].lower()
    if verb == "show" and len(words) >= 2 and words[1].lower() in ("job", "jobs"):
        _show_jobs(words[2:], as_json)  # the hot path: the API's JSON as it is, no dataclasses
        return
    if verb == "show" and len(words) >= 2 and words[1].lower() in ("hostnames", "hostname", "hostlist", "config"):
        _show_local(words[1].lower(), words[2:])  # no controller: the argument, the environment, the file
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
        return token_cmd.token(PROG, words[1:])
    client = connect(PROG)
    if verb == "show" and len(words) >= 2:
        _show(client, words[1].lower(), words[2:], as_json)
    elif verb in ("hold", "uhold", "release", "requeue") and len(words) >= 2:
        _job_action(client, verb, words[1:])
    else:
        fail(PROG, f"Invalid command: {' '.join(words)}")


def _show(client: Client, what: str, names: list[str], as_json: str | None) -> None:
    """show node|partition; ``as_json``: None, "slurm" (Slurm's shape, as scontrol's --json from 23.02;
    22.05's scontrol has none) or "pslurm"."""
    import json

    from pslurm.cli import jsonout, slurmjson

    if what in ("node", "nodes"):
        with reporting(PROG):
            nodes = [n for n in client.nodes() if not names or n.name in names]
        if names and not nodes:
            fail(PROG, f"Node {names[0]} not found")
        if as_json == "slurm":
            print(slurmjson.dumps(slurmjson.nodes_reply(nodes)))
        elif as_json:
            print(json.dumps({"nodes": [jsonout.node_json(n) for n in nodes]}, indent=2))
        else:
            print("\n".join(show_node(n) for n in nodes))
    elif what in ("partition", "partitions"):
        with reporting(PROG):
            parts = [p for p in client.partitions() if not names or p.name in names]
            all_nodes = client.nodes() if as_json == "slurm" else []  # a partition's CPU and TRES totals
        if as_json == "slurm":
            print(slurmjson.dumps(slurmjson.partitions_reply(parts, all_nodes)))
        elif as_json:
            print(json.dumps({"partitions": [jsonout.partition_json(p) for p in parts]}, indent=2))
        else:
            for p in parts:
                print(show_partition(p))
    else:
        fail(PROG, f"Invalid entity: {what} (job, node, partition, config, hostnames or hostlist)")


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
    if what == "hostlist":
        if not args:  # scontrol's words and status
            print("invalid encode argument", file=sys.stderr)
            raise SystemExit(1)
        print(encode_hostlist(",".join(args)))
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


def encode_hostlist(text: str) -> str:
    """``show hostlist``: names (or hostlists), commas or blanks between, as one hostlist expression."""
    from pslurm.core.hostlists import collect, expand

    names: list[str] = []
    for word in text.replace("\n", ",").replace(" ", ",").split(","):
        if word:
            names.extend(expand(word) if "[" in word else [word])
    return collect(dict.fromkeys(names))


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


def _show_jobs(names: list[str], as_json: str | None) -> None:
    """show job [ID...]: every job, or the named ones (finished ones too)."""
    from pslurm.core.jobinfo import JobInfo

    try:
        job_ids = [int(n) for n in names]
    except ValueError:
        fail(PROG, f"Invalid job id specified: {' '.join(names)}")
    api = connect_api(PROG)
    with reporting(PROG):
        jobs = [JobInfo(data) for data in api.jobs(job_ids=job_ids, include_finished=bool(names))]
    if names and not jobs:
        fail(PROG, "Invalid job id specified")
    if as_json == "slurm":  # as squeue --json (scontrol show job --json of Slurm 23.02 on)
        from pslurm.cli import slurmjson

        print(slurmjson.dumps(slurmjson.jobs_reply(jobs, api.config.cluster_name)))
    elif as_json:
        import json

        from pslurm.cli import jsonout

        print(json.dumps({"jobs": [{**jsonout.job_json(j, full=True), "job_id": str(j.job_id)} for j in jobs]},
                         indent=2))
    else:
        print("\n".join(show_job(j) for j in jobs) if jobs else "No jobs in the system")


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
        fail(PROG, "too few arguments for keyword:write")
    if not "batch_script".startswith(args[0].lower()) or len(args[0]) < 5:
        fail(PROG, f"invalid write argument:{args[0]}")
    if len(args) > 3:
        fail(PROG, "too many arguments for keyword:write")
    if len(args) < 2:
        fail(PROG, "too few arguments for keyword:write")  # scontrol says nothing here (and exits 0)
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

    from pslurm.core.jobinfo import JobInfo

    if job_id <= 0:
        return None, NO_SUCH_JOB
    api = connect_api(PROG)
    with reporting(PROG):
        found = [JobInfo(d) for d in api.jobs(job_ids=[job_id], include_finished=True)]
    job = next((j for j in found if j.job_id == job_id), None)
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
        fail(PROG, "too few arguments for keyword:update")
    if any(len(key) >= 3 and "nodename".startswith(key.lower()) for key in (w.partition("=")[0] for w in words)):
        _update_nodes(words)
    else:
        _update_jobs(words)


def _update_jobs(words: list[str]) -> None:
    """scontrol update JobId=..: the words checked here (scontrol's refusals, nothing sent), then
    each job of the id list changed, all its changes or none; scontrol's lines for the refused, exit 1."""
    import sys

    from pslurm.core.arrays import split_job_list
    from pslurm.core.jobupdate import UpdateError, parse_job_update

    try:
        job, changes = parse_job_update(words)
    except UpdateError as exc:
        if exc.prefixed:
            fail(PROG, exc.lines[0])
        print("\n".join(exc.lines), file=sys.stderr)
        raise SystemExit(1) from None
    api = connect_api(PROG)
    errors: list[str] = []
    for text in split_job_list(job) or [job]:
        with reporting(PROG):
            errors.extend(api.update_job(text, changes=changes))
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


def _job_action(client: Client, verb: str, ids: list[str]) -> None:
    """hold / uhold / release / requeue, for each id (14, 14_3, 14_[5-9]; commas allowed)."""
    from pslurm.core.arrays import split_job_list

    errors = []
    for item in ids:
        for text in split_job_list(item):
            with reporting(PROG):
                errors.extend(client.update_job(text, action=verb))
    _report(errors)


def _report(errors: list[str]) -> None:
    import sys

    for line in errors:
        print(f"{PROG}: error: {line}", file=sys.stderr)
    if errors:
        raise SystemExit(1)

