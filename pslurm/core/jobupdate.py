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
    min_memory_node (int) MinMemoryNode=MB    pending jobs only; K/M/G/T allowed

Keys are scontrol's, case-insensitive, and may be cut short as scontrol allows (``TimeL=``,
``Part=``). The controller reads the same mapping (:func:`checked_changes`) at its trust boundary
and works out a relative time limit against the limit in force (:func:`new_time_limit`).

The rules of an update are here too (:func:`update_values`: who may change what of which job, in
slurmctld's order of checks, and what it writes), pure: the job service reads the job, calls them
and writes what they return. The words need the standard library only (pscontrol imports this
module on its path); the rules import the domain when the controller calls them.
"""

from __future__ import annotations

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
    ("Comment", 3, "comment"),
    ("TimeLimit", 5, "time_limit"),
    ("Priority", 2, "priority"),
    ("Nice", 2, "nice"),
    ("NumTasks", 8, "num_tasks"),
    ("ReqProcs", 8, "num_tasks"),
    ("MinMemoryNode", 10, "min_memory_node"),
    ("Partition", 2, "partition"),
    ("Name", 2, "name"),
    ("JobName", 4, "name"),
    ("Account", 1, "account"),
)
FIELDS = frozenset({"priority", "nice", "time_limit", "partition", "name", "account", "comment", "num_tasks",
                    "min_memory_node"})
PENDING_ONLY = frozenset({"partition", "account", "num_tasks", "min_memory_node", "priority", "nice"})
_INFINITE = frozenset({"INFINITE", "UNLIMITED", "-1"})

# slurm_strerror's words for what scontrol update is refused with (slurm_errno.c)
INVALID_JOB_ID = "Invalid job id specified"  # ESLURM_INVALID_JOB_ID
INVALID_USER = "Invalid user id"  # ESLURM_USER_ID_MISSING: another user's job
JOB_FINISHED = "Job has already finished"  # ESLURM_JOB_FINISHED
NOT_PENDING = "Job is no longer pending execution"  # ESLURM_JOB_NOT_PENDING
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
        elif change == "num_tasks":
            if not value.isdigit() or int(value) > INT32_MAX:
                raise UpdateError(f"Invalid NumTasks value: {value}")
            changes[change] = int(value)
        elif change == "min_memory_node":
            mb = memory_mb(value)
            if mb is None:
                raise UpdateError(f"Invalid MinMemoryNode value: {value}")
            changes[change] = mb
        else:
            changes[change] = value
    if not changes:
        raise UpdateError("No changes specified", prefixed=False)
    if not job:
        raise UpdateError("No job ID specified")
    return job, changes


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
        if key in ("priority", "nice", "num_tasks", "min_memory_node"):
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"Invalid request: {key} is an integer")
            if key == "nice" and abs(value) > NICE_LIMIT:
                raise ValueError(f"Nice value out of range (+/- {NICE_LIMIT}). Value ignored")
            if key != "nice" and not 0 <= value <= (0xFFFFFFFF if key == "priority" else
                                                   2**53 if key == "min_memory_node" else INT32_MAX):
                raise ValueError(f"Invalid {'NumTasks' if key == 'num_tasks' else key} value: {value}")
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
    write to ``job``: its columns, its request's fields, and the event's detail, in slurmctld's order
    of checks (_update_job). Values already in force are left out. SpecError with scontrol's words for
    the first refusal. ``readmit``: admission of the job's request again, asked when what decides
    where a pending job may run changes (partition, task count, memory); the time limit in force.
    ``account_of(user, asked, partition)``: the account a job charges (the associations'
    ``job_account``; None: pslurm.conf's)."""
    from dataclasses import replace

    from pslurm.core.errors import SpecError
    from pslurm.core.states import JobState

    if not admin and uid != job.spec.uid:
        raise SpecError(INVALID_USER)  # ESLURM_USER_ID_MISSING: scontrol's answer to another user's job
    if job.state.is_final or job.state is JobState.COMPLETING:
        raise SpecError(JOB_FINISHED)
    if account_of is None:
        from pslurm.core.assoc import config_associations

        account_of = config_associations(config).job_account
    new = _checked_values(job, changes, admin, config, account_of)
    spec = job.spec
    if (new["partition"], new["ntasks"], new["mem_mb"]) != (job.partition, spec.ntasks, spec.mem_mb):
        new["time_limit"] = readmit(replace(spec, partition=new["partition"], ntasks=new["ntasks"],
                                            mem_mb=new["mem_mb"], time_limit=new["asked"]))
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
        if new["account"] and len(new["account"]) > 64:
            raise SpecError("Invalid job request: the account is longer than 64 characters")
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
    if "min_memory_node" in changes:
        pending_only()
        new["mem_mb"] = int(changes["min_memory_node"])
    new["name"] = str(changes.get("name", spec.name))
    if len(new["name"]) > 256:
        raise SpecError("Invalid job request: the job name is longer than 256 characters")
    new["comment"] = changes.get("comment")
    if new["comment"] is not None and len(str(new["comment"])) > 1024:
        raise SpecError("Invalid job request: the comment is longer than 1024 characters")
    return new


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
    """The columns and request fields that differ from ``job``'s once ``new`` applies, and the
    event's detail (scontrol's KEY=VALUE words of each)."""
    from pslurm.core.timefmt import format_duration

    spec = job.spec
    columns: dict[str, Any] = {}
    request: dict[str, Any] = {}
    words: list[str] = []
    if new["partition"] != job.partition:
        columns["partition"] = request["partition"] = new["partition"]
        words.append(f"Partition={new['partition']}")
    if new["account"] != spec.account:
        columns["account"] = request["account"] = new["account"]
        words.append(f"Account={new['account']}")
    if new["ntasks"] != spec.ntasks:
        request["ntasks"] = new["ntasks"]
        columns["cpus"] = new["ntasks"] * spec.cpus_per_task
        words.append(f"NumTasks={new['ntasks']}")
    if new["mem_mb"] != spec.mem_mb:
        columns["mem_mb"] = request["mem_mb"] = new["mem_mb"]
        words.append(f"MinMemoryNode={new['mem_mb']}")
    if new["time_limit"] != job.time_limit or new["asked"] != spec.time_limit:
        columns["time_limit"], request["time_limit"] = new["time_limit"], new["asked"]
        words.append(f"TimeLimit={format_duration(new['time_limit'])}")
    if "priority" in changes:
        columns["admin_priority"] = columns["priority"] = int(changes["priority"])
        words.append(f"Priority={changes['priority']}")
    if "nice" in changes and changes["nice"] != spec.nice:
        columns["nice"] = request["nice"] = int(changes["nice"])
        words.append(f"Nice={changes['nice']}")
    if new["name"] != spec.name:
        columns["name"] = request["name"] = new["name"]
        words.append(f"JobName={new['name']}")
    if new["comment"] is not None and new["comment"] != spec.comment:
        columns["comment"] = request["comment"] = str(new["comment"])
        words.append(f"Comment={new['comment']}")
    return columns, request, "update " + " ".join(words)
