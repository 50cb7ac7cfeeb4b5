"""``pslurm up``: a controller and N agents as processes on loopback, in one state directory.

Everything a cluster owns lives in its state directory: pslurm.conf, gres.conf and cgroup.conf,
the SQLite store, the agents' spool, logs and pid files. Ports are picked free at start, so two
clusters in two directories run side by side.

``pslurm up --conf FILE`` runs the nodes a given pslurm.conf names (all on this machine). Its
gres.conf and cgroup.conf are *copied* beside the written config: the agents read them from the
directory of the pslurm.conf they are given, and a copy makes the state dir a self-contained
record of what the cluster runs with (editing the original does not change a running cluster,
exactly as the rewritten pslurm.conf does not).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pslurm.auth.credential import create_key
from pslurm.auth.secretfiles import has_password, write_private
from pslurm.core.config import (
    ClusterConfig,
    ConfigError,
    NodeConfig,
    PartitionConfig,
    default_state_dir,
    load_gres_conf,
    parse_cgroup_conf,
    parse_slurm_conf,
    render_slurm_conf,
)
from pslurm.core.gres import GresRequest
from pslurm.core.hostlists import collect

# Inside the state directory: the controller's own (StateSaveLocation: the SQLite store, 0700, psctld's
# user's alone), and the database URL when it holds a password (DatabaseURLFile, 0600). The state
# directory itself stays open: the agents' spool, and for a root cluster its users' config and socket.
CONTROLLER_DIR = "ctld"
DATABASE_URL_FILE = "database.url"
NODES_PER_VIRTUAL_HOST = 250  # pslurm up --virtual: agents per hosting process


class ClusterError(Exception):
    """The cluster could not be brought up or down; one line for the user."""


@dataclass
class LocalCluster:
    state_dir: Path
    processes: dict[str, int] = field(default_factory=dict)

    @property
    def conf_path(self) -> Path:
        return self.state_dir / "pslurm.conf"

    @property
    def run_dir(self) -> Path:
        return self.state_dir / "run"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    @property
    def controller_dir(self) -> Path:
        """The controller's StateSaveLocation (psctld makes it 0700)."""
        return self.state_dir / CONTROLLER_DIR

    def _private_database(self, config: ClusterConfig) -> ClusterConfig:
        """``config`` with a database URL that holds a password moved out of pslurm.conf (which
        every user of the cluster reads: psctld would refuse it) into a 0600 DatabaseURLFile."""
        path = self.state_dir / DATABASE_URL_FILE
        if not has_password(config.database_url):
            if config.database_url_file != str(path):
                path.unlink(missing_ok=True)  # an earlier cluster's
            return config
        write_private(str(path), config.database_url + "\n")
        return replace(config, database_url="", database_url_file=str(path))

    def default_cluster_name(self) -> str:
        if self.state_dir.resolve() == Path(default_state_dir()).resolve():
            return "pslurm"
        return "pslurm-" + hashlib.sha256(str(self.state_dir.resolve()).encode()).hexdigest()[:8]

    # -- up --------------------------------------------------------------------------------

    def write_config(self, nodes: int, gpus_per_node: int, cpus: int, memory_mb: int, db_url: str | None,
                     cluster_name: str | None = None, gpu_memory_mb: int | None = None,
                     shards: int = 0, controllers: int = 1) -> ClusterConfig:
        """pslurm.conf with free ports and gres.conf with simulated GPUs (Count=). The cluster is
        named ``pslurm`` in the default state dir, else ``pslurm-`` and a digest of the state dir:
        clusters on one machine need names of their own, since their agents' job cgroups live
        under ``pslurm_<ClusterName>/<node>`` and each agent clears what it finds there at start.
        ``gpu_memory_mb``: each simulated GPU's memory (gres.conf ``Memory=``: jobs may then ask
        ``--gpu-mem`` and declare their use, see :mod:`pslurm.nodeagent.simgpu`); ``shards``: shards
        per GPU (``Name=shard`` in gres.conf, ``shard:N`` in the nodes' Gres=). ``controllers``: with more
        than one, ``ctl0`` on 127.0.0.1 and its backups ``ctl1``, ... on 127.0.0.2, ... (the same ports on
        addresses of their own), sharing ``db_url``, which must then be PostgreSQL (ClusterError)."""
        if cluster_name is None:
            cluster_name = self.default_cluster_name()
        if controllers > 1 and not (db_url or "").startswith("postgresql"):
            raise ClusterError(f"{controllers} controllers share one PostgreSQL database: give --db "
                               "postgresql+psycopg://USER:PASSWORD@HOST/DB (SQLite is one controller's file)")
        hosts = ([("localhost", "127.0.0.1")] if controllers == 1
                 else [(f"ctl{i}", f"127.0.0.{i + 1}") for i in range(controllers)])
        ports = free_ports(nodes + 2)
        rest_port = ports.pop()
        names = [f"c{i:03d}" for i in range(nodes)]
        gres: tuple[GresRequest, ...] = (GresRequest("gpu", None, gpus_per_node),) if gpus_per_node else ()
        if gpus_per_node and shards:
            gres += (GresRequest("shard", None, shards * gpus_per_node),)
        config = ClusterConfig(
            path=str(self.conf_path), cluster_name=cluster_name, controller_host=hosts[0][0],
            controller_addr=hosts[0][1], backup_controllers=tuple(hosts[1:]), controller_port=ports[0],
            rest_port=rest_port,
            database_url=db_url or f"sqlite:///{self.controller_dir / 'pslurm.db'}",
            state_dir=str(self.controller_dir), spool_dir=str(self.state_dir / "spool"),
            slurmd_timeout=10, kill_wait=5,
            nodes={n: NodeConfig(n, "127.0.0.1", p, cpus, memory_mb, gres)
                   for n, p in zip(names, ports[1:], strict=True)},
            partitions={"gpu": PartitionConfig("gpu", tuple(names), default=True)},
        )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        config = self._private_database(config)
        self.conf_path.write_text(render_slurm_conf(config))
        memory = f" Memory={gpu_memory_mb}" if gpu_memory_mb else ""
        shard_line = f"Name=shard Count={shards * gpus_per_node}" if shards else ""
        gres_lines = [f"NodeName={n} {line}" for n in names if gpus_per_node
                      for line in (f"Name=gpu Count={gpus_per_node}{memory}", shard_line) if line]
        (self.state_dir / "gres.conf").write_text("# simulated GPUs written by pslurm up\n"
                                                  + "".join(line + "\n" for line in gres_lines))
        (self.state_dir / "cgroup.conf").unlink(missing_ok=True)  # left by an earlier 'up --conf'
        return config

    def write_config_from(self, source: Path, db_url: str | None = None) -> ClusterConfig:
        """pslurm.conf for the nodes ``source`` names, run on this machine, plus copies of the
        gres.conf and cgroup.conf beside ``source``.

        What the file leaves out is made local: the controller on a free port of 127.0.0.1
        (SlurmctldHost/SlurmctldPort, and RestPort), SQLite in the state dir's ``ctld`` (DatabaseURL),
        ``ctld`` for StateSaveLocation, the state dir's ``spool`` for SlurmdSpoolDir, and free
        loopback ports for the agents when no NodeName= line sets Port=. ``db_url`` overrides
        DatabaseURL (and DatabaseURLFile). A database URL with a password is written to a 0600 file
        named by DatabaseURLFile, not into pslurm.conf. Raises ClusterError.
        """
        try:
            text = source.read_text()
            cfg = parse_slurm_conf(text, str(source))
            load_gres_conf(str(source))  # fail here, in one line, rather than in every agent
            cgroup = source.parent / "cgroup.conf"
            if cgroup.exists():
                parse_cgroup_conf(cgroup.read_text(), str(cgroup))
        except (OSError, ConfigError) as exc:
            why = str(exc) if isinstance(exc, ConfigError) else f"{source}: {exc.strerror}"
            raise ClusterError(why) from None
        if not cfg.nodes:
            raise ClusterError(f"{source}: no NodeName= lines: nothing to bring up")
        given, node_ports = _given_keys(text)
        ports = free_ports(len(cfg.nodes) + 2)
        rest_port = ports.pop()
        values: dict[str, object] = {"path": str(self.conf_path)}
        if not given & {"slurmctldhost", "controlmachine"}:
            values.update(controller_host="localhost", controller_addr="127.0.0.1")
        if "slurmctldport" not in given:
            values["controller_port"] = ports[0]
        if "restport" not in given:
            values["rest_port"] = rest_port
        if "statesavelocation" not in given:
            values["state_dir"] = str(self.controller_dir)
        if "slurmdspooldir" not in given:
            values["spool_dir"] = str(self.state_dir / "spool")
        if db_url or not given & {"databaseurl", "databaseurlfile"}:
            values["database_url"] = db_url or f"sqlite:///{self.controller_dir / 'pslurm.db'}"
            values["database_url_file"] = ""
        nodes = cfg.nodes
        if not node_ports:  # every node would get 6818 on one address
            nodes = {n: replace(node, port=p)
                     for (n, node), p in zip(cfg.nodes.items(), ports[1:], strict=True)}
        config = replace(cfg, nodes=nodes, **values)  # type: ignore[arg-type]
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for name in ("gres.conf", "cgroup.conf"):
            src, dst = source.parent / name, self.state_dir / name
            if src.exists() and not (dst.exists() and dst.samefile(src)):
                shutil.copyfile(src, dst)
            elif not src.exists():
                dst.unlink(missing_ok=True)  # a stale copy would give the nodes GPUs they do not have
        config = self._private_database(config)
        self.conf_path.write_text(render_slurm_conf(config))
        return config

    def start(self, config: ClusterConfig, timeout: float = 60.0, virtual: int = 0) -> dict[str, str]:
        """Start the controller and the agents, and return once every node is up (idle, or
        drained by its agent: those are returned, name -> reason). ``virtual``: host the agents in
        that many processes (``psd --virtual``, named ``psd-virtual-K``), not one each."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        create_key(config.auth_key_path)  # before any daemon starts: each of them reads it
        check_ports(config)  # a port another program holds: say which, rather than a daemon dying on it
        try:
            for index, (name, args) in enumerate(controller_processes(config)):
                self._spawn(name, ["pslurm.controller.app", "-f", str(self.conf_path), *args])
                if index == 0 and config.backup_controllers:  # the primary takes control before a backup starts
                    wait_controller(config, config.controller_addr, timeout, self._check_alive, "active")
            if virtual:
                names = list(config.nodes)
                size = -(-len(names) // virtual)
                for k, at in enumerate(range(0, len(names), size)):
                    self._spawn(f"psd-virtual-{k}", ["pslurm.nodeagent.app", "-f", str(self.conf_path), "--virtual",
                                                      "-N", collect(names[at:at + size])])
            else:
                for name in config.nodes:
                    self._spawn(f"psd-{name}", ["pslurm.nodeagent.app", "-f", str(self.conf_path), "-N", name])
            for _, addr in config.backup_controllers:  # each backup answers, standing by
                wait_controller(config, addr, timeout, self._check_alive)
            return wait_idle(config, set(config.nodes), timeout, self._check_alive)
        except BaseException:
            self.stop()
            raise

    def _spawn(self, name: str, module_args: list[str]) -> None:
        log = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", *module_args], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=self.state_dir)
        log.close()
        (self.run_dir / f"{name}.pid").write_text(f"{proc.pid}\n")
        self.processes[name] = proc.pid

    def _check_alive(self) -> None:
        for name, pid in self.processes.items():
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                raise ClusterError(f"{name} exited during start-up: {last_error(self.log_dir / f'{name}.log')}")

    # -- down ------------------------------------------------------------------------------

    def running(self) -> dict[str, int]:
        """Processes of this cluster still alive, by name (from the pid files)."""
        alive = {}
        for pid_file in sorted(self.run_dir.glob("*.pid")) if self.run_dir.exists() else []:
            try:
                pid = int(pid_file.read_text().strip())
            except ValueError:
                continue
            if _is_ours(pid):
                alive[pid_file.stem] = pid
        return alive

    def stop(self, grace: float = 10.0) -> list[str]:
        """SIGTERM every process (agents first, they end their jobs), SIGKILL what is left."""
        procs = {**self.running(), **{n: p for n, p in self.processes.items() if _is_ours(p)}}
        order = sorted(procs, key=lambda n: n.startswith("psctld"))  # agents first: they report their jobs' end
        for name in order:
            _signal(procs[name], signal.SIGTERM)
        deadline = time.time() + grace
        while time.time() < deadline and any(_is_ours(p) for p in procs.values()):
            _reap(procs.values())
            time.sleep(0.05)
        for pid in procs.values():
            if _is_ours(pid):
                _signal(pid, signal.SIGKILL)
        _reap(procs.values())
        for pid_file in self.run_dir.glob("*.pid") if self.run_dir.exists() else []:
            pid_file.unlink()
        self.processes.clear()
        return order


def virtual_hosts(nodes: int) -> int:
    """How many processes ``pslurm up --virtual`` hosts ``nodes`` agents in: one per 250 nodes (a
    few processes, as Slurm's multiple-slurmd on one host), at least one."""
    return max(1, -(-nodes // NODES_PER_VIRTUAL_HOST))


def controller_processes(config: ClusterConfig) -> list[tuple[str, list[str]]]:
    """Each controller's process name (its pid and log file) and its psctld arguments: ``psctld``
    alone, or ``psctld-NAME`` with ``--host NAME`` for each of several SlurmctldHost= lines."""
    if not config.backup_controllers:
        return [("psctld", [])]
    return [(f"psctld-{name}", ["--host", name]) for name, _ in config.controller_hosts]


def free_ports(count: int) -> list[int]:
    """Ports free on loopback now (held open together so they are distinct)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_taken(addr: str, port: int) -> bool:
    """Whether something listens on ``addr:port`` already (a bind there fails with EADDRINUSE); an
    address this machine does not have is not "taken" (the daemon says what is wrong with it)."""
    with socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does: TIME_WAIT is no owner
        try:
            s.bind((addr, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        return False


def check_ports(config: ClusterConfig) -> None:
    """ClusterError naming the first port of ``config`` that another program listens on (e.g. a real
    Slurm's slurmctld on 6817): SlurmctldPort, RestPort, then each node's Port (where its address is
    this machine's)."""
    wanted = [(key, addr, port) for _, addr in config.controller_hosts
              for key, port in (("SlurmctldPort", config.controller_port), ("RestPort", config.rest_port))]
    wanted += [(f"node {n.name}'s Port", n.addr, n.port) for n in config.nodes.values()]
    for what, addr, port in wanted:
        try:
            resolved = socket.getaddrinfo(addr, port, proto=socket.IPPROTO_TCP)[0][4][0]
        except OSError:
            continue
        if port and port_taken(str(resolved), port):
            raise ClusterError(f"{what} {port} on {addr} is taken: another program listens there "
                               "(a real Slurm's daemon?)")


def last_error(path: Path) -> str:
    """The line of a daemon's log that says why it stopped: its last line naming an error (its
    ``prog: error: ...`` line, a traceback's exception), else its last line."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return f"no log in {path}"
    if not lines:
        return f"no output in {path}"
    errors = [line for line in lines[-20:] if re.search(r"error|exception|denied|refused|not found", line, re.I)]
    return errors[-1] if errors else lines[-1]


def wait_idle(config: ClusterConfig, names: set[str], timeout: float, check: object = None) -> dict[str, str]:
    """Poll the controller until every named node is UP and idle or drained; returns the drained
    ones (name -> reason), e.g. an agent that found fewer GPUs than configured."""
    from pslurm.client import Client, ClientError
    from pslurm.core.states import NodeState

    deadline = time.time() + timeout
    states: dict[str, str] = {}
    with Client(config, timeout=2) as client:
        while time.time() < deadline:
            if callable(check):
                check()
            asked = time.monotonic()
            try:
                mine = [n for n in client.nodes() if n.name in names]
                states = {n.name: n.display_state for n in mine}
                registered = all(n.state == NodeState.UP and n.display_state in ("idle", "drain") for n in mine)
                if len(states) == len(names) and registered:
                    return {n.name: n.reason for n in mine if n.drain}
            except ClientError:
                pass
            time.sleep(max(0.05, time.monotonic() - asked))  # a 1000-node listing is no free poll
    if not states:
        raise ClusterError(f"nodes not idle after {timeout:.0f}s: controller not answering")
    waiting = [(n, states.get(n, "unlisted")) for n in sorted(names) if states.get(n) not in ("idle", "drain")]
    seen = ", ".join(f"{n}={s}" for n, s in waiting[:10])
    if len(waiting) > 10:
        seen += f" and {len(waiting) - 10} more"
    raise ClusterError(f"nodes not idle after {timeout:.0f}s: {seen or 'not all registered'}")


def wait_controller(config: ClusterConfig, addr: str, timeout: float, check: object = None,
                    mode: str | None = None) -> None:
    """Poll the controller at ``addr`` until it answers (in ``mode``, active or standby, if given)."""
    from pslurm.client.api import Api
    from pslurm.client.errors import ClientError

    deadline = time.time() + timeout
    with Api(config, timeout=2) as api:
        while time.time() < deadline:
            if callable(check):
                check()
            try:
                if mode in (None, api.ping(addr).get("mode")):
                    return
            except ClientError:
                pass
            time.sleep(0.05)
    raise ClusterError(f"the controller on {addr} did not {'answer' if mode is None else 'take control'} "
                       f"in {timeout:.0f}s")


_COMMENT = re.compile(r"#.*")


def _given_keys(text: str) -> tuple[set[str], bool]:
    """The global keys a pslurm.conf sets (lower case), and whether a NodeName= line sets Port=."""
    keys: set[str] = set()
    node_port = False
    for line in text.splitlines():
        pairs = [tok.split("=", 1)[0].lower() for tok in _COMMENT.sub("", line).split() if "=" in tok]
        if not pairs:
            continue
        if pairs[0] == "nodename":
            node_port = node_port or "port" in pairs
        elif pairs[0] != "partitionname":
            keys.update(pairs)
    return keys, node_port


def _is_ours(pid: int) -> bool:
    """Alive and one of pslurm's daemons (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return b"pslurm" in cmdline and stat.rsplit(")", 1)[1].split()[0] != "Z"


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pids: object) -> None:
    for pid in pids:  # type: ignore[attr-defined]
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
