"""What a job asks for (JobSpec) and what the controller knows of it (JobRecord)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pslurm.core.errors import SpecError as SpecError  # its home is light: the commands' paths need no dataclasses
from pslurm.core.gres import GresRequest
from pslurm.core.jobids import display_id as display_id  # light: the commands name jobs without dataclasses
from pslurm.core.states import JobReason, JobState


@dataclass
class JobSpec:
    """A job request, built by the CLIs from flags and directives and checked by the controller. Its
    fields are core/jobfields.py's rows, in their order and with their defaults (tests/unit/test_jobfields.py)."""

    name: str
    user: str
    uid: int
    gid: int
    workdir: str
    script: str | None = None  # batch script text (psbatch); None for psrun
    argv: tuple[str, ...] = ()  # the command psrun runs, without a shell
    environment: dict[str, str] = field(default_factory=dict)
    partition: str | None = None  # None: the cluster's default partition
    stdout: str | None = None  # output pattern (%j %x %u %N %A %a); None: slurm-%j.out
    stderr: str | None = None  # None: same file as stdout
    time_limit: int | None = None  # seconds; None: the partition's limit
    num_nodes: int = 1
    ntasks: int = 1
    cpus_per_task: int = 1
    mem_mb: int = 0  # per node; 0: no memory asked
    gres: tuple[GresRequest, ...] = ()  # per node
    interactive: bool = False  # psrun: output streamed back, not written to files
    account: str = ""  # -A/--account, for fair share; "" is the default account
    nice: int = 0  # --nice: lowers the priority by this much (negative raises it: operators only)
    dependency: str = ""  # -d/--dependency, e.g. afterok:12:13 or afterany:12?afternotok:14
    requeue: bool | None = None  # --requeue/--no-requeue; None: the cluster's JobRequeue (batch jobs)
    hold: bool = False  # -H/--hold: submitted held (JobHeldUser) until released
    array: str = ""  # -a/--array, e.g. 0-99%5 or 1,3,5-7 or 0-15:4
    kill_on_invalid_dep: bool = False  # --kill-on-invalid-dep=yes: cancel when a dependency can never be met
    nodelist: str = ""  # -w/--nodelist: the node(s) the job must run on, a hostlist (Slurm's ReqNodeList)
    exclude: str = ""  # -x/--exclude: nodes it must not run on, a hostlist (ExcNodeList)
    constraint: str = ""  # -C/--constraint: the node features it needs (a100, a&b, a|b; Features=)
    exclusive: bool = False  # --exclusive: whole nodes (all CPUs, memory, GPUs), nothing else on them
    open_mode: str = ""  # --open-mode: "append" or "truncate"; "": not given (truncate, as JobFileAppend=0)
    allocation: bool = False  # psalloc: an allocation, no batch script (steps run in it, the command locally)
    gpu_mem: str = ""  # --gpu-mem as given ("8G", "auto"); the controller turns it into a gpumem:MB GRES item
    begin_time: float | None = None  # -b/--begin: it starts no earlier (epoch seconds); its EligibleTime
    deadline: float | None = None  # --deadline: ended DEADLINE once it can no longer end before this
    comment: str = ""  # --comment: the user's note (Comment=), at most 1024 characters
    qos: str = ""  # -q/--qos; "" is the default, "normal" (pslurm has no other QOS)
    warn_signal: int = 0  # --signal: send this signal (0: none) ...
    warn_time: int = 0  # ... this many seconds before the time limit (Slurm's default 60)
    warn_batch: bool = False  # --signal=B:...: to the batch shell only (else to all of the job's processes)
    warn_reservation: bool = False  # --signal=R:...: also at its reservation's end: accepted, pslurm has none
    max_nodes: int = 0  # -N MIN-MAX's MAX; 0: MIN (pslurm allocates MIN nodes)
    ntasks_per_node: int = 0  # --ntasks-per-node; 0: not given (ntasks spread in block order, core/layout.py)
    command: str = ""  # the batch script's path as sbatch was given it, absolute (Command=); "": --wrap, stdin
    submit_host: str = ""  # the host it was submitted from (AllocNode=)
    submit_sid: int = 0  # the session id of the shell that submitted it (AllocSID, AllocNode:Sid=)
    submit_line: str = ""  # the command line that submitted it (sacct's SubmitLine)
    mem_per_cpu_mb: int = 0  # --mem-per-cpu; each node's memory is this times its CPUs (core/layout.py)
    mem_per_gpu_mb: int = 0  # --mem-per-gpu; each node's memory is this times its GPUs
    cpus_per_gpu: int = 0  # --cpus-per-gpu; each node's CPUs are this times its GPUs
    mail_type: str = ""  # --mail-type, as Slurm prints it (END, BEGIN,END, ...): shown, pslurm sends no mail
    mail_user: str = ""  # --mail-user
    tres_per_job: str = ""  # --gpus as Slurm records it (TRES_PER_JOB, ``gres:gpu:2``); its GPUs are in gres per node

    @property
    def cpus(self) -> int:
        """CPUs needed on the node (with --cpus-per-gpu: at least that times its GPUs, core/layout.py)."""
        return max(self.ntasks * self.cpus_per_task, self.cpus_per_gpu * self.gpus())

    def gpus(self, type_: str | None = None) -> int:
        """GPUs asked per node (of one type when ``type_`` is given)."""
        return sum(g.count for g in self.gres if g.name == "gpu" and (type_ is None or g.type == type_))


