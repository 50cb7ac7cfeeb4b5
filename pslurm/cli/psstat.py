"""psstat: what a running job's steps use now (sstat), measured by the agents of its nodes.

Each node's agent reads its tasks' processes (/proc) and the job's cgroup when asked
(``GET /pslurm/v1/job/J/stat``); a step's line is over its tasks on every node: the largest (with
its node and task), the mean, the least CPU, the totals, in sstat 22.05's fields. The GPU figures are
pslurm's beside them: ``gres/gpumem`` and ``gres/gpuutil`` in the TRES usage, as Slurm's NVML
gathering names them.
"""

from __future__ import annotations

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, prog_name, reporting
from pslurm.cli.printfields import PARSABLE, PARSABLE2, Field, parse_command, render, split_width, write_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PROG = prog_name("psstat")
# sstat 22.05's fields (src/sstat/sstat.c), in its order: a name matches the first it is a prefix of
FIELDS = (("AveCPU", 10), ("AveCPUFreq", 10), ("AveDiskRead", 12), ("AveDiskWrite", 12), ("AvePages", 10),
          ("AveRSS", 10), ("AveVMSize", 10), ("ConsumedEnergy", 14), ("ConsumedEnergyRaw", 17), ("JobID", -12),
          ("MaxDiskRead", 12), ("MaxDiskReadNode", 15), ("MaxDiskReadTask", 15), ("MaxDiskWrite", 12),
          ("MaxDiskWriteNode", 16), ("MaxDiskWriteTask", 16), ("MaxPages", 8), ("MaxPagesNode", 12),
          ("MaxPagesTask", 14), ("MaxRSS", 10), ("MaxRSSNode", 10), ("MaxRSSTask", 10), ("MaxVMSize", 10),
          ("MaxVMSizeNode", 14), ("MaxVMSizeTask", 14), ("MinCPU", 10), ("MinCPUNode", 10), ("MinCPUTask", 10),
          ("Nodelist", 20), ("NTasks", 8), ("Pids", 20), ("ReqCPUFreq", 10), ("ReqCPUFreqMin", 13),
          ("ReqCPUFreqMax", 13), ("ReqCPUFreqGov", 13), ("TRESUsageInAve", 14), ("TRESUsageInMax", 14),
          ("TRESUsageInMaxNode", 18), ("TRESUsageInMaxTask", 18), ("TRESUsageInMin", 14),
          ("TRESUsageInMinNode", 18), ("TRESUsageInMinTask", 18), ("TRESUsageInTot", 14), ("TRESUsageOutAve", 15),
          ("TRESUsageOutMax", 15), ("TRESUsageOutMaxNode", 19), ("TRESUsageOutMaxTask", 19),
          ("TRESUsageOutMin", 15), ("TRESUsageOutMinNode", 19), ("TRESUsageOutMinTask", 19),
          ("TRESUsageOutTot", 15))
STAT_FIELDS = ("jobid,maxvmsize,maxvmsizenode,maxvmsizetask,avevmsize,maxrss,maxrssnode,maxrsstask,averss,maxpages,"
               "maxpagesnode,maxpagestask,avepages,mincpu,mincpunode,mincputask,avecpu,ntasks,avecpufreq,"
               "reqcpufreqmin,reqcpufreqmax,reqcpufreqgov,consumedenergy,maxdiskread,maxdiskreadnode,maxdiskreadtask,"
               "avediskread,maxdiskwrite,maxdiskwritenode,maxdiskwritetask,avediskwrite,tresusageinave,"
               "tresusageinmax,tresusageinmaxn,tresusageinmaxt,tresusageinmin,tresusageinminn,tresusageinmint,"
               "tresusageintot,tresusageoutave,tresusageoutmax,tresusageoutmaxn,tresusageoutmaxt,tresusageoutmin,"
               "tresusageoutminn,tresusageoutmint,tresusageouttot")
