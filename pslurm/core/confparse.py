"""Parsing and writing slurm.conf / gres.conf / cgroup.conf: Slurm's "Key=Value Key=Value" lines."""

from __future__ import annotations

from collections.abc import Iterable

from pslurm.core.accounts import check_accounts, parse_account_line, parse_user_line, render_accounts
from pslurm.core.clientconf import ConfigError, config_error, controller_host, logical_lines, whole_number
from pslurm.core.confmodel import AccountConfig, CgroupConfig, ClusterConfig, GresConfLine, NodeConfig, PartitionConfig

# --- Parsing: Slurm's "Key=Value Key=Value" lines -------------------------------------------------


def _err(path: str, lineno: int, what: str) -> ConfigError:
    return config_error(path, lineno, what)


_logical_lines = logical_lines  # the one tokenizer, shared with the client's reader
_int = whole_number


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


_GLOBAL_STR = {"clustername": "cluster_name", "databaseurl": "database_url", "databaseurlfile": "database_url_file",
               "statesavelocation": "state_dir", "slurmdspooldir": "spool_dir",
               "authkey": "auth_key", "authsocket": "auth_socket"}  # fmt: skip
_GLOBAL_INT = {"slurmctldport": "controller_port", "restport": "rest_port", "slurmdtimeout": "slurmd_timeout",
               "killwait": "kill_wait", "batchstarttimeout": "batch_start_timeout",
               "slurmctldtimeout": "slurmctld_timeout"}
_PART_STATES = ("UP", "DOWN", "DRAIN", "INACTIVE")


