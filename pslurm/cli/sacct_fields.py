"""sacct's fields beyond the everyday ones, each as Slurm 22.05 prints it on a job's line and on a step's
(src/sacct/sacct.c, print.c): the ones pslurm has a value for, and the ones it prints as Slurm prints them
for a job without one (process accounting samples, energy, CPU frequencies, burst buffers...).

Standard library only: psacct imports this on its path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    Getter = Callable[[Any], str]

# sacct 22.05's header names and default widths (src/sacct/sacct.c's fields[]); a negative width is
# left-aligned, everything else right-aligned.
SLURM_FIELDS = (
    ("AdminComment", 15), ("AllocNodes", 10), ("AssocID", 7), ("AveCPU", 10), ("AveCPUFreq", 10),
    ("AveDiskRead", 14), ("AveDiskWrite", 14), ("AvePages", 10), ("AveRSS", 10), ("AveVMSize", 10), ("BlockID", 16),
    ("Cluster", 10), ("Constraints", 19), ("ConsumedEnergy", 14), ("ConsumedEnergyRaw", 17), ("Container", 19),
    ("DBIndex", -10), ("DerivedExitCode", 15), ("Eligible", 19), ("Flags", 19), ("Layout", 9), ("MaxDiskRead", 12),
    ("MaxDiskReadNode", 15), ("MaxDiskReadTask", 15), ("MaxDiskWrite", 12), ("MaxDiskWriteNode", 16),
    ("MaxDiskWriteTask", 16), ("MaxPages", 8), ("MaxPagesNode", 12), ("MaxPagesTask", 14), ("MaxRSSNode", 10),
    ("MaxRSSTask", 10), ("MaxVMSize", 10), ("MaxVMSizeNode", 14), ("MaxVMSizeTask", 14), ("McsLabel", 12),
    ("MinCPU", 10), ("MinCPUNode", 10), ("MinCPUTask", 10), ("Priority", 10), ("QOSRAW", 6), ("ReqCPUFreq", 10),
    ("ReqCPUFreqGov", 13), ("ReqCPUFreqMax", 13), ("ReqCPUFreqMin", 13), ("ReqNodes", 8), ("Reservation", 20),
    ("ReservationId", 8), ("Reserved", 10), ("ResvCPU", 10), ("ResvCPURAW", 10), ("SubmitLine", 20),
    ("Suspended", 10), ("SystemCPU", 10), ("TimelimitRaw", 10), ("TotalCPU", 10), ("TRESUsageInAve", 14),
    ("TRESUsageInMax", 14), ("TRESUsageInMaxNode", 18), ("TRESUsageInMaxTask", 18), ("TRESUsageInMin", 14),
    ("TRESUsageInMinNode", 18), ("TRESUsageInMinTask", 18), ("TRESUsageInTot", 14), ("TRESUsageOutAve", 15),
    ("TRESUsageOutMax", 15), ("TRESUsageOutMaxNode", 19), ("TRESUsageOutMaxTask", 19), ("TRESUsageOutMin", 15),
    ("TRESUsageOutMinNode", 19), ("TRESUsageOutMinTask", 19), ("TRESUsageOutTot", 15), ("UserCPU", 10),
    ("WCKey", 10), ("WCKeyID", 10),
)

# Sampled by Slurm's jobacct_gather plugin on a step's line, blank where a step ran too briefly to be
# sampled (and on a job's line): pslurm samples no per-task usage.
UNSAMPLED = ("avecpu", "avediskread", "avediskwrite", "avepages", "averss", "avevmsize", "maxdiskread",
             "maxdiskreadnode", "maxdiskreadtask", "maxdiskwrite", "maxdiskwritenode", "maxdiskwritetask", "maxpages",
             "maxpagesnode", "maxpagestask", "maxrssnode", "maxrsstask", "maxvmsize", "maxvmsizenode", "maxvmsizetask",
             "mincpu", "mincpunode", "mincputask", "tresusageinmax", "tresusageinmaxnode", "tresusageinmaxtask",
             "tresusageinmin", "tresusageinminnode", "tresusageinmintask", "tresusageoutmax", "tresusageoutmaxnode",
             "tresusageoutmaxtask", "tresusageoutmin", "tresusageoutminnode", "tresusageoutmintask")
ALWAYS_BLANK = ("admincomment", "blockid", "container", "mcslabel", "reservation", "reservationid", "wckey")


def cpu_time_text(seconds: float | None) -> str:
    """A CPU time as sacct prints TotalCPU (its _elapsed_time): ``MM:SS.mmm`` below an hour with a
    fraction of a second, else as Elapsed (``00:MM:SS``, ``HH:MM:SS``, ``D-HH:MM:SS``); 0 or not
    measured: ``00:00:00``."""
    from pslurm.core.timefmt import format_slurm_duration

    secs, usecs = divmod(round((seconds or 0.0) * 1e6), 1_000_000)
    if secs < 3600 and usecs >= 1000:
        return f"{secs // 60:02d}:{secs % 60:02d}.{usecs // 1000:03d}"
    return format_slurm_duration(secs)


def _cpu(part: str) -> Getter:
    """TotalCPU (``part`` total), UserCPU (user), SystemCPU (system): the job's cgroup's CPU time
    (cpu.stat's usage_usec, user_usec, system_usec; v1 cpuacct) on its line and its batch step's (which
    holds every process of the job); psrun's steps are not measured apart."""
    def get(row: Any) -> str:
        if is_step(row) and not str(row.job_id).endswith(".batch"):
            return "00:00:00"
        return cpu_time_text(getattr(_job(row), f"{part}_cpu_seconds", None))

    return get


def is_step(row: Any) -> bool:
    return bool(getattr(row, "is_step", False))


def _job(row: Any) -> Any:
    """The job a line is of (a step's line carries its job)."""
    return getattr(row, "job", row)


def more_fields(now: float, cluster: str) -> dict[str, Getter]:
    """The getters of SLURM_FIELDS, by lower-case name."""
    from pslurm.cli import jobview as v
    from pslurm.core.timefmt import format_slurm_duration, format_timestamp

    def on_job(get: Getter, step: str = "") -> Getter:
        return lambda row: step if is_step(row) else get(row)

    def on_step(get: Getter, job: str = "") -> Getter:
        return lambda row: get(row) if is_step(row) else job

    def reserved(row: Any) -> float:
        job = _job(row)
        eligible = v.eligible_time(job)
        return max(0.0, job.start_time - eligible) if job.start_time is not None and eligible else 0.0

    def time_limit_raw(row: Any) -> str:
        job = _job(row)
        if job.time_limit is not None:
            return str(-(-job.time_limit // 60))
        return "Partition_Limit" if job.start_time is None and job.spec.time_limit is None else "UNLIMITED"

    def flags(row: Any) -> str:
        job = _job(row)
        return "SchedMain,StartRecieved" if job.start_time is not None else "StartRecieved"  # sic: Slurm's word

    fields: dict[str, Getter] = {name: (lambda row: "") for name in (*UNSAMPLED, *ALWAYS_BLANK)}
    fields.update({
        "allocnodes": lambda row: str(len(v.job_nodes(_job(row))) if not is_step(row) else row.spec.num_nodes),
        "associd": lambda row: str(_job(row).assoc_id),
        "avecpufreq": on_step(lambda row: "0"),
        "cluster": lambda row: cluster,
        "constraints": on_job(lambda row: row.spec.constraint),
        "consumedenergy": lambda row: "0" if is_step(row) or row.start_time is None else "",
        "consumedenergyraw": lambda row: "0" if is_step(row) or row.start_time is None else "",
        "dbindex": lambda row: str(_job(row).job_id),
        "derivedexitcode": on_job(lambda row: "0:0"),
        "eligible": lambda row: format_timestamp(v.eligible_time(_job(row))),
        "flags": on_job(flags),
        "layout": on_step(lambda row: "Unknown"),
        "priority": on_job(lambda row: str(v.slurm_priority(row))),
        "qosraw": on_job(lambda row: "1"),
        "reqcpufreq": lambda row: "0" if is_step(row) else "Unknown",
        "reqcpufreqgov": lambda row: "0" if is_step(row) else "Unknown",
        "reqcpufreqmax": lambda row: "0" if is_step(row) else "Unknown",
        "reqcpufreqmin": lambda row: "0" if is_step(row) else "Unknown",
        "reqnodes": lambda row: str(row.spec.num_nodes if is_step(row) else v.node_count(row)),
        "reserved": on_job(lambda row: format_slurm_duration(reserved(row))),
        "resvcpu": on_job(lambda row: format_slurm_duration(reserved(row) * v.total_cpus(row))),
        "resvcpuraw": on_job(lambda row: str(int(reserved(row) * v.total_cpus(row)))),
        "submitline": on_job(lambda row: v.escaped(row.spec.submit_line)),
        "suspended": lambda row: format_slurm_duration(0 if is_step(row) else v.suspended_time(row, now)),
        "systemcpu": _cpu("system"), "usercpu": _cpu("user"), "totalcpu": _cpu("total"),
        "timelimitraw": on_job(time_limit_raw),
        "tresusageinave": on_step(lambda row: "energy=0"), "tresusageintot": on_step(lambda row: "energy=0"),
        "tresusageoutave": on_step(lambda row: "energy=0"), "tresusageouttot": on_step(lambda row: "energy=0"),
        "wckeyid": on_job(lambda row: "0"),
    })
    return fields