PID_FIELDS = "jobid,nodelist,pids"
OPTIONS = (
    a.Opt("allsteps", "a", a.NONE, help="every step of the jobs (the batch step too)"),
    a.Opt("helpformat", "e", a.NONE, help="list the fields --format takes"),
    a.Opt("help", "h", a.NONE, help=""),
    a.Opt("usage", arg=a.NONE, dest="help", help=""),
    a.Opt("pidformat", "i", a.NONE, help="the fields jobid,nodelist,pids"),
    a.Opt("jobs", "j", help="J, J.S or J.batch, comma-separated"),
    a.Opt("noheader", "n", a.NONE, help="no header lines"),
    a.Opt(("format", "fields"), "o", dest="fmt", help="fields: JobID,MaxRSS,AveCPU,..."),
    a.Opt("noconvert", arg=a.NONE, help="sizes in bytes and seconds, not K/M/G and [D-]HH:MM:SS"),
    a.Opt("parsable", "p", a.NONE, help="'|' after every field"),
    a.Opt("parsable2", "P", a.NONE, help="'|' between fields"),
    a.Opt("verbose", "v", a.NONE, help="no effect"),
    a.Opt("version", "V", a.NONE, help="print pslurm's version and exit"),
)


def size(value: float, convert: bool = True) -> str:
    """sstat's convert_num_unit (CONVERT_NUM_UNIT_EXACT): bytes in 1024s while no precision is lost
    (``3084K``, ``2.50M`` as a half), else as they are (``11089``); ``0``."""
    if int(value) == 0:
        return "0"
    if not convert:
        return str(int(value))
    unit = 0
    while value >= 1024 and value % 512 == 0 and unit < 5:
        value /= 1024
        unit += 1
    suffix = "\0KMGTP"[unit] if unit else ""
    return f"{int(value)}{suffix}" if value == int(value) else f"{value:.2f}{suffix}"


def elapsed(seconds: float, convert: bool = True) -> str:
    """sstat's _elapsed_time (whole seconds, as sstat passes them): ``00:MM:SS``, ``HH:MM:SS``, ``D-HH:MM:SS``."""
    secs = int(seconds)
    if not convert:
        return str(secs)
    days, hours, minutes = secs // 86400, secs // 3600 % 24, secs // 60 % 60
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs % 60:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs % 60:02d}"


def step_rows(reply: dict[str, Any], wanted_step: str | None, all_steps: bool, convert: bool) -> list[dict[str, str]]:
    """One row per step of the reply (``wanted_step``: only that one; None and not ``all_steps``: the
    first normal step, as sstat picks when no step is named)."""
    tasks: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for node in reply["nodes"]:
        for task in node.get("tasks") or ():
            tasks.setdefault(task["step"], []).append((node["node"], task))
    gpus = [g for node in reply["nodes"] for g in node.get("gpus") or ()]
    steps = sorted(tasks, key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s))
    if wanted_step is not None:
        steps = [s for s in steps if s == wanted_step]
    elif not all_steps:
        steps = [s for s in steps if s.isdigit()][:1]
    return [_row(f"{reply['display_id']}.{step}", tasks[step], gpus, convert) for step in steps]


