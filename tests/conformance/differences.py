"""The cases whose answers differ from Slurm's, each with why.

DIFFERENT: on purpose, where pslurm's answer is the better one, or where two different systems cannot
answer the same (their versions, their help pages). NOT_YET: differences pslurm still has, listed so
that the suite says so in docs/conformance.md and a new one fails; a listed case that comes out
identical fails too, so that the list only shrinks. Keys are case ids, or fnmatch patterns of them.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

VERSION = "the version: pslurm's own (`pslurm 0.1.0`), not Slurm's"
VERBOSE = "-v: what each implementation says of its own workings (Slurm: its plugins and every option's value)"
HOST = ("what the host measures (free memory, load): pslurm's agents do not report them, so pslurm prints N/A "
        "rather than a figure that is not the node's")
DIFFERENT: dict[str, str] = {
    "* -V": VERSION, "* --version": VERSION, "scontrol version": VERSION, "sinfo -O Version": VERSION,
    "sinfo -o %v": VERSION, "sinfo -N -o %v": VERSION,
    "squeue -v *": VERBOSE, "sinfo -v": VERBOSE, "sacct -v *": VERBOSE, "sprio -v": VERBOSE, "scontrol -v *": VERBOSE,
    "sinfo -O FreeMem": HOST, "sinfo -o %e": HOST, "sinfo -N -o %e": HOST, "sinfo -O CPUsLoad": HOST,
    "sinfo -o %O": HOST, "sinfo -N -o %O": HOST, "sinfo -O All": HOST,
    "sinfo -O Port": "the agents' ports: pslurm up gives each agent a free port (Slurm's anchor: 17000 on)",
    "sinfo -O NodeHost": "a node's host name: Slurm's four slurmds share this machine's name, pslurm's nodes are "
                         "their own hosts",
    "sinfo -o %n": "a node's host name (as sinfo -O NodeHost)", "sinfo -N -o %n": "a node's host name",
    "squeue -O AllocSID": "the session id of the shell that submitted (pslurm does not record it)",
    "sacct -o DBIndex": "the accounting database's row numbers (pslurm's store has none: it prints the job id)",
    "sacct -o SystemCPU": "CPU time measured by Slurm's jobacct_gather (pslurm measures none yet: 00:00:00)",
    "sacct -o UserCPU": "CPU time measured by Slurm's jobacct_gather (pslurm measures none yet: 00:00:00)",
    "sacct -o TotalCPU": "CPU time measured by Slurm's jobacct_gather (pslurm measures none yet: 00:00:00)",
    "scontrol show config *": "the configuration of two different systems (pslurm.conf has pslurm's keys)",
    "scontrol show daemons": "the daemons' names: psctld and psd",
    "scontrol reconfigure": "pslurm reads pslurm.conf when psctld starts: reconfigure says so on stderr",
    "scontrol listpids {running}": "process ids",
}

NOT_YET: dict[str, str] = {}


def reason_for(case_id: str, table: dict[str, str]) -> str:
    """The reason ``table`` gives for a case ("" when it lists none)."""
    if case_id in table:
        return table[case_id]
    for pattern, reason in table.items():
        if any(ch in pattern for ch in "*?[") and fnmatchcase(case_id, pattern):
            return reason
    return ""
