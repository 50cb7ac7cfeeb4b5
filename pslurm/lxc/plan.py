"""What ``pslurm lxc up`` builds, decided before anything is touched (pure; no LXC needed).

A plan names the bridge and its subnet, each node's container, address and GPU device nodes, and
where every generated file goes in the state directory::

    DIR/pslurm.conf             the cluster (controller on the bridge address, one NodeAddr per node)
    DIR/lxc-cluster.json        manifest of what was made, for ``down`` (also after a failed ``up``)
    DIR/lxc/<container>/config  LXC config, rootfs delta in DIR/lxc/<container>/delta0
    DIR/nodes/<node>/           the agent's own pslurm.conf, gres.conf, cgroup.conf, start script
    DIR/dev/nvidiaN             fake GPU device nodes (``--fake-gpus``)
    DIR/log/                    controller, agent and LXC logs
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

NVIDIA_MAJOR = 195
NVIDIACTL_MINOR = 255
NVIDIA_MODESET_MINOR = 254
CONTROLLER_PORT = 6817
AGENT_PORT = 6818
REST_PORT = 6820
FIRST_NODE_HOST = 10  # nodes get .10, .11, ... of the subnet; the bridge (and controller) gets .1
DEFAULT_SUBNETS = tuple(ipaddress.IPv4Network(f"10.99.{i}.0/24") for i in range(256))
# /dev/null, zero, full, random, urandom, tty, console, ptmx, pts/*: what any process expects
BASIC_DEVICES = ("c 1:3 rwm", "c 1:5 rwm", "c 1:7 rwm", "c 1:8 rwm", "c 1:9 rwm",
                 "c 5:0 rwm", "c 5:1 rwm", "c 5:2 rwm", "c 136:* rwm")  # fmt: skip
PREFIX_RE = re.compile(r"[a-z][a-z0-9]{0,7}")  # host interface names (<prefix>-c000, <prefix>-br0) <= 15


class PlanError(ValueError):
    """Options that cannot make a cluster; the message is one line for the user."""


@dataclass(frozen=True)
class Device:
    """A character device bound into a container: ``source`` on the host, ``target`` inside."""

    source: str
    target: str
    major: int
    minor: int

    @property
    def rule(self) -> str:
        """The devices-cgroup rule that allows it."""
        return f"c {self.major}:{self.minor} rwm"


@dataclass(frozen=True)
class NodePlan:
    name: str  # the node's name in pslurm.conf and the container's hostname: c000
    container: str  # LXC container name: <prefix>-c000
    addr: str  # static address on the bridge
    veth: str  # host end of the container's veth pair
    gpus: tuple[Device, ...]  # this node's own GPUs


@dataclass(frozen=True)
class LxcPlan:
    state_dir: Path
    prefix: str
    network: ipaddress.IPv4Network
    bridge: str
    bridge_addr: str  # the controller binds here
    nodes: tuple[NodePlan, ...]
    shared_devices: tuple[Device, ...]  # nvidiactl (and nvidia-uvm with real GPUs): bound into every node
    fake_gpus: bool
    rootfs: str  # "overlay" (over the host's /) or "debian"
    rootfs_lower: str  # the overlay's lower directory: "/" or the cached Debian root
    python: str  # the interpreter that runs the agent inside the container
    shares: tuple[str, ...]  # host directories bound read-write at the same path (state dir first)
    cgroup_version: int  # 1: lxc.cgroup.devices.* keys, 2: lxc.cgroup2.devices.*
    cpus: int = 2
    memory_mb: int = 4000
    controller_port: int = CONTROLLER_PORT
    agent_port: int = AGENT_PORT
    rest_port: int = REST_PORT  # the controller's user API, on the bridge address too

    @property
    def lxcpath(self) -> Path:
        return self.state_dir / "lxc"

    @property
    def conf_path(self) -> Path:
        return self.state_dir / "pslurm.conf"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "log"

    @property
    def broadcast(self) -> str:
        return str(self.network.broadcast_address)

    def container_dir(self, node: NodePlan) -> Path:
        return self.lxcpath / node.container

    def delta_dir(self, node: NodePlan) -> Path:
        return self.container_dir(node) / "delta0"

    def node_dir(self, node: NodePlan) -> Path:
        return self.state_dir / "nodes" / node.name

    def allowed_rules(self, node: NodePlan) -> list[str]:
        """Every device rule of the node's container: the basics, its own GPUs, the shared nodes."""
        if not node.gpus:
            return list(BASIC_DEVICES)
        gpu = [d.rule for d in node.gpus] + [d.rule for d in self.shared_devices]
        modeset = f"c {NVIDIA_MAJOR}:{NVIDIA_MODESET_MINOR} rwm"  # the agent's job cgroups ask for it
        return list(BASIC_DEVICES) + list(dict.fromkeys(gpu + [modeset]))

    def fake_device_paths(self) -> list[str]:
        if not self.fake_gpus:
            return []
        return [d.source for n in self.nodes for d in n.gpus] + [d.source for d in self.shared_devices]


