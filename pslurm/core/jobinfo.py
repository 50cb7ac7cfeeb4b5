"""The API's job JSON read as it is: a ``job_desc_msg`` and a ``job_info`` with the attributes of a
:class:`~pslurm.core.jobspec.JobSpec` and a :class:`~pslurm.core.jobspec.JobRecord`, by the same names.

The one place these shapes are read (:mod:`pslurm.core.restjson` builds the dataclasses from these
views; docs/api.md has the shapes). The commands format from the views themselves: a listing reads
only the fields its columns show, and a command's start imports neither the dataclasses nor
``typing``. Standard library only (the GRES of a job that has some are read into GresRequests).
"""

from __future__ import annotations

from pslurm.core.errors import SpecError
from pslurm.core.states import JobReason, JobState

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from typing import Any

    from pslurm.core.gres import GresRequest

# The JobSpec fields a JobDesc reads, and the JobRecord fields a JobInfo reads (besides ``spec``);
# tests/unit/test_restjson.py checks them against the dataclasses.
SPEC_FIELDS = (
    "name", "user", "uid", "gid", "workdir", "script", "argv", "environment", "partition", "stdout", "stderr",
    "time_limit", "num_nodes", "ntasks", "cpus_per_task", "mem_mb", "gres", "interactive", "account", "nice",
    "dependency", "requeue", "hold", "array", "kill_on_invalid_dep", "nodelist", "exclude", "open_mode",
    "gpu_mem", "allocation", "begin_time", "deadline", "comment", "qos", "warn_signal", "warn_time", "warn_batch",
    "warn_reservation", "max_nodes", "ntasks_per_node", "constraint", "exclusive",
)
RECORD_FIELDS = (
    "job_id", "state", "reason", "submit_time", "start_time", "end_time", "node", "gpu_indices", "exit_code",
    "exit_signal", "partition", "time_limit", "gpu_seconds", "peak_gpu_memory_mb", "mean_gpu_util", "array_job_id",
    "array_task_id", "priority", "hold", "restarts", "start_estimate", "eligible_time", "requeue",
    "collapsed_tasks", "system_comment", "nodes", "node_gpus", "max_rss_kb",
)


def from_no_val(data: Any) -> Any:
    """The number of a ``*_no_val`` struct (a bare number is taken too), None when unset."""
    if isinstance(data, dict):
        return data.get("number") if data.get("set", True) and not data.get("infinite") else None
    return data


def opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def gres_from(items: Any) -> tuple[GresRequest, ...]:
    """GresRequests of pslurm's ``[[name, type, count], ...]``."""
    if not items:
        return ()
    from pslurm.core.gres import GresRequest

    return tuple(GresRequest(str(n), t or None, int(c)) for n, t, c in items)


def tres_from(text: str) -> tuple[GresRequest, ...]:
    """GresRequests of Slurm's ``tres_per_node`` (``gres/gpu:2``)."""
    if not text:
        return ()
    from pslurm.core.gres import parse_gres

    return parse_gres(text)


