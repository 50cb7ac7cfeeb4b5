"""Bring an LXC cluster up and down, and report its status.

``up`` records each thing in the manifest (DIR/lxc-cluster.json) as soon as it has made it, so ``down``
(called by ``up`` itself when a step fails) removes exactly what was made: containers, their cgroups,
the bridge, fake device nodes, the controller, and the generated files. Logs and the job database stay.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from pslurm.auth.credential import create_key
from pslurm.auth.secretfiles import write_private
from pslurm.cluster.local import ClusterError, LocalCluster, free_ports, last_error, port_taken, wait_idle
from pslurm.lxc import host
from pslurm.lxc.plan import LxcPlan
from pslurm.lxc.render import cluster_config, render_all, write_all

MANIFEST = "lxc-cluster.json"
GENERATED = ("lxc", "nodes", "dev", "run", "pslurm.conf", "pslurm.key")  # what down removes from the state dir


@dataclass
class Manifest:
    """What ``up`` made, saved after every step."""

    path: Path
    prefix: str = ""
    bridge: str | None = None
    subnet: str = ""
    controller: str = ""
    lxcpath: str = ""
    containers: dict[str, str] = field(default_factory=dict)  # container -> address
    nodes: dict[str, str] = field(default_factory=dict)  # container -> node name
    devices: list[str] = field(default_factory=list)  # fake device nodes made
    remove_pivot: bool = False  # LXC's lxc.pivot cgroup did not exist before up

    @classmethod
    def load(cls, state_dir: Path) -> Manifest | None:
        path = state_dir / MANIFEST
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"{path}: unreadable manifest: {exc}") from None
        return cls(path=path, **{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def save(self) -> None:
        data = {k: v for k, v in self.__dict__.items() if k != "path"}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.path)


def up(plan: LxcPlan, timeout: float = 60.0) -> LxcPlan:
    """Make and start everything; on any failure remove what was made and raise. Returns the plan as
    brought up: the controller's ports moved to free ones where another program holds them."""
    if (plan.state_dir / MANIFEST).exists():
        raise ClusterError(f"an LXC cluster is already up in {plan.state_dir} ('pslurm lxc down' first)")
    if LocalCluster(plan.state_dir).running():
        raise ClusterError(f"a 'pslurm up' cluster is running in {plan.state_dir} ('pslurm down' first)")
    plan = with_free_ports(plan)
    plan.state_dir.mkdir(parents=True, exist_ok=True)
    plan.log_dir.mkdir(exist_ok=True)
    man = Manifest(plan.state_dir / MANIFEST, prefix=plan.prefix, subnet=str(plan.network),
                   controller=f"{plan.bridge_addr}:{plan.controller_port}", lxcpath=str(plan.lxcpath),
                   remove_pivot=not host.lxc_pivot_exists())
    man.save()
    try:
        host.create_bridge(plan.bridge, plan.bridge_addr, plan.network.prefixlen, plan.broadcast)
        man.bridge = plan.bridge
        man.save()
        for path in plan.fake_device_paths():
            man.devices.append(path)
            man.save()
            host.make_fake_device(path)
        for node in plan.nodes:
            man.containers[node.container] = node.addr
            man.nodes[node.container] = node.name
        man.save()
        write_all(render_all(plan))
        _install_key(plan)
        _start_controller(plan)
        _start_containers(plan)
        config = cluster_config(plan)
        wait_idle(config, set(config.nodes), timeout, lambda: _check_running(plan))
    except BaseException:
        down(plan.state_dir, grace=1.0)
        raise
    return plan


def with_free_ports(plan: LxcPlan) -> LxcPlan:
    """``plan`` with free ports for the controller (SlurmctldPort, RestPort) where the planned ones are
    taken on this host (e.g. 6817 by a real Slurm's slurmctld, which listens on every address, the bridge's
    too). The agents listen inside their containers' own network namespaces: their port is always free."""
    taken = {p for p in (plan.controller_port, plan.rest_port) if port_taken("0.0.0.0", p)}
    if not taken:
        return plan
    spare = [p for p in free_ports(4) if p not in (plan.controller_port, plan.rest_port)]
    return replace(plan, controller_port=spare.pop() if plan.controller_port in taken else plan.controller_port,
                   rest_port=spare.pop() if plan.rest_port in taken else plan.rest_port)


def _install_key(plan: LxcPlan) -> None:
    """A new cluster key beside the controller's pslurm.conf, and a copy beside each agent's, each
    0600 from its first byte (a copy made readable and narrowed afterwards would leave a window)."""
    key = plan.state_dir / "pslurm.key"
    create_key(str(key))
    text = key.read_text()
    for node in plan.nodes:
        write_private(str(plan.node_dir(node) / "pslurm.key"), text)


def _start_controller(plan: LxcPlan) -> None:
    run_dir = plan.state_dir / "run"
    run_dir.mkdir(exist_ok=True)
    with open(plan.log_dir / "psctld.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pslurm.controller.app", "-f", str(plan.conf_path)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=plan.state_dir)
    (run_dir / "psctld.pid").write_text(f"{proc.pid}\n")


