"""The commands' one model of a job: a lazy, typed view over the API's JSON (Flux's
``flux.job.JobInfo`` is the model).

:class:`JobInfo` reads a ``job_info`` and :class:`JobDesc` a ``job_desc_msg`` (docs/api.md has the
shapes) on access, by the names of the controller's :class:`~pslurm.core.jobspec.JobRecord` and
:class:`~pslurm.core.jobspec.JobSpec`: what :class:`pslurm.client.Client` returns, what every
command formats, and how the controller reads a submitted request (``restjson.spec_from_json``), so
the shapes are read in this one place. A listing reads only the fields its columns show, and a
command's start imports neither dataclasses nor ``typing``. Standard library only (the GRES of a job
that has some are read into GresRequests).
"""

from __future__ import annotations

from pslurm.core.errors import SpecError
from pslurm.core.jobfields import FIELDS
from pslurm.core.jobids import display_id as display_id  # where the commands have found it
from pslurm.core.states import JobReason, JobState

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from typing import Any

    from pslurm.core.gres import GresRequest
    from pslurm.core.jobfields import Field


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


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


class JobDesc:
    """A ``job_desc_msg`` (a job request) with JobSpec's attributes. What pslurm keeps under the
    ``pslurm`` key wins over Slurm's fields (it is exact: seconds, the GRES as a list). The fields
    whose JSON is their value read as core/jobfields.py's rows say (:func:`_reader`, set on the
    class below); those here are read by hand."""

    __slots__ = ("data", "own")

    if TYPE_CHECKING:
        def __getattr__(self, name: str) -> Any: ...  # the table's fields (mypy: JobSpec's names, untyped)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.own: dict[str, Any] = data.get("pslurm") or {}

    def __repr__(self) -> str:
        return f"JobDesc(name={self.data.get('name')!r})"

    @property
    def uid(self) -> int:
        return int(self.data.get("user_id", 0))

    @property
    def gid(self) -> int:
        return int(self.data.get("group_id", 0))

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(str(a) for a in self.data.get("argv") or ())

    @property
    def partition(self) -> str | None:
        return opt_str(self.data.get("partition")) or None

    @property
    def max_nodes(self) -> int:
        """-N MIN-MAX's MAX: pslurm's own key, else ``maximum_nodes`` when above the minimum; 0: MIN."""
        if "max_nodes" in self.own:
            return int(self.own["max_nodes"] or 0)
        high = int(from_no_val(self.data.get("maximum_nodes")) or 0)
        return high if high > self.num_nodes else 0

    @property
    def mem_mb(self) -> int:
        return int(from_no_val(self.data.get("memory_per_node")) or 0)

    @property
    def nodelist(self) -> str:
        return ",".join(map(str, self.data.get("required_nodes") or ()))

    @property
    def exclude(self) -> str:
        return ",".join(map(str, self.data.get("excluded_nodes") or ()))

    @property
    def open_mode(self) -> str:
        """``append``, ``truncate`` or "" (not asked: truncate, JobFileAppend=0); pslurm's own key."""
        mode = self.own.get("open_mode") or ""
        if mode not in ("", "append", "truncate"):
            raise SpecError(f"Invalid job request: open_mode {mode!r}")
        return str(mode)

    @property
    def submit_sid(self) -> int:
        """The submitting shell's session id (a pid: Slurm's alloc_sid is 32 bits)."""
        sid = int(self.own.get("submit_sid") or 0)
        if not 0 <= sid < 2**32:
            raise ValueError("submit_sid is not a session id (0 to 4294967295)")
        return sid

    @property
    def mem_per_cpu_mb(self) -> int:
        """--mem-per-cpu in MB (slurmrestd's ``memory_per_cpu``); 0: not asked."""
        return int(from_no_val(self.data.get("memory_per_cpu")) or 0)

    @property
    def warn_time(self) -> int:
        return int(from_no_val(self.data.get("kill_warning_delay")) or 0)

    @property
    def warn_batch(self) -> bool:
        return "BATCH_JOB" in (self.data.get("kill_warning_flags") or ())

    @property
    def warn_reservation(self) -> bool:
        return "RESERVATION_JOB" in (self.data.get("kill_warning_flags") or ())

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
        from pslurm.core.signals import signal_number

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
        return max(self.ntasks * self.cpus_per_task, self.cpus_per_gpu * self.gpus())

    def gpus(self, type_: str | None = None) -> int:
        """GPUs asked per node, of one type when ``type_`` is given (as JobSpec.gpus)."""
        return sum(g.count for g in self.gres if g.name == "gpu" and (type_ is None or g.type == type_))


def _reader(f: Field) -> property:
    """The property of JobDesc that reads field ``f`` (its JSON the value as it is): the row's type, its
    default when absent (or "", 0, unset), a ``*_no_val`` number's number."""
    key, own, kind, default = f.key, f.own, f.type, f.default
    if default is None:
        def get(self: JobDesc) -> Any:
            value = (self.own if own else self.data).get(key)
            return None if value is None else kind(value)
    else:
        def get(self: JobDesc) -> Any:
            value = from_no_val((self.own if own else self.data).get(key))
            return kind(value) if value else default
    return property(get, doc=f"{f.name}: ``{f.json}``")


for _field in FIELDS:
    if not _field.json_by_hand and _field.name not in vars(JobDesc):
        setattr(JobDesc, _field.name, _reader(_field))