def _row(job_id: str, tasks: list[tuple[str, dict[str, Any]]], gpus: list[dict[str, Any]],
         convert: bool) -> dict[str, str]:
    row = {"JobID": job_id, "NTasks": str(len(tasks)), "Nodelist": _hostlist([n for n, _ in tasks]),
           "Pids": ",".join(str(p) for _, t in tasks for p in t.get("pids") or [t["pid"]]), "AveCPUFreq": "0",
           "ReqCPUFreqMin": "0", "ReqCPUFreqMax": "0", "ReqCPUFreqGov": "0", "ReqCPUFreq": "0",
           "ConsumedEnergy": "0", "ConsumedEnergyRaw": "0"}
    for name, key, show in (("VMSize", "vmsize_kb", 1024), ("RSS", "rss_kb", 1024), ("Pages", "pages", 0),
                            ("DiskRead", "read_bytes", 1), ("DiskWrite", "write_bytes", 1)):
        node, top = max(tasks, key=lambda nt: nt[1][key])

        def fmt(value: float, factor: int = show) -> str:
            return size(value * factor, convert) if factor else str(int(value))

        row[f"Max{name}"], row[f"Max{name}Node"], row[f"Max{name}Task"] = fmt(top[key]), node, str(top["rank"])
        row[f"Ave{name}"] = fmt(sum(t[key] for _, t in tasks) / len(tasks))
    low_node, low = min(tasks, key=lambda nt: nt[1]["cpu_seconds"])
    row.update(MinCPU=elapsed(low["cpu_seconds"], convert), MinCPUNode=low_node, MinCPUTask=str(low["rank"]),
               AveCPU=elapsed(sum(t["cpu_seconds"] for _, t in tasks) / len(tasks), convert))
    gpu_mem = sum(g["memory_used_mb"] for g in gpus) * 1024 * 1024
    gpu_util = sum(g["util"] for g in gpus)

    def tres(pick: Any, with_gpus: bool = True) -> str:
        values = {"cpu": elapsed(pick("cpu_seconds"), convert), "energy": "0",
                  "fs/disk": size(pick("read_bytes"), convert), "mem": size(pick("rss_kb") * 1024, convert),
                  "pages": str(int(pick("pages"))), "vmem": size(pick("vmsize_kb") * 1024, convert)}
        if gpus and with_gpus:
            values["gres/gpumem"], values["gres/gpuutil"] = size(gpu_mem, convert), str(int(gpu_util))
        return ",".join(f"{k}={values[k]}" for k in sorted(values))

    def over(fn: Any) -> Any:
        return lambda key: fn(t[key] for _, t in tasks)

    row.update(TRESUsageInMax=tres(over(max)), TRESUsageInMin=tres(over(min), False),
               TRESUsageInAve=tres(lambda key: sum(t[key] for _, t in tasks) / len(tasks)),
               TRESUsageInTot=tres(over(sum)),
               TRESUsageOutMax=f"energy=0,fs/disk={size(max(t['write_bytes'] for _, t in tasks), convert)}",
               TRESUsageOutTot=f"energy=0,fs/disk={size(sum(t['write_bytes'] for _, t in tasks), convert)}")
    row["TRESUsageOutAve"] = row["TRESUsageOutMin"] = row["TRESUsageOutMax"]
    top_node, top_task = max(tasks, key=lambda nt: nt[1]["rss_kb"])
    for kind in ("In", "Out"):
        row[f"TRESUsage{kind}MaxNode"] = row[f"TRESUsage{kind}MinNode"] = f"cpu={top_node}"
        row[f"TRESUsage{kind}MaxTask"] = row[f"TRESUsage{kind}MinTask"] = f"cpu={top_task['rank']}"
    return row


def _hostlist(names: list[str]) -> str:
    from pslurm.core.hostlists import collect

    return collect(sorted(set(names)))


def fields_of(spec: str) -> list[Field]:
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, width = split_width(item)
        found = next((f for f in FIELDS if f[0].lower().startswith(name.lower())), None)
        if found is None:
            raise ValueError(f'Invalid field requested: "{name}"')
        out.append(Field(found[0], width or found[1]))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """Resource use of running jobs' steps, now (sstat)."""
    v, words = parse_command(PROG, argv, OPTIONS, "psstat [OPTIONS] -j JOB[.STEP]", main.__doc__ or "", words=True)
    if v.get("helpformat"):
        print(" ".join(f[0] for f in FIELDS))
        return
    given = [j for j in str(v.get("jobs") or "").split(",") if j] + [w for text in words for w in text.split(",")]
    if not given:
        fail(PROG, "You didn't give me any jobs to stat.")
    try:
        fields = fields_of(str(v.get("fmt") or (PID_FIELDS if v.get("pidformat") else STAT_FIELDS)))
    except ValueError as exc:
        fail(PROG, str(exc))
    convert = not v.get("noconvert")
    api = connect_api(PROG)
    rows: list[dict[str, str]] = []
    for text in given:
        job, dot, step = text.partition(".")
        if not job.isdigit() or (dot and not (step.isdigit() or step == "batch")):
            fail(PROG, f"Invalid job id: {text}")
        with reporting(PROG):
            reply = api.request("GET", f"/pslurm/v1/job/{job}/stat")
        rows += step_rows(reply, step if dot else None, bool(v.get("allsteps")), convert)
    parsable = PARSABLE2 if v.get("parsable2") else PARSABLE if v.get("parsable") else ""
    write_lines(render(fields, ([r.get(f.header) for f in fields] for r in rows), not v.get("noheader"), parsable))


if __name__ == "__main__":
    main()
