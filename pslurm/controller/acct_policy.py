"""Association and QOS limits as Slurm 22.05 enforces them (src/slurmctld/acct_policy.c): pure.

With ``AccountingStorageEnforce=limits`` a job is held to its QOS's limits and its association's, and
to the Grp limits of every association above it up to root:

* at submit (:meth:`AcctLimits.submit_refusal`): MaxSubmitJobs, GrpSubmitJobs (association) and
  MaxSubmitJobsPerUser, GrpSubmitJobs (QOS) refuse a job that would pass them; with the QOS's
  ``Flags=DenyOnLimit`` a job whose own size or time is over a limit is refused too;
* in every scheduling pass (:meth:`AcctUsage.over`): a job that would pass a limit of what runs at
  once (GrpTRES, GrpJobs, MaxJobs, MaxTRESPerUser, MaxJobsPerUser), or is itself over one
  (MaxTRESPerJob, MaxTRESPerNode, MaxWall), stays pending with Slurm's reason (``AssocGrpGRES``,
  ``AssocMaxWallDurationPerJobLimit``, ``QOSMaxGRESPerUser``...), in acct_policy.c's order: the QOS's
  job and time limits, the associations', then the QOS's TRES limits, the associations'.

As in Slurm, a limit the QOS sets overrides the association's of the same kind (QOS MaxWall, not the
association's; QOS GrpTRES for gres/gpu, not the association's for gres/gpu), and an association's
Max limits are inherited by the associations under it that do not set them (sacctmgr: "a limit set
on an account applies to its users and sub-accounts unless set lower down"), while each Grp limit
counts the jobs of its association and of every one under it. The TRES are Slurm's ``cpu``, ``mem``
(MB), ``node`` and ``gres/gpu``, checked in that order (Slurm's TRES ids). A job's nodes count once
per job (Slurm counts a node shared by two jobs of one association once: pslurm twice).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pslurm.core.assoc import Assoc, Associations, Qos, parse_tres
from pslurm.core.config import ConfigError

TRES_NAMES = ("cpu", "mem", "node", "gres/gpu")  # Slurm's TRES order: the first over its limit names the reason
Tres = tuple[int, int, int, int]  # a job's cpu, mem (MB), node, gres/gpu, in all
Caps = tuple["int | None", ...]  # a limit per TRES_NAMES (None: none)
NO_CAPS: Caps = (None, None, None, None)
ZERO: Tres = (0, 0, 0, 0)

# Slurm's reasons for each TRES of TRES_NAMES (job_reason_string; _get_tres_state_reason's mapping)
REASONS: dict[str, tuple[str, str, str, str]] = {
    "assoc_grp": ("AssocGrpCpuLimit", "AssocGrpMemLimit", "AssocGrpNodeLimit", "AssocGrpGRES"),
    "assoc_job": ("AssocMaxCpuPerJobLimit", "AssocMaxMemPerJob", "AssocMaxNodePerJobLimit", "AssocMaxGRESPerJob"),
    "assoc_node": ("AssocMaxCpuPerNode", "AssocMaxMemPerNode", "AssocMaxUnknownPerNode", "AssocMaxGRESPerNode"),
    "qos_grp": ("QOSGrpCpuLimit", "QOSGrpMemLimit", "QOSGrpNodeLimit", "QOSGrpGRES"),
    "qos_job": ("QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob", "QOSMaxNodePerJobLimit", "QOSMaxGRESPerJob"),
    "qos_node": ("QOSMaxCpuPerNode", "QOSMaxMemoryPerNode", "QOSMaxUnknownPerNode", "QOSMaxGRESPerNode"),
    "qos_user": ("QOSMaxCpuPerUserLimit", "QOSMaxMemoryPerUser", "QOSMaxNodePerUserLimit", "QOSMaxGRESPerUser"),
}

ENFORCE_WORDS = ("associations", "limits", "qos", "safe", "wckeys", "nojobs", "nosteps", "all")
DEFAULT_ENFORCE = frozenset({"associations", "limits", "qos"})  # pslurm's without the key (see enforcement())


def enforcement(text: str | None) -> frozenset[str]:
    """``AccountingStorageEnforce``'s words as Slurm reads them: ``limits`` and ``qos`` imply
    ``associations``, ``safe`` implies ``limits``; ``0``/``none``/empty enforce nothing. Without the key
    (None) pslurm enforces associations, limits and QOS (what it did before the key was read). ValueError
    for a word Slurm does not know."""
    if text is None:
        return DEFAULT_ENFORCE
    words = {w.strip().lower() for w in text.split(",") if w.strip()} - {"0", "none", "no"}
    unknown = words - set(ENFORCE_WORDS)
    if unknown:
        raise ValueError(f"AccountingStorageEnforce: unknown word '{sorted(unknown)[0]}'")
    if "all" in words:
        words |= {"associations", "limits", "qos", "safe", "wckeys"}
    if "safe" in words:
        words.add("limits")
    if words & {"limits", "qos", "wckeys"}:
        words.add("associations")
    return frozenset(words)


def config_enforcement(extra: Mapping[str, str]) -> frozenset[str]:
    """pslurm.conf's ``AccountingStorageEnforce`` (``extra``: its keys Slurm's commands do not read
    otherwise), as :func:`enforcement` reads it; ConfigError for a word Slurm does not know."""
    try:
        return enforcement(next((v for k, v in extra.items() if k.lower() == "accountingstorageenforce"), None))
    except ValueError as exc:
        raise ConfigError(f"pslurm.conf: {exc}") from None


class LimitsCache:
    """:func:`acct_limits` of the associations' snapshot, made again only when the snapshot changes
    (the association service hands out one object until sacctmgr changes something)."""

    def __init__(self) -> None:
        self._of: Associations | None = None
        self._limits = AcctLimits()

    def get(self, snap: Associations) -> AcctLimits:
        if snap is not self._of:
            self._limits, self._of = acct_limits(snap), snap
        return self._limits


def caps(text: str) -> Caps:
    """``cpu=8,gres/gpu=2,mem=4G,node=1`` as a limit per TRES_NAMES (others ignored; unreadable: none)."""
    if not text:
        return NO_CAPS
    try:
        found = parse_tres(text)
    except ValueError:
        return NO_CAPS
    return _caps(tuple(found.get(name) for name in TRES_NAMES))


def _caps(values: Caps) -> Caps:
    return NO_CAPS if all(v is None for v in values) else values


def job_tres(cpus: int, mem_mb: int, nodes: int, gpus: int) -> Tres:
    """A job's TRES in all: its CPUs, memory (MB), nodes and GPUs (every node's)."""
    return (cpus, mem_mb, nodes, gpus)


@dataclass(frozen=True)
class QosLimits:
    """One QOS's limits (None / NO_CAPS: none)."""

    name: str
    grp_tres: Caps = NO_CAPS
    grp_jobs: int | None = None
    grp_submit_jobs: int | None = None
    max_tres_per_job: Caps = NO_CAPS
    max_tres_per_node: Caps = NO_CAPS
    max_tres_per_user: Caps = NO_CAPS
    max_jobs_per_user: int | None = None
    max_submit_jobs_per_user: int | None = None
    max_wall: int | None = None  # seconds
    deny_on_limit: bool = False

    @staticmethod
    def of(q: Qos) -> QosLimits:
        return QosLimits(q.name, caps(q.grp_tres), q.grp_jobs, q.grp_submit_jobs, caps(q.max_tres_per_job),
                         caps(q.max_tres_per_node), caps(q.max_tres_per_user), q.max_jobs_per_user,
                         q.max_submit_jobs_per_user, q.max_wall, q.deny_on_limit)


