"""``scontrol update JobId=ID KEY=VALUE...``: the words, as scontrol reads them, and the changes they ask.

The words become a plain mapping of changes (the user API's fields, JSON-ready):

    priority (int)      Priority=N            operators only
    nice (int)          Nice[=N]              negative: operators only; ``Nice`` alone is 100
    time_limit (str)    TimeLimit=[+|-]TIME   scontrol's formats; ``+30``, ``-5``, ``TimeLimit+=30``
                                              change the limit in force by that much
    partition (str)     Partition=NAME        pending jobs only
    name (str)          JobName=|Name=TEXT
    account (str)       Account=NAME          pending jobs only; "" is the user's default account
    comment (str)       Comment=TEXT          only where the job request has a comment field
    num_tasks (int)     NumTasks=N            pending jobs only
    min_memory_node (int) MinMemoryNode=MB    pending jobs only; K/M/G/T allowed (clears MinMemoryCPU)
    min_memory_cpu (int) MinMemoryCPU=MB      pending jobs only (clears MinMemoryNode, as Slurm's)
    cpus_per_task (int) CPUsPerTask=N         pending jobs only
    num_nodes (str)     NumNodes=N[-M]        pending jobs only (a running job's: Slurm's resize, refused)
    req_nodes (str)     ReqNodeList=|NodeList=HOSTLIST   pending jobs only; "" clears it
    exc_nodes (str)     ExcNodeList=HOSTLIST  pending jobs only
    features (str)      Features=CONSTRAINT   pending jobs only
    gres (str)          Gres=|TresPerNode=LIST pending jobs only (--gres's syntax)
    dependency (str)    Dependency=LIST       pending jobs only, checked as at submit
    qos (str)           QOS=NAME              pending jobs only ("normal": pslurm's one QOS)
    begin_time (float)  StartTime=|EligibleTime=TIME  pending jobs only; scontrol's parse_time, a past
                                              time is now
    deadline (float)    Deadline=TIME         pending jobs only
    workdir, stdout, stderr (str)  WorkDir=, StdOut=, StdErr=PATH  pending jobs only
    requeue (int)       Requeue=0|1           any job not ended
    (the table's ``update`` rows, str)  MailType=, MailUser=  any job not ended (kept and shown;
                                              pslurm sends no mail, as Slurm without a MailProg)
    throttle (int)      ArrayTaskThrottle=N   an array's tasks (0: none)

Keys are scontrol's, case-insensitive, and may be cut short as scontrol allows (``TimeL=``,
``Part=``). The controller reads the same mapping (:func:`checked_changes`) at its trust boundary
and works out a relative time limit against the limit in force (:func:`new_time_limit`).

The rules of an update are here too (:func:`update_values`: who may change what of which job, in
slurmctld's order of checks, and what it writes), pure: the job service reads the job, calls them
and writes what they return. The words need the standard library only (pscontrol imports this
module on its path); the rules import the domain when the controller calls them.
"""

from __future__ import annotations

from pslurm.core.jobfields import FIELDS as JOB_FIELDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from pslurm.core.config import ClusterConfig, PartitionConfig
    from pslurm.core.jobspec import JobRecord, JobSpec

    AccountOf = Callable[[str, str, str], str]  # (user, -A asked, partition) -> the account charged

NICE_LIMIT = 2147483645  # NICE_OFFSET - 3: scontrol's bound on |Nice|
INT32_MAX = 2**31 - 1

