"""scontrol show's records, line by line as Slurm 22.05 writes them (src/api/job_info.c
slurm_sprint_job_info, node_info.c, partition_info.c, step_info.c): ``Key=Value`` pairs, a record's
lines joined by a newline and three blanks, or by one blank with ``-o``.

Standard library only: pscontrol imports this on its path.
"""

from __future__ import annotations

import time

from pslurm.cli.printable import escaped

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pslurm.cli.stepview import StepRow
    from pslurm.core.clusterinfo import NodeInfo, PartitionInfo
    from pslurm.core.jobinfo import JobInfo

NULL = "(null)"


def when(ts: float | None) -> str:
    """slurm_make_time_str: the local time, ``Unknown`` for none."""
    if not ts:
        return "Unknown"
    from pslurm.core.timefmt import format_timestamp

    return format_timestamp(ts)


def duration(seconds: float | None) -> str:
    """secs2time_str / mins2time_str: ``[D-]HH:MM:SS``, ``UNLIMITED`` for none."""
    from pslurm.core.timefmt import format_slurm_duration

    return format_slurm_duration(seconds)


def _record(lines: list[str], one_liner: bool, job: bool = False) -> str:
    """A record's lines as scontrol joins them (each record ends with an empty line; a job's with an
    indented blank line before it)."""
    lines = [escaped(line) for line in lines]  # every field's user text, whichever field holds it
    if one_liner:
        return " ".join(lines) + " \n"
    return "\n   ".join(lines) + ("\n   \n\n" if job else "\n\n")


def show_job(job: JobInfo, one_liner: bool = False, details: bool = False, now: float | None = None,
             node_memory: int = 0) -> str:
    """scontrol show job's record of one job (``node_memory``: a node's, what a waiting job that asked
    no memory counts in its TRES)."""
    from pslurm.cli import jobview as v
    from pslurm.core.timefmt import format_timestamp

    now = time.time() if now is None else now
    spec = job.spec
    state = job.state.value
    first = f"JobId={job.job_id} "
    if job.array_job_id is not None:
        first += f"ArrayJobId={job.array_job_id} ArrayTaskId={v.array_task_text(job)} "
        throttle = spec.array.partition("%")[2]
        if throttle.isdigit() and int(throttle):
            first += f"ArrayTaskThrottle={throttle} "
    first += f"JobName={v.escaped(spec.name)}"
    group = v.group_name(spec.gid)
    if state == "PENDING":
        run_time = 0.0
    else:
        run_time = v.run_time(job, job.end_time if job.end_time is not None and not job.state.holds_resources else now)
    limit = "UNLIMITED" if job.time_limit is None else duration(job.time_limit)
    end = "Unknown" if job.time_limit is None and job.state.holds_resources else when(v.slurm_end_time(job))
    nodes = v.node_count(job)
    num_nodes = f"{nodes}-{spec.max_nodes}" if state == "PENDING" and spec.max_nodes else str(nodes)  # -N: MIN-MAX
    # a job cancelled before it started: slurmctld never set its task count (NO_VAL, shown N/A)
    tasks = "N/A" if state == "CANCELLED" and job.start_time is None else v.total_tasks(job)
    lines = [
        first,
        f"UserId={spec.user}({spec.uid}) GroupId={group}({spec.gid}) MCS_label=N/A",
        f"Priority={v.slurm_priority(job)} Nice={spec.nice} Account={spec.account or NULL} "
        f"QOS={spec.qos or 'normal'}",
        # slurmctld's words for the reason, where it gave some, with their blanks as underscores (as scontrol)
        f"JobState={state} Reason={'_'.join(v.reason_text(job).split())} Dependency={v.dependency_text(job)}",
        f"Requeue={1 if job.requeue else 0} Restarts={job.restarts} "
        f"BatchFlag={0 if spec.interactive or spec.allocation else 1} Reboot=0 "
        "ExitCode={}:{}".format(*v.exit_pair(job)),
        *(["DerivedExitCode={}:{}".format(*v.exit_pair(job))] if details else []),
        f"RunTime={duration(run_time)} TimeLimit={limit} TimeMin=N/A",
        f"SubmitTime={when(job.submit_time)} EligibleTime={when(v.eligible_time(job))}",
        f"AccrueTime={when(v.eligible_time(job))}",
        f"StartTime={when(v.slurm_start_time(job))} EndTime={end} "
        f"Deadline={format_timestamp(spec.deadline) if spec.deadline else 'N/A'}",
        f"SuspendTime={when(job.suspend_time) if job.suspend_time else 'None'} "
        f"SecsPreSuspend={_secs_pre_suspend(job)} LastSchedEval={when(job.start_time or job.submit_time)} "
        "Scheduler=Main",
        f"Partition={job.partition or spec.partition or ''} "
        f"AllocNode:Sid={spec.submit_host or 'localhost'}:{spec.submit_sid}",
        f"ReqNodeList={spec.nodelist or NULL} ExcNodeList={spec.exclude or NULL}",
        f"NodeList={v.nodelist_text(job)}",
        *([f"BatchHost={job.node}"] if job.node and not spec.interactive else []),
        f"NumNodes={num_nodes} NumCPUs={v.total_cpus(job)} NumTasks={tasks} "
        f"CPUs/Task={spec.cpus_per_task} ReqB:S:C:T=0:0:*:*",
        f"TRES={v.tres_alloc_text(job, node_memory)}",
        f"Socks/Node=* NtasksPerN:B:S:C={spec.ntasks_per_node}:0:*:* CoreSpec=*",
        *(_allocation_lines(job) if details and job.state.holds_resources else []),
        f"MinCPUsNode={v.min_cpus_per_node(job)} {_min_memory(job)} MinTmpDiskNode=0",
        f"Features={spec.constraint or NULL} DelayBoot=00:00:00",
        f"OverSubscribe={'NO' if spec.exclusive else 'OK'} Contiguous=0 Licenses={NULL} Network={NULL}",
        f"Command={v.command_text(job)}",
        f"WorkDir={spec.workdir}",
    ]
    if job.system_comment:
        lines.append(f"SystemComment={v.escaped(job.system_comment)} ")
    if spec.comment:
        lines.append(f"Comment={v.escaped(spec.comment)} ")
    if not (spec.interactive or spec.allocation):
        stdout, stderr, stdin = v.std_paths(job)
        lines += [f"StdErr={stderr}", f"StdIn={stdin}", f"StdOut={stdout}"]
    lines.append("Power=")
    if v.tres_per_job(spec):
        lines.append(f"TresPerJob={v.tres_per_job(spec)}")
    tres = v.tres_per_node_text(job)
    if tres != "N/A":
        lines.append(f"TresPerNode={tres}")
    if spec.mail_user and spec.mail_type:
        lines.append(f"MailUser={spec.mail_user} MailType={spec.mail_type}")
    return _record(lines, one_liner, job=True)