@dataclass(frozen=True)
class AssocLimits:
    """One association's limits: its own Grp limits (each counts it and every association under it),
    and the Max limits in force for its jobs (its own, else the nearest association's above it)."""

    id: int
    chain: tuple[int, ...]  # its id, then those of the associations above it up to root
    grp_tres: Caps = NO_CAPS
    grp_jobs: int | None = None
    grp_submit_jobs: int | None = None
    max_tres_per_job: Caps = NO_CAPS
    max_tres_per_node: Caps = NO_CAPS
    max_jobs: int | None = None
    max_submit_jobs: int | None = None
    max_wall: int | None = None  # seconds
    # the Grp limits along ``chain`` that are set, (association id, limit) from this one up: what a pass checks
    grp_tres_chain: tuple[tuple[int, Caps], ...] = ()
    grp_jobs_chain: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class AcctLimits:
    """Every association's and QOS's limits, from one snapshot of the associations."""

    assocs: Mapping[int, AssocLimits] = field(default_factory=dict)
    qos: Mapping[str, QosLimits] = field(default_factory=dict)
    active: bool = False  # any limit set at all: a pass without one checks nothing
    counts_submits: bool = False  # a MaxSubmit or GrpSubmit limit set: a submit counts the queue

    def wall(self, assoc_id: int, qos: str) -> int | None:
        """The MaxWall in force for a job (the QOS's, else its association's, inherited): the time
        limit a job that asks none gets."""
        q = self.qos.get(qos)
        if q is not None and q.max_wall is not None:
            return q.max_wall
        a = self.assocs.get(assoc_id)
        return a.max_wall if a is not None else None

    def submit_refusal(self, assoc_id: int, qos: str, user: str, tres: Tres, time_limit: int | None,
                       counts: SubmitCounts, count: int = 1) -> str | None:
        """Why Slurm's acct_policy_validate refuses ``count`` more jobs (an array's tasks) of this shape
        at submit: Slurm's reason, or None. ``counts``: the jobs queued or running now."""
        q = self.qos.get(qos)
        a = self.assocs.get(assoc_id)
        strict = q.deny_on_limit if q is not None else True  # Slurm: strict when the job has no QOS
        if q is not None:
            if q.max_submit_jobs_per_user is not None and counts.qos_user.get((qos, user), 0) + count > \
                    q.max_submit_jobs_per_user:
                return "QOSMaxSubmitJobPerUserLimit"
            if q.grp_submit_jobs is not None and counts.qos.get(qos, 0) + count > q.grp_submit_jobs:
                return "QOSGrpSubmitJobsLimit"
            if strict:
                found = _alone_over(q, tres, time_limit)
                if found is not None:
                    return found
        if a is None:
            return None
        for level in a.chain:
            up = self.assocs.get(level)
            if up is None:
                continue
            if strict:
                i = _first_over(tres, up.grp_tres, q.grp_tres if q else NO_CAPS)
                if i is not None:
                    return REASONS["assoc_grp"][i]
            if (up.grp_submit_jobs is not None and (q is None or q.grp_submit_jobs is None)
                    and counts.assoc.get(level, 0) + count > up.grp_submit_jobs):
                return "AssocGrpSubmitJobsLimit"
        if strict:
            found = _assoc_alone_over(a, q, tres, time_limit)
            if found is not None:
                return found
        if (a.max_submit_jobs is not None and (q is None or q.max_submit_jobs_per_user is None)
                and counts.assoc_own.get(assoc_id, 0) + count > a.max_submit_jobs):
            return "AssocMaxSubmitJobLimit"
        return None