@dataclass
class JobRecord:
    """A job as the store keeps it."""

    job_id: int
    spec: JobSpec
    state: JobState
    reason: JobReason = JobReason.NONE
    submit_time: float = 0.0
    start_time: float | None = None
    end_time: float | None = None
    node: str | None = None  # the first node of its allocation (the batch host)
    gpu_indices: tuple[int, ...] = ()  # the first node's own GPU indices
    exit_code: int = 0
    exit_signal: int = 0
    cancel_requested: bool = False
    partition: str = ""  # the partition it was accepted into
    time_limit: int | None = None  # seconds in force; None is unlimited
    gpu_seconds: float | None = None
    peak_gpu_memory_mb: int | None = None
    mean_gpu_util: float | None = None
    array_job_id: int | None = None  # the array's id (its first task's job id); None: not an array task
    array_task_id: int | None = None
    priority: int = 0  # the priority computed by the last scheduling pass (or set by an operator)
    hold: str = ""  # "", "user" or "admin"
    restarts: int = 0  # times the job was requeued
    start_estimate: float | None = None  # expected start of a pending job, where backfill reserved one
    eligible_time: float | None = None  # when it became eligible to start (Slurm's EligibleTime)
    requeue: bool = False  # may be requeued (node failure, pscontrol requeue)
    requeue_requested: bool = False  # pscontrol requeue asked: back to PENDING once its end is seen
    collapsed_tasks: str = ""  # in a collapsed listing: this record stands for these pending tasks (``0-999``)
    system_comment: str = ""  # why the system ended or requeued it (a launch failure, a lost node): SystemComment=
    nodes: tuple[str, ...] = ()  # every node of its allocation, in order (the first is ``node``); () before start
    node_gpus: tuple[tuple[int, ...], ...] = ()  # each node's own GPU indices, in the order of ``nodes``
    max_rss_kb: int | None = None  # the batch step's MaxRSS: its memory cgroup's peak (None: not measured)
    assoc_id: int = 0  # the association it was charged to (sacctmgr's id); 0: none, as Slurm's
    suspend_time: float | None = None  # its last scontrol suspend or resume (Slurm's SuspendTime); None: never
    suspended_seconds: float = 0.0  # the run's time suspended before its last resume: its limit's end moves so
    state_desc: str = ""  # the reason in words where slurmctld gives one (its state_desc); shown for Reason
    reason_prev: JobReason = JobReason.NONE  # the last reason it waited for but None/Priority/Resources (sacct's)
    total_cpu_seconds: float | None = None  # its cgroup's CPU time, user and system (TotalCPU); None: not measured
    user_cpu_seconds: float | None = None  # of which in user mode (UserCPU)
    system_cpu_seconds: float | None = None  # and in system mode (SystemCPU)

    @property
    def all_nodes(self) -> tuple[str, ...]:
        """The allocation's nodes: ``nodes``, or ``(node,)`` for a record that has only that."""
        return self.nodes or ((self.node,) if self.node else ())

    @property
    def display_id(self) -> str:
        """``A_i`` for an array task, the job id otherwise."""
        return display_id(self.job_id, self.array_job_id, self.array_task_id)


def spec_to_dict(spec: JobSpec) -> dict[str, object]:
    """A JSON-ready dict of the spec (the store keeps the whole request as JSON)."""
    data = dict(vars(spec))
    data["argv"] = list(spec.argv)
    data["gres"] = [[g.name, g.type, g.count] for g in spec.gres]
    return data


def spec_from_dict(data: dict[str, object]) -> JobSpec:
    """The inverse of :func:`spec_to_dict`."""
    values = dict(data)
    values["argv"] = tuple(values.get("argv") or ())  # type: ignore[call-overload,arg-type]
    values["gres"] = tuple(GresRequest(n, t, c) for n, t, c in values.get("gres") or ())  # type: ignore[attr-defined]
    return JobSpec(**values)  # type: ignore[arg-type]
