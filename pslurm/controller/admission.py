"""Admission: whether a job request is accepted, and as what, before anything is stored.

Two layers. :func:`admit` (and :func:`could_ever_run`) are pure functions of the request and the
configuration: is the request well formed, may its user use the partition, could any node of the
partition ever run it, and with which time limit. :class:`Admission` is everything a submission
is checked for, the rest read from the store: who asks (a user submits only as themself), the
defaults the controller fills in (account, QOS, ``--gpu-mem``'s slice from accounting), the
queue's limits (MaxJobCount, MaxSubmitJobsPerUser), an array's indices and the jobs a
dependency names. The job service submits what :meth:`Admission.check` accepted, and asks
:meth:`Admission.readmit` when an update changes where a pending job may run. So a refused job is
never stored. Messages follow Slurm's wording where Slurm has one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace

from pslurm.auth.credential import Identity
from pslurm.controller.acct_policy import AcctLimits, LimitsCache, config_enforcement
from pslurm.controller.assocs import assoc_limits, charge, submit_refusal
from pslurm.controller.errors import PermissionDenied
from pslurm.controller.store import Store
from pslurm.core.arrays import parse_array
from pslurm.core.assoc import Associations, config_associations
from pslurm.core.config import ClusterConfig, NodeConfig, PartitionConfig, scheduler_config
from pslurm.core.dependency import parse_dependency
from pslurm.core.directives import script_problem
from pslurm.core.features import INVALID as INVALID_FEATURES
from pslurm.core.features import parse_constraint, satisfies
from pslurm.core.gres import GresRequest, format_gres
from pslurm.core.jobdesc import parse_mem
from pslurm.core.jobspec import JobSpec, SpecError
from pslurm.core.layout import node_layout
from pslurm.core.request import hostlist_option
from pslurm.core.sharing import sharing_error
from pslurm.core.textlimits import job_text_limits, text_problem

UNAVAILABLE = "Requested node configuration is not available"
TIME_LIMIT_INVALID = "Requested time limit is invalid (missing or exceeds some limit)"
INT32_MAX = 2**31 - 1  # the store's INTEGER columns (counts, seconds)
MEM_MAX_MB = 2**53  # more than any node has, and exact in a float
GRES_MAX_CHARS = 256  # the store's gres column
MAX_ENVIRONMENT = 1024 * 1024  # characters of NAME=value in all: more than exec(2) takes on Linux
# a name on one line of psqueue, psacct and the output file patterns: no line breaks
_ONE_LINE = {"name": "the job name", "account": "the account", "partition": "the partition name",
             "user": "the user name", "dependency": "the dependency", "comment": "the comment", "qos": "the qos"}
SUBMIT_LIMIT = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
QOS_NAMES = ("normal",)  # pslurm has no QOS table: Slurm's default QOS is the one there is
INVALID_QOS = "Invalid qos specification"  # Slurm's ESLURM_INVALID_QOS
LAST_TIME = 253402300799.0  # 9999-12-31T23:59:59 UTC: --begin and --deadline go no further

@dataclass(frozen=True)
class Admitted:
    """What :func:`admit` accepts a request with."""

    partition: str
    time_limit: int | None  # seconds in force; None is unlimited


@dataclass(frozen=True)
class Submission:
    """A request :meth:`Admission.check` accepted: what the store would be given."""

    spec: JobSpec  # with the defaults the controller fills in (account, qos, a GPU memory slice)
    partition: str
    time_limit: int | None  # seconds in force; None is unlimited
    requeue: bool
    array_ids: tuple[int, ...] = ()
    throttle: int | None = None
    assoc_id: int = 0  # the association it charges (0: none)


class Admission:
    """A submission's checks against the configuration, the requester and the store (read only)."""

    def __init__(self, config: ClusterConfig, store: Store, clock: Callable[[], float],
                 operators: frozenset[int]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.operators = operators  # uids that may submit for others and set a negative nice
        self.sched = scheduler_config(config)
        job_text_limits(config.extra)  # a bad MaxSubmitLineSize is refused at start, not at each submit
        fixed = config_associations(config)
        # accounts and QOS: the association service's (controller/assocs.py) once app.py assembled it
        self.associations: Callable[[], Associations] = lambda: fixed
        self.enforce = config_enforcement(config.extra)  # AccountingStorageEnforce
        self._limits = LimitsCache()

    def _acct_limits(self, snap: Associations) -> AcctLimits:
        """The association and QOS limits in force (none without AccountingStorageEnforce=limits)."""
        return self._limits.get(snap) if "limits" in self.enforce else AcctLimits()

    def check(self, spec: JobSpec, requester: Identity) -> Submission:
        """The request as it would be stored (its defaults filled in), or the refusal (SpecError,
        PermissionDenied); nothing stored. A job runs as the user it names: only an operator may submit
        one for somebody else."""
        spec = own_user(spec, requester, self.operators)
        sched = self.sched
        gpu_memory = None
        if spec.gpu_mem or any(g.name == "gpumem" for g in spec.gres):
            gpu_memory = self._gpu_memory()
            spec = self._with_gpu_slice(spec, gpu_memory)
        snap = self.associations()
        spec, assoc, qos = charge(snap, spec, "qos" in self.enforce)  # -A and --qos, or the defaults (assocs.py)
        admitted = admit(spec, self.config, enforce_part_limits=sched.enforce_part_limits,
                         groups=_group_names(spec.user, spec.gid), gpu_memory=gpu_memory, now=self.clock())
        spec = replace(spec, qos=qos.name)
        if spec.nice < 0 and requester.uid not in self.operators:
            raise SpecError("Invalid --nice value: only privileged users can set a negative nice")
        if abs(spec.nice) > 2147483645:
            raise SpecError("Invalid --nice value")
        array_ids: tuple[int, ...] = ()
        throttle = None
        if spec.array:
            if spec.interactive:
                raise SpecError("--array is for batch jobs (psbatch)")
            array_ids, throttle = parse_array(spec.array, sched.max_array_size)
        count = max(1, len(array_ids))
        limits = self._acct_limits(snap)
        time_limit = assoc_limits(limits, assoc, qos, admitted.time_limit, spec.time_limit)
        submit_refusal(limits, assoc, qos, spec, self.store.active_by_assoc, count)
        self._check_queue_limits(spec.user, count)
        self._check_dependency(spec.dependency)
        requeue = spec.requeue if spec.requeue is not None else (sched.job_requeue and not spec.interactive)
        return Submission(spec, admitted.partition, time_limit, requeue, array_ids, throttle,
                          assoc.id if assoc is not None else 0)

    def readmit(self, spec: JobSpec, dependency: bool = False) -> int | None:
        """A pending job's request changed where it may run (``pscontrol update`` of its partition,
        task count, memory, nodes, GRES...): admitted again as at submit (no deadline check), its
        dependency too when it changed (``dependency``), its QOS as at submit (one its association does
        not allow: ``Invalid qos specification``); the time limit in force (the QOS's or association's
        MaxWall for a job that asks none, as at submit), or SpecError."""
        gpu_memory = self._gpu_memory() if any(g.name == "gpumem" for g in spec.gres) else None
        snap = self.associations()
        charged, assoc, qos = charge(snap, spec, "qos" in self.enforce)
        limit = admit(charged, self.config, enforce_part_limits=self.sched.enforce_part_limits,
                      groups=_group_names(spec.user, spec.gid), gpu_memory=gpu_memory).time_limit
        if dependency:
            self._check_dependency(spec.dependency)
        return assoc_limits(self._acct_limits(snap), assoc, qos, limit, spec.time_limit)

    def _check_queue_limits(self, user: str, count: int) -> None:
        """MaxJobCount and MaxSubmitJobsPerUser, with ``count`` more jobs (an array's tasks) queued."""
        sched = self.sched
        if sched.max_job_count and self.store.count_active() + count > sched.max_job_count:
            raise SpecError(f"MaxJobCount ({sched.max_job_count} jobs in the queue) reached: job not accepted, "
                            f"try again later")
        if sched.max_submit_jobs_per_user and self.store.count_active(user) + count > sched.max_submit_jobs_per_user:
            raise SpecError(f"{SUBMIT_LIMIT}: MaxSubmitJobsPerUser={sched.max_submit_jobs_per_user}")

    def _check_dependency(self, text: str) -> None:
        """Every job (and array task) a ``--dependency`` names is known."""
        dep = parse_dependency(text)
        if dep is None:
            return
        found = self.store.refs(r.job_id for r in dep.refs)
        known = {r.job_id for r in found} | {r.array_job_id for r in found if r.array_job_id is not None}
        tasks = {(r.array_job_id, r.array_task_id) for r in found}
        for ref in dep.refs:
            if ref.job_id not in known or (ref.task_id is not None and (ref.job_id, ref.task_id) not in tasks):
                raise SpecError(f"Job dependency problem: no job {ref}")

    def _gpu_memory(self) -> dict[str, int]:
        """The memory of each registered node's largest GPU (nodes whose agents reported none are left out)."""
        found = {}
        for node in self.store.get_nodes():
            sizes = [g.memory_mb for g in node.gpus if g.memory_mb]
            if sizes:
                found[node.name] = max(sizes)
        return found

    def _with_gpu_slice(self, spec: JobSpec, gpu_memory: Mapping[str, int]) -> JobSpec:
        """``--gpu-mem`` as the job's ``gpumem:MB`` GRES item. ``auto``: the largest peak of the last
        runs of the same job name by the same user, plus GpuMemAutoMargin percent; without history,
        GpuMemAutoDefault, else a whole GPU's memory (the smallest GPU of the job's partition), so that
        a first run is measured before it is packed."""
        if not spec.gpu_mem:
            return spec
        if any(g.name == "gpumem" for g in spec.gres):
            raise SpecError("Invalid GRES specification: --gpu-mem and --gres=gpumem both given")
        if spec.gpu_mem != "auto":
            mb = parse_mem(spec.gpu_mem)  # the commands send MB; an API client may send 8G
        else:
            peak = self.store.gpu_memory_peak(spec.user, spec.name)
            if peak is not None:
                mb = max(1, math.ceil(peak * (100 + self.sched.gpu_mem_auto_margin) / 100))
            elif self.sched.gpu_mem_auto_default:
                mb = self.sched.gpu_mem_auto_default
            else:
                part = self.config.partitions.get(spec.partition or "") or self.config.default_partition
                sizes = [gpu_memory[n] for n in (part.nodes if part else ()) if n in gpu_memory]
                if not sizes:
                    raise SpecError(f"--gpu-mem=auto: job {spec.name} has no earlier run to size it by, and no GPU "
                                    "memory is known in its partition: give --gpu-mem=SIZE")
                mb = min(sizes)
        if mb < 1:
            raise SpecError(f"Invalid --gpu-mem specification: {spec.gpu_mem}")
        return replace(spec, gres=(*spec.gres, GresRequest("gpumem", None, mb)))


def could_ever_run(spec: JobSpec, node: NodeConfig, gpu_memory_mb: int | None = None, cpus: int | None = None) -> bool:
    """True when the node, empty, has what the job asks for. ``gpu_memory_mb``: the memory of the
    node's largest GPU as its agent reported it (None: not known yet, so a memory slice may fit).
    ``cpus``: the CPUs it needs there (a multi-node job's share of one node; None: ``spec.cpus``)."""
    if node.cpus < (spec.cpus if cpus is None else cpus) or node.real_memory < spec.mem_mb:
        return False
    for req in spec.gres:
        if req.name == "gpu":
            if node.gpus(req.type) < req.count:
                return False
        elif req.name in ("shard", "mps"):  # one GPU's share: the node's count split over its GPUs
            total = sum(g.count for g in node.gres if g.name == req.name)
            if node.gpus(req.type) < 1 or math.ceil(total / max(1, node.gpus())) < req.count:
                return False
        elif req.name == "gpumem":
            if node.gpus(req.type) < 1 or (gpu_memory_mb is not None and gpu_memory_mb < req.count):
                return False
        else:
            return False  # no other generic resource is known
    return node.gpus() >= spec.gpus()


def admit(spec: JobSpec, config: ClusterConfig, *, enforce_part_limits: bool = True,
          groups: Collection[str] | None = None, gpu_memory: Mapping[str, int] | None = None,
          now: float | None = None) -> Admitted:
    """The partition and time limit a job is accepted with, or SpecError saying why not.

    ``groups``: the submitting user's group names, checked against the partition's AllowGroups
    (None: not checked). Without ``enforce_part_limits`` (EnforcePartLimits=NO) a time limit over the
    partition's MaxTime is accepted and the job pends with reason PartitionTimeLimit. ``gpu_memory``:
    the memory of each registered node's largest GPU, against which a memory slice is checked.
    ``now``: the clock a deadline is checked against (None: not checked)."""
    _check_request(spec, job_text_limits(config.extra))
    if spec.qos and spec.qos.lower() not in QOS_NAMES:
        raise SpecError(INVALID_QOS)
    if spec.deadline is not None and now is not None and spec.deadline < now:
        raise SpecError(TIME_LIMIT_INVALID)  # as slurmctld: a deadline already past
    problem = sharing_error(spec.gres)
    if problem is not None:
        raise SpecError(problem)
    partition = _partition_for(spec, config)
    if partition.state in ("DRAIN", "INACTIVE"):
        raise SpecError(f"Partition {partition.name} is {partition.state}: it accepts no new jobs")
    if partition.allow_groups and groups is not None and not set(partition.allow_groups) & set(groups):
        raise SpecError("User's group not permitted to use this partition")
    if partition.max_nodes is not None and spec.num_nodes > partition.max_nodes:
        raise SpecError("Node count specification invalid: more than the partition's MaxNodes")
    if spec.num_nodes > 1 and any(g.name in _SHARES for g in spec.gres):
        raise SpecError("Node count specification invalid: a shared GPU (--gres=shard/mps, --gpu-mem) "
                        "is for single-node jobs: pslurm shares GPUs with -N 1 only")
    if spec.exclusive and any(g.name in _SHARES for g in spec.gres):
        raise SpecError(f"{UNAVAILABLE}: --exclusive takes whole nodes and GPUs, not a share of a GPU")
    if spec.script is None and not spec.argv and not spec.allocation:  # psalloc's job runs nothing itself
        raise SpecError("No command or batch script given")
    time_limit = spec.time_limit
    if time_limit is None:
        time_limit = partition.default_time if partition.default_time is not None else partition.max_time
    elif partition.max_time is not None and time_limit > partition.max_time and enforce_part_limits:
        raise SpecError(TIME_LIMIT_INVALID)
    candidates = [name for name in partition.nodes if name in config.nodes]
    if spec.nodelist or spec.exclude:
        candidates = _requested_nodes(spec, config, candidates)
    if spec.constraint:
        candidates = _featured_nodes(spec, config, partition, candidates)
    if spec.num_nodes > len(candidates):  # as slurmctld: the partition (less -x) has fewer nodes
        raise SpecError("Node count specification invalid: the partition has "
                        f"{len(candidates)} usable node(s), the job asks {spec.num_nodes}")
    known = gpu_memory or {}
    if spec.num_nodes > 1:
        _check_nodes(spec, config, candidates, known)
        return Admitted(partition.name, time_limit)
    if not any(could_ever_run(spec, config.nodes[name], known.get(name)) for name in candidates):
        slices = [g.count for g in spec.gres if g.name == "gpumem"]
        if slices and any(could_ever_run(spec, config.nodes[name]) for name in candidates):
            largest = max(known.get(name, 0) for name in candidates)
            raise SpecError(f"{UNAVAILABLE}: --gpu-mem asks {slices[0]} MB of one GPU, and the largest GPU of "
                            f"the partition has {largest} MB")
        raise SpecError(UNAVAILABLE)
    return Admitted(partition.name, time_limit)


_SHARES = ("shard", "mps", "gpumem")


def _check_nodes(spec: JobSpec, config: ClusterConfig, candidates: list[str], known: Mapping[str, int]) -> None:
    """A multi-node job: each node's share (core/layout.py) must fit some node, and some set of
    ``num_nodes`` distinct candidates must hold the shares all at once (the nodes named by -w among them)."""
    needs = sorted((n.cpus for n in node_layout(spec)), reverse=True)
    fitting = [sum(could_ever_run(spec, config.nodes[name], known.get(name), cpus) for name in candidates)
               for cpus in needs]
    if not fitting or fitting[-1] == 0:
        raise SpecError(UNAVAILABLE)
    # the shares differ only in CPUs, so the nodes that fit a larger one fit every smaller one: the
    # i-th largest share needs i+1 fitting nodes
    if any(count < i + 1 for i, count in enumerate(fitting)):
        raise SpecError(f"{UNAVAILABLE}: no {spec.num_nodes} nodes of the partition can each hold their share")
    required = hostlist_option("--nodelist", spec.nodelist) if spec.nodelist else []
    if any(not could_ever_run(spec, config.nodes[name], known.get(name), needs[-1]) for name in required):
        raise SpecError(UNAVAILABLE)


def _check_request(spec: JobSpec, limits: Mapping[str, tuple[str, int]]) -> None:
    """Refuse what a raw gRPC client could send but the CLIs never would: a NUL byte in any text,
    counts and sizes out of range, text longer than the store's columns hold. So a refused request
    is never stored, and what is stored fits."""
    problem = text_problem(spec, limits)  # every text field's bound (core/textlimits.py)
    if problem is not None:
        raise SpecError(problem)
    for field, (what, _) in (*limits.items(), ("script", ("the batch script", 0))):
        text = getattr(spec, field)
        if isinstance(text, str):
            _no_nul(text, what)
    for field, what in _ONE_LINE.items():
        if any(c in (getattr(spec, field) or "") for c in "\n\r"):
            raise SpecError(f"Invalid job request: {what} contains a line break")
    if spec.script is not None:
        problem = script_problem(spec.script)
        if problem is not None:
            raise SpecError(problem)
    if sum(len(k) + len(v) + 2 for k, v in spec.environment.items()) > MAX_ENVIRONMENT:
        raise SpecError(f"Invalid job request: the environment is larger than {MAX_ENVIRONMENT} characters")
    for arg in spec.argv:
        _no_nul(arg, "the command")
    for key, value in spec.environment.items():
        _no_nul(key, "the environment")
        _no_nul(value, "the environment")
    for req in spec.gres:
        _no_nul(req.name + (req.type or ""), "the generic resource (gres) request")
        if req.count < 1:
            raise SpecError(f"Invalid generic resource (gres) specification: {req}")
    if len(format_gres(spec.gres)) > GRES_MAX_CHARS:
        raise SpecError(f"Invalid generic resource (gres) specification: longer than {GRES_MAX_CHARS} characters")
    if not 1 <= spec.num_nodes <= INT32_MAX or not (spec.max_nodes == 0 or spec.num_nodes <= spec.max_nodes
                                                      <= INT32_MAX):
        raise SpecError("Node count specification invalid")
    if not 0 <= spec.ntasks_per_node <= INT32_MAX:
        raise SpecError("Invalid task or CPU count specification")
    if not (1 <= spec.ntasks <= INT32_MAX and 1 <= spec.cpus_per_task <= INT32_MAX):
        raise SpecError("Invalid task or CPU count specification")
    if not 0 <= spec.mem_mb <= MEM_MAX_MB:
        raise SpecError(f"Invalid memory specification: {spec.mem_mb}")
    if spec.time_limit is not None and not 0 <= spec.time_limit <= INT32_MAX:
        raise SpecError(TIME_LIMIT_INVALID)
    for when, flag in ((spec.begin_time, "--begin"), (spec.deadline, "--deadline")):
        if when is not None and not 0 < when <= LAST_TIME:  # NaN too
            raise SpecError(f"Invalid {flag} specification: {when}")
    if spec.begin_time is not None and spec.deadline is not None and spec.deadline < spec.begin_time:
        raise SpecError("Incompatible begin and deadline time specification")
    if not (0 <= spec.warn_signal < 65 and 0 <= spec.warn_time <= 0xFFFF):  # 64: SIGRTMAX on Linux
        raise SpecError("Invalid --signal specification")


def _no_nul(text: str, what: str) -> None:
    if "\x00" in text:
        raise SpecError(f"Invalid job request: {what} contains a NUL byte")


def _featured_nodes(spec: JobSpec, config: ClusterConfig, partition: PartitionConfig,
                    candidates: list[str]) -> list[str]:
    """The candidates with the features --constraint asks. As slurmctld: ``Invalid feature specification``
    when no node of the partition has them, ``Requested node configuration is not available`` when a
    node -w names lacks them (or -x left none that has them)."""
    wanted = parse_constraint(spec.constraint)
    if not any(satisfies(wanted, config.nodes[name].features) for name in partition.nodes if name in config.nodes):
        raise SpecError(INVALID_FEATURES)
    featured = [name for name in candidates if satisfies(wanted, config.nodes[name].features)]
    required = hostlist_option("--nodelist", spec.nodelist) if spec.nodelist else []
    if not featured or any(name not in featured for name in required):
        raise SpecError(UNAVAILABLE)
    return featured


def _requested_nodes(spec: JobSpec, config: ClusterConfig, candidates: list[str]) -> list[str]:
    """The partition's nodes the job may use by its -w (the node it must run on) and -x."""
    required = hostlist_option("--nodelist", spec.nodelist)
    excluded = set(hostlist_option("--exclude", spec.exclude))
    unknown = [name for name in [*required, *excluded] if name not in config.nodes]
    if unknown:
        raise SpecError(f"Invalid node name specified: {unknown[0]}")
    if len(required) > spec.num_nodes:  # every named node is in the allocation: -N must cover them
        raise SpecError(f"Node count specification invalid: -w names {len(required)} nodes, "
                        f"and the job asks {spec.num_nodes} (-N {len(required)} or more)")
    if not required:
        return [name for name in candidates if name not in excluded]
    if any(name in excluded or name not in candidates for name in required):  # excluded, or not in the partition
        raise SpecError(UNAVAILABLE)
    if len(required) == spec.num_nodes:
        return required
    return [*required, *(name for name in candidates if name not in excluded and name not in required)]


def _partition_for(spec: JobSpec, config: ClusterConfig) -> PartitionConfig:
    if spec.partition:
        found = config.partitions.get(spec.partition)
        if found is None:
            raise SpecError(f"invalid partition specified: {spec.partition}")
        return found
    default = config.default_partition
    if default is None:
        raise SpecError("No partition specified or system default partition")
    return default


def own_user(spec: JobSpec, requester: Identity, operators: frozenset[int]) -> JobSpec:
    """The request with its user name taken from its uid on this host, never from the client (as
    slurmctld names a job's user). A user's job names the user's own uid and primary gid; a uid this
    host does not know is refused ("Invalid user id", ESLURM_USER_ID_MISSING's words) unless an
    operator sends it (an operator vouches for the name; the agents give such a job no supplementary
    group of that name's: nodeagent/identity.py)."""
    import pwd

    if requester.uid not in operators and (spec.uid, spec.gid) != (requester.uid, requester.gid):
        raise PermissionDenied(f"Access/permission denied: the job is for uid {spec.uid} gid {spec.gid}, "
                               f"the request comes from uid {requester.uid} gid {requester.gid}")
    try:
        name = pwd.getpwuid(spec.uid).pw_name
    except (KeyError, OverflowError):
        if requester.uid in operators:
            return spec
        raise PermissionDenied(f"Invalid user id: uid {spec.uid} has no name on the controller's host") from None
    return spec if spec.user == name else replace(spec, user=name)


def _group_names(user: str, gid: int) -> list[str]:
    """The user's group names, for AllowGroups (none where the user is unknown on this host)."""
    import grp
    import os

    try:
        ids = os.getgrouplist(user, gid)
    except (KeyError, OSError, ValueError):  # ValueError: a NUL byte, which admission refuses
        return []
    names = []
    for g in ids:
        try:
            names.append(grp.getgrgid(g).gr_name)
        except KeyError:
            continue
    return names
