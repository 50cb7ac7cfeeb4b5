"""pseff: a finished job's efficiency, as Slurm's contrib script seff prints it, and its GPUs'.

CPU Utilized is the job's cgroup's CPU time, read by its agent when it ended; Memory Utilized its
memory cgroup's peak (ConstrainRAMSpace=yes; else 0, as seff shows a job with no step data); then
pslurm's GPU lines for a job with GPUs: their mean utilisation and memory peak (NVML), or that
they were not measured.
"""

from __future__ import annotations

import sys

from pslurm.cli.common import connect_api, prog_name
from pslurm.cli.printfields import write_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PROG = prog_name("pseff")
VERSION = "2.1"  # the seff script's own version line
USAGE = ("Usage: seff [Options] <Jobid>\n       Options:\n       -h    Help menu\n       -v    Version\n"
         "       -d    Debug mode: display raw Slurm data\n")


def time2str(seconds: float) -> str:
    """seff's time2str: ``[D-]HH:MM:SS``."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{f'{days}-' if days else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def kbytes2str(kbytes: float) -> str:
    """seff's kbytes2str: ``12.34 MB``."""
    if kbytes <= 0:
        return "0.00 MB"
    import math

    exp = min(int(math.log(kbytes) / math.log(1024)), 5)
    return f"{kbytes / 1024 ** exp:.2f} {'KMGTPE'[exp]}B"


def report(job: dict[str, Any], cluster: str, now: float, debug: bool = False) -> list[str]:
    """seff's lines for one job (the efficiency endpoint's dict)."""
    import grp

    try:
        group = grp.getgrgid(int(job["gid"])).gr_name
    except (KeyError, TypeError, ValueError):
        group = str(job["gid"])
    state, ncpus, nnodes = job["state"], max(1, int(job["cpus"] or 1)), max(1, int(job["nodes"] or 1))
    start, end = job["start_time"], job["end_time"]
    walltime = int((end if end is not None else now) - start) if start is not None else 0
    cput = int(round(job["total_cpu_seconds"] or 0))
    mem = int(job["max_rss_kb"] or 0)
    reqmem = int(job["mem_mb"] or 0) * 1024
    array = f"{job['array_job_id']}_{job['array_task_id']}" if job["array_job_id"] is not None else ""
    out = []
    if debug:
        out += ["Slurm data: JobID ArrayJobID User Group State Clustername Ncpus Nnodes Ntasks Reqmem PerNode Cput "
                "Walltime Mem ExitStatus",
                f"Slurm data: {job['job_id']} {array} {job['user']} {group} {state} {cluster} {ncpus} {nnodes} 1 "
                f"{reqmem} 1 {cput} {walltime} {mem} {job['exit_code']}", ""]
    out.append(f"Job ID: {job['job_id']}")
    if array:
        out.append(f"Array Job ID: {array}")
    out += [f"Cluster: {cluster}", f"User/Group: {job['user']}/{group}",
            f"State: {state}" if state in ("PENDING", "RUNNING", "SUSPENDED")
            else f"State: {state} (exit code {job['exit_code']})"]
    out += [f"Cores: {ncpus}"] if ncpus == 1 else [f"Nodes: {nnodes}", f"Cores per node: {ncpus // nnodes}"]
    if state == "PENDING":
        return [*out, "Efficiency not available for jobs in the PENDING state."]
    core_walltime = walltime * ncpus
    out += [f"CPU Utilized: {time2str(cput)}",
            f"CPU Efficiency: {cput / core_walltime * 100 if core_walltime else 0.0:.2f}% of "
            f"{time2str(core_walltime)} core-walltime",
            f"Job Wall-clock time: {time2str(walltime)}", f"Memory Utilized: {kbytes2str(mem)}",
            f"Memory Efficiency: {mem / reqmem * 100 if reqmem else 0.0:.2f}% of {kbytes2str(reqmem)}"]
    if job["gpus"]:
        out += gpu_lines(job)
    if state == "RUNNING":
        out.append(f"WARNING: Efficiency statistics may be misleading for {state} jobs.")
    return out


def gpu_lines(job: dict[str, Any]) -> list[str]:
    """pslurm's own: the job's GPUs, their mean utilisation and memory peak (NVML), or why not."""
    lines = [f"GPUs: {job['gpus']}"]
    if job["mean_gpu_util"] is None:
        return [*lines, "GPU Efficiency: not measured (the node's GPUs are not read through NVML)"]
    lines.append(f"GPU Efficiency: {float(job['mean_gpu_util']):.2f}% (mean utilisation of its GPUs)")
    if job["peak_gpu_memory_mb"] is not None:
        lines.append(f"GPU Memory Utilized: {kbytes2str(int(job['peak_gpu_memory_mb']) * 1024)} (peak)")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """seff JOBID: a job's CPU, memory and GPU efficiency."""
    import getopt
    import time

    args = sys.argv[1:] if argv is None else list(argv)
    if "--help" in args:  # Getopt::Std's own --help: the usage, status 0
        sys.stdout.write(USAGE)
        return 0
    try:  # the seff script's getopts('hvdf:')
        opts, words = getopt.getopt(args, "hvdf:")
    except getopt.GetoptError as exc:
        print(f"{PROG}: {exc.msg}", file=sys.stderr)
        sys.stdout.write(USAGE)
        return 1
    flags = {o for o, _ in opts}
    if "-v" in flags:
        print(f"seff Version {VERSION}")
        return 1
    if "-h" in flags or len(words) != 1:
        sys.stdout.write(USAGE)
        return 1
    job_text = words[0]
    base, _, task = job_text.partition("_")
    if not base.isdigit() or (task and not task.isdigit()):
        print("Job not found.", file=sys.stderr)
        return 2
    from pslurm.cli.common import reporting

    api = connect_api(PROG)
    with reporting(PROG):
        found = api.request("GET", f"/pslurm/v1/efficiency?job_id={base}")
    jobs = [j for j in found["jobs"]
            if not task or (j["array_job_id"] == int(base) and j["array_task_id"] == int(task))]
    if not jobs:
        print("Job not found.", file=sys.stderr)
        return 2
    write_lines(report(jobs[0], found["cluster"], time.time(), "-d" in flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
