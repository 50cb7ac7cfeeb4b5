"""Job and node states and the reasons jobs wait or end; the operations between them are in
``pslurm.core.lifecycle``."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Iterator
    from enum import StrEnum as _StrEnum
else:
    _StrEnum = None  # set below: the job views of every command import this module, and enum costs them 17 M
    # instructions (more than half a bare interpreter's start)


class _StrEnumType(type):
    """What the states need of ``enum.StrEnum``, without the enum module: each public ``str`` attribute of the
    class body becomes a member, an instance of the class equal (and hashing equal) to its value, with
    ``name`` and ``value``; ``cls(value)`` returns the member (the same object: ``is`` compares) or raises
    ValueError; iterating the class yields the members in the order written; copies and pickles are the
    member itself. Type checkers see ``enum.StrEnum``."""

    _value2member_map_: dict[str, str]

    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, object]) -> _StrEnumType:
        names = [key for key, value in namespace.items() if not key.startswith("_") and isinstance(value, str)]
        cls = super().__new__(mcs, name, bases, {k: v for k, v in namespace.items() if k not in names})
        cls._value2member_map_ = {}
        for key in names:
            member: str = str.__new__(cls, str(namespace[key]))  # type: ignore[arg-type]
            member._name_ = key  # type: ignore[attr-defined]
            cls._value2member_map_[str(member)] = member
            setattr(cls, key, member)
        return cls

    def __call__(cls, value: object) -> str:
        member = cls._value2member_map_.get(value) if isinstance(value, str) else None
        if member is None:
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}")
        return member

    def __iter__(cls) -> Iterator[str]:
        return iter(cls._value2member_map_.values())

    def __len__(cls) -> int:
        return len(cls._value2member_map_)

    def __contains__(cls, value: object) -> bool:
        return isinstance(value, str) and value in cls._value2member_map_

    @property
    def __members__(cls) -> dict[str, str]:
        return {member._name_: member for member in cls._value2member_map_.values()}  # type: ignore[attr-defined]


class _CheapStrEnum(str, metaclass=_StrEnumType):
    _name_: str

    @property
    def name(self) -> str:
        return self._name_

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str.__str__(self), spec)

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self._name_}: {str.__repr__(self)}>"

    def __reduce_ex__(self, protocol: object) -> tuple[type, tuple[str]]:
        return type(self), (str.__str__(self),)

    def __copy__(self) -> _CheapStrEnum:
        return self

    def __deepcopy__(self, memo: object) -> _CheapStrEnum:
        return self


if not TYPE_CHECKING:
    _StrEnum = _CheapStrEnum


class JobState(_StrEnum):
    """A job's state, named as Slurm names it."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"  # pscontrol suspend: its processes stopped on every node, its allocation kept
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"  # a process of the job was killed for going past its --mem
    DEADLINE = "DEADLINE"  # --deadline: it could no longer end before its deadline, and never started

    @property
    def short(self) -> str:
        """Slurm's two-letter code (squeue %t)."""
        return _SHORT[self]

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES

    @property
    def holds_resources(self) -> bool:
        """RUNNING, SUSPENDED and COMPLETING jobs keep their GPUs until the agent reports the end (a
        suspended job keeps its whole allocation, as Slurm's does its GPUs and memory)."""
        return self in (JobState.RUNNING, JobState.SUSPENDED, JobState.COMPLETING)

    @classmethod
    def parse(cls, text: str) -> JobState:
        """Accept a long name (``RUNNING``) or a short code (``R``), any case."""
        key = text.strip().upper()
        for state in cls:
            if key in (state.value, state.short):
                return state
        raise ValueError(f"Invalid job state specified: {text}")


_SHORT = {
    JobState.PENDING: "PD",
    JobState.RUNNING: "R",
    JobState.SUSPENDED: "S",
    JobState.COMPLETING: "CG",
    JobState.COMPLETED: "CD",
    JobState.FAILED: "F",
    JobState.CANCELLED: "CA",
    JobState.TIMEOUT: "TO",
    JobState.NODE_FAIL: "NF",
    JobState.OUT_OF_MEMORY: "OOM",
    JobState.DEADLINE: "DL",
}

FINAL_STATES = frozenset(
    {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL,
     JobState.OUT_OF_MEMORY, JobState.DEADLINE}
)


class InvalidTransition(Exception):
    """A state change the lifecycle forbids (``pslurm.core.lifecycle``), or one that lost a race
    (the row had moved on)."""


