"""``pslurm up``: a controller and N agents as processes on loopback, in one state directory.

Everything a cluster owns lives in its state directory: pslurm.conf and gres.conf, the SQLite
store, the agents' spool, logs and pid files. Ports are picked free at start, so two clusters in
two directories run side by side.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pslurm.core.config import ClusterConfig, NodeConfig, PartitionConfig, render_slurm_conf
from pslurm.core.gres import GresRequest


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

    # -- up --------------------------------------------------------------------------------

    def write_config(self, nodes: int, gpus_per_node: int, cpus: int, memory_mb: int, db_url: str | None,
                     cluster_name: str = "pslurm") -> ClusterConfig:
        """pslurm.conf with free ports and gres.conf with simulated GPUs (Count=)."""
        ports = free_ports(nodes + 1)
        names = [f"c{i:03d}" for i in range(nodes)]
        gres = (GresRequest("gpu", None, gpus_per_node),) if gpus_per_node else ()
        config = ClusterConfig(
            path=str(self.conf_path), cluster_name=cluster_name, controller_host="localhost",
            controller_addr="127.0.0.1", controller_port=ports[0],
            database_url=db_url or f"sqlite:///{self.state_dir / 'pslurm.db'}",
            state_dir=str(self.state_dir), spool_dir=str(self.state_dir / "spool"),
            slurmd_timeout=10, kill_wait=5,
            nodes={n: NodeConfig(n, "127.0.0.1", p, cpus, memory_mb, gres) for n, p in zip(names, ports[1:])},
            partitions={"gpu": PartitionConfig("gpu", tuple(names), default=True)},
        )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.conf_path.write_text(render_slurm_conf(config))
        gres_lines = [f"NodeName={n} Name=gpu Count={gpus_per_node}" for n in names if gpus_per_node]
        (self.state_dir / "gres.conf").write_text("# simulated GPUs written by pslurm up\n"
                                                  + "".join(line + "\n" for line in gres_lines))
        return config

    def start(self, config: ClusterConfig, timeout: float = 60.0) -> None:
        """Start the controller and the agents, and return once every node is idle."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._spawn("psctld", ["pslurm.controller.app", "-f", str(self.conf_path)])
            for name in config.nodes:
                self._spawn(f"psd-{name}", ["pslurm.nodeagent.app", "-f", str(self.conf_path), "-N", name])
            wait_idle(config, set(config.nodes), timeout, self._check_alive)
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
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 0
            if done:
                tail = (self.log_dir / f"{name}.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise ClusterError(f"{name} exited during start-up: {tail[0] if tail else 'no output'}")

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
        order = sorted(procs, key=lambda n: n == "psctld")  # agents first: they report their jobs' end
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


def wait_idle(config: ClusterConfig, names: set[str], timeout: float, check: object = None) -> None:
    """Poll the controller until every named node is UP and idle."""
    import grpc

    from pslurm.proto import pslurm_pb2 as pb
    from pslurm.proto import pslurm_pb2_grpc as pb_grpc

    stub = pb_grpc.ControllerStub(grpc.insecure_channel(config.controller_target))
    deadline = time.time() + timeout
    states: dict[str, str] = {}
    while time.time() < deadline:
        if callable(check):
            check()
        try:
            info = stub.GetCluster(pb.Empty(), timeout=2, metadata=(("x-pslurm-uid", str(os.getuid())),))
            states = {n.name: n.display_state for n in info.nodes if n.name in names}
            if len(states) == len(names) and all(s == "idle" for s in states.values()):
                return
        except grpc.RpcError:
            pass
        time.sleep(0.05)
    raise ClusterError(f"nodes not idle after {timeout:.0f}s: "
                       + (", ".join(f"{n}={s}" for n, s in sorted(states.items())) or "controller not answering"))


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