def _secs_pre_suspend(job: JobInfo) -> int:
    """Slurm's SecsPreSuspend=: the seconds it had run when last suspended (0: never suspended)."""
    if job.suspend_time is None or job.start_time is None:
        return 0
    return int(max(0.0, job.suspend_time - job.start_time - job.suspended_seconds))


def _min_memory(job: JobInfo) -> str:
    """MinMemoryNode= (--mem), or MinMemoryCPU= (--mem-per-cpu), in Slurm's units (``100M``, ``4G``)."""
    spec = job.spec
    if spec.mem_per_cpu_mb:
        return f"MinMemoryCPU={mem_text(spec.mem_per_cpu_mb)}"
    return f"MinMemoryNode={mem_text(spec.mem_mb)}"


def mem_text(mb: int) -> str:
    """convert_num_unit(UNIT_MEGA, exact): ``0``, ``100M``, ``4G`` (a whole number of the larger unit)."""
    if not mb:
        return "0"
    for unit, size in (("T", 1024 * 1024), ("G", 1024)):
        if mb % size == 0:
            return f"{mb // size}{unit}"
    return f"{mb}M"


def _allocation_lines(job: JobInfo) -> list[str]:
    """-d: the GRES the job holds, and its CPUs and memory per node (pslurm numbers a node's CPUs from 0)."""
    from pslurm.cli.jobview import job_nodes, tres_per_node_text

    spec = job.spec
    gres = tres_per_node_text(job)
    lines = [f"JOB_GRES={'(null)' if gres == 'N/A' else gres.replace('gres:', '')}"]
    per_node = max(1, spec.cpus_per_task) * max(1, spec.ntasks // max(1, len(job_nodes(job))))
    cpus = "0" if per_node == 1 else f"0-{per_node - 1}"
    for node, gpus in zip(job_nodes(job), job.node_gpus or [job.gpu_indices], strict=False):
        gpu_text = f"gpu:{len(gpus)}(IDX:{','.join(map(str, gpus))})" if gpus else ""
        lines.append(f"  Nodes={node} CPU_IDs={cpus} Mem={spec.mem_mb} GRES={gpu_text}")
    return lines


def show_step(row: StepRow, one_liner: bool = False) -> str:
    """scontrol show step's record of one step."""
    from pslurm.cli.stepview import BATCH

    job = row.job
    spec = job.spec
    limit = "UNLIMITED" if job.time_limit is None else duration(job.time_limit)
    nodes = len(row.nodes.split(",")) if row.nodes else 0
    batch = row.sort_key == BATCH  # slurmctld's record of the batch step: no CPUs, TRES or srun of its own
    # srun's default distribution: cyclic while there are no more tasks than nodes, else block
    dist = "" if batch else " Dist=Cyclic" if row.ntasks <= nodes else " Dist=Block"
    lines = [
        f"StepId={row.step_id} UserId={spec.uid} StartTime={when(row.start_time)} TimeLimit={limit}",
        f"State={row.state} Partition={job.partition} NodeList={row.nodes}",
        f"Nodes={nodes} CPUs={0 if batch else row.cpus} Tasks={row.ntasks} Name={escaped(row.name)} Network=(null)",
        "TRES=(null)" if batch else f"TRES=cpu={row.cpus},mem=0,node={nodes}",
        "ResvPorts=(null)",
        f"CPUFreqReq=Default{dist}",
        f"SrunHost:Pid={'(null)' if batch else spec.submit_host or 'localhost'}:0",
    ]
    return _record(lines, one_liner)


def show_node(node: NodeInfo, one_liner: bool = False) -> str:
    """scontrol show node's record of one node."""
    from pslurm.cli.gpushow import gres_used
    from pslurm.core.gres import format_gres

    state = {"idle": "IDLE", "mix": "MIXED", "alloc": "ALLOCATED", "drain": "IDLE+DRAIN", "drng": "MIXED+DRAIN",
             "down": "DOWN", "unk": "UNKNOWN"}.get(node.display_state, node.display_state.upper())
    if node.drain and "DRAIN" not in state:
        state += "+DRAIN"
    features = ",".join(node.features) or NULL
    gres = format_gres(node.gres) or NULL
    lines = [
        f"NodeName={node.name} Arch=x86_64 CoresPerSocket={node.cpus}",
        f"CPUAlloc={node.alloc_cpus} CPUEfctv={node.cpus} CPUTot={node.cpus} CPULoad=0.00",
        f"AvailableFeatures={features}",
        f"ActiveFeatures={features}",
        f"Gres={gres}",
        f"NodeAddr={node.addr} NodeHostName={node.name} Version={_version()}",
        "OS=Linux",
        f"RealMemory={node.real_memory} AllocMem={node.alloc_mem} FreeMem=N/A Sockets=1 Boards=1",
        "State=" + state + " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        f"Partitions={','.join(node.partitions)}",
        f"BootTime=None SlurmdStartTime={when(node.last_heartbeat)}",
        "LastBusyTime=Unknown",
        f"CfgTRES=cpu={node.cpus},mem={_mem_g(node.real_memory)},billing={node.cpus}"
        + "".join(f",gres/{g.name}={g.count}" for g in node.gres),
        f"AllocTRES={_alloc_tres(node)}",
        "CapWatts=n/a",
        "CurrentWatts=0 AveWatts=0",
        "ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
        *([f"Reason={node.reason}" + (f" [{node.reason_user}@{when(node.reason_time)}]" if node.reason_time else "")]
          if node.reason else []),
        f"GresUsed={gres_used(node.alloc_gpus, node.gpu_usage)} DeviceIsolation={node.isolation or 'unknown'}",
    ]
    return _record(lines, one_liner)


def _version() -> str:
    from pslurm.cli.common import version

    return version()


def _mem_g(mb: int) -> str:
    return mem_text(mb) if mb else "0"


def _alloc_tres(node: NodeInfo) -> str:
    parts = []
    if node.alloc_cpus:
        parts.append(f"cpu={node.alloc_cpus}")
    if node.alloc_mem:
        parts.append(f"mem={mem_text(node.alloc_mem)}")
    if node.alloc_gpus:
        parts.append(f"gres/gpu={len(node.alloc_gpus)}")
    return ",".join(parts)


def show_partition(part: PartitionInfo, nodes: list[NodeInfo], one_liner: bool = False) -> str:
    """scontrol show partition's record of one partition (``nodes``: every node, for the totals)."""
    from pslurm.core.hostlists import collect

    mine = [n for n in nodes if n.name in part.nodes]
    cpus = sum(n.cpus for n in mine)
    max_time = "UNLIMITED" if part.max_time is None else duration(part.max_time)
    default_time = "NONE" if part.default_time is None else duration(part.default_time)
    mem = sum(n.real_memory for n in mine)
    gpus = sum(g.count for n in mine for g in n.gres if g.name == "gpu")
    tres = f"cpu={cpus},mem={mem_text(mem)},node={len(part.nodes)},billing={cpus}" + (
        f",gres/gpu={gpus}" if gpus else "")
    lines = [
        f"PartitionName={part.name}",
        f"AllowGroups={','.join(part.allow_groups) or 'ALL'} AllowAccounts=ALL AllowQos=ALL",
        "AllocNodes=ALL Default=" + ("YES" if part.default else "NO") + " QoS=N/A",
        "DefaultTime=" + default_time + " DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO",
        f"MaxNodes={part.max_nodes if part.max_nodes is not None else 'UNLIMITED'} MaxTime={max_time} MinNodes=0 "
        "LLN=NO MaxCPUsPerNode=UNLIMITED",
        f"Nodes={collect(part.nodes) if part.nodes else ''}",
        f"PriorityJobFactor={part.priority_job_factor} PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO",
        "OverTimeLimit=NONE PreemptMode=OFF",
        f"State={part.state} TotalCPUs={cpus} TotalNodes={len(part.nodes)} SelectTypeParameters=NONE",
        "JobDefaults=(null)",
        "DefMemPerNode=UNLIMITED MaxMemPerNode=UNLIMITED",
        f"TRES={tres}",
    ]
    return _record(lines, one_liner)