def choose_subnet(used: Iterable[ipaddress.IPv4Network], candidates: Iterable[ipaddress.IPv4Network]
                  = DEFAULT_SUBNETS) -> ipaddress.IPv4Network:
    """The first candidate that overlaps no network in use on the host."""
    used = list(used)
    for net in candidates:
        if not any(net.overlaps(u) for u in used):
            return net
    raise PlanError("no free private subnet among 10.99.0.0/24..10.99.255.0/24: give one with --subnet")


def node_addresses(network: ipaddress.IPv4Network, count: int) -> tuple[str, list[str]]:
    """The bridge address (first host) and ``count`` node addresses (from .10, or .2 in a small net)."""
    hosts = list(network.hosts()) if network.num_addresses <= 65536 else None
    if hosts is None:
        raise PlanError(f"--subnet {network}: use a /16 or smaller network")
    first = FIRST_NODE_HOST - 1 if len(hosts) >= FIRST_NODE_HOST - 1 + count else 1
    if len(hosts) < first + count:
        raise PlanError(f"--subnet {network} has room for {len(hosts) - 1} nodes, not {count}")
    return str(hosts[0]), [str(h) for h in hosts[first:first + count]]


def make_plan(
    state_dir: Path, nodes: int, gpus_per_node: int, *, prefix: str = "pslurm",
    network: ipaddress.IPv4Network, gpu_devices: list[tuple[str, int]] | None = None, fake_gpus: bool = False,
    shared_devices: list[tuple[str, int, int]] | None = None, rootfs: str = "overlay", rootfs_lower: str = "/",
    python: str = "/usr/bin/python3", shares: tuple[str, ...] = (), cgroup_version: int = 1, cpus: int = 2,
    memory_mb: int = 4000, fake_dir: Path | None = None,
) -> LxcPlan:
    """Decide the cluster. ``gpu_devices`` are the host's (path, minor) GPU nodes (real GPUs) to split
    among the nodes in order; with ``fake_gpus`` the nodes are DIR/dev/nvidiaN with minors 0.. instead.
    ``shared_devices`` (path, major, minor) are bound into every node (nvidiactl, nvidia-uvm).
    ``fake_dir`` holds the fake nodes instead of DIR/dev (for a state dir on a nodev filesystem)."""
    if not PREFIX_RE.fullmatch(prefix):
        raise PlanError(f"--prefix {prefix!r}: 1-8 lower-case letters and digits, starting with a letter")
    if not 1 <= nodes <= 200:
        raise PlanError("--nodes must be 1..200")
    if gpus_per_node < 0 or gpus_per_node > 64:
        raise PlanError("--gpus-per-node must be 0..64")
    if rootfs not in ("overlay", "debian"):
        raise PlanError(f"--rootfs {rootfs!r}: expected overlay or debian")
    state_dir = state_dir.resolve()
    if any(c.isspace() for c in str(state_dir) + "".join(shares)):
        raise PlanError(f"{state_dir}: paths with white space cannot be written in LXC mount entries")
    bridge_addr, addrs = node_addresses(network, nodes)
    wanted = nodes * gpus_per_node
    if fake_gpus:
        fake_dir = fake_dir or state_dir / "dev"
        gpu_devices = [(str(fake_dir / f"nvidia{i}"), i) for i in range(wanted)]
        shared = [(str(fake_dir / "nvidiactl"), NVIDIA_MAJOR, NVIDIACTL_MINOR)] if wanted else []
    else:
        gpu_devices = list(gpu_devices or [])
        shared = list(shared_devices or [])
        if len(gpu_devices) < wanted:
            raise PlanError(f"{nodes} nodes x {gpus_per_node} GPUs need {wanted} GPU devices and the host has "
                            f"{len(gpu_devices)}: use --fake-gpus, fewer GPUs, or name them with --devices")
    node_plans = []
    for i, addr in enumerate(addrs):
        name = f"c{i:03d}"
        mine = gpu_devices[i * gpus_per_node:(i + 1) * gpus_per_node]
        gpus = tuple(Device(src, f"/dev/nvidia{minor}", NVIDIA_MAJOR, minor) for src, minor in mine)
        node_plans.append(NodePlan(name, f"{prefix}-{name}", addr, f"{prefix}-{name}", gpus))
    shared_devs = tuple(Device(src, "/dev/" + Path(src).name, major, minor) for src, major, minor in shared)
    share_list = [str(state_dir)] + [str(Path(s).resolve()) for s in shares]
    return LxcPlan(
        state_dir=state_dir, prefix=prefix, network=network, bridge=f"{prefix}-br0", bridge_addr=bridge_addr,
        nodes=tuple(node_plans), shared_devices=shared_devs if wanted else (), fake_gpus=fake_gpus,
        rootfs=rootfs, rootfs_lower=rootfs_lower, python=python, shares=tuple(dict.fromkeys(share_list)),
        cgroup_version=cgroup_version, cpus=cpus, memory_mb=memory_mb,
    )