# scontrol's keys that pslurm takes, in the order scontrol tries them, with the fewest letters each
# may be cut to (update_job.c: xstrncasecmp(tag, KEY, MAX(taglen, N))) and the change it sets.
_KEYS = (
    ("JobId", 3, "job"),
    ("ArrayTaskThrottle", 10, "throttle"),
    ("Comment", 3, "comment"),
    ("TimeLimit", 5, "time_limit"),
    ("Priority", 2, "priority"),
    ("Nice", 2, "nice"),
    ("CPUsPerTask", 6, "cpus_per_task"),
    ("NumTasks", 8, "num_tasks"),
    ("ReqProcs", 8, "num_tasks"),
    ("Requeue", 4, "requeue"),
    ("ReqNodes", 8, "num_nodes"),
    ("NumNodes", 8, "num_nodes"),
    ("MinMemoryNode", 10, "min_memory_node"),
    ("MinMemoryCPU", 10, "min_memory_cpu"),
    ("Partition", 2, "partition"),
    ("QOS", 2, "qos"),
    ("Name", 2, "name"),
    ("JobName", 4, "name"),
    ("StdOut", 6, "stdout"),
    ("StdErr", 6, "stderr"),
    ("ExcNodeList", 3, "exc_nodes"),
    ("NodeList", 8, "req_nodes"),
    ("ReqNodeList", 8, "req_nodes"),
    ("Features", 1, "features"),
    ("Gres", 2, "gres"),
    ("TresPerNode", 4, "gres"),
    ("Account", 1, "account"),
    ("Dependency", 1, "dependency"),
    ("EligibleTime", 2, "begin_time"),
    ("StartTime", 2, "begin_time"),
    ("Deadline", 3, "deadline"),
    # the request's text fields any job not ended may change as they are (kept and shown): the table's
    *((f.update, f.update_len, f.name) for f in JOB_FIELDS if f.update),
    ("WorkDir", 2, "workdir"),
)
_KEPT = frozenset(f.name for f in JOB_FIELDS if f.update)
# the changes that name a field of the job's request (JobSpec) as they are: text, checked by admission
REQUEST_TEXT = {"req_nodes": "nodelist", "exc_nodes": "exclude", "features": "constraint", "dependency": "dependency",
                "qos": "qos", "workdir": "workdir", "stdout": "stdout", "stderr": "stderr",
                **{name: name for name in _KEPT}}
_INTEGERS = {"priority": 0xFFFFFFFF, "num_tasks": INT32_MAX, "min_memory_node": 2**53, "min_memory_cpu": 2**53,
             "cpus_per_task": 0xFFFF, "requeue": 0xFFFF, "throttle": INT32_MAX}
_TIMES = frozenset({"begin_time", "deadline"})
FIELDS = frozenset({"nice", "time_limit", "partition", "name", "account", "comment", "num_nodes", "gres",
                    *REQUEST_TEXT, *_INTEGERS, *_TIMES})
PENDING_ONLY = frozenset({"partition", "account", "num_tasks", "min_memory_node", "priority", "nice",
                          "min_memory_cpu", "cpus_per_task", "num_nodes", "gres", "begin_time", "deadline",
                          *REQUEST_TEXT} - _KEPT)
# the changes after which a pending job is admitted again (where it may run, what it needs)
READMIT = frozenset({"partition", "num_tasks", "min_memory_node", "min_memory_cpu", "cpus_per_task", "num_nodes",
                     "req_nodes", "exc_nodes", "features", "gres", "qos", "begin_time", "deadline"})
_INFINITE = frozenset({"INFINITE", "UNLIMITED", "-1"})

# slurm_strerror's words for what scontrol update is refused with (slurm_errno.c)
INVALID_JOB_ID = "Invalid job id specified"  # ESLURM_INVALID_JOB_ID
INVALID_USER = "Invalid user id"  # ESLURM_USER_ID_MISSING: another user's job
JOB_FINISHED = "Job has already finished"  # ESLURM_JOB_FINISHED
NOT_PENDING = "Job is no longer pending execution"  # ESLURM_JOB_NOT_PENDING
NOT_SUPPORTED = "Requested operation not supported on this system"  # ESLURM_NOT_SUPPORTED: a running job's resize
ACCESS_DENIED = "Access/permission denied"  # ESLURM_ACCESS_DENIED: a user raising a limit, setting a priority


class UpdateError(Exception):
    """Words scontrol would refuse before asking the controller. ``lines``: what it prints;
    ``prefixed``: an ``error()`` line (``pscontrol: error: ...``) rather than a bare one."""

    def __init__(self, *lines: str, prefixed: bool = True) -> None:
        super().__init__(lines[0])
        self.lines, self.prefixed = lines, prefixed


def _key(tag: str) -> str | None:
    """The change a tag names (a prefix of a key, at least that key's fewest letters), or None."""
    low = tag.lower()
    for key, fewest, change in _KEYS:
        if len(low) >= fewest and key.lower().startswith(low):
            return change
    return None