@dataclass(frozen=True)
class SubmitCounts:
    """Jobs queued or running: of each association and those under it (``assoc``), of each association
    alone (``assoc_own``), of each QOS, and of each (QOS, user)."""

    assoc: Mapping[int, int] = field(default_factory=dict)
    assoc_own: Mapping[int, int] = field(default_factory=dict)
    qos: Mapping[str, int] = field(default_factory=dict)
    qos_user: Mapping[tuple[str, str], int] = field(default_factory=dict)


def submit_counts(limits: AcctLimits, rows: list[tuple[int, str, str, int]]) -> SubmitCounts:
    """:class:`SubmitCounts` from (association id, QOS, user, jobs) rows of the active jobs."""
    assoc: dict[int, int] = defaultdict(int)
    own: dict[int, int] = defaultdict(int)
    qos: dict[str, int] = defaultdict(int)
    qos_user: dict[tuple[str, str], int] = defaultdict(int)
    for assoc_id, name, user, n in rows:
        own[assoc_id] += n
        found = limits.assocs.get(assoc_id)
        for level in (found.chain if found is not None else ()):
            assoc[level] += n
        qos[name] += n
        qos_user[(name, user)] += n
    return SubmitCounts(assoc, own, qos, qos_user)


def _over_wall(time_limit: int | None, wall: int) -> bool:
    return time_limit is None or time_limit > wall


