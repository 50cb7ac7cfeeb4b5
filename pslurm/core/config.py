"""Cluster configuration in slurm.conf / gres.conf / cgroup.conf syntax, and where to find it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from pslurm.core.gres import GresRequest


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class NodeConfig:
    """One ``NodeName=`` entry, expanded to a single node."""

    name: str
    addr: str = "127.0.0.1"  # NodeAddr=
    port: int = 6818  # Port= (the agent's gRPC port)
    cpus: int = 1  # CPUs=
    real_memory: int = 1  # RealMemory=, MB
    gres: tuple[GresRequest, ...] = ()  # Gres=gpu:2 or gpu:a100:2,gpu:v100:1

    def gpus(self, type_: str | None = None) -> int:
        return sum(g.count for g in self.gres if g.name == "gpu" and (type_ is None or g.type == type_))


@dataclass(frozen=True)
class PartitionConfig:
    """One ``PartitionName=`` entry."""

    name: str
    nodes: tuple[str, ...]  # expanded node names
    default: bool = False  # Default=YES
    max_time: int | None = None  # MaxTime=, seconds; None is INFINITE
    default_time: int | None = None  # DefaultTime=, seconds; None: max_time
    state: str = "UP"  # State=UP|DOWN|DRAIN|INACTIVE
    max_nodes: int | None = None  # MaxNodes=; None is UNLIMITED
    priority_job_factor: int = 1  # PriorityJobFactor= (the partition factor of multifactor priority)
    allow_groups: tuple[str, ...] = ()  # AllowGroups=; empty is ALL


@dataclass(frozen=True)
class GresConfLine:
    """One gres.conf line: ``[NodeName=c[000-001]] Name=gpu [Type=a100] File=/dev/nvidia[0-1] [Cores=0-7]``
    or ``Count=N`` instead of ``File=``, or ``AutoDetect=nvml``."""

    name: str | None  # None on a bare AutoDetect= line
    node_names: tuple[str, ...] | None = None  # None: applies to every node
    type: str | None = None
    files: tuple[str, ...] = ()  # expanded, one per device
    count: int = 0  # len(files) when File= is given
    cores: tuple[int, ...] | None = None
    autodetect: str | None = None  # "nvml" or "off"


@dataclass(frozen=True)
class CgroupConfig:
    """cgroup.conf beside pslurm.conf."""

    constrain_devices: bool = False  # ConstrainDevices=yes
    constrain_cores: bool = False  # ConstrainCores=yes


@dataclass(frozen=True)
class ClusterConfig:
    """Everything the controller, the agents and the CLIs read from pslurm.conf."""

    path: str  # the file this came from
    cluster_name: str = "pslurm"  # ClusterName=
    controller_host: str = "localhost"  # SlurmctldHost=name(addr): the name
    controller_addr: str = "127.0.0.1"  # ... and the address to reach it on
    controller_port: int = 6817  # SlurmctldPort=
    database_url: str = ""  # DatabaseURL= (pslurm's own key); "" -> sqlite in state_dir
    state_dir: str = "/var/spool/pslurm"  # StateSaveLocation=
    spool_dir: str = "/var/spool/pslurm/d"  # SlurmdSpoolDir=
    slurmd_timeout: int = 300  # SlurmdTimeout=, seconds without heartbeat before DOWN
    kill_wait: int = 30  # KillWait=, seconds between SIGTERM and SIGKILL
    nodes: dict[str, NodeConfig] = field(default_factory=dict)
    partitions: dict[str, PartitionConfig] = field(default_factory=dict)
    extra: dict[str, str] = field(default_factory=dict)  # keys pslurm does not use, kept as read

    @property
    def default_partition(self) -> PartitionConfig | None:
        for part in self.partitions.values():
            if part.default:
                return part
        return next(iter(self.partitions.values()), None)

    @property
    def controller_target(self) -> str:
        """host:port for a gRPC channel."""
        return f"{self.controller_addr}:{self.controller_port}"


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduling keys of pslurm.conf (slurm.conf's names; the per-user limits, which Slurm keeps in
    QOS and associations, are pslurm.conf keys here)."""

    weight_age: int = 0  # PriorityWeightAge=
    weight_fairshare: int = 0  # PriorityWeightFairshare=
    weight_jobsize: int = 0  # PriorityWeightJobSize=
    weight_partition: int = 0  # PriorityWeightPartition=
    weight_qos: int = 0  # PriorityWeightQOS= (pslurm has no QOS: the factor is 0)
    max_age: int = 7 * 86400  # PriorityMaxAge=
    decay_half_life: int = 7 * 86400  # PriorityDecayHalfLife= (0: no decay)
    favor_small: bool = False  # PriorityFavorSmall=
    billing_weights: tuple[tuple[str, float], ...] = (("cpu", 1.0), ("gres/gpu", 1.0))  # TRESBillingWeights=
    max_job_count: int = 0  # MaxJobCount= (0: no limit)
    max_array_size: int = 1001  # MaxArraySize=
    max_submit_jobs_per_user: int = 0  # MaxSubmitJobsPerUser= (pslurm's; Slurm's QOS MaxSubmitJobsPerUser)
    max_jobs_per_user: int = 0  # MaxJobsPerUser= (pslurm's; Slurm's QOS MaxJobsPerUser)
    max_gpus_per_user: int = 0  # MaxTRESPerUser=gres/gpu=N (pslurm's; Slurm's QOS MaxTRESPerUser)
    max_cpus_per_user: int = 0  # MaxTRESPerUser=cpu=N
    job_requeue: bool = True  # JobRequeue= (1: batch jobs may be requeued unless --no-requeue)
    enforce_part_limits: bool = True  # EnforcePartLimits= (NO: a job over MaxTime pends PartitionTimeLimit)
    bf_max_job_test: int = 500  # SchedulerParameters=bf_max_job_test=N: reservations per pass


