from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATE_UNSPECIFIED: _ClassVar[JobState]
    JOB_PENDING: _ClassVar[JobState]
    JOB_RUNNING: _ClassVar[JobState]
    JOB_COMPLETING: _ClassVar[JobState]
    JOB_COMPLETED: _ClassVar[JobState]
    JOB_FAILED: _ClassVar[JobState]
    JOB_CANCELLED: _ClassVar[JobState]
    JOB_TIMEOUT: _ClassVar[JobState]
    JOB_NODE_FAIL: _ClassVar[JobState]
    JOB_OUT_OF_MEMORY: _ClassVar[JobState]
    JOB_DEADLINE: _ClassVar[JobState]
    JOB_SUSPENDED: _ClassVar[JobState]

class JobReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_NONE: _ClassVar[JobReason]
    REASON_PRIORITY: _ClassVar[JobReason]
    REASON_RESOURCES: _ClassVar[JobReason]
    REASON_DEPENDENCY: _ClassVar[JobReason]
    REASON_DEPENDENCY_NEVER_SATISFIED: _ClassVar[JobReason]
    REASON_JOB_HELD_USER: _ClassVar[JobReason]
    REASON_JOB_HELD_ADMIN: _ClassVar[JobReason]
    REASON_PARTITION_DOWN: _ClassVar[JobReason]
    REASON_PARTITION_INACTIVE: _ClassVar[JobReason]
    REASON_PARTITION_TIME_LIMIT: _ClassVar[JobReason]
    REASON_JOB_ARRAY_TASK_LIMIT: _ClassVar[JobReason]
    REASON_QOS_MAX_JOBS_PER_USER_LIMIT: _ClassVar[JobReason]
    REASON_QOS_MAX_GRES_PER_USER: _ClassVar[JobReason]
    REASON_QOS_MAX_CPU_PER_USER_LIMIT: _ClassVar[JobReason]
    REASON_REQ_NODE_NOT_AVAIL: _ClassVar[JobReason]
    REASON_BEGIN_TIME: _ClassVar[JobReason]
    REASON_NON_ZERO_EXIT_CODE: _ClassVar[JobReason]
    REASON_TIME_LIMIT: _ClassVar[JobReason]
    REASON_NODE_DOWN: _ClassVar[JobReason]
    REASON_JOB_LAUNCH_FAILURE: _ClassVar[JobReason]
    REASON_OUT_OF_MEMORY: _ClassVar[JobReason]
    REASON_DEADLINE: _ClassVar[JobReason]
JOB_STATE_UNSPECIFIED: JobState
JOB_PENDING: JobState
JOB_RUNNING: JobState
JOB_COMPLETING: JobState
JOB_COMPLETED: JobState
JOB_FAILED: JobState
JOB_CANCELLED: JobState
JOB_TIMEOUT: JobState
JOB_NODE_FAIL: JobState
JOB_OUT_OF_MEMORY: JobState
JOB_DEADLINE: JobState
JOB_SUSPENDED: JobState
REASON_NONE: JobReason
REASON_PRIORITY: JobReason
REASON_RESOURCES: JobReason
REASON_DEPENDENCY: JobReason
REASON_DEPENDENCY_NEVER_SATISFIED: JobReason
REASON_JOB_HELD_USER: JobReason
REASON_JOB_HELD_ADMIN: JobReason
REASON_PARTITION_DOWN: JobReason
REASON_PARTITION_INACTIVE: JobReason
REASON_PARTITION_TIME_LIMIT: JobReason
REASON_JOB_ARRAY_TASK_LIMIT: JobReason
REASON_QOS_MAX_JOBS_PER_USER_LIMIT: JobReason
REASON_QOS_MAX_GRES_PER_USER: JobReason
REASON_QOS_MAX_CPU_PER_USER_LIMIT: JobReason
REASON_REQ_NODE_NOT_AVAIL: JobReason
REASON_BEGIN_TIME: JobReason
REASON_NON_ZERO_EXIT_CODE: JobReason
REASON_TIME_LIMIT: JobReason
REASON_NODE_DOWN: JobReason
REASON_JOB_LAUNCH_FAILURE: JobReason
REASON_OUT_OF_MEMORY: JobReason
REASON_DEADLINE: JobReason

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JobRun(_message.Message):
    __slots__ = ("job_id", "restarts")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    restarts: int
    def __init__(self, job_id: _Optional[int] = ..., restarts: _Optional[int] = ...) -> None: ...