def _start_containers(plan: LxcPlan) -> None:
    """Start every node's container, the agent as its PID 1.

    liblxc moves the process that calls start() into the container's ``lxc.monitor.<name>`` cgroup;
    the calls are made in a short-lived child so that this process (which may have to clean up) stays
    out of it and LXC can remove that cgroup when the container stops.
    """
    from pslurm.lxc.bindings import load_lxc

    lxc = load_lxc()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: start them, report the first failure, never return into the caller
        os.close(read_end)
        failure = "exception in the starting process"
        try:
            failure = ""
            for node in plan.nodes:
                c = lxc.Container(node.container, str(plan.lxcpath))
                script = str(plan.node_dir(node) / "start-agent.sh")
                if not c.start(useinit=False, daemonize=True, close_fds=True, cmd=("/bin/sh", script)):
                    failure = (f"container {node.container} did not start: "
                               f"{last_error(plan.log_dir / f'lxc-{node.name}.log')}")
                    break
        finally:
            os.write(write_end, failure.encode())
            os._exit(1 if failure else 0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        message = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if message or status != 0:
        raise ClusterError(message or f"starting the containers failed (status {status})")


def _check_running(plan: LxcPlan) -> None:
    """Fail fast while waiting for the nodes: a container or the controller that exited."""
    from pslurm.lxc.bindings import load_lxc

    if not LocalCluster(plan.state_dir).running():
        raise ClusterError(f"psctld exited during start-up: {last_error(plan.log_dir / 'psctld.log')}")
    lxc = load_lxc()
    for node in plan.nodes:
        if lxc.Container(node.container, str(plan.lxcpath)).state == "STOPPED":
            raise ClusterError(f"node {node.name}'s container stopped during start-up: "
                               f"{last_error(plan.log_dir / f'psd-{node.name}.log')}")


def down(state_dir: Path, grace: float = 5.0) -> list[str]:
    """Stop and remove everything the manifest names; returns what was removed (empty: nothing was up)."""
    man = Manifest.load(state_dir)
    if man is None:
        return []
    removed = [f"container {name}" for name in _stop_containers(man, grace)]
    removed += [f"process {name}" for name in LocalCluster(state_dir).stop(grace)]
    for name in man.containers:
        shutil.rmtree(Path(man.lxcpath) / name, ignore_errors=True)
    removed += [f"cgroup {cg}" for cg in host.remove_cgroups(list(man.containers), man.remove_pivot)]
    if man.bridge:
        for veth in man.containers:  # LXC deletes the host end with the container; make sure
            host.delete_link(veth)
        if host.delete_link(man.bridge):
            removed.append(f"bridge {man.bridge}")
    for path in man.devices:
        Path(path).unlink(missing_ok=True)
    for parent in {Path(p).parent for p in man.devices}:
        if parent.name.startswith("pslurm-") and parent.parent == Path("/dev"):
            shutil.rmtree(parent, ignore_errors=True)  # /dev/pslurm-<prefix>, made for a nodev state dir
    removed += [f"device {d}" for d in man.devices]
    for name in GENERATED:
        generated = state_dir / name
        if generated.is_dir():
            shutil.rmtree(generated, ignore_errors=True)
        else:
            generated.unlink(missing_ok=True)
    man.path.unlink(missing_ok=True)
    return removed or ["manifest"]


def _stop_containers(man: Manifest, grace: float) -> list[str]:
    """SIGTERM every container's PID 1, the agent (it ends its jobs and exits, which ends the container),
    then SIGKILL what still runs after ``grace``."""
    if not man.containers:
        return []
    from pslurm.lxc.bindings import load_lxc

    lxc = load_lxc()
    containers = {name: lxc.Container(name, man.lxcpath) for name in man.containers}
    running = {n: c for n, c in containers.items() if c.defined and c.state != "STOPPED"}
    for c in running.values():
        c.shutdown(0)  # sends lxc.signal.halt, does not wait
    deadline = time.monotonic() + grace
    for c in running.values():
        if not c.wait("STOPPED", max(0, round(deadline - time.monotonic()))):
            c.stop()
            c.wait("STOPPED", 5)
    host.wait_monitors_gone(man.lxcpath, list(man.containers))
    return list(running)


def status(state_dir: Path) -> list[dict[str, str]] | None:
    """One row per node: container, address, container state, node state in the controller."""
    man = Manifest.load(state_dir)
    if man is None:
        return None
    from pslurm.lxc.bindings import load_lxc

    lxc = load_lxc()
    node_states = _node_states(state_dir)
    rows = []
    for container, addr in man.containers.items():
        c = lxc.Container(container, man.lxcpath)
        node = man.nodes.get(container, container)
        rows.append({"node": node, "container": container, "address": addr,
                     "container_state": c.state if c.defined else "MISSING",
                     "node_state": node_states.get(node, "unknown")})
    return rows


def _node_states(state_dir: Path) -> dict[str, str]:
    from pslurm.client import Client, ClientError

    try:
        with Client(state_dir / "pslurm.conf", timeout=3) as client:
            return {n.name: n.display_state for n in client.nodes()}
    except ClientError:
        return {}