class JobDesc:
    """A ``job_desc_msg`` (a job request) with JobSpec's attributes. What pslurm keeps under the
    ``pslurm`` key wins over Slurm's fields (it is exact: seconds, the GRES as a list)."""

    __slots__ = ("data", "own")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.own: dict[str, Any] = data.get("pslurm") or {}

    name = property(lambda self: str(self.data.get("name") or ""))
    user = property(lambda self: str(self.own.get("user_name") or ""))
    uid = property(lambda self: int(self.data.get("user_id", 0)))
    gid = property(lambda self: int(self.data.get("group_id", 0)))
    workdir = property(lambda self: str(self.data.get("current_working_directory") or ""))
    script = property(lambda self: opt_str(self.data.get("script")))
    argv = property(lambda self: tuple(str(a) for a in self.data.get("argv") or ()))
    partition = property(lambda self: opt_str(self.data.get("partition")) or None)
    stdout = property(lambda self: opt_str(self.data.get("standard_output")))
    stderr = property(lambda self: opt_str(self.data.get("standard_error")))
    num_nodes = property(lambda self: int(self.data.get("minimum_nodes") or 1))
    ntasks = property(lambda self: int(self.data.get("tasks") or 1))
    ntasks_per_node = property(lambda self: int(from_no_val(self.data.get("tasks_per_node")) or 0))

    @property
    def max_nodes(self) -> int:
        """-N MIN-MAX's MAX: pslurm's own key, else ``maximum_nodes`` when above the minimum; 0: MIN."""
        if "max_nodes" in self.own:
            return int(self.own["max_nodes"] or 0)
        high = int(from_no_val(self.data.get("maximum_nodes")) or 0)
        return high if high > self.num_nodes else 0
    cpus_per_task = property(lambda self: int(self.data.get("cpus_per_task") or 1))
    mem_mb = property(lambda self: int(from_no_val(self.data.get("memory_per_node")) or 0))
    interactive = property(lambda self: bool(self.own.get("interactive", False)))
    account = property(lambda self: str(self.data.get("account") or ""))
    nice = property(lambda self: int(self.data.get("nice") or 0))
    dependency = property(lambda self: str(self.data.get("dependency") or ""))
    requeue = property(lambda self: None if self.data.get("requeue") is None else bool(self.data["requeue"]))
    hold = property(lambda self: bool(self.data.get("hold")))
    array = property(lambda self: str(self.data.get("array") or ""))
    kill_on_invalid_dep = property(lambda self: bool(self.data.get("kill_on_invalid_dependency")))
    nodelist = property(lambda self: ",".join(map(str, self.data.get("required_nodes") or ())))
    exclude = property(lambda self: ",".join(map(str, self.data.get("excluded_nodes") or ())))
    constraint = property(lambda self: str(self.data.get("constraints") or ""))  # slurmrestd's name
    exclusive = property(lambda self: bool(self.own.get("exclusive", False)))

    @property
    def open_mode(self) -> str:
        """``append``, ``truncate`` or "" (not asked: truncate, JobFileAppend=0); pslurm's own key."""
        mode = self.own.get("open_mode") or ""
        if mode not in ("", "append", "truncate"):
            raise SpecError(f"Invalid job request: open_mode {mode!r}")
        return str(mode)

    gpu_mem = property(lambda self: str(self.own.get("gpu_mem") or ""))  # --gpu-mem as given; pslurm's own key
    allocation = property(lambda self: bool(self.own.get("allocation")))  # psalloc's job; pslurm's own key
    comment = property(lambda self: str(self.data.get("comment") or ""))
    qos = property(lambda self: str(self.data.get("qos") or ""))
    warn_time = property(lambda self: int(from_no_val(self.data.get("kill_warning_delay")) or 0))
    warn_batch = property(lambda self: "BATCH_JOB" in (self.data.get("kill_warning_flags") or ()))
    warn_reservation = property(lambda self: "RESERVATION_JOB" in (self.data.get("kill_warning_flags") or ()))

    @property
    def begin_time(self) -> float | None:
        """``begin_time`` (Slurm's ``*_no_val`` number, epoch seconds); None when not given."""
        value = from_no_val(self.data.get("begin_time"))
        return None if not value else float(value)

    @property
    def deadline(self) -> float | None:
        """``deadline`` (epoch seconds; 0 or absent: none, as Slurm's)."""
        value = from_no_val(self.data.get("deadline"))
        return None if not value else float(value)

    @property
    def warn_signal(self) -> int:
        """``kill_warning_signal``: a signal name as slurmrestd writes it (``USR1``), or its number; 0: none."""
        value = self.data.get("kill_warning_signal")
        if value is None or value == "":
            return 0
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        from pslurm.core.jobdesc import signal_number

        number = signal_number(str(value))
        if not number:
            raise SpecError(f"Invalid job request: kill_warning_signal {value!r}")
        return number

    @property
    def environment(self) -> dict[str, str]:
        environment = {}
        for item in self.data.get("environment") or ():
            key, sep, value = str(item).partition("=")
            if not sep:
                raise SpecError(f"Invalid job request: environment entry without '=': {key}")
            environment[key] = value
        return environment

    @property
    def time_limit(self) -> int | None:
        minutes = from_no_val(self.data.get("time_limit"))
        seconds = self.own.get("time_limit", None if minutes is None else int(minutes) * 60)
        return None if seconds is None else int(seconds)

    @property
    def gres(self) -> tuple[GresRequest, ...]:
        own = self.own
        return gres_from(own["gres"]) if "gres" in own else tres_from(str(self.data.get("tres_per_node") or ""))

    @property
    def cpus(self) -> int:
        """CPUs needed on the node (as JobSpec.cpus)."""
        return self.ntasks * self.cpus_per_task

    def gpus(self, type_: str | None = None) -> int:
        """GPUs asked per node, of one type when ``type_`` is given (as JobSpec.gpus)."""
        return sum(g.count for g in self.gres if g.name == "gpu" and (type_ is None or g.type == type_))


