"""psdiag: the controller's figures as sdiag 22.05 prints them (``GET /slurm/v0.0.40/diag``).

The figures count from psctld's start. pslurm's controller has no slurmdbd agent and no RPC agent
threads (those lines are 0), and serves HTTP, not Slurm's RPCs: the "message types" are the API's
routes, and nothing is listed by user.
"""

from __future__ import annotations

import sys
import time

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, prog_name, reporting
from pslurm.cli.printfields import parse_command, write_lines

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PROG = prog_name("psdiag")
OPTIONS = (
    a.Opt("all", "a", a.NONE, help="every figure (sdiag's default too)"),
    a.Opt("help", "h", a.NONE, help=""),
    a.Opt("usage", arg=a.NONE, dest="help", help=""),
    a.Opt("reset", "r", a.NONE, help="reset the figures (not in pslurm: they count from psctld's start)"),
    a.Opt("sort-by-id", "i", a.NONE, help="RPCs by id"),
    a.Opt(("clusters", "cluster"), "M", help="clusters to ask (pslurm: this one)"),
    a.Opt("sort-by-time", "t", a.NONE, help="RPCs by total time"),
    a.Opt("sort-by-time2", "T", a.NONE, help="RPCs by mean time"),
    a.Opt("version", "V", a.NONE, help="print pslurm's version and exit"),
)


def _when(value: dict[str, Any] | int) -> str:
    number = int(value["number"] if isinstance(value, dict) else value)
    return f"{time.ctime(number)} ({number})"


def report(s: dict[str, Any]) -> list[str]:
    """sdiag's lines (src/sdiag/sdiag.c, _print_stats) for slurmrestd's ``statistics`` object."""
    n = {k: (v["number"] if isinstance(v, dict) else v) for k, v in s.items()}
    out = ["*******************************************************",
           f"sdiag output at {_when(s['req_time'])}", f"Data since      {_when(s['req_time_start'])}",
           "*******************************************************",
           f"Server thread count:  {n['server_thread_count']}", f"Agent queue size:     {n['agent_queue_size']}",
           f"Agent count:          {n['agent_count']}", f"Agent thread count:   {n['agent_thread_count']}",
           f"DBD Agent queue size: {n['dbd_agent_queue_size']}", "",
           f"Jobs submitted: {n['jobs_submitted']}", f"Jobs started:   {n['jobs_started']}",
           f"Jobs completed: {n['jobs_completed']}", f"Jobs canceled:  {n['jobs_canceled']}",
           f"Jobs failed:    {n['jobs_failed']}", "",
           f"Job states ts:  {_when(s['job_states_ts'])}", f"Jobs pending:   {n['jobs_pending']}",
           f"Jobs running:   {n['jobs_running']}", "", "Main schedule statistics (microseconds):",
           f"\tLast cycle:   {n['schedule_cycle_last']}", f"\tMax cycle:    {n['schedule_cycle_max']}",
           f"\tTotal cycles: {n['schedule_cycle_total']}"]
    if n["schedule_cycle_total"]:
        out += [f"\tMean cycle:   {n['schedule_cycle_mean']}", f"\tMean depth cycle:  {n['schedule_cycle_mean_depth']}"]
    if n["req_time"] - n["req_time_start"] > 60:
        out.append(f"\tCycles per minute: {n['schedule_cycle_per_minute']}")
    out += [f"\tLast queue length: {n['schedule_queue_length']}", "",
            "Backfilling stats" + (" (WARNING: data obtained in the middle of backfilling execution.)"
                                   if n.get("bf_active") else ""),
            f"\tTotal backfilled jobs (since last slurm start): {n['bf_backfilled_jobs']}",
            f"\tTotal backfilled jobs (since last stats cycle start): {n['bf_last_backfilled_jobs']}",
            f"\tTotal backfilled heterogeneous job components: {n['bf_backfilled_het_jobs']}",
            f"\tTotal cycles: {n['bf_cycle_counter']}",
            f"\tLast cycle when: {_when(s['bf_when_last_cycle']) if n['bf_when_last_cycle'] > 0 else 'N/A'}",
            f"\tLast cycle: {n['bf_cycle_last']}", f"\tMax cycle:  {n.get('bf_cycle_max', 0)}"]
    cycles = n["bf_cycle_counter"]
    if cycles:
        out.append(f"\tMean cycle: {n['bf_cycle_mean']}")
    out += [f"\tLast depth cycle: {n['bf_last_depth']}", f"\tLast depth cycle (try sched): {n['bf_last_depth_try']}"]
    if cycles:
        out += [f"\tDepth Mean: {n['bf_depth_mean']}", f"\tDepth Mean (try depth): {n['bf_depth_mean_try']}"]
    out.append(f"\tLast queue length: {n['bf_queue_len']}")
    if cycles:
        out.append(f"\tQueue length mean: {n['bf_queue_len_mean']}")
    out.append(f"\tLast table size: {n['bf_table_size']}")
    if cycles:
        out.append(f"\tMean table size: {n['bf_table_size_mean']}")
    out += ["", f"Latency for 1000 calls to gettimeofday(): {n['gettimeofday_latency']} microseconds", "",
            "Remote Procedure Call statistics by message type",
            *(f"\t{r['message_type']:<40}({r['type_id']:5}) count:{r['count']:<6} "
              f"ave_time:{r['average_time']:<6} total_time:{r['total_time']}" for r in s["rpcs_by_message_type"]),
            "", "Remote Procedure Call statistics by user",
            *(f"\t{r['user']:<16}({r['user_id']:8}) count:{r['count']:<6} "
              f"ave_time:{r['average_time']:<6} total_time:{r['total_time']}" for r in s["rpcs_by_user"]),
            "", "Pending RPC statistics", "\tNo pending RPCs"]
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """The controller's scheduling and job figures (sdiag)."""
    v, _ = parse_command(PROG, argv, OPTIONS, "psdiag [OPTIONS]", main.__doc__ or "")
    if v.get("reset"):
        print(f"{PROG}: warning: --reset has no effect in pslurm (the figures count from psctld's start)",
              file=sys.stderr)
        return
    api = connect_api(PROG)
    with reporting(PROG):
        stats = api.request("GET", "/slurm/v0.0.40/diag")["statistics"]
    write_lines(report(stats))


if __name__ == "__main__":
    main()