def _nodes(path: str, lineno: int, kv: dict[str, str]) -> list[NodeConfig]:
    """The nodes of one NodeName= line (``kv``: lower-case keys, DEFAULT values merged in)."""
    from pslurm.core.features import parse_features
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
    try:
        features = parse_features(kv.get("features", kv.get("feature", "")))
    except ValueError as exc:
        raise _err(path, lineno, str(exc)) from None
    out = []
    for i, name in enumerate(names):
        shared_addr = len(addrs) == 1
        node_port = 6818 if port is None else port + (i if shared_addr and len(names) > 1 else 0)
        if node_port > 65535:
            raise _err(path, lineno, f"Port={port}: node {name} would get port {node_port} > 65535")
        out.append(NodeConfig(name, addrs[0 if shared_addr else i], node_port, cpus, mem, gres, features))
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
    without an address, ``localhost`` is reached on 127.0.0.1 and any other name on itself; the
    first line is the primary controller, later lines its backups), SlurmctldTimeout,
    SlurmctldPort, RestPort, DatabaseURL, DatabaseURLFile, AuthKey and AuthSocket (pslurm's own), StateSaveLocation,
    SlurmdSpoolDir, SlurmdTimeout, KillWait, BatchStartTimeout; other global keys are kept in ``extra``.
    ``NodeName=c[000-003]`` lines take NodeAddr (one address for all nodes, or a hostlist with one per
    node), Port, CPUs, RealMemory, Gres.
    When nodes of one line share an address, ``Port`` is a base: node i gets Port+i, so several
    agents can run on one host. ``PartitionName=`` lines take Nodes (a hostlist or ALL), Default,
    MaxTime, DefaultTime, State, MaxNodes, PriorityJobFactor, AllowGroups. Scheduling keys are read
    from ``extra`` by :func:`scheduler_config`. ``NodeName=DEFAULT`` / ``PartitionName=DEFAULT`` set defaults
    for the lines after them. Other node and partition keys are ignored. ``AccountName=`` and
    ``UserName=`` lines (pslurm's own: accounts, their users and shares, users' default accounts)
    are read by :mod:`pslurm.core.accounts`.
    Raises ConfigError(``path:line: what``).
    """
    values: dict[str, object] = {}
    extra: dict[str, str] = {}
    nodes: dict[str, NodeConfig] = {}
    node_defaults: dict[str, str] = {}
    part_defaults: dict[str, str] = {}
    part_lines: list[tuple[int, dict[str, str]]] = []
    accounts: dict[str, AccountConfig] = {}  # pslurm's own AccountName= and UserName= lines (core.accounts)
    user_lines: list[tuple[int, str, str]] = []
    backups: list[tuple[str, str]] = []  # SlurmctldHost= lines after the first
    for lineno, pairs in _logical_lines(text, path):
        kind = pairs[0][0].lower()
        kv = {k.lower(): v for k, v in pairs}
        if kind == "accountname":
            account = parse_account_line(path, lineno, kv)
            if account.name in accounts:
                raise _err(path, lineno, f"account {account.name} is defined twice")
            accounts[account.name] = account
            continue
        if kind == "username":
            user_lines.append((lineno, *parse_user_line(path, lineno, kv)))
            continue
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
                host, addr = controller_host(path, lineno, key, value)
                if "controller_host" not in values:  # later lines name backup controllers
                    values["controller_host"], values["controller_addr"] = host, addr
                else:
                    backups.append((host, addr))
            else:
                extra[key] = value
    partitions: dict[str, PartitionConfig] = {}
    for lineno, kv in part_lines:
        part = _partition(path, lineno, kv, nodes)
        if part.name in partitions:
            raise _err(path, lineno, f"partition {part.name} is defined twice")
        partitions[part.name] = part
    default_accounts = check_accounts(path, accounts, user_lines)
    if backups:
        values["backup_controllers"] = tuple(backups)
    return ClusterConfig(path=path, nodes=nodes, partitions=partitions, accounts=accounts,
                         default_accounts=default_accounts, extra=extra, **values)  # type: ignore[arg-type]


_AUTODETECT = ("nvml", "off", "rsmi", "nrt", "oneapi")
SHARED_GRES = ("shard", "mps")  # gres.conf names that share the GPUs out (Slurm's gres/shard, gres/mps)
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


def _memory(path: str, lineno: int, name: str, value: str) -> int:
    """Memory= (pslurm's own, gpu lines only): MB, or with K/M/G/T as ``--mem`` takes it."""
    from pslurm.core.errors import SpecError
    from pslurm.core.jobdesc import parse_mem

    if name != "gpu":
        raise _err(path, lineno, f"Memory={value}: only a Name=gpu line has Memory=")
    try:
        mb = parse_mem(value)
    except (SpecError, OverflowError):
        mb = 0
    if not 0 < mb < 2**31:  # 2 PiB: more is a typo
        raise _err(path, lineno, f"Memory={value}: expected a size such as 16G or 16384 (MB)")
    return mb


def parse_gres_conf(text: str, path: str = "<string>") -> list[GresConfLine]:
    """Parse gres.conf: ``[NodeName=hostlist] Name=gpu [Type=a100] File=/dev/nvidia[0-3] [Cores=0-15]
    [Memory=80G]``, or ``Count=N`` instead of File=, or ``[NodeName=..] AutoDetect=nvml``. File= is
    expanded and the count is the number of files; with neither File= nor Count= the count is 1, as
    in Slurm. ``Name=shard|mps Count=N [File=...]``: Count= is required and is the shards or MPS
    units the line shares out over its File= GPUs (over all the node's GPUs without File=); the
    node's agent splits it (:mod:`pslurm.nodeagent.gpus`). Raises ConfigError(``path:line: what``).
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
        shared = kv["name"] in SHARED_GRES
        count = len(files) if files else 1
        if shared and "count" not in kv:
            units = "shards" if kv["name"] == "shard" else "MPS units"
            raise _err(path, lineno, f"Name={kv['name']} needs Count= (the {units} its GPUs offer)")
        if "count" in kv:
            raw = kv["count"]
            mult = _COUNT_SUFFIX.get(raw[-1:].lower(), 1)
            given = _int(path, lineno, "Count", raw[:-1] if mult > 1 else raw) * mult
            if files and given != len(files) and not shared:  # a shared line's Count is its units, not devices
                raise _err(path, lineno, f"Count={raw} does not match the {len(files)} devices of File=")
            if shared and given > 2**31 - 1:  # each GPU's part travels as a 32-bit count
                raise _err(path, lineno, f"Count={raw}: expected a whole number from 0 to {2**31 - 1}")
            count = given
        out.append(GresConfLine(
            name=kv["name"],
            node_names=node_names,
            type=kv.get("type") or None,
            files=files,
            count=count,
            cores=_cpu_list(path, lineno, kv["cores"]) if "cores" in kv else None,
            autodetect=auto.lower() if auto else None,
            memory_mb=_memory(path, lineno, kv["name"], kv["memory"]) if "memory" in kv else None,
        ))  # fmt: skip
    return out


def gres_lines_for_node(lines: Iterable[GresConfLine], node_name: str) -> list[GresConfLine]:
    """The gres.conf lines that apply to ``node_name``: those without NodeName= or naming it."""
    return [ln for ln in lines if ln.node_names is None or node_name in ln.node_names]


CGROUP_PLUGINS = ("autodetect", "cgroup/v1", "cgroup/v2", "disabled")
_CGROUP_FLAGS = {"constraindevices": "constrain_devices", "constraincores": "constrain_cores",
                 "constrainramspace": "constrain_ram_space"}


def parse_cgroup_conf(text: str, path: str = "<string>") -> CgroupConfig:
    """Parse cgroup.conf: ConstrainDevices, ConstrainCores, ConstrainRAMSpace (yes|no), CgroupPlugin
    (autodetect, cgroup/v1, cgroup/v2, disabled) and CgroupMountpoint; other keys are ignored."""
    values: dict[str, bool | str] = {}
    for lineno, pairs in _logical_lines(text, path):
        for key, value in pairs:
            low = key.lower()
            if low in _CGROUP_FLAGS:
                values[_CGROUP_FLAGS[low]] = _bool(path, lineno, key, value)
            elif low == "cgroupplugin":
                if value.lower() not in CGROUP_PLUGINS:
                    raise _err(path, lineno, f"{key}={value}: expected {', '.join(CGROUP_PLUGINS)}")
                values["plugin"] = value.lower()
            elif low == "cgroupmountpoint":
                if not value.startswith("/"):
                    raise _err(path, lineno, f"{key}={value}: expected an absolute path")
                values["mountpoint"] = value.rstrip("/") or "/"
    return CgroupConfig(**values)  # type: ignore[arg-type]


# --- Files and locations ----------------------------------------------------------------------------


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
        *(f"SlurmctldHost={q(f'{name}({addr})')}" for name, addr in cfg.controller_hosts),
        f"SlurmctldPort={cfg.controller_port}",
        f"RestPort={cfg.rest_port}",
        f"DatabaseURL={q(cfg.database_url)}",
        f"StateSaveLocation={q(cfg.state_dir)}",
        f"SlurmdSpoolDir={q(cfg.spool_dir)}",
        f"SlurmdTimeout={cfg.slurmd_timeout}",
        f"KillWait={cfg.kill_wait}",
        f"BatchStartTimeout={cfg.batch_start_timeout}",
        f"SlurmctldTimeout={cfg.slurmctld_timeout}",
    ]
    lines += [f"{key}={q(value)}" for key, value in (("DatabaseURLFile", cfg.database_url_file),
                                                     ("AuthKey", cfg.auth_key), ("AuthSocket", cfg.auth_socket))
              if value]
    lines += [f"{key}={q(value)}" for key, value in cfg.extra.items()]
    for n in cfg.nodes.values():
        gres = f" Gres={q(format_gres(n.gres))}" if n.gres else ""
        gres += f" Features={q(','.join(n.features))}" if n.features else ""
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
    lines += render_accounts(cfg)
    return "\n".join(lines) + "\n"