def parse_job_update(words: Sequence[str]) -> tuple[str, dict[str, object]]:
    """The job id text and the changes of ``update JobId=ID KEY=VALUE...`` (``KEY VALUE`` too, as
    scontrol takes it). Raises UpdateError with scontrol's words."""
    job = ""
    changes: dict[str, object] = {}
    i = 0
    while i < len(words):
        word = words[i]
        tag, eq, value = word.partition("=")
        add = ""
        if eq and tag[-1:] in ("+", "-"):  # TimeLimit+=30
            tag, add = tag[:-1], tag[-1]
        if not eq:
            if _key(word) == "nice":  # a bare Nice: 100
                changes["nice"] = 100
                i += 1
                continue
            if i + 1 >= len(words):
                raise UpdateError(f"Invalid input: {word}", "Request aborted", prefixed=False)
            value = words[i + 1]
            i += 1
        i += 1
        change = _key(tag) if tag else None
        if change is None:
            raise UpdateError(f"Update of this parameter is not supported: {word}", "Request aborted", prefixed=False)
        if change == "time_limit":
            if value[:1] in ("+", "-"):
                if add:
                    raise UpdateError("Invalid syntax, variations of +=- are not accepted.")
                add, value = value[0], value[1:]
            if time_limit_change(add + value) is None:
                raise UpdateError("Invalid TimeLimit value")
            changes[change] = add + value
            continue
        if add:
            raise UpdateError(f"Option {word} does not accept [+|-]= syntax")
        if change == "job":
            job = value
        elif change == "priority":
            if not value.isdigit() or int(value) > 0xFFFFFFFF:
                raise UpdateError(f"Invalid Priority value: {value}")
            changes[change] = int(value)
        elif change == "nice":
            nice = _integer(value)
            if nice is None:
                raise UpdateError(f"Invalid Nice value: {value}")
            if abs(nice) > NICE_LIMIT:
                raise UpdateError(f"Nice value out of range (+/- {NICE_LIMIT}). Value ignored")
            changes[change] = nice
        elif change in ("min_memory_node", "min_memory_cpu"):
            mb = memory_mb(value)
            if mb is None:
                raise UpdateError(f"Invalid {_name(change)} value: {value}")
            changes[change] = mb
        elif change in _INTEGERS:
            if not value.isdigit() or int(value) > _INTEGERS[change]:
                raise UpdateError(f"Invalid {_name(change)} value" + ("" if change == "throttle" else f": {value}"))
            changes[change] = int(value)
        elif change in _TIMES:
            changes[change] = _time(value, change == "begin_time")
        elif change == "mail_type":
            from pslurm.core.errors import SpecError
            from pslurm.core.jobdesc import mail_type_text

            try:
                changes[change] = mail_type_text(value)
            except SpecError:
                raise UpdateError(f"Invalid MailType value: {value}") from None
        else:
            changes[change] = value
    if not changes:
        raise UpdateError("No changes specified", prefixed=False)
    if not job:
        raise UpdateError("No job ID specified")
    return job, changes


def _name(change: str) -> str:
    """The scontrol key a change is named by in its messages (the first of _KEYS that sets it)."""
    return next(key for key, _, name in _KEYS if name == change)


def _time(text: str, not_before_now: bool) -> float:
    """StartTime= / Deadline=: scontrol's parse_time, here (a past start time is now, as scontrol's)."""
    import time

    from pslurm.core.timefmt import TimeFormatError, parse_time

    now = time.time()
    try:
        when = parse_time(text, now)
    except TimeFormatError as exc:
        raise UpdateError(str(exc)) from None
    return max(when, float(int(now))) if not_before_now else when


def _integer(text: str) -> int | None:
    body = text[1:] if text[:1] in ("+", "-") else text
    return int(text) if body.isdigit() else None


def memory_mb(text: str) -> int | None:
    """MinMemoryNode=: MB, or with K/M/G/T as ``--mem`` takes it; None when malformed."""
    s = text.strip().upper().removesuffix("B")
    unit = s[-1:] if s[-1:] in ("K", "M", "G", "T") else ""
    digits = s[:-1] if unit else s
    if not digits.isdigit():
        return None
    mb = int(digits) * {"K": 1, "": 1024, "M": 1024, "G": 1024**2, "T": 1024**3}[unit] // 1024
    return mb if mb <= 2**53 else None