def _time_or_minutes(path: str, key: str, value: str) -> int:
    from pslurm.core.timefmt import parse_time_limit

    try:
        found = parse_time_limit(value)
    except ValueError as exc:
        raise ConfigError(f"{path}: {key}: {exc}") from None
    return 0 if found is None else found


def scheduler_config(cfg: ClusterConfig) -> SchedulerConfig:
    """The scheduling keys of ``cfg.extra`` (kept there so the file round-trips). Raises ConfigError."""
    kv = {k.lower(): v for k, v in cfg.extra.items()}
    path = cfg.path
    values: dict[str, object] = {}

    def whole(key: str) -> int:
        text = kv[key]
        if not text.isdigit():
            raise ConfigError(f"{path}: {key}={text}: expected a whole number")
        return int(text)

    for key, attr in (("priorityweightage", "weight_age"), ("priorityweightfairshare", "weight_fairshare"),
                      ("priorityweightjobsize", "weight_jobsize"), ("priorityweightpartition", "weight_partition"),
                      ("priorityweightqos", "weight_qos"), ("maxjobcount", "max_job_count"),
                      ("maxarraysize", "max_array_size"), ("maxsubmitjobsperuser", "max_submit_jobs_per_user"),
                      ("maxjobsperuser", "max_jobs_per_user")):
        if key in kv:
            values[attr] = whole(key)
    for key, attr in (("prioritymaxage", "max_age"), ("prioritydecayhalflife", "decay_half_life")):
        if key in kv:
            values[attr] = _time_or_minutes(path, key, kv[key])
    for key, attr in (("priorityfavorsmall", "favor_small"), ("jobrequeue", "job_requeue")):
        if key in kv:
            values[attr] = kv[key].lower() in ("yes", "true", "1")
    if "enforcepartlimits" in kv:
        values["enforce_part_limits"] = kv["enforcepartlimits"].upper() not in ("NO", "0", "FALSE")
    if "tresbillingweights" in kv:
        weights = []
        for item in filter(None, kv["tresbillingweights"].split(",")):
            name, eq, num = item.partition("=")
            unit = 1.0
            if num[-1:].upper() in ("K", "M", "G", "T"):  # Mem=0.25G: per GB
                unit = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}[num[-1].upper()]
                num = num[:-1]
            try:
                weights.append((name.lower(), float(num) * (unit if name.lower() == "mem" else 1.0)))
            except ValueError:
                raise ConfigError(f"{path}: TRESBillingWeights: bad weight '{item}'") from None
            if not eq:
                raise ConfigError(f"{path}: TRESBillingWeights: expected NAME=WEIGHT, got '{item}'")
        values["billing_weights"] = tuple(weights)
    if "maxtresperuser" in kv:
        for item in filter(None, kv["maxtresperuser"].split(",")):
            name, _, num = item.partition("=")
            if not num.isdigit() or name.lower() not in ("gres/gpu", "cpu"):
                raise ConfigError(f"{path}: MaxTRESPerUser: expected gres/gpu=N or cpu=N, got '{item}'")
            values["max_gpus_per_user" if name.lower() == "gres/gpu" else "max_cpus_per_user"] = int(num)
    for item in filter(None, kv.get("schedulerparameters", "").split(",")):
        name, _, num = item.partition("=")
        if name.lower() == "bf_max_job_test":
            if not num.isdigit():
                raise ConfigError(f"{path}: SchedulerParameters: bf_max_job_test={num}: expected a number")
            values["bf_max_job_test"] = int(num)
    return SchedulerConfig(**values)  # type: ignore[arg-type]