class JobInfo:
    """A ``job_info`` (a job as the controller knows it) with JobRecord's attributes; ``spec`` is
    its request as a :class:`JobDesc`."""

    __slots__ = ("data", "own", "_spec")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.own: dict[str, Any] = data["pslurm"]
        self._spec: JobDesc | None = None

    def __repr__(self) -> str:
        return f"JobInfo({self.display_id}, {self.state.value})"

    @property
    def spec(self) -> JobDesc:
        if self._spec is None:  # made once: a listing's columns ask for it several times a row
            self._spec = JobDesc(self.own["job"])
        return self._spec

    @property
    def job_id(self) -> int:
        return int(self.data["job_id"])

    @property
    def display_id(self) -> str:
        """``A_i`` for an array task, the job id otherwise (as JobRecord.display_id)."""
        return display_id(self.job_id, self.array_job_id, self.array_task_id)

    @property
    def state(self) -> JobState:
        return JobState(self.data["job_state"][0])

    @property
    def reason(self) -> JobReason:
        return JobReason(self.data.get("state_reason") or "None")

    @property
    def state_desc(self) -> str:
        """The reason in words where slurmctld gives one (its state_desc); "" none."""
        return str(self.data.get("state_description") or "")

    @property
    def reason_prev(self) -> JobReason:
        """The last reason it waited for but None, Priority and Resources (sacct's Reason); pslurm's own key."""
        return JobReason.parse(self.own.get("reason_prev"))

    @property
    def submit_time(self) -> float:
        return float(from_no_val(self.data["submit_time"]) or 0.0)

    @property
    def start_time(self) -> float | None:
        return _float(from_no_val(self.data.get("start_time")))

    @property
    def end_time(self) -> float | None:
        return _float(from_no_val(self.data.get("end_time")))

    @property
    def eligible_time(self) -> float | None:
        return _float(from_no_val(self.data.get("eligible_time")))

    @property
    def suspend_time(self) -> float | None:
        """Its last scontrol suspend or resume; None: never."""
        return _float(from_no_val(self.data.get("suspend_time")))

    @property
    def suspended_seconds(self) -> float:
        """Its run's time suspended before its last resume (its limit's end moves later by it)."""
        return float(self.own.get("suspended_seconds") or 0.0)

    @property
    def node(self) -> str | None:
        """The first node of its allocation (the batch host); None before it started."""
        return self.data.get("batch_host", self.data.get("nodes")) or None

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(self.own.get("nodes") or ())

    @property
    def all_nodes(self) -> tuple[str, ...]:
        """The allocation's nodes: ``nodes``, or ``(node,)`` for a record that has only that."""
        return self.nodes or ((self.node,) if self.node else ())

    @property
    def node_gpus(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(g) for g in self.own.get("node_gpus") or ())

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return tuple(self.own.get("gpu_indices") or ())

    @property
    def exit_code(self) -> int:
        return int(from_no_val((self.data.get("exit_code") or {}).get("return_code")) or 0)

    @property
    def exit_signal(self) -> int:
        return int(from_no_val(((self.data.get("exit_code") or {}).get("signal") or {}).get("id")) or 0)

    @property
    def partition(self) -> str:
        return str(self.data.get("partition") or "")

    @property
    def time_limit(self) -> int | None:
        """Seconds in force; None is unlimited."""
        return _int(self.own.get("time_limit"))

    @property
    def array_job_id(self) -> int | None:
        return _int(from_no_val(self.data.get("array_job_id")))

    @property
    def array_task_id(self) -> int | None:
        return _int(from_no_val(self.data.get("array_task_id")))

    @property
    def priority(self) -> int:
        return int(from_no_val(self.data.get("priority")) or 0)

    @property
    def hold(self) -> str:
        """"", ``user`` or ``admin``."""
        return str(self.own.get("hold") or "")

    @property
    def restarts(self) -> int:
        return int(self.data.get("restart_cnt") or 0)

    @property
    def start_estimate(self) -> float | None:
        return _float(self.own.get("start_estimate"))

    @property
    def gpu_seconds(self) -> float | None:
        return _float(self.own.get("gpu_seconds"))

    @property
    def peak_gpu_memory_mb(self) -> int | None:
        return _int(self.own.get("peak_gpu_memory_mb"))

    @property
    def mean_gpu_util(self) -> float | None:
        return _float(self.own.get("mean_gpu_util"))

    @property
    def max_rss_kb(self) -> int | None:
        return _int(self.own.get("max_rss_kb"))

    @property
    def total_cpu_seconds(self) -> float | None:
        """Its cgroup's CPU time, user and system (sacct's TotalCPU); None: not measured."""
        return _float(self.own.get("total_cpu_seconds"))

    @property
    def user_cpu_seconds(self) -> float | None:
        """Of which in user mode (UserCPU)."""
        return _float(self.own.get("user_cpu_seconds"))

    @property
    def system_cpu_seconds(self) -> float | None:
        """And in system mode (SystemCPU)."""
        return _float(self.own.get("system_cpu_seconds"))

    @property
    def system_comment(self) -> str:
        return str(self.data.get("system_comment") or "")

    @property
    def assoc_id(self) -> int:
        return int(self.data.get("association_id") or 0)

    @property
    def requeue(self) -> bool:
        return bool(self.data.get("requeue"))

    @property
    def collapsed_tasks(self) -> str:
        """In a collapsed listing: the pending tasks this record stands for (``0-999``)."""
        return str(self.own.get("collapsed_tasks") or "")

    @property
    def steps(self) -> tuple[dict[str, Any], ...]:
        """The job's steps (``GET .../jobs?steps=1``: docs/api.md's step objects), () when not asked."""
        return tuple(self.own.get("steps") or ())


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
