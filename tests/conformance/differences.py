"""The cases whose answers differ from Slurm's, each with why.

DIFFERENT: on purpose, where pslurm's answer is the better one, or where two different systems cannot
answer the same (their versions, their help pages). NOT_YET: differences pslurm still has, listed so
that the suite says so in docs/conformance.md and a new one fails; a listed case that comes out
identical fails too, so that the list only shrinks. Keys are case ids, or fnmatch patterns of them.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

VERBOSE = "-v: what each implementation says of its own workings (Slurm: its plugins and every option's value)"
HOST = ("what the host measures (free memory, load): pslurm's agents do not report them, so pslurm prints N/A "
        "rather than a figure that is not the node's")
ONE_LINE = ("an unknown option: pslurm's one line (`prog: error: unrecognized option ...`); getopt's two, the second "
            "`Try \"prog --help\"`")
INERT = "an option that means nothing here: pslurm takes it with a one-line warning (Slurm: takes it, or refuses it)"
SCRIPTS = ("a job's script and environment: pslurm keeps them; Slurm's accounting only with "
           "AccountingStoreFlags=job_script,job_env (NONE here)")
OWN_FIELDS = "the fields: pslurm's own GPU fields (GPUSeconds, GPUMem, GPUUtil ...) and AllocGRES are listed too"
NODE = ("a node's record: what the host measures and runs (CPULoad, FreeMem, OS, Port, Version, BootTime), and "
        "pslurm's own line (GresUsed with GPU indexes, DeviceIsolation)")
ARRAY = ("an array's pending tasks: Slurm keeps them as one record (job 14) until each starts and gets an id of its "
         "own; pslurm gives each task its id at submission")
DIFFERENT: dict[str, str] = {
    "squeue -v *": VERBOSE, "sinfo -v": VERBOSE, "sacct -v *": VERBOSE, "sprio -v": VERBOSE, "scontrol -v *": VERBOSE,
    "sinfo -O FreeMem": HOST, "sinfo -o %e": HOST, "sinfo -N -o %e": HOST, "sinfo -O CPUsLoad": HOST,
    "sinfo -o %O": HOST, "sinfo -N -o %O": HOST, "sinfo -O All": HOST,
    "sinfo -O Port": "the agents' ports: pslurm up gives each agent a free port (Slurm's anchor: 17000 on)",
    "sinfo -O NodeHost": "a node's host name: Slurm's four slurmds share this machine's name, pslurm's nodes are "
                         "their own hosts",
    "sinfo -o %n": "a node's host name (as sinfo -O NodeHost)", "sinfo -N -o %n": "a node's host name",
    "sacct -o DBIndex": "the accounting database's row numbers (pslurm's store has none: it prints the job id)",
    "scontrol show config *": "the configuration of two different systems (pslurm.conf has pslurm's keys)",
    "scontrol show daemons": "the daemons' names: psctld and psd",
    "scontrol reconfigure": "pslurm reads pslurm.conf when psctld starts: reconfigure says so on stderr",
    "scontrol listpids {running}": "process ids",
    # bad input: pslurm's rule is one line saying what and why, and a non-zero exit
    "* --bogus": ONE_LINE, "squeue -Z": ONE_LINE,
    "sbatch -H --frobnicate --wrap true": ONE_LINE + "; exit 1 (sbatch 255)",
    "sbatch -H -p nopart -o /dev/null --wrap true": ONE_LINE,
    "sinfo -O bogus": "an unknown -O field: pslurm refuses it (exit 1); sinfo 22.05 prints empty lines and exits 0",
    "sbatch -H --mem-per-cpu=100 --mem=100 -o /dev/null --wrap true": "pslurm's `error:` where sbatch says `fatal:`",
    "sbatch -H --gres=gpu:9 -o /dev/null --wrap true": (
        "a job no node can ever run: pslurm refuses it at submission, held or not; Slurm 22.05 takes it held"),
    "sbatch -H --context=x -o /dev/null --wrap true": INERT,
    "sbatch -H --ntasks-per-tres=1 -o /dev/null --wrap true": INERT,
    "srun --context=x --ntasks-per-tres=1 echo ok": INERT,
    "tool: mkdir -p submitit*": INERT + " (submitit's --wckey)",
    "sbatch -H -J victim3 -p gpu -o /dev/null --wrap true > /dev/null && scancel -p gpu -n victim3 -v": VERBOSE,
    "tool: sinfo -h -o' \"%n %G\"'": "a node's host name (as sinfo -O NodeHost)",
    "squeue -O NumTasks": "a job cancelled while held: squeue 22.05 prints NO_VAL (4294967294) for its tasks",
    # what pslurm keeps that Slurm's anchor does not
    "sacct -j {done} -B": SCRIPTS, "sacct -j {done} --batch-script": SCRIPTS, "sacct -j {done} --env-vars": SCRIPTS,
    "sacct -e": OWN_FIELDS, "sacct --helpformat": OWN_FIELDS,
    "tool: sacct -a -X --format=Allocgres *": "AllocGRES: pslurm keeps the field (and GPU ones of its own); Slurm "
                                              "22.05 removed it (a fatal error)",
    "sinfo -O GresUsed": "GPU indexes: the anchor's GPUs have no device files, so Slurm knows none (gpu:1, not "
                         "gpu:1(IDX:0))",
    "scontrol * show node *": NODE, "scontrol show node *": NODE, "scontrol show nodes *": NODE,
    "scontrol show node": NODE, "scontrol -o show nodes": NODE,
    "scontrol -d*show job {running}": "-d: the CPU ids a job holds on its node (Slurm's cons_tres picks others)",
    # arrays: Slurm keeps an array's pending tasks as one record (job 14) until each starts
    "squeue -j {arr}_[1-2]": ARRAY + " (a task range of it is answered by its first task, 14_0)",
    "scontrol show job {arr}_2": ARRAY, "tool: squeue -a -r -h -o' %A|%a|%T|%C'": ARRAY,
    "tool: squeue -a -r -h -o' %A|%u|%T|%C'": ARRAY, "tool: squeue -a -r -h -o' %A,%T,%r' --states=all": ARRAY,
    "scancel {arr}_1 && squeue -h -t all -j {arr} -r -o '%i %T'": (
        ARRAY + "; squeue 22.05 leaves out the task cancelled before it was split off, pslurm lists it"),
    "sbatch -n 2 -c 2, held: its node count while pending": (
        "a held job of 2 tasks of 2 CPUs without -N: slurmctld 22.05 shows 2 nodes while it waits (it allocates "
        "one); pslurm the 1 node it will have"),
}

# Cases where Slurm's own answer varies from run to run: listed, and never required to differ
UNSTABLE: dict[str, str] = {
    "sacct -o Start": ("a job cancelled while held: Slurm 22.05 records its start as the cancel time or as none, "
                       "as its scheduling passes fall; pslurm: None"),
    "sacct -o SystemCPU": ("CPU time of jobs that burn next to none: Slurm's jobacct_gather samples a millisecond "
                           "or none, pslurm's cgroup measure (cpu.stat's system_usec) a few or none"),
    **{pattern: ("a timed-out job's batch script: SIGTERM reaches bash while it waits for a child or not, so Slurm "
                 "reports it killed by signal 15 (0:15, CANCELLED) in some runs and exited 143 (143:0, FAILED 15:0) in "
                 "others; pslurm: 0:15") for pattern in (
        "squeue -O exit_code", "sacct", "sacct -a", "sacct --allusers", "sacct -j {timeout}", "sacct --federation",
        "scontrol show job {timeout}")},
    "sacct -o UserCPU": ("CPU time of jobs that burn next to none: Slurm's jobacct_gather samples a few "
                         "milliseconds or none, pslurm's cgroup measure (cpu.stat's user_usec) a few or none"),
    "sacct -o TotalCPU": ("CPU time of jobs that burn next to none: Slurm's jobacct_gather samples a millisecond "
                          "or none, pslurm's cgroup measure a few milliseconds or none"),
    "sacct -o Reason": ("a job submitted held and cancelled at once: slurmctld records the reason it waited for "
                        "(state_reason_prev, sacct's Reason) at its next scheduling pass, so Slurm says JobHeldUser "
                        "when a pass came between and None when not; pslurm records it at submission: JobHeldUser"),
    "scontrol release {dep} && squeue -h -j {dep} -o '%r'": (
        "release of a job that waits on a dependency: slurmctld clears its reason (None) until its next "
        "scheduling pass, which may come before squeue asks; pslurm says what it still waits for (Dependency)"),
    **{pattern: ("a waiting job's Scheduler=: Slurm names whichever of its schedulers (Main or Backfill:*) last "
                 "looked at the job, as its passes fall; pslurm: Main") for pattern in (
        "scontrol show job", "scontrol -o show jobs")},
}
DIFFERENT.update(UNSTABLE)

NOT_YET: dict[str, str] = {}

# What the conformance work found and no case of the corpus shows (it needs a scenario of its own), each kept
# with why: docs/conformance.md lists them.
LEFT: dict[str, str] = {
    "classic fair share": (
        "pslurm computes Slurm's classic fair share (PriorityFlags=NO_FAIR_TREE, docs/accounting.md) where Slurm "
        "22.05's default is the fair tree (FAIR_TREE): with one account level and users of equal shares both rank "
        "users alike (the corpus's scenario, one user, gets 1.0 from both); the fair tree's ranking of sibling "
        "accounts by LevelFS, and sshare -l's LevelFS column, are still to do"),
    "node down time": (
        "sreport cluster utilization's Down and PLND Down are 0: pslurm keeps no history of node states (a node "
        "events table with each DOWN/DRAIN interval, as slurmdbd's cluster events, is still to do)"),
    "reason_prev at submission": (
        "pslurm records the reason a held job waits for (state_reason_prev, sacct's Reason) when it is submitted; "
        "slurmctld at its next scheduling pass (build_job_queue), so a held job cancelled before that pass says "
        "None in Slurm and JobHeldUser in pslurm: kept, since the job did wait held, and Slurm's answer depends "
        "on when its pass falls (`sacct -o Reason` is listed among its unstable answers)"),
    "ReqNodeNotAvail descriptions": (
        "slurmctld's other state descriptions (`ReqNodeNotAvail, UnavailableNodes:c[001-002]`) are not written: "
        "pslurm's reason is ReqNodeNotAvail alone"),
    "suspended jobs": (
        "a suspended job keeps its CPUs (Slurm frees them to other jobs, keeping its GPUs and memory), backfill "
        "takes its end as its start plus its limit (Slurm adds the time suspended), and a node agent that "
        "restarts forgets it was suspended (it reports the run, which is then continued)"),
    "pslurm JSON": "`--json=pslurm` (pslurm's own shape) lacks the fields added for Slurm's (state_desc, "
                   "reason_prev, the CPU times, tres_per_job): Slurm's `--json` has them",
    "steps' CPU time": ("sacct's TotalCPU, UserCPU and SystemCPU of a psrun step (J.0...) are 00:00:00 and the "
                        "batch step's line carries the whole job's: the agent measures a job's cgroup, not each "
                        "step's tasks (their rusage in the StepEnded report and a step column are still to do)"),
    "v0.0.40 times": ("REST v0.0.40's times (submit_time, start_time, end_time...) carry pslurm's fractions of a "
                      "second where slurmrestd's are whole epoch seconds (an int64): a strict client's model may "
                      "refuse a float; cutting them there (and keeping them in `/pslurm/v1`) is still to do"),
}


def reason_for(case_id: str, table: dict[str, str]) -> str:
    """The reason ``table`` gives for a case ("" when it lists none)."""
    if case_id in table:
        return table[case_id]
    for pattern, reason in table.items():
        if any(ch in pattern for ch in "*?[") and fnmatchcase(case_id, pattern):
            return reason
    return ""