def time_limit_change(text: str) -> tuple[str, int | None] | None:
    """``TimeLimit=`` as (operation, seconds): ``("=", N)``, ``("=", None)`` for no limit
    (``UNLIMITED``, ``INFINITE``, ``0``, as ``-t``), ``("+", N)`` or ``("-", N)`` for a change of the
    limit in force; None when malformed."""
    from pslurm.core.timefmt import parse_time_limit

    op = text[:1] if text[:1] in ("+", "-") else "="
    body = text[1:] if op != "=" else text
    if op != "=" and body.strip().upper() in _INFINITE:
        return None
    try:
        seconds = parse_time_limit(body)
    except ValueError:
        return None
    if op != "=" and seconds is None:
        seconds = 0  # +0: no change
    if seconds is not None and seconds > INT32_MAX:
        return None
    return op, seconds


def new_time_limit(text: str, current: int | None) -> int | None:
    """The limit ``TimeLimit=text`` asks of a job whose limit in force is ``current`` (None: none).
    Raises ValueError with scontrol's words."""
    from pslurm.core.timefmt import format_duration

    change = time_limit_change(text)
    if change is None:
        raise ValueError("Invalid TimeLimit value")
    op, seconds = change
    if op == "=":
        return seconds
    assert seconds is not None
    if current is None:
        raise ValueError("Cannot increment/decrement TimeLimit when set to UNLIMITED.")
    if op == "+":
        return min(current + seconds, INT32_MAX)
    if seconds > current:
        raise ValueError(f"TimeLimit decrement larger than current time limit ({format_duration(seconds)} > "
                         f"{format_duration(current)})")
    return current - seconds


