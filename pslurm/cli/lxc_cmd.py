"""pslurm lxc: a virtual GPU cluster of LXC containers on this machine (up, down, status)."""

from __future__ import annotations

import ipaddress
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from pslurm.cli.common import fail
from pslurm.cli.typer_support import typer_group

PROG = "pslurm lxc"


def make_app() -> typer.Typer:
    """pslurm lxc and its commands, in the order its help lists them."""
    app = typer_group("A virtual GPU cluster of LXC containers on this machine.")
    for command in (up, down, status):
        app.command()(command)
    return app


def up(
    nodes: Annotated[int, typer.Option("--nodes", "-N", help="number of node containers")] = 2,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", "-G", help="GPUs bound into each")] = 1,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="where the cluster lives")] = None,
    prefix: Annotated[str, typer.Option("--prefix", help="names: <prefix>-c000, <prefix>-br0")] = "pslurm",
    subnet: Annotated[Optional[str], typer.Option("--subnet", help="private IPv4 network for the bridge "
                                                  "(default: the first free 10.99.N.0/24)")] = None,
    devices: Annotated[Optional[str], typer.Option("--devices", help="host GPU nodes to hand out, "
                                                   "comma-separated (default: every /dev/nvidiaN)")] = None,
    fake_gpus: Annotated[bool, typer.Option("--fake-gpus", help="make fake device nodes (c 195 N)")] = False,
    rootfs: Annotated[str, typer.Option("--rootfs", help="overlay (of the host's /) or debian")] = "overlay",
    share: Annotated[Optional[list[str]], typer.Option("--share", help="host directory bound read-write "
                                                       "into every node (repeatable; default /tmp /home "
                                                       "/root)")] = None,
    cpus: Annotated[int, typer.Option("--cpus", help="CPUs per node")] = 2,
    memory: Annotated[int, typer.Option("--memory", help="RealMemory per node, MB")] = 4000,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for idle nodes")] = 60.0,
) -> None:
    """Create and start NODES containers, one agent in each, and the controller on the bridge."""
    from pslurm.cluster.local import ClusterError
    from pslurm.lxc import cluster, host
    from pslurm.lxc.plan import choose_subnet, make_plan

    if devices and fake_gpus:
        fail(PROG, "--devices and --fake-gpus exclude each other")
    directory = _state_dir(state_dir)
    started = time.monotonic()
    try:
        cgroup_version = host.check_host()
        network = ipaddress.IPv4Network(subnet, strict=False) if subnet else choose_subnet(host.used_networks())
        if subnet and any(network.overlaps(n) for n in host.used_networks()):
            fail(PROG, f"--subnet {network} overlaps a network in use on this host")
        gpu_devices = None if fake_gpus or not gpus_per_node else host.host_gpu_devices(
            devices.split(",") if devices else None)
        lower, python = "/", sys.executable
        if rootfs == "debian":
            from pslurm.lxc.rootfs import debian_root

            lower, python = debian_root()
        shares = [s for s in (share if share is not None else ["/tmp", "/home", "/root"]) if Path(s).is_dir()]
        if rootfs == "overlay":  # an overlay of / shows no other filesystem: bind what the agent runs from
            import pslurm

            shares += [p for p in (sys.base_prefix, sys.prefix, str(Path(pslurm.__file__).parents[1]))
                       if host.needs_bind(p)]
        fake_dir = None if host.allows_devices(directory) else Path(f"/dev/pslurm-{prefix}")
        plan = make_plan(directory, nodes, gpus_per_node, prefix=prefix, network=network,
                         gpu_devices=gpu_devices, fake_gpus=fake_gpus, shared_devices=host.host_shared_devices(),
                         rootfs=rootfs, rootfs_lower=lower, python=python, shares=tuple(shares),
                         cgroup_version=cgroup_version, cpus=cpus, memory_mb=memory, fake_dir=fake_dir)
        plan = cluster.up(plan, timeout)
    except (ValueError, host.HostError) as exc:  # PlanError, a bad --subnet, what the host lacks
        fail(PROG, str(exc))
    except ClusterError as exc:
        fail(PROG, f"{exc} (logs in {directory / 'log'})")
    gpus = f"{gpus_per_node} {'fake ' if fake_gpus else ''}GPUs"
    print(f"pslurm: LXC cluster '{prefix}' is up in {time.monotonic() - started:.1f}s: {nodes} containers "
          f"with {gpus} each on bridge {plan.bridge} ({network}), controller on "
          f"{plan.bridge_addr}:{plan.controller_port}")
    print(f"pslurm: use it with: export PSLURM_CONF={plan.conf_path}")
    print(f"pslurm: stop it with: pslurm lxc down --state-dir {directory}")


def down(
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="the cluster's state dir")] = None,
) -> None:
    """Stop and remove the containers, bridge, fake devices and controller that 'up' made."""
    from pslurm.cluster.local import ClusterError
    from pslurm.lxc import cluster, host

    directory = _state_dir(state_dir)
    started = time.monotonic()
    try:
        host.check_host()
        removed = cluster.down(directory)
    except (host.HostError, ClusterError) as exc:
        fail(PROG, str(exc))
    if not removed:
        print(f"pslurm: no LXC cluster in {directory}")
        return
    print(f"pslurm: LXC cluster in {directory} is down in {time.monotonic() - started:.1f}s "
          f"({len([r for r in removed if r.startswith('container')])} containers removed)")


def status(
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="the cluster's state dir")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """List the containers, their addresses, and their nodes' states."""
    from pslurm.cluster.local import ClusterError
    from pslurm.lxc import cluster, host

    directory = _state_dir(state_dir)
    try:
        host.check_host()
        rows = cluster.status(directory)
    except (host.HostError, ClusterError) as exc:
        fail(PROG, str(exc))
    if rows is None:
        fail(PROG, f"no LXC cluster in {directory}")
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    fmt = "{node:<6} {container:<16} {address:<15} {container_state:<9} {node_state}"
    print(fmt.format(node="NODE", container="CONTAINER", address="ADDRESS", container_state="CONTAINER",
                     node_state="STATE"))
    for row in rows:
        print(fmt.format(**row))


def _state_dir(given: Path | None) -> Path:
    """--state-dir, else the per-user directory the CLIs find by themselves (as 'pslurm up')."""
    from pslurm.core.config import default_state_dir

    return given.resolve() if given is not None else Path(default_state_dir())