class JobReason(_StrEnum):
    """Why a job waits, or why it ended, in Slurm's words (squeue %r, scontrol's Reason=)."""

    NONE = "None"
    PRIORITY = "Priority"
    RESOURCES = "Resources"
    DEPENDENCY = "Dependency"
    DEPENDENCY_NEVER_SATISFIED = "DependencyNeverSatisfied"
    JOB_HELD_USER = "JobHeldUser"
    JOB_HELD_ADMIN = "JobHeldAdmin"
    PARTITION_DOWN = "PartitionDown"
    PARTITION_INACTIVE = "PartitionInactive"
    PARTITION_TIME_LIMIT = "PartitionTimeLimit"
    JOB_ARRAY_TASK_LIMIT = "JobArrayTaskLimit"
    QOS_MAX_JOBS_PER_USER_LIMIT = "QOSMaxJobsPerUserLimit"
    QOS_MAX_GRES_PER_USER = "QOSMaxGRESPerUser"
    QOS_MAX_CPU_PER_USER_LIMIT = "QOSMaxCpuPerUserLimit"
    REQ_NODE_NOT_AVAIL = "ReqNodeNotAvail"
    BEGIN_TIME = "BeginTime"
    NON_ZERO_EXIT_CODE = "NonZeroExitCode"
    TIME_LIMIT = "TimeLimit"
    NODE_DOWN = "NodeDown"
    JOB_LAUNCH_FAILURE = "JobLaunchFailure"
    OUT_OF_MEMORY = "OutOfMemory"
    DEADLINE = "DeadLine"  # Slurm's FAIL_DEADLINE: ended for a deadline it could no longer meet
    # association and QOS limits (controller/acct_policy.py), job_reason_string's words
    ASSOC_GRP_CPU_LIMIT = "AssocGrpCpuLimit"
    ASSOC_GRP_MEM_LIMIT = "AssocGrpMemLimit"
    ASSOC_GRP_NODE_LIMIT = "AssocGrpNodeLimit"
    ASSOC_GRP_GRES = "AssocGrpGRES"
    ASSOC_MAX_CPU_PER_JOB_LIMIT = "AssocMaxCpuPerJobLimit"
    ASSOC_MAX_MEM_PER_JOB = "AssocMaxMemPerJob"
    ASSOC_MAX_NODE_PER_JOB_LIMIT = "AssocMaxNodePerJobLimit"
    ASSOC_MAX_GRES_PER_JOB = "AssocMaxGRESPerJob"
    ASSOC_MAX_CPU_PER_NODE = "AssocMaxCpuPerNode"
    ASSOC_MAX_MEM_PER_NODE = "AssocMaxMemPerNode"
    ASSOC_MAX_UNKNOWN_PER_NODE = "AssocMaxUnknownPerNode"
    ASSOC_MAX_GRES_PER_NODE = "AssocMaxGRESPerNode"
    QOS_GRP_CPU_LIMIT = "QOSGrpCpuLimit"
    QOS_GRP_MEM_LIMIT = "QOSGrpMemLimit"
    QOS_GRP_NODE_LIMIT = "QOSGrpNodeLimit"
    QOS_GRP_GRES = "QOSGrpGRES"
    QOS_MAX_CPU_PER_JOB_LIMIT = "QOSMaxCpuPerJobLimit"
    QOS_MAX_MEMORY_PER_JOB = "QOSMaxMemoryPerJob"
    QOS_MAX_NODE_PER_JOB_LIMIT = "QOSMaxNodePerJobLimit"
    QOS_MAX_GRES_PER_JOB = "QOSMaxGRESPerJob"
    QOS_MAX_CPU_PER_NODE = "QOSMaxCpuPerNode"
    QOS_MAX_MEMORY_PER_NODE = "QOSMaxMemoryPerNode"
    QOS_MAX_UNKNOWN_PER_NODE = "QOSMaxUnknownPerNode"
    QOS_MAX_GRES_PER_NODE = "QOSMaxGRESPerNode"
    QOS_MAX_MEMORY_PER_USER = "QOSMaxMemoryPerUser"
    QOS_MAX_NODE_PER_USER_LIMIT = "QOSMaxNodePerUserLimit"
    ASSOC_GRP_JOBS_LIMIT = "AssocGrpJobsLimit"
    ASSOC_MAX_JOBS_LIMIT = "AssocMaxJobsLimit"
    ASSOC_MAX_WALL_DURATION_PER_JOB_LIMIT = "AssocMaxWallDurationPerJobLimit"
    QOS_GRP_JOBS_LIMIT = "QOSGrpJobsLimit"
    QOS_MAX_WALL_DURATION_PER_JOB_LIMIT = "QOSMaxWallDurationPerJobLimit"
    ASSOC_GRP_SUBMIT_JOBS_LIMIT = "AssocGrpSubmitJobsLimit"
    ASSOC_MAX_SUBMIT_JOB_LIMIT = "AssocMaxSubmitJobLimit"
    QOS_GRP_SUBMIT_JOBS_LIMIT = "QOSGrpSubmitJobsLimit"
    QOS_MAX_SUBMIT_JOB_PER_USER_LIMIT = "QOSMaxSubmitJobPerUserLimit"

    @property
    def is_kept_wait(self) -> bool:
        """Whether accounting keeps it as the reason a pending job waited for (Slurm's state_reason_prev,
        sacct's Reason): every reason but None, Priority and Resources, as slurmctld's build_job_queue."""
        return self not in (JobReason.NONE, JobReason.PRIORITY, JobReason.RESOURCES)

    @classmethod
    def parse(cls, text: str | None) -> JobReason:
        """The reason a stored or received word names; an unknown or empty one is NONE."""
        try:
            return cls(text or "None")
        except ValueError:
            return cls.NONE


class NodeState(_StrEnum):
    """A node's base state as the controller keeps it; drain is a flag beside it."""

    UNKNOWN = "UNKNOWN"  # configured, never registered
    UP = "UP"  # registered and heartbeating
    DOWN = "DOWN"  # missed its heartbeats, or set down by an operator


NODE_TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    NodeState.UP: frozenset({NodeState.UNKNOWN, NodeState.DOWN, NodeState.UP}),
    NodeState.DOWN: frozenset({NodeState.UNKNOWN, NodeState.UP}),
    NodeState.UNKNOWN: frozenset(),
}


def node_display_state(state: NodeState, drain: bool, busy_gpus: int, total_gpus: int,
                       busy_cpus: int, total_cpus: int, running_jobs: int) -> str:
    """The state word sinfo shows: idle, mix, alloc, drain, drng, down, unk."""
    if state is NodeState.DOWN:
        return "down"
    if state is NodeState.UNKNOWN:
        return "unk"
    if drain:
        return "drng" if running_jobs else "drain"
    if running_jobs == 0:
        return "idle"
    full = (total_gpus > 0 and busy_gpus >= total_gpus) or busy_cpus >= total_cpus
    return "alloc" if full else "mix"