# --- Parsing: Slurm's "Key=Value Key=Value" lines -------------------------------------------------


def _err(path: str, lineno: int, what: str) -> ConfigError:
    return ConfigError(f"{path}:{lineno}: {what}")


def _logical_lines(text: str, path: str) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """Yield (first line number, [(key, value)]) per logical line: backslash continuations joined,
    ``#`` comments dropped, quoted values unquoted. Keys keep their spelling."""
    import shlex  # lazy: the CLIs import this module on every start

    pending, start = "", 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not pending:
            start = lineno
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical, pending = pending + line, ""
        lexer = shlex.shlex(logical, posix=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        try:
            tokens = list(lexer)
        except ValueError as exc:
            raise _err(path, start, f"cannot parse line: {exc}") from None
        pairs = []
        for tok in tokens:
            key, eq, value = tok.partition("=")
            if not eq or not key:
                raise _err(path, start, f"expected Key=Value, got '{tok}'")
            pairs.append((key, value))
        if pairs:
            yield start, pairs
    if pending:
        raise _err(path, start, "line continuation (trailing backslash) at end of file")


def _int(path: str, lineno: int, key: str, value: str, hi: int = 2**31 - 1) -> int:
    if not value.isascii() or not value.isdigit() or int(value) > hi:
        raise _err(path, lineno, f"{key}={value}: expected a whole number from 0 to {hi}")
    return int(value)


def _bool(path: str, lineno: int, key: str, value: str) -> bool:
    low = value.lower()
    if low not in ("yes", "no", "true", "false", "1", "0"):
        raise _err(path, lineno, f"{key}={value}: expected YES or NO")
    return low in ("yes", "true", "1")


def _hosts(path: str, lineno: int, key: str, value: str) -> list[str]:
    from pslurm.core.hostlists import expand

    try:
        return expand(value)
    except ValueError as exc:
        raise _err(path, lineno, f"{key}={value}: {exc}") from None


def _time(path: str, lineno: int, key: str, value: str) -> int | None:
    from pslurm.core.timefmt import parse_time_limit

    try:
        return parse_time_limit(value)
    except ValueError as exc:
        raise _err(path, lineno, f"{key}: {exc}") from None


_GLOBAL_STR = {"clustername": "cluster_name", "databaseurl": "database_url",
               "statesavelocation": "state_dir", "slurmdspooldir": "spool_dir"}  # fmt: skip
_GLOBAL_INT = {"slurmctldport": "controller_port", "slurmdtimeout": "slurmd_timeout", "killwait": "kill_wait"}
_CTLD_HOST = re.compile(r"([^()\s]+)(?:\(([^()\s]+)\))?")
_PART_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")


def _nodes(path: str, lineno: int, kv: dict[str, str]) -> list[NodeConfig]:
    """The nodes of one NodeName= line (``kv``: lower-case keys, DEFAULT values merged in)."""
    from pslurm.core.gres import GresError, parse_node_gres

    names = _hosts(path, lineno, "NodeName", kv["nodename"])
    addrs = _hosts(path, lineno, "NodeAddr", kv["nodeaddr"]) if "nodeaddr" in kv else ["127.0.0.1"]
    if len(addrs) not in (1, len(names)):
        raise _err(path, lineno, f"NodeAddr= names {len(addrs)} addresses for {len(names)} nodes")
    port = _int(path, lineno, "Port", kv["port"], 65535) if "port" in kv else None
    try:
        gres = parse_node_gres(kv.get("gres", ""))
    except GresError as exc:
        raise _err(path, lineno, str(exc)) from None
    cpus = _int(path, lineno, "CPUs", kv["cpus"]) if "cpus" in kv else 1
    mem = _int(path, lineno, "RealMemory", kv["realmemory"]) if "realmemory" in kv else 1
    out = []
    for i, name in enumerate(names):
        shared_addr = len(addrs) == 1
        node_port = 6818 if port is None else port + (i if shared_addr and len(names) > 1 else 0)
        if node_port > 65535:
            raise _err(path, lineno, f"Port={port}: node {name} would get port {node_port} > 65535")
        out.append(NodeConfig(name, addrs[0 if shared_addr else i], node_port, cpus, mem, gres))
    return out


def _partition(path: str, lineno: int, kv: dict[str, str], nodes: dict[str, NodeConfig]) -> PartitionConfig:
    """One PartitionName= line (``kv``: lower-case keys, DEFAULT values merged in)."""
    name, spec = kv["partitionname"], kv.get("nodes", "")
    members = list(nodes) if spec.upper() == "ALL" else _hosts(path, lineno, "Nodes", spec)
    for node in members:
        if node not in nodes:
            raise _err(path, lineno, f"partition {name}: node {node} is not defined by any NodeName= line")
    state = kv.get("state", "UP").upper()
    if state not in _PART_STATES:
        raise _err(path, lineno, f"State={kv['state']}: expected one of {', '.join(_PART_STATES)}")
    return PartitionConfig(
        name=name,
        nodes=tuple(members),
        default=_bool(path, lineno, "Default", kv["default"]) if "default" in kv else False,
        max_time=_time(path, lineno, "MaxTime", kv["maxtime"]) if "maxtime" in kv else None,
        default_time=_time(path, lineno, "DefaultTime", kv["defaulttime"]) if "defaulttime" in kv else None,
        state=state,
        max_nodes=(None if kv.get("maxnodes", "UNLIMITED").upper() in ("UNLIMITED", "INFINITE")
                   else _int(path, lineno, "MaxNodes", kv["maxnodes"])),
        priority_job_factor=(_int(path, lineno, "PriorityJobFactor", kv["priorityjobfactor"], 65533)
                             if "priorityjobfactor" in kv else 1),
        allow_groups=(() if kv.get("allowgroups", "ALL").upper() == "ALL"
                      else tuple(g for g in kv["allowgroups"].split(",") if g)),
    )


def parse_slurm_conf(text: str, path: str = "<string>") -> ClusterConfig:
    """Parse pslurm.conf, written in slurm.conf syntax, into a ClusterConfig.

    Keys are case-insensitive. Globals: ClusterName, SlurmctldHost (``name`` or ``name(addr)``;
    without an address, ``localhost`` is reached on 127.0.0.1 and any other name on itself),
    SlurmctldPort, DatabaseURL (pslurm's own), StateSaveLocation, SlurmdSpoolDir, SlurmdTimeout,
    KillWait; other global keys are kept in ``extra``. ``NodeName=c[000-003]`` lines take NodeAddr
    (one address for all nodes, or a hostlist with one per node), Port, CPUs, RealMemory, Gres.
    When nodes of one line share an address, ``Port`` is a base: node i gets Port+i, so several
    agents can run on one host. ``PartitionName=`` lines take Nodes (a hostlist or ALL), Default,
    MaxTime, DefaultTime, State, MaxNodes, PriorityJobFactor, AllowGroups. Scheduling keys are read
    from ``extra`` by :func:`scheduler_config`. ``NodeName=DEFAULT`` / ``PartitionName=DEFAULT`` set defaults
    for the lines after them. Other node and partition keys are ignored.
    Raises ConfigError(``path:line: what``).
    """
    values: dict[str, object] = {}
    extra: dict[str, str] = {}
    nodes: dict[str, NodeConfig] = {}
    node_defaults: dict[str, str] = {}
    part_defaults: dict[str, str] = {}
    part_lines: list[tuple[int, dict[str, str]]] = []
    for lineno, pairs in _logical_lines(text, path):
        kind = pairs[0][0].lower()
        kv = {k.lower(): v for k, v in pairs}
        if kind in ("nodename", "partitionname"):
            defaults = node_defaults if kind == "nodename" else part_defaults
            if kv[kind].upper() == "DEFAULT":
                defaults.update({k: v for k, v in kv.items() if k != kind})
            elif kind == "nodename":
                for node in _nodes(path, lineno, {**node_defaults, **kv}):
                    if node.name in nodes:
                        raise _err(path, lineno, f"node {node.name} is defined twice")
                    nodes[node.name] = node
            else:
                part_lines.append((lineno, {**part_defaults, **kv}))  # Nodes=ALL means every node in the file
            continue
        for key, value in pairs:
            low = key.lower()
            if low in _GLOBAL_STR:
                values[_GLOBAL_STR[low]] = value
            elif low in _GLOBAL_INT:
                values[_GLOBAL_INT[low]] = _int(
                    path, lineno, key, value, 65535 if low.endswith("port") else 2**31 - 1
                )
            elif low in ("slurmctldhost", "controlmachine"):
                m = _CTLD_HOST.fullmatch(value)
                if not m:
                    raise _err(path, lineno, f"{key}={value}: expected name or name(address)")
                if "controller_host" not in values:  # later lines name backup controllers
                    values["controller_host"] = m.group(1)
                    values["controller_addr"] = m.group(2) or (
                        "127.0.0.1" if m.group(1) == "localhost" else m.group(1)
                    )
            else:
                extra[key] = value
    partitions: dict[str, PartitionConfig] = {}
    for lineno, kv in part_lines:
        part = _partition(path, lineno, kv, nodes)
        if part.name in partitions:
            raise _err(path, lineno, f"partition {part.name} is defined twice")
        partitions[part.name] = part
    return ClusterConfig(path=path, nodes=nodes, partitions=partitions, extra=extra, **values)  # type: ignore[arg-type]


_AUTODETECT = ("nvml", "off", "rsmi", "nrt", "oneapi")
_COUNT_SUFFIX = {"k": 1024, "m": 1024**2, "g": 1024**3}


def _cpu_list(path: str, lineno: int, value: str) -> tuple[int, ...]:
    """``0-7,16-23`` -> (0, ..., 7, 16, ..., 23)."""
    cores: list[int] = []
    for item in value.split(","):
        lo, dash, hi = item.partition("-")
        a = _int(path, lineno, "Cores", lo, 65535)
        b = _int(path, lineno, "Cores", hi, 65535) if dash else a
        if b < a:
            raise _err(path, lineno, f"Cores={value}: range {item} runs backwards")
        cores.extend(range(a, b + 1))
    return tuple(cores)


def parse_gres_conf(text: str, path: str = "<string>") -> list[GresConfLine]:
    """Parse gres.conf: ``[NodeName=hostlist] Name=gpu [Type=a100] File=/dev/nvidia[0-3] [Cores=0-15]``,
    or ``Count=N`` instead of File=, or ``[NodeName=..] AutoDetect=nvml``. File= is expanded and
    the count is the number of files; with neither File= nor Count= the count is 1, as in Slurm.
    Raises ConfigError(``path:line: what``).
    """
    out: list[GresConfLine] = []
    for lineno, pairs in _logical_lines(text, path):
        kv = {k.lower(): v for k, v in pairs}
        auto = kv.get("autodetect")
        if auto is not None and auto.lower() not in _AUTODETECT:
            raise _err(path, lineno, f"AutoDetect={auto}: expected one of {', '.join(_AUTODETECT)}")
        node_names = tuple(_hosts(path, lineno, "NodeName", kv["nodename"])) if "nodename" in kv else None
        if "name" not in kv:
            if auto is None or set(kv) - {"autodetect", "nodename"}:
                raise _err(path, lineno, "Name= is required (e.g. Name=gpu)")
            out.append(GresConfLine(None, node_names, autodetect=auto.lower()))
            continue
        files = tuple(_hosts(path, lineno, "File", kv["file"])) if "file" in kv else ()
        count = len(files) if files else 1
        if "count" in kv:
            raw = kv["count"]
            mult = _COUNT_SUFFIX.get(raw[-1:].lower(), 1)
            given = _int(path, lineno, "Count", raw[:-1] if mult > 1 else raw) * mult
            if files and given != len(files):
                raise _err(path, lineno, f"Count={raw} does not match the {len(files)} devices of File=")
            count = given
        out.append(GresConfLine(
            name=kv["name"],
            node_names=node_names,
            type=kv.get("type") or None,
            files=files,
            count=count,
            cores=_cpu_list(path, lineno, kv["cores"]) if "cores" in kv else None,
            autodetect=auto.lower() if auto else None,
        ))  # fmt: skip
    return out


def gres_lines_for_node(lines: Iterable[GresConfLine], node_name: str) -> list[GresConfLine]:
    """The gres.conf lines that apply to ``node_name``: those without NodeName= or naming it."""
    return [ln for ln in lines if ln.node_names is None or node_name in ln.node_names]


def parse_cgroup_conf(text: str, path: str = "<string>") -> CgroupConfig:
    """Parse cgroup.conf: ConstrainDevices=yes|no and ConstrainCores=yes|no; other keys are ignored."""
    flags: dict[str, bool] = {}
    for lineno, pairs in _logical_lines(text, path):
        for key, value in pairs:
            if key.lower() in ("constraindevices", "constraincores"):
                field_name = "constrain_devices" if key.lower() == "constraindevices" else "constrain_cores"
                flags[field_name] = _bool(path, lineno, key, value)
    return CgroupConfig(**flags)


# --- Files and locations ----------------------------------------------------------------------------


def _read(path: str) -> str | None:
    """The file's text; None when it does not exist."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def load_cluster_config(path: str) -> ClusterConfig:
    """Read and parse pslurm.conf; an empty DatabaseURL becomes ``sqlite:///<state_dir>/pslurm.db``."""
    text = _read(path)
    if text is None:
        raise ConfigError(f"{path}: cannot read: No such file or directory")
    cfg = parse_slurm_conf(text, path)
    if not cfg.database_url:
        cfg = replace(cfg, database_url=f"sqlite:///{cfg.state_dir}/pslurm.db")
    return cfg


def load_gres_conf(conf_path: str) -> list[GresConfLine]:
    """gres.conf from the directory of pslurm.conf at ``conf_path``; [] when there is none."""
    path = os.path.join(os.path.dirname(conf_path), "gres.conf")
    text = _read(path)
    return [] if text is None else parse_gres_conf(text, path)


def load_cgroup_conf(conf_path: str) -> CgroupConfig:
    """cgroup.conf from the directory of pslurm.conf at ``conf_path``; defaults when there is none."""
    path = os.path.join(os.path.dirname(conf_path), "cgroup.conf")
    text = _read(path)
    return CgroupConfig() if text is None else parse_cgroup_conf(text, path)


def default_state_dir() -> str:
    """Where ``pslurm up`` keeps the per-user local cluster: ``$XDG_STATE_HOME/pslurm`` or
    ``~/.local/state/pslurm``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "pslurm")


def find_config_path() -> str:
    """``$PSLURM_CONF``, else ``/etc/pslurm/pslurm.conf`` if it exists, else the per-user one."""
    env = os.environ.get("PSLURM_CONF")
    if env:
        return env
    if os.path.exists("/etc/pslurm/pslurm.conf"):
        return "/etc/pslurm/pslurm.conf"
    return os.path.join(default_state_dir(), "pslurm.conf")


def render_slurm_conf(cfg: ClusterConfig) -> str:
    """Write ``cfg`` in slurm.conf syntax, one NodeName= line per node, such that
    ``parse_slurm_conf(render_slurm_conf(cfg))`` equals ``cfg`` apart from ``path``."""
    import shlex

    from pslurm.core.gres import format_gres
    from pslurm.core.hostlists import collect, expand
    from pslurm.core.timefmt import format_duration

    q = shlex.quote
    lines = [
        "# pslurm cluster configuration (slurm.conf syntax)",
        f"ClusterName={q(cfg.cluster_name)}",
        f"SlurmctldHost={q(f'{cfg.controller_host}({cfg.controller_addr})')}",
        f"SlurmctldPort={cfg.controller_port}",
        f"DatabaseURL={q(cfg.database_url)}",
        f"StateSaveLocation={q(cfg.state_dir)}",
        f"SlurmdSpoolDir={q(cfg.spool_dir)}",
        f"SlurmdTimeout={cfg.slurmd_timeout}",
        f"KillWait={cfg.kill_wait}",
    ]
    lines += [f"{key}={q(value)}" for key, value in cfg.extra.items()]
    for n in cfg.nodes.values():
        gres = f" Gres={q(format_gres(n.gres))}" if n.gres else ""
        lines.append(
            f"NodeName={n.name} NodeAddr={q(n.addr)} Port={n.port} CPUs={n.cpus} RealMemory={n.real_memory}{gres}"
        )
    for p in cfg.partitions.values():
        nodes = collect(p.nodes)
        if expand(nodes) != list(p.nodes):  # keep the configured order when a hostlist would sort it
            nodes = ",".join(p.nodes)
        line = f"PartitionName={q(p.name)} Nodes={q(nodes)} Default={'YES' if p.default else 'NO'}"
        line += f" MaxTime={'INFINITE' if p.max_time is None else format_duration(p.max_time)}"
        if p.default_time is not None:
            line += f" DefaultTime={format_duration(p.default_time)}"
        if p.max_nodes is not None:
            line += f" MaxNodes={p.max_nodes}"
        if p.priority_job_factor != 1:
            line += f" PriorityJobFactor={p.priority_job_factor}"
        if p.allow_groups:
            line += f" AllowGroups={q(','.join(p.allow_groups))}"
        lines.append(f"{line} State={p.state}")
    return "\n".join(lines) + "\n"