class JobInfo:
    """A ``job_info`` (a job as the controller knows it) with JobRecord's attributes; ``spec`` is
    its request as a :class:`JobDesc`."""

    __slots__ = ("data", "own", "_spec")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.own: dict[str, Any] = data["pslurm"]
        self._spec: JobDesc | None = None

    job_id = property(lambda self: int(self.data["job_id"]))
    state = property(lambda self: JobState(self.data["job_state"][0]))
    reason = property(lambda self: JobReason(self.data.get("state_reason") or "None"))
    submit_time = property(lambda self: from_no_val(self.data["submit_time"]) or 0.0)
    start_time = property(lambda self: from_no_val(self.data.get("start_time")))
    end_time = property(lambda self: from_no_val(self.data.get("end_time")))
    eligible_time = property(lambda self: from_no_val(self.data.get("eligible_time")))
    node = property(lambda self: self.data.get("batch_host", self.data.get("nodes")) or None)
    nodes = property(lambda self: tuple(self.own.get("nodes") or ()))
    node_gpus = property(lambda self: tuple(tuple(g) for g in self.own.get("node_gpus") or ()))
    gpu_indices = property(lambda self: tuple(self.own.get("gpu_indices") or ()))
    exit_code = property(lambda self: from_no_val((self.data.get("exit_code") or {}).get("return_code")) or 0)
    exit_signal = property(
        lambda self: from_no_val(((self.data.get("exit_code") or {}).get("signal") or {}).get("id")) or 0)
    partition = property(lambda self: self.data.get("partition") or "")
    time_limit = property(lambda self: self.own.get("time_limit"))
    array_job_id = property(lambda self: from_no_val(self.data.get("array_job_id")))
    array_task_id = property(lambda self: from_no_val(self.data.get("array_task_id")))
    priority = property(lambda self: from_no_val(self.data.get("priority")) or 0)
    hold = property(lambda self: self.own.get("hold") or "")
    restarts = property(lambda self: int(self.data.get("restart_cnt") or 0))
    start_estimate = property(lambda self: self.own.get("start_estimate"))
    gpu_seconds = property(lambda self: self.own.get("gpu_seconds"))
    peak_gpu_memory_mb = property(lambda self: self.own.get("peak_gpu_memory_mb"))
    mean_gpu_util = property(lambda self: self.own.get("mean_gpu_util"))
    max_rss_kb = property(lambda self: self.own.get("max_rss_kb"))
    system_comment = property(lambda self: self.data.get("system_comment") or "")
    requeue = property(lambda self: bool(self.data.get("requeue")))
    collapsed_tasks = property(lambda self: self.own.get("collapsed_tasks") or "")

    @property
    def spec(self) -> JobDesc:
        if self._spec is None:  # made once: a listing's columns ask for it several times a row
            self._spec = JobDesc(self.own["job"])
        return self._spec

    @property
    def display_id(self) -> str:
        """``A_i`` for an array task, the job id otherwise (as JobRecord.display_id)."""
        return display_id(self.job_id, self.array_job_id, self.array_task_id)


def share_specs(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A brief listing's records made whole: each record that names a shared request by its
    ``pslurm.spec_ref`` gets it as ``pslurm.job`` (one dict, shared by them all). In place; returns
    ``jobs``."""
    shared: dict[Any, dict[str, Any]] = {}
    for data in jobs:
        own = data.get("pslurm")
        if own is None:
            continue
        ref = own.get("spec_ref")
        if ref is None:
            continue
        spec = own.get("job")
        if spec is None:
            own["job"] = shared[ref]
        else:
            shared[ref] = spec
    return jobs


def display_id(job_id: int, array_job_id: int | None = None, array_task_id: int | None = None) -> str:
    """How Slurm names a job: ``A_i`` for task i of array A, the job id otherwise. The one place
    this is computed (records, listings, priorities)."""
    return str(job_id) if array_job_id is None else f"{array_job_id}_{array_task_id}"