def _first_over(tres: Tres, limit: Caps, overridden: Caps = NO_CAPS, used: Tres = ZERO,
                divisor: int = 1) -> int | None:
    """The first TRES the job asks (``tres``, per node with ``divisor``) whose ``used`` plus it passes
    ``limit`` (skipping those ``overridden`` sets: the QOS's override the association's), or None."""
    if limit is NO_CAPS:  # most limits are unset: every Caps without a value is this one object
        return None
    for i in range(4):
        cap = limit[i]
        if cap is None or not tres[i] or overridden[i] is not None:
            continue
        if used[i] + tres[i] // divisor > cap:
            return i
    return None


def _alone_over(q: QosLimits, tres: Tres, time_limit: int | None) -> str | None:
    """A QOS's limit that the job alone passes (DenyOnLimit refuses it at submit)."""
    for limit, kind in ((q.grp_tres, "qos_grp"), (q.max_tres_per_job, "qos_job"), (q.max_tres_per_user, "qos_user")):
        i = _first_over(tres, limit)
        if i is not None:
            return REASONS[kind][i]
    i = _first_over(tres, q.max_tres_per_node, divisor=max(1, tres[2]))
    if i is not None:
        return REASONS["qos_node"][i]
    if q.max_wall is not None and time_limit is not None and time_limit > q.max_wall:
        return "QOSMaxWallDurationPerJobLimit"
    return None


def _assoc_alone_over(a: AssocLimits, q: QosLimits | None, tres: Tres, time_limit: int | None) -> str | None:
    """An association's per-job limit that the job passes (DenyOnLimit refuses it at submit)."""
    i = _first_over(tres, a.max_tres_per_job, q.max_tres_per_job if q else NO_CAPS)
    if i is not None:
        return REASONS["assoc_job"][i]
    i = _first_over(tres, a.max_tres_per_node, q.max_tres_per_node if q else NO_CAPS, divisor=max(1, tres[2]))
    if i is not None:
        return REASONS["assoc_node"][i]
    if (a.max_wall is not None and (q is None or q.max_wall is None) and time_limit is not None
            and time_limit > a.max_wall):
        return "AssocMaxWallDurationPerJobLimit"
    return None


