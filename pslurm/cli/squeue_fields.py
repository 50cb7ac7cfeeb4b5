"""squeue's fields: every ``-o`` letter and ``-O`` name of Slurm 22.05 (src/squeue/opts.c, print.c), by
one table, each with the header and the value Slurm prints; a field pslurm has no value for prints
what Slurm prints for a job without one (``(null)``, ``N/A``, ``*``, ``0``).

Standard library only: psqueue imports this on its path.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable

    from pslurm.core.jobinfo import JobInfo as Job

    Getter = Callable[[Job], str]

NOT_SET = "(null)"
YEAR = 365 * 86400


def _null(value: str) -> str:
    return value or NOT_SET


def secs(seconds: float | None) -> str:
    """squeue's _print_secs: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``; INVALID when negative or over a year."""
    if seconds is not None and (int(seconds) < 0 or int(seconds) > YEAR):
        return "INVALID"
    from pslurm.core.timefmt import format_duration

    return format_duration(seconds)


def stamp(when: float | None) -> str:
    """squeue's _print_time: the local time, ``N/A`` for none."""
    if not when:
        return "N/A"
    from pslurm.core.timefmt import format_timestamp

    return format_timestamp(when)


class JobFields:
    """The fields of one listing (``now``: its clock; ``cluster``: ClusterName; ``node_memory``: asked
    for a node's memory, read once when a field needs it), by letter and by name."""

    def __init__(self, now: float, cluster: str, node_memory: Callable[[], int] | None = None) -> None:
        self.now, self.cluster = now, cluster
        self._node_memory, self._memory = node_memory, -1

    def tres(self, job: Job) -> str:
        """TRES_ALLOC: a waiting job that asked no memory counts a node's (as slurmctld)."""
        from pslurm.cli.jobview import tres_alloc_text

        if job.start_time is None and not job.spec.mem_mb and self._node_memory is not None:
            if self._memory < 0:
                self._memory = self._node_memory()
            return tres_alloc_text(job, self._memory)
        return tres_alloc_text(job)

    # -- values that several fields share ------------------------------------------------------------

    def pending(self, job: Job) -> bool:
        return job.state.value == "PENDING"

    def start(self, job: Job) -> float | None:
        """Slurm's start_time: when it started; a pending job's expected start; a job that ended
        without starting (cancelled while pending), its end."""
        from pslurm.cli.jobview import slurm_start_time

        return slurm_start_time(job)

    def end(self, job: Job) -> float | None:
        from pslurm.cli.jobview import slurm_end_time

        return slurm_end_time(job)

    def used(self, job: Job) -> float:
        from pslurm.cli.jobview import time_used

        return time_used(job, self.now)

    def reason_list(self, job: Job) -> str:
        """%R: the reason in parentheses for a pending job or one that ended badly, else its nodes."""
        from pslurm.cli.jobview import nodelist_text, reason_text, shows_reason

        return f"({reason_text(job)})" if shows_reason(job) else nodelist_text(job)

    def end_text(self, job: Job) -> str:
        """%e: NONE for a job without a time limit that runs or is expected to start."""
        if job.time_limit is None and (job.state.holds_resources or self.pending(job) and job.start_estimate):
            return "NONE"
        return stamp(self.end(job))

    def time_left(self, job: Job) -> str:
        if job.time_limit is None:
            return "UNLIMITED"
        if job.state.is_final:
            return secs(job.time_limit - self.used(job)) if self.used(job) <= job.time_limit else "INVALID"
        return secs(job.time_limit - self.used(job))

    def pending_time(self, job: Job) -> str:
        """Seconds it waited: from its eligible (else submit) time to its start, or to now."""
        from pslurm.cli.jobview import eligible_time

        since = eligible_time(job) or job.submit_time
        if job.start_time is not None:
            return str(max(0, int(job.start_time - since)))
        if job.state.is_final:
            return "0"
        return str(max(0, int(self.now - since)))

    # -- the table -----------------------------------------------------------------------------------

    # long: one table, a line per -o letter and -O field of squeue 22.05
    def table(self) -> dict[str, tuple[str, Getter]]:
        """Field key (an -o letter, or an -O name in lower case) -> (header, getter)."""
        from pslurm.cli import jobview as v

        spec = lambda j: j.spec  # noqa: E731 - short: read as j.spec
        fields: dict[str, tuple[str, Getter]] = {
            "a": ("ACCOUNT", lambda j: _null(spec(j).account)),
            "A": ("JOBID", lambda j: str(j.job_id)),
            "b": ("TRES_PER_NODE", v.tres_per_node_text),
            "B": ("EXEC_HOST", lambda j: j.node or "n/a"),
            "c": ("MIN_CPUS", lambda j: str(v.min_cpus_per_node(j))),
            "C": ("CPUS", lambda j: str(v.total_cpus(j))),
            "d": ("MIN_TMP_DISK", lambda j: "0"),
            "D": ("NODES", lambda j: str(v.node_count(j))),
            "e": ("END_TIME", self.end_text),
            "E": ("DEPENDENCY", v.dependency_text),
            "f": ("FEATURES", lambda j: _null(spec(j).constraint)),
            "F": ("ARRAY_JOB_ID", lambda j: str(j.array_job_id if j.array_job_id is not None else j.job_id)),
            "g": ("GROUP", lambda j: v.group_name(spec(j).gid)),
            "G": ("GROUP", lambda j: str(spec(j).gid)),
            "h": ("OVER_SUBSCRIBE", lambda j: "NO" if spec(j).exclusive else "OK"),
            "H": ("SOCKETS_PER_NODE", lambda j: "*"),
            "i": ("JOBID", v.row_id),
            "I": ("CORES_PER_SOCKET", lambda j: "*"),
            "j": ("NAME", lambda j: v.escaped(spec(j).name)),
            "J": ("THREADS_PER_CORE", lambda j: "*"),
            "k": ("COMMENT", lambda j: _null(v.escaped(spec(j).comment))),
            "K": ("ARRAY_TASK_ID", v.array_task_text),
            "l": ("TIME_LIMIT", lambda j: secs(j.time_limit)),
            "L": ("TIME_LEFT", self.time_left),
            "m": ("MIN_MEMORY", lambda j: v.min_memory_text(j)),
            "M": ("TIME", lambda j: secs(self.used(j))),
            "n": ("REQ_NODES", lambda j: spec(j).nodelist),
            "N": ("NODELIST", v.nodelist_text),
            "o": ("COMMAND", v.command_text),
            "O": ("CONTIGUOUS", lambda j: "0"),
            "p": ("PRIORITY", lambda j: f"{v.slurm_priority(j) / 2**32:.14f}"),
            "P": ("PARTITION", lambda j: j.partition or spec(j).partition or ""),
            "q": ("QOS", lambda j: spec(j).qos or "normal"),
            "Q": ("PRIORITY", lambda j: str(v.slurm_priority(j))),
            "r": ("REASON", v.reason_text),
            "R": ("NODELIST(REASON)", self.reason_list),
            "s": ("", lambda j: ""),  # node selection plugin data: none in 22.05's cons_tres
            "S": ("START_TIME", lambda j: stamp(self.start(j))),
            "t": ("ST", lambda j: j.state.short),
            "T": ("STATE", lambda j: j.state.value),
            "u": ("USER", lambda j: spec(j).user),
            "U": ("UID", lambda j: str(spec(j).uid)),
            "v": ("RESERVATION", lambda j: NOT_SET),
            "V": ("SUBMIT_TIME", lambda j: stamp(j.submit_time)),
            "w": ("WCKEY", lambda j: NOT_SET),
            "W": ("LICENSES", lambda j: NOT_SET),
            "x": ("EXC_NODES", lambda j: spec(j).exclude),
            "X": ("CORE_SPEC", lambda j: "N/A"),
            "y": ("NICE", lambda j: str(spec(j).nice)),
            "Y": ("SCHEDNODES", lambda j: NOT_SET),
            "z": ("S:C:T", lambda j: "*:*:*"),
            "Z": ("WORK_DIR", lambda j: spec(j).workdir),
        }
        by_name: dict[str, tuple[str, Getter]] = {
            "account": fields["a"],
            "accruetime": ("ACCRUE_TIME", lambda j: stamp(v.eligible_time(j))),
            "admin_comment": ("ADMIN_COMMENT", lambda j: NOT_SET),
            "allocnodes": ("ALLOC_NODES", lambda j: "localhost"),
            "allocsid": ("ALLOC_SID", lambda j: str(spec(j).submit_sid)),
            "arrayjobid": fields["F"], "arraytaskid": fields["K"],
            "associd": ("ASSOC_ID", lambda j: str(j.assoc_id)),
            "batchflag": ("BATCH_FLAG", lambda j: "0" if spec(j).interactive or spec(j).allocation else "1"),
            "batchhost": fields["B"],
            "boardspernode": ("BOARDS_PER_NODE", lambda j: "0"),
            "burstbuffer": ("BURST_BUFFER", lambda j: NOT_SET),
            "burstbufferstate": ("BURST_BUFFER_STATE", lambda j: NOT_SET),
            "cluster": ("CLUSTER", lambda j: self.cluster),
            "clusterfeature": ("CLUSTER_FEATURES", lambda j: NOT_SET),
            "command": fields["o"], "comment": fields["k"], "contiguous": fields["O"],
            "container": ("CONTAINER", lambda j: NOT_SET),
            "cores": fields["I"], "corespec": fields["X"],
            "cpuspertask": ("CPUS_PER_TASK", lambda j: str(spec(j).cpus_per_task)),
            "cpus-per-task": ("CPUS_PER_TASK", lambda j: str(spec(j).cpus_per_task)),
            "cpus-per-tres": ("CPUS_PER_TRES", lambda j: "N/A"),
            "deadline": ("DEADLINE", lambda j: stamp(spec(j).deadline)),
            "delayboot": ("DELAY_BOOT", lambda j: "0:00"),
            "dependency": fields["E"],
            "derivedec": ("DERIVED_EC", lambda j: "0"),
            "eligibletime": ("ELIGIBLE_TIME", lambda j: stamp(v.eligible_time(j))),
            "endtime": fields["e"],
            "exit_code": ("EXIT_CODE", lambda j: str(v.wait_status(j))),
            "feature": fields["f"], "groupid": fields["G"], "groupname": fields["g"],
            "hetjobid": ("HET_JOB_ID", lambda j: "N/A"), "packjobid": ("HET_JOB_ID", lambda j: "N/A"),
            "hetjobidset": ("HET_JOB_ID_SET", lambda j: "N/A"), "packjobidset": ("HET_JOB_ID_SET", lambda j: "N/A"),
            "hetjoboffset": ("HET_JOB_OFFSET", lambda j: "N/A"),
            "packjoboffset": ("HET_JOB_OFFSET", lambda j: "N/A"),
            "jobarrayid": fields["i"], "jobid": ("JOBID", lambda j: str(j.job_id)),
            "lastschedeval": ("LAST_SCHED_EVAL", lambda j: stamp(j.start_time or j.submit_time)),
            "licenses": fields["W"],
            "maxcpus": ("MAX_CPUS", lambda j: str(v.total_cpus(j))),
            "maxnodes": ("MAX_NODES", lambda j: str(spec(j).max_nodes or v.node_count(j))),
            "mcslabel": ("MCSLABEL", lambda j: NOT_SET),
            "mem-per-tres": ("MEM_PER_TRES", lambda j: "N/A"),
            "mincpus": fields["c"], "minmemory": fields["m"],
            "mintime": ("TIME_MIN", lambda j: "0:00"),
            "mintmpdisk": fields["d"], "name": fields["j"],
            "network": ("NETWORK", lambda j: NOT_SET),
            "nice": fields["y"], "nodelist": fields["N"],
            "ntperboard": ("NTASKS_PER_BOARD", lambda j: "0"),
            "ntpercore": ("NTASKS_PER_CORE", lambda j: "N/A"),
            "ntpernode": ("NTASKS_PER_NODE", lambda j: str(spec(j).ntasks_per_node)),
            "ntpersocket": ("NTASKS_PER_SOCKET", lambda j: "N/A"),
            "numcpus": fields["C"], "numnodes": fields["D"],
            "numtasks": ("TASKS", lambda j: str(v.total_tasks(j))),
            "origin": ("ORIGIN", lambda j: "NA"), "originraw": ("ORIGIN_RAW", lambda j: "NA"),
            "oversubscribe": fields["h"], "shared": fields["h"], "partition": fields["P"],
            "pendingtime": ("PENDING_TIME", self.pending_time),
            "preempttime": ("PREEMPT_TIME", lambda j: "N/A"),
            "prefer": ("PREFER", lambda j: NOT_SET),
            "priority": fields["p"], "prioritylong": fields["Q"],
            "profile": ("PROFILE", lambda j: "NotSet"),
            "qos": fields["q"], "reason": fields["r"], "reasonlist": fields["R"],
            "reboot": ("REBOOT", lambda j: "0"),
            "reqnodes": fields["n"],
            "reqswitch": ("REQ_SWITCH", lambda j: "0"),
            "requeue": ("REQUEUE", lambda j: "1" if j.requeue else "0"),
            "reservation": fields["v"],
            "resizetime": ("RESIZE_TIME", lambda j: "N/A"),
            "restartcnt": ("RESTART_COUNT", lambda j: str(j.restarts)),
            "schednodes": fields["Y"], "sct": fields["z"],
            "selectjobinfo": ("", lambda j: ""),
            "siblingsactive": ("ACTIVE_SIBLINGS", lambda j: "NA"),
            "siblingsactiveraw": ("ACTIVE_SIBLINGS_RAW", lambda j: "NA"),
            "siblingsviable": ("VIABLE_SIBLINGS", lambda j: "NA"),
            "siblingsviableraw": ("VIALBLE_SIBLINGS_RAW", lambda j: "NA"),  # sic: Slurm 22.05's header
            "sockets": fields["H"],
            "sperboard": ("SOCKETS_PER_BOARD", lambda j: "0"),
            "starttime": fields["S"], "state": fields["T"], "statecompact": fields["t"],
            "stderr": ("STDERR", lambda j: v.std_paths(j)[1]),
            "stdin": ("STDIN", lambda j: v.std_paths(j)[2]),
            "stdout": ("STDOUT", lambda j: v.std_paths(j)[0]),
            "submittime": fields["V"],
            "system_comment": ("SYSTEM_COMMENT", lambda j: _null(v.escaped(j.system_comment))),
            "threads": fields["J"], "timeleft": fields["L"], "timelimit": fields["l"], "timeused": fields["M"],
            "tres": ("TRES_ALLOC", self.tres), "tres-alloc": ("TRES_ALLOC", self.tres),
            "tres-bind": ("TRES_BIND", lambda j: "N/A"), "tres-freq": ("TRES_FREQ", lambda j: "N/A"),
            "tres-per-job": ("TRES_PER_JOB", v.tres_per_job_text),
            "tres-per-node": ("TRES_PER_NODE", v.tres_per_node_text),
            "tres-per-socket": ("TRES_PER_SOCKET", lambda j: "N/A"),
            "tres-per-task": ("TRES_PER_TASK", lambda j: "N/A"),
            "userid": fields["U"], "username": fields["u"],
            "wait4switch": ("WAIT4SWITCH", lambda j: "0:00"),
            "wckey": fields["w"], "workdir": fields["Z"],
        }
        return {**fields, **by_name}