def checked_changes(data: Mapping[str, object]) -> dict[str, object]:
    """The changes of a request (the user API's ``changes`` object), their types checked: what a raw
    client could send the commands never would. Raises ValueError with one line."""
    out: dict[str, object] = {}
    for key, value in data.items():
        if value is None:
            continue
        if key not in FIELDS:
            raise ValueError(f"Update of this parameter is not supported: {key}")
        if key == "nice" or key in _INTEGERS:
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"Invalid request: {key} is an integer")
            if key == "nice" and abs(value) > NICE_LIMIT:
                raise ValueError(f"Nice value out of range (+/- {NICE_LIMIT}). Value ignored")
            if key != "nice" and not 0 <= value <= _INTEGERS[key]:
                raise ValueError(f"Invalid {_name(key)} value: {value}")
        elif key in _TIMES:
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 2**53:
                raise ValueError(f"Invalid request: {key} is a time (epoch seconds)")
            value = float(value)
        elif key == "time_limit":
            if isinstance(value, int) and not isinstance(value, bool):  # seconds, from a program
                value = str(value // 60) + (f":{value % 60:02d}" if value % 60 else "") if value > 0 else "UNLIMITED"
            if not isinstance(value, str) or time_limit_change(value) is None:
                raise ValueError("Invalid TimeLimit value")
        elif not isinstance(value, str):
            raise ValueError(f"Invalid request: {key} is a string")
        elif "\x00" in value or "\n" in value or "\r" in value:
            raise ValueError(f"Invalid request: {key} contains a NUL byte or a line break")
        out[key] = value
    return out


# -- the rules (the controller's side) ------------------------------------------------------------


def update_values(job: JobRecord, changes: Mapping[str, Any], uid: int, admin: bool, config: ClusterConfig,
                  readmit: Callable[[JobSpec], int | None], account_of: AccountOf | None = None
                  ) -> tuple[dict[str, Any], dict[str, Any], str]:
    """What ``changes`` (:func:`checked_changes`' mapping) asked by ``uid`` (an operator: ``admin``)
    write to ``job``: its own values (partition, time limit in force, priority), its request's fields
    (JobSpec's names and values), and the event's detail, in slurmctld's order of checks (_update_job).
    Values already in force are left out. SpecError with scontrol's words for the first refusal.
    ``readmit``: admission of the job's request again, asked when what decides where a pending job
    may run changes (partition, task count, memory); the time limit in force.
    ``account_of(user, asked, partition)``: the account a job charges (the associations'
    ``job_account``; None: pslurm.conf's)."""
    from dataclasses import replace

    from pslurm.core.errors import SpecError
    from pslurm.core.states import JobState
    from pslurm.core.textlimits import job_text_limits, text_problem

    if not admin and uid != job.spec.uid:
        raise SpecError(INVALID_USER)  # ESLURM_USER_ID_MISSING: scontrol's answer to another user's job
    if job.state.is_final or job.state is JobState.COMPLETING:
        raise SpecError(JOB_FINISHED)
    if account_of is None:
        from pslurm.core.assoc import config_associations

        account_of = config_associations(config).job_account
    new = _checked_values(job, changes, admin, config, account_of)
    spec = job.spec
    new["spec"] = replace(spec, partition=new["partition"], ntasks=new["ntasks"], mem_mb=new["mem_mb"],
                          time_limit=new["asked"], **new["request"])
    problem = text_problem(replace(new["spec"], name=new["name"], comment=str(new["comment"] or ""),
                                   account=new["account"] or ""), job_text_limits(config.extra))
    if problem is not None:  # every text field's bound, as at submit (core/textlimits.py)
        raise SpecError(problem)
    if ((new["partition"], new["ntasks"], new["mem_mb"]) != (job.partition, spec.ntasks, spec.mem_mb)
            or new["request"].keys() & _ADMITTED):
        new["time_limit"] = readmit(new["spec"])
    return _writes(job, changes, new)


def _checked_values(job: JobRecord, changes: Mapping[str, Any], admin: bool, config: ClusterConfig,
                    account_of: AccountOf) -> dict[str, Any]:
    """The job's values once ``changes`` apply (``asked``: the time limit its request asks,
    ``time_limit``: the one in force), each change checked in slurmctld's order."""
    from pslurm.core.errors import SpecError
    from pslurm.core.states import JobState

    spec, pending = job.spec, job.state is JobState.PENDING

    def pending_only() -> None:
        if not pending:
            raise SpecError(NOT_PENDING)

    new: dict[str, Any] = {"partition": job.partition, "account": spec.account, "ntasks": spec.ntasks,
                           "time_limit": job.time_limit, "asked": spec.time_limit, "mem_mb": spec.mem_mb}
    if "partition" in changes and changes["partition"] != job.partition:
        pending_only()
        new["partition"] = str(changes["partition"])
        if new["partition"] not in config.partitions:
            raise SpecError("Invalid partition name specified")
    if "account" in changes:
        pending_only()  # as slurmctld: even the same account, once the job started
        new["account"] = account_of(spec.user, str(changes["account"]), new["partition"])
    if "num_tasks" in changes:
        pending_only()
        new["ntasks"] = int(changes["num_tasks"])
        if new["ntasks"] < 1:
            raise SpecError("Task count specification invalid")
    if "time_limit" in changes:
        new["asked"] = new["time_limit"] = _allowed_time_limit(job, str(changes["time_limit"]), admin, pending,
                                                               config.partitions.get(new["partition"]))
    for key in ("priority", "nice"):
        if key in changes:
            pending_only()
            if not admin and (key == "priority" or int(changes[key]) < 0):
                raise SpecError(ACCESS_DENIED)
    if "min_memory_node" in changes or "min_memory_cpu" in changes:
        pending_only()
        new["mem_mb"] = 0 if "min_memory_cpu" in changes else int(changes["min_memory_node"])
    new["request"] = _request_changes(job, changes, pending_only)
    new["name"] = str(changes.get("name", spec.name))
    new["comment"] = changes.get("comment")
    return new


# the fields of a request whose change has the job admitted again (where it may run, what it needs)
_ADMITTED = frozenset({"num_nodes", "max_nodes", "nodelist", "exclude", "constraint", "gres", "qos", "cpus_per_task",
                       "mem_per_cpu_mb", "begin_time", "deadline", "dependency"})


def _request_changes(job: JobRecord, changes: Mapping[str, Any], pending_only: Callable[[], None]
                     ) -> dict[str, Any]:
    """The request's fields (JobSpec's names) that the keys beyond the job's columns change, each
    checked as scontrol's slurmctld does (a pending job's only, where so); the values still to be
    admitted (:func:`update_values`)."""
    from pslurm.core.errors import SpecError
    from pslurm.core.gres import GresError, parse_gres
    from pslurm.core.states import JobState

    spec = job.spec
    out: dict[str, Any] = {}
    if "num_nodes" in changes:
        if job.state is not JobState.PENDING:
            raise SpecError(NOT_SUPPORTED)  # slurmctld: a running job's resize, which pslurm does not do
        low, _, high = str(changes["num_nodes"]).partition("-")
        if not low.isdigit() or not (high or low).isdigit() or not 1 <= int(low) <= int(high or low) <= 100000:
            raise SpecError("Node count specification invalid")
        out["num_nodes"], out["max_nodes"] = int(low), int(high) if high and int(high) != int(low) else 0
    for change, field in REQUEST_TEXT.items():
        if change in changes and changes[change] != getattr(spec, field):
            if change in PENDING_ONLY:
                pending_only()
            out[field] = str(changes[change])
    if "qos" in out:
        out["qos"] = out["qos"].lower()
    for change, field in (("cpus_per_task", "cpus_per_task"), ("begin_time", "begin_time"), ("deadline", "deadline")):
        if change in changes:
            pending_only()
            out[field] = changes[change]
    if "min_memory_cpu" in changes or "min_memory_node" in changes:  # one or the other, as Slurm's
        out["mem_per_cpu_mb"] = int(changes.get("min_memory_cpu", 0))
    if "gres" in changes:
        pending_only()
        try:
            out["gres"] = parse_gres(str(changes["gres"]))
        except GresError:
            raise SpecError("Invalid generic resource (gres) specification") from None
    if "requeue" in changes and bool(changes["requeue"]) != job.requeue:  # slurmctld: MIN(requeue, 1)
        out["requeue"] = bool(changes["requeue"])
    if "throttle" in changes and job.array_job_id is not None:
        base = spec.array.partition("%")[0]
        out["array"] = base + (f"%{changes['throttle']}" if changes["throttle"] else "")
    return {k: v for k, v in out.items() if getattr(spec, k) != v or k == "requeue"}


def _allowed_time_limit(job: JobRecord, text: str, admin: bool, pending: bool,
                        partition: PartitionConfig | None) -> int | None:
    """The limit ``TimeLimit=text`` asks, where its asker may set it: slurmctld lets an operator set any
    limit, a user lower it, or raise a pending job's up to its partition's MaxTime. SpecError else."""
    from pslurm.core.errors import SpecError

    try:
        asked = new_time_limit(text, job.time_limit)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    if asked != job.time_limit:
        max_time = partition.max_time if partition is not None else None
        if not (admin or _longer(job.time_limit, asked) or (pending and _longer(max_time, asked, True))):
            raise SpecError(ACCESS_DENIED)
    return asked


def _longer(limit: int | None, than: int | None, or_equal: bool = False) -> bool:
    """Whether time limit ``limit`` is longer than ``than`` (or as long, with ``or_equal``); None is no limit."""
    if limit is None:
        return than is not None or or_equal
    if than is None:
        return False
    return limit > than or (or_equal and limit == than)


def _writes(job: JobRecord, changes: Mapping[str, Any], new: Mapping[str, Any]
            ) -> tuple[dict[str, Any], dict[str, Any], str]:
    """What differs from ``job`` once ``new`` applies: the job's own values (its partition, the time
    limit in force, its priority), its request's fields (JobSpec's names and values), and the event's
    detail (scontrol's KEY=VALUE words of each). The store keeps its columns in step with both."""
    from pslurm.core.timefmt import format_duration

    spec = job.spec
    own: dict[str, Any] = {}
    request: dict[str, Any] = {}
    words: list[str] = []
    if new["partition"] != job.partition:
        own["partition"] = request["partition"] = new["partition"]
        words.append(f"Partition={new['partition']}")
    if new["account"] != spec.account:
        request["account"] = new["account"]
        words.append(f"Account={new['account']}")
    if new["ntasks"] != spec.ntasks:
        request["ntasks"] = new["ntasks"]
        words.append(f"NumTasks={new['ntasks']}")
    if new["mem_mb"] != spec.mem_mb:
        request["mem_mb"] = new["mem_mb"]
        words.append(f"MinMemoryNode={new['mem_mb']}")
    for field, value in new["request"].items():
        request[field] = value
        words.append(f"{field}={value}")
    if new["time_limit"] != job.time_limit or new["asked"] != spec.time_limit:
        own["time_limit"], request["time_limit"] = new["time_limit"], new["asked"]
        words.append(f"TimeLimit={format_duration(new['time_limit'])}")
    if "priority" in changes:
        own["admin_priority"] = own["priority"] = int(changes["priority"])
        words.append(f"Priority={changes['priority']}")
    if "nice" in changes and changes["nice"] != spec.nice:
        request["nice"] = int(changes["nice"])
        words.append(f"Nice={changes['nice']}")
    if new["name"] != spec.name:
        request["name"] = new["name"]
        words.append(f"JobName={new['name']}")
    if new["comment"] is not None and new["comment"] != spec.comment:
        request["comment"] = str(new["comment"])
        words.append(f"Comment={new['comment']}")
    return own, request, "update " + " ".join(words)