def acct_limits(snap: Associations) -> AcctLimits:
    """Every association's limits (Max ones inherited down the tree) and every QOS's, from ``snap``."""
    by_key = {a.key: a for a in snap.assocs}
    made: dict[int, AssocLimits] = {}

    def limits_of(a: Assoc, seen: tuple[int, ...] = ()) -> AssocLimits:
        found = made.get(a.id)
        if found is not None:
            return found
        parent = snap.parent_assoc(a)
        up = limits_of(parent, (*seen, a.id)) if parent is not None and parent.id not in (*seen, a.id) else None
        own = AssocLimits(a.id, (a.id, *(up.chain if up else ())), caps(a.grp_tres), a.grp_jobs, a.grp_submit_jobs,
                          _inherit(caps(a.max_tres_per_job), up.max_tres_per_job if up else NO_CAPS),
                          _inherit(caps(a.max_tres_per_node), up.max_tres_per_node if up else NO_CAPS),
                          _first(a.max_jobs, up.max_jobs if up else None),
                          _first(a.max_submit_jobs, up.max_submit_jobs if up else None),
                          _first(a.max_wall, up.max_wall if up else None))
        made[a.id] = own
        return own

    for a in by_key.values():
        limits_of(a)
    for key, found in made.items():
        ups = [made[level] for level in found.chain if level in made]
        made[key] = replace(found, grp_tres_chain=tuple((u.id, u.grp_tres) for u in ups if u.grp_tres is not NO_CAPS),
                            grp_jobs_chain=tuple((u.id, u.grp_jobs) for u in ups if u.grp_jobs is not None))
    qos = {name: QosLimits.of(q) for name, q in snap.qos.items()}
    active = any(_set(x) for x in made.values()) or any(_set(q) for q in qos.values())
    submits = any(x.grp_submit_jobs is not None or x.max_submit_jobs is not None for x in made.values()) or any(
        q.grp_submit_jobs is not None or q.max_submit_jobs_per_user is not None for q in qos.values())
    return AcctLimits(made, qos, active, submits)


def _first(own: int | None, inherited: int | None) -> int | None:
    return own if own is not None else inherited


def _inherit(own: Caps, inherited: Caps) -> Caps:
    return _caps(tuple(o if o is not None else i for o, i in zip(own, inherited, strict=True)))


def _set(limits: AssocLimits | QosLimits) -> bool:
    """Whether any limit is set (the scheduler then counts usage)."""
    for name, value in vars(limits).items():
        if name in ("id", "chain", "name", "deny_on_limit", "grp_tres_chain", "grp_jobs_chain"):
            continue
        if value is not None and value != NO_CAPS:
            return True
    return False