class Gres(_message.Message):
    __slots__ = ("name", "type", "count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    count: int
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("name", "user", "uid", "gid", "workdir", "script", "argv", "environment", "partition", "stdout", "stderr", "time_limit", "num_nodes", "ntasks", "cpus_per_task", "mem_mb", "gres", "interactive", "account", "nice", "dependency", "requeue", "hold", "array", "kill_on_invalid_dep", "nodelist", "exclude", "open_mode", "gpu_mem", "begin_time", "deadline", "comment", "qos", "warn_signal", "warn_time", "warn_batch", "warn_reservation", "allocation", "max_nodes", "ntasks_per_node", "constraint", "exclusive")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NTASKS_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    MEM_MB_FIELD_NUMBER: _ClassVar[int]
    GRES_FIELD_NUMBER: _ClassVar[int]
    INTERACTIVE_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    NICE_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    ARRAY_FIELD_NUMBER: _ClassVar[int]
    KILL_ON_INVALID_DEP_FIELD_NUMBER: _ClassVar[int]
    NODELIST_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    OPEN_MODE_FIELD_NUMBER: _ClassVar[int]
    GPU_MEM_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIME_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    QOS_FIELD_NUMBER: _ClassVar[int]
    WARN_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    WARN_TIME_FIELD_NUMBER: _ClassVar[int]
    WARN_BATCH_FIELD_NUMBER: _ClassVar[int]
    WARN_RESERVATION_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    NTASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    user: str
    uid: int
    gid: int
    workdir: str
    script: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    partition: str
    stdout: str
    stderr: str
    time_limit: int
    num_nodes: int
    ntasks: int
    cpus_per_task: int
    mem_mb: int
    gres: _containers.RepeatedCompositeFieldContainer[Gres]
    interactive: bool
    account: str
    nice: int
    dependency: str
    requeue: bool
    hold: bool
    array: str
    kill_on_invalid_dep: bool
    nodelist: str
    exclude: str
    open_mode: str
    gpu_mem: str
    begin_time: float
    deadline: float
    comment: str
    qos: str
    warn_signal: int
    warn_time: int
    warn_batch: bool
    warn_reservation: bool
    allocation: bool
    max_nodes: int
    ntasks_per_node: int
    constraint: str
    exclusive: bool
    def __init__(self, name: _Optional[str] = ..., user: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., workdir: _Optional[str] = ..., script: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., partition: _Optional[str] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., time_limit: _Optional[int] = ..., num_nodes: _Optional[int] = ..., ntasks: _Optional[int] = ..., cpus_per_task: _Optional[int] = ..., mem_mb: _Optional[int] = ..., gres: _Optional[_Iterable[_Union[Gres, _Mapping]]] = ..., interactive: _Optional[bool] = ..., account: _Optional[str] = ..., nice: _Optional[int] = ..., dependency: _Optional[str] = ..., requeue: _Optional[bool] = ..., hold: _Optional[bool] = ..., array: _Optional[str] = ..., kill_on_invalid_dep: _Optional[bool] = ..., nodelist: _Optional[str] = ..., exclude: _Optional[str] = ..., open_mode: _Optional[str] = ..., gpu_mem: _Optional[str] = ..., begin_time: _Optional[float] = ..., deadline: _Optional[float] = ..., comment: _Optional[str] = ..., qos: _Optional[str] = ..., warn_signal: _Optional[int] = ..., warn_time: _Optional[int] = ..., warn_batch: _Optional[bool] = ..., warn_reservation: _Optional[bool] = ..., allocation: _Optional[bool] = ..., max_nodes: _Optional[int] = ..., ntasks_per_node: _Optional[int] = ..., constraint: _Optional[str] = ..., exclusive: _Optional[bool] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("job_id", "spec", "state", "reason", "submit_time", "start_time", "end_time", "node", "gpu_indices", "exit_code", "exit_signal", "node_target", "time_limit", "gpu_seconds", "peak_gpu_memory_mb", "mean_gpu_util", "array_job_id", "array_task_id", "priority", "hold", "restarts", "start_estimate", "eligible_time", "collapsed_tasks", "system_comment", "requeue", "nodes", "node_index", "node_gpus", "max_rss_kb")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    NODE_TARGET_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PEAK_GPU_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    MEAN_GPU_UTIL_FIELD_NUMBER: _ClassVar[int]
    ARRAY_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ARRAY_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    START_ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_TIME_FIELD_NUMBER: _ClassVar[int]
    COLLAPSED_TASKS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_COMMENT_FIELD_NUMBER: _ClassVar[int]
    REQUEUE_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    NODE_INDEX_FIELD_NUMBER: _ClassVar[int]
    NODE_GPUS_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    spec: JobSpec
    state: JobState
    reason: JobReason
    submit_time: float
    start_time: float
    end_time: float
    node: str
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    exit_code: int
    exit_signal: int
    node_target: str
    time_limit: int
    gpu_seconds: float
    peak_gpu_memory_mb: int
    mean_gpu_util: float
    array_job_id: int
    array_task_id: int
    priority: int
    hold: str
    restarts: int
    start_estimate: float
    eligible_time: float
    collapsed_tasks: str
    system_comment: str
    requeue: bool
    nodes: _containers.RepeatedScalarFieldContainer[str]
    node_index: int
    node_gpus: _containers.RepeatedCompositeFieldContainer[NodeGpus]
    max_rss_kb: int
    def __init__(self, job_id: _Optional[int] = ..., spec: _Optional[_Union[JobSpec, _Mapping]] = ..., state: _Optional[_Union[JobState, str]] = ..., reason: _Optional[_Union[JobReason, str]] = ..., submit_time: _Optional[float] = ..., start_time: _Optional[float] = ..., end_time: _Optional[float] = ..., node: _Optional[str] = ..., gpu_indices: _Optional[_Iterable[int]] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ..., node_target: _Optional[str] = ..., time_limit: _Optional[int] = ..., gpu_seconds: _Optional[float] = ..., peak_gpu_memory_mb: _Optional[int] = ..., mean_gpu_util: _Optional[float] = ..., array_job_id: _Optional[int] = ..., array_task_id: _Optional[int] = ..., priority: _Optional[int] = ..., hold: _Optional[str] = ..., restarts: _Optional[int] = ..., start_estimate: _Optional[float] = ..., eligible_time: _Optional[float] = ..., collapsed_tasks: _Optional[str] = ..., system_comment: _Optional[str] = ..., requeue: _Optional[bool] = ..., nodes: _Optional[_Iterable[str]] = ..., node_index: _Optional[int] = ..., node_gpus: _Optional[_Iterable[_Union[NodeGpus, _Mapping]]] = ..., max_rss_kb: _Optional[int] = ...) -> None: ...

class NodeGpus(_message.Message):
    __slots__ = ("indices",)
    INDICES_FIELD_NUMBER: _ClassVar[int]
    indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, indices: _Optional[_Iterable[int]] = ...) -> None: ...

class GpuInfo(_message.Message):
    __slots__ = ("index", "name", "type", "file", "minor", "uuid", "memory_mb", "cores", "shards", "mps")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    MINOR_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    CORES_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    MPS_FIELD_NUMBER: _ClassVar[int]
    index: int
    name: str
    type: str
    file: str
    minor: int
    uuid: str
    memory_mb: int
    cores: _containers.RepeatedScalarFieldContainer[int]
    shards: int
    mps: int
    def __init__(self, index: _Optional[int] = ..., name: _Optional[str] = ..., type: _Optional[str] = ..., file: _Optional[str] = ..., minor: _Optional[int] = ..., uuid: _Optional[str] = ..., memory_mb: _Optional[int] = ..., cores: _Optional[_Iterable[int]] = ..., shards: _Optional[int] = ..., mps: _Optional[int] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("name", "addr", "port", "cpus", "real_memory", "gpus", "runs", "drain_reason", "isolation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    REAL_MEMORY_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    DRAIN_REASON_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    addr: str
    port: int
    cpus: int
    real_memory: int
    gpus: _containers.RepeatedCompositeFieldContainer[GpuInfo]
    runs: _containers.RepeatedCompositeFieldContainer[JobRun]
    drain_reason: str
    isolation: str
    def __init__(self, name: _Optional[str] = ..., addr: _Optional[str] = ..., port: _Optional[int] = ..., cpus: _Optional[int] = ..., real_memory: _Optional[int] = ..., gpus: _Optional[_Iterable[_Union[GpuInfo, _Mapping]]] = ..., runs: _Optional[_Iterable[_Union[JobRun, _Mapping]]] = ..., drain_reason: _Optional[str] = ..., isolation: _Optional[str] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("heartbeat_interval", "kill")
    HEARTBEAT_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    KILL_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval: float
    kill: _containers.RepeatedCompositeFieldContainer[JobRun]
    def __init__(self, heartbeat_interval: _Optional[float] = ..., kill: _Optional[_Iterable[_Union[JobRun, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "runs", "health_reason", "gpu_use", "steps", "sent_at")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_REASON_FIELD_NUMBER: _ClassVar[int]
    GPU_USE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    name: str
    runs: _containers.RepeatedCompositeFieldContainer[JobRun]
    health_reason: str
    gpu_use: _containers.RepeatedCompositeFieldContainer[GpuUse]
    steps: _containers.RepeatedCompositeFieldContainer[StepRef]
    sent_at: float
    def __init__(self, name: _Optional[str] = ..., runs: _Optional[_Iterable[_Union[JobRun, _Mapping]]] = ..., health_reason: _Optional[str] = ..., gpu_use: _Optional[_Iterable[_Union[GpuUse, _Mapping]]] = ..., steps: _Optional[_Iterable[_Union[StepRef, _Mapping]]] = ..., sent_at: _Optional[float] = ...) -> None: ...

class GpuUse(_message.Message):
    __slots__ = ("index", "memory_used_mb", "util")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_MB_FIELD_NUMBER: _ClassVar[int]
    UTIL_FIELD_NUMBER: _ClassVar[int]
    index: int
    memory_used_mb: int
    util: float
    def __init__(self, index: _Optional[int] = ..., memory_used_mb: _Optional[int] = ..., util: _Optional[float] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("reregister", "kill")
    REREGISTER_FIELD_NUMBER: _ClassVar[int]
    KILL_FIELD_NUMBER: _ClassVar[int]
    reregister: bool
    kill: _containers.RepeatedCompositeFieldContainer[JobRun]
    def __init__(self, reregister: _Optional[bool] = ..., kill: _Optional[_Iterable[_Union[JobRun, _Mapping]]] = ...) -> None: ...

class JobUsage(_message.Message):
    __slots__ = ("gpu_count", "gpu_seconds", "peak_gpu_memory_mb", "mean_gpu_util", "max_rss_kb", "total_cpu_usec", "user_cpu_usec", "system_cpu_usec")
    GPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    GPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PEAK_GPU_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    MEAN_GPU_UTIL_FIELD_NUMBER: _ClassVar[int]
    MAX_RSS_KB_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    USER_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_CPU_USEC_FIELD_NUMBER: _ClassVar[int]
    gpu_count: int
    gpu_seconds: float
    peak_gpu_memory_mb: int
    mean_gpu_util: float
    max_rss_kb: int
    total_cpu_usec: int
    user_cpu_usec: int
    system_cpu_usec: int
    def __init__(self, gpu_count: _Optional[int] = ..., gpu_seconds: _Optional[float] = ..., peak_gpu_memory_mb: _Optional[int] = ..., mean_gpu_util: _Optional[float] = ..., max_rss_kb: _Optional[int] = ..., total_cpu_usec: _Optional[int] = ..., user_cpu_usec: _Optional[int] = ..., system_cpu_usec: _Optional[int] = ...) -> None: ...

class JobEndedRequest(_message.Message):
    __slots__ = ("job_id", "node", "state", "exit_code", "exit_signal", "end_time", "usage", "restarts", "launch_failure", "comment")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FAILURE_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    node: str
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float
    usage: JobUsage
    restarts: int
    launch_failure: str
    comment: str
    def __init__(self, job_id: _Optional[int] = ..., node: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ..., end_time: _Optional[float] = ..., usage: _Optional[_Union[JobUsage, _Mapping]] = ..., restarts: _Optional[int] = ..., launch_failure: _Optional[str] = ..., comment: _Optional[str] = ...) -> None: ...

class JobsEndedRequest(_message.Message):
    __slots__ = ("node", "ends")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    node: str
    ends: _containers.RepeatedCompositeFieldContainer[JobEndedRequest]
    def __init__(self, node: _Optional[str] = ..., ends: _Optional[_Iterable[_Union[JobEndedRequest, _Mapping]]] = ...) -> None: ...

class StepRef(_message.Message):
    __slots__ = ("job_id", "step_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ...) -> None: ...

class StepLaunch(_message.Message):
    __slots__ = ("job_id", "restarts", "step_id", "name", "argv", "environment", "workdir", "uid", "gid", "user", "ntasks", "task_offset", "total_tasks", "node_index", "step_nodelist", "tasks_per_node", "cpus_per_task", "gpu_indices", "label", "pty", "task_gpus", "no_gpus")
    class EnvironmentEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    ENVIRONMENT_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    GID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    NTASKS_FIELD_NUMBER: _ClassVar[int]
    TASK_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TASKS_FIELD_NUMBER: _ClassVar[int]
    NODE_INDEX_FIELD_NUMBER: _ClassVar[int]
    STEP_NODELIST_FIELD_NUMBER: _ClassVar[int]
    TASKS_PER_NODE_FIELD_NUMBER: _ClassVar[int]
    CPUS_PER_TASK_FIELD_NUMBER: _ClassVar[int]
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PTY_FIELD_NUMBER: _ClassVar[int]
    TASK_GPUS_FIELD_NUMBER: _ClassVar[int]
    NO_GPUS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    restarts: int
    step_id: int
    name: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    environment: _containers.ScalarMap[str, str]
    workdir: str
    uid: int
    gid: int
    user: str
    ntasks: int
    task_offset: int
    total_tasks: int
    node_index: int
    step_nodelist: str
    tasks_per_node: str
    cpus_per_task: int
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    label: bool
    pty: bool
    task_gpus: _containers.RepeatedCompositeFieldContainer[TaskGpus]
    no_gpus: bool
    def __init__(self, job_id: _Optional[int] = ..., restarts: _Optional[int] = ..., step_id: _Optional[int] = ..., name: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., environment: _Optional[_Mapping[str, str]] = ..., workdir: _Optional[str] = ..., uid: _Optional[int] = ..., gid: _Optional[int] = ..., user: _Optional[str] = ..., ntasks: _Optional[int] = ..., task_offset: _Optional[int] = ..., total_tasks: _Optional[int] = ..., node_index: _Optional[int] = ..., step_nodelist: _Optional[str] = ..., tasks_per_node: _Optional[str] = ..., cpus_per_task: _Optional[int] = ..., gpu_indices: _Optional[_Iterable[int]] = ..., label: _Optional[bool] = ..., pty: _Optional[bool] = ..., task_gpus: _Optional[_Iterable[_Union[TaskGpus, _Mapping]]] = ..., no_gpus: _Optional[bool] = ...) -> None: ...

class TaskGpus(_message.Message):
    __slots__ = ("gpu_indices",)
    GPU_INDICES_FIELD_NUMBER: _ClassVar[int]
    gpu_indices: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, gpu_indices: _Optional[_Iterable[int]] = ...) -> None: ...

class StepSignal(_message.Message):
    __slots__ = ("job_id", "step_id", "signal")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    signal: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., signal: _Optional[int] = ...) -> None: ...

class StepEnded(_message.Message):
    __slots__ = ("job_id", "step_id", "node", "state", "exit_code", "exit_signal", "end_time")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    node: str
    state: JobState
    exit_code: int
    exit_signal: int
    end_time: float
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ..., node: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ..., end_time: _Optional[float] = ...) -> None: ...

class StepsEndedRequest(_message.Message):
    __slots__ = ("node", "ends")
    NODE_FIELD_NUMBER: _ClassVar[int]
    ENDS_FIELD_NUMBER: _ClassVar[int]
    node: str
    ends: _containers.RepeatedCompositeFieldContainer[StepEnded]
    def __init__(self, node: _Optional[str] = ..., ends: _Optional[_Iterable[_Union[StepEnded, _Mapping]]] = ...) -> None: ...

class LaunchRequest(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: Job
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ...) -> None: ...

class LaunchJobsRequest(_message.Message):
    __slots__ = ("launches",)
    LAUNCHES_FIELD_NUMBER: _ClassVar[int]
    launches: _containers.RepeatedCompositeFieldContainer[LaunchRequest]
    def __init__(self, launches: _Optional[_Iterable[_Union[LaunchRequest, _Mapping]]] = ...) -> None: ...

class LaunchRefusal(_message.Message):
    __slots__ = ("job_id", "error")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    error: str
    def __init__(self, job_id: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class LaunchJobsReply(_message.Message):
    __slots__ = ("refused",)
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    refused: _containers.RepeatedCompositeFieldContainer[LaunchRefusal]
    def __init__(self, refused: _Optional[_Iterable[_Union[LaunchRefusal, _Mapping]]] = ...) -> None: ...

class SignalRequest(_message.Message):
    __slots__ = ("job_id", "signal")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    signal: int
    def __init__(self, job_id: _Optional[int] = ..., signal: _Optional[int] = ...) -> None: ...

class TimeLimitRequest(_message.Message):
    __slots__ = ("job_id", "restarts", "time_limit")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    restarts: int
    time_limit: int
    def __init__(self, job_id: _Optional[int] = ..., restarts: _Optional[int] = ..., time_limit: _Optional[int] = ...) -> None: ...

class SuspendRequest(_message.Message):
    __slots__ = ("job_id", "restarts", "resume")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    restarts: int
    resume: bool
    def __init__(self, job_id: _Optional[int] = ..., restarts: _Optional[int] = ..., resume: _Optional[bool] = ...) -> None: ...

class OutputRequest(_message.Message):
    __slots__ = ("job_id", "step_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    step_id: int
    def __init__(self, job_id: _Optional[int] = ..., step_id: _Optional[int] = ...) -> None: ...

class InputChunk(_message.Message):
    __slots__ = ("job_id", "data", "step_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    data: bytes
    step_id: int
    def __init__(self, job_id: _Optional[int] = ..., data: _Optional[bytes] = ..., step_id: _Optional[int] = ...) -> None: ...

class OutputChunk(_message.Message):
    __slots__ = ("stdout", "stderr", "done", "state", "exit_code", "exit_signal", "tasks")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    done: bool
    state: JobState
    exit_code: int
    exit_signal: int
    tasks: _containers.RepeatedCompositeFieldContainer[TaskEnded]
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., done: _Optional[bool] = ..., state: _Optional[_Union[JobState, str]] = ..., exit_code: _Optional[int] = ..., exit_signal: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[TaskEnded, _Mapping]]] = ...) -> None: ...

class TaskEnded(_message.Message):
    __slots__ = ("rank", "exit_code", "signal", "node")
    RANK_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    rank: int
    exit_code: int
    signal: int
    node: str
    def __init__(self, rank: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., node: _Optional[str] = ...) -> None: ...

class TailRequest(_message.Message):
    __slots__ = ("job_id", "max_bytes")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    max_bytes: int
    def __init__(self, job_id: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class TailReply(_message.Message):
    __slots__ = ("data", "path", "truncated")
    DATA_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    path: str
    truncated: bool
    def __init__(self, data: _Optional[bytes] = ..., path: _Optional[str] = ..., truncated: _Optional[bool] = ...) -> None: ...

class JobStatsRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class TaskStats(_message.Message):
    __slots__ = ("step", "rank", "pid", "cpu_seconds", "rss_kb", "vmsize_kb", "pages", "read_bytes", "write_bytes", "pids")
    STEP_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RSS_KB_FIELD_NUMBER: _ClassVar[int]
    VMSIZE_KB_FIELD_NUMBER: _ClassVar[int]
    PAGES_FIELD_NUMBER: _ClassVar[int]
    READ_BYTES_FIELD_NUMBER: _ClassVar[int]
    WRITE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PIDS_FIELD_NUMBER: _ClassVar[int]
    step: str
    rank: int
    pid: int
    cpu_seconds: float
    rss_kb: int
    vmsize_kb: int
    pages: int
    read_bytes: int
    write_bytes: int
    pids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, step: _Optional[str] = ..., rank: _Optional[int] = ..., pid: _Optional[int] = ..., cpu_seconds: _Optional[float] = ..., rss_kb: _Optional[int] = ..., vmsize_kb: _Optional[int] = ..., pages: _Optional[int] = ..., read_bytes: _Optional[int] = ..., write_bytes: _Optional[int] = ..., pids: _Optional[_Iterable[int]] = ...) -> None: ...

class JobStatsReply(_message.Message):
    __slots__ = ("node", "tasks", "memory_kb", "cpu_seconds", "gpus")
    NODE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_KB_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GPUS_FIELD_NUMBER: _ClassVar[int]
    node: str
    tasks: _containers.RepeatedCompositeFieldContainer[TaskStats]
    memory_kb: int
    cpu_seconds: float
    gpus: _containers.RepeatedCompositeFieldContainer[GpuUse]
    def __init__(self, node: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[TaskStats, _Mapping]]] = ..., memory_kb: _Optional[int] = ..., cpu_seconds: _Optional[float] = ..., gpus: _Optional[_Iterable[_Union[GpuUse, _Mapping]]] = ...) -> None: ...