class AcctUsage:
    """What runs at once, per association (and each one above it), per QOS and per (QOS, user),
    against :class:`AcctLimits`: the running jobs of a pass's snapshot and its starts, each by :meth:`add`."""

    __slots__ = ("limits", "assoc_jobs", "assoc_tres", "qos_jobs", "qos_tres", "user_jobs", "user_tres")

    def __init__(self, limits: AcctLimits) -> None:
        self.limits = limits
        self.assoc_jobs: dict[int, int] = defaultdict(int)
        self.assoc_tres: dict[int, Tres] = defaultdict(lambda: ZERO)
        self.qos_jobs: dict[str, int] = defaultdict(int)
        self.qos_tres: dict[str, Tres] = defaultdict(lambda: ZERO)
        self.user_jobs: dict[tuple[str, str], int] = defaultdict(int)
        self.user_tres: dict[tuple[str, str], Tres] = defaultdict(lambda: ZERO)

    def add(self, assoc_id: int, qos: str, user: str, tres: Tres, jobs: int = 1) -> None:
        """``jobs`` more jobs (0: more of one already counted, a multi-node job's next node) hold ``tres``."""
        found = self.limits.assocs.get(assoc_id)
        for level in (found.chain if found is not None else ()):
            self.assoc_jobs[level] += jobs
            self.assoc_tres[level] = _plus(self.assoc_tres[level], tres)
        self.qos_jobs[qos] += jobs
        self.qos_tres[qos] = _plus(self.qos_tres[qos], tres)
        key = (qos, user)
        self.user_jobs[key] += jobs
        self.user_tres[key] = _plus(self.user_tres[key], tres)

    def over(self, assoc_id: int, qos: str, user: str, tres: Tres, time_limit: int | None) -> str | None:
        """Why a pending job may not start now by its QOS's and associations' limits (Slurm's
        acct_policy_job_runnable_pre_select, then _post_select), or None."""
        limits = self.limits
        q = limits.qos.get(qos)
        a = limits.assocs.get(assoc_id)
        if q is not None:
            if q.grp_jobs is not None and self.qos_jobs[qos] >= q.grp_jobs:
                return "QOSGrpJobsLimit"
            if q.max_jobs_per_user is not None and self.user_jobs[(qos, user)] >= q.max_jobs_per_user:
                return "QOSMaxJobsPerUserLimit"
            if q.max_wall is not None and _over_wall(time_limit, q.max_wall):
                return "QOSMaxWallDurationPerJobLimit"
        if a is not None:
            reason = self._assoc_pre(a, q, time_limit)
            if reason is not None:
                return reason
        if q is not None:
            reason = self._qos_post(q, user, tres)
            if reason is not None:
                return reason
        return self._assoc_post(a, q, tres) if a is not None else None

    def _assoc_pre(self, a: AssocLimits, q: QosLimits | None, time_limit: int | None) -> str | None:
        """GrpJobs of the job's association, its MaxJobs and MaxWall, then GrpJobs of those above it."""
        jobs = self.assoc_jobs
        own = True
        for level, cap in a.grp_jobs_chain:
            if level != a.id and own:
                own = False
                reason = self._own_pre(a, q, time_limit)
                if reason is not None:
                    return reason
            if (q is None or q.grp_jobs is None) and jobs[level] >= cap:
                return "AssocGrpJobsLimit"
        return self._own_pre(a, q, time_limit) if own else None

    def _own_pre(self, a: AssocLimits, q: QosLimits | None, time_limit: int | None) -> str | None:
        if (a.max_jobs is not None and (q is None or q.max_jobs_per_user is None)
                and self.assoc_jobs[a.id] >= a.max_jobs):
            return "AssocMaxJobsLimit"
        if a.max_wall is not None and (q is None or q.max_wall is None) and _over_wall(time_limit, a.max_wall):
            return "AssocMaxWallDurationPerJobLimit"
        return None

    def _qos_post(self, q: QosLimits, user: str, tres: Tres) -> str | None:
        i = _first_over(tres, q.grp_tres, used=self.qos_tres[q.name])
        if i is not None:
            return REASONS["qos_grp"][i]
        i = _first_over(tres, q.max_tres_per_job)
        if i is not None:
            return REASONS["qos_job"][i]
        i = _first_over(tres, q.max_tres_per_node, divisor=max(1, tres[2]))
        if i is not None:
            return REASONS["qos_node"][i]
        i = _first_over(tres, q.max_tres_per_user, used=self.user_tres[(q.name, user)])
        return REASONS["qos_user"][i] if i is not None else None

    def _assoc_post(self, a: AssocLimits, q: QosLimits | None, tres: Tres) -> str | None:
        """GrpTRES of the job's association, its MaxTRES per job and per node, then GrpTRES of those above."""
        used, over_grp = self.assoc_tres, q.grp_tres if q else NO_CAPS
        own = True
        for level, cap in a.grp_tres_chain:
            if level != a.id and own:
                own = False
                reason = _own_post(a, q, tres)
                if reason is not None:
                    return reason
            i = _first_over(tres, cap, over_grp, used[level])
            if i is not None:
                return REASONS["assoc_grp"][i]
        return _own_post(a, q, tres) if own else None


def _own_post(a: AssocLimits, q: QosLimits | None, tres: Tres) -> str | None:
    i = _first_over(tres, a.max_tres_per_job, q.max_tres_per_job if q else NO_CAPS)
    if i is not None:
        return REASONS["assoc_job"][i]
    i = _first_over(tres, a.max_tres_per_node, q.max_tres_per_node if q else NO_CAPS, divisor=max(1, tres[2]))
    return REASONS["assoc_node"][i] if i is not None else None


def _plus(a: Tres, b: Tres) -> Tres:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])
