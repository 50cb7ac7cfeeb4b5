"""pslurm: bring a local cluster up and down."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from pslurm.cli.common import fail
from pslurm.cli.typer_support import run, typer_group

PROG = "pslurm"


def make_app() -> typer.Typer:
    """pslurm and its commands, in the order its help lists them."""
    app = typer_group("Run a pslurm cluster on this machine.")
    for command in (up, down, doctor, dashboard):
        app.command()(command)

    # light: lxc's commands import pslurm.lxc when they run
    from pslurm.cli import accounts_cmd, compat, lxc_cmd, units_cmd

    app.command("accounts")(accounts_cmd.accounts)
    app.command("install-units")(units_cmd.install_units)

    app.add_typer(lxc_cmd.make_app(), name="lxc")
    app.add_typer(compat.make_app(), name="compat")
    return app


def up(
    nodes: Annotated[int, typer.Option("--nodes", "-N", help="number of nodes")] = 4,
    gpus_per_node: Annotated[int, typer.Option("--gpus-per-node", "-G", help="simulated GPUs per node")] = 2,
    cpus: Annotated[int, typer.Option("--cpus", help="CPUs per node")] = 8,
    memory: Annotated[int, typer.Option("--memory", help="RealMemory per node, MB")] = 16000,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="where the cluster lives")] = None,
    db: Annotated[Optional[str], typer.Option("--db", help="database URL (default: SQLite in state dir)")] = None,
    conf: Annotated[Optional[Path], typer.Option(
        "--conf", help="run the nodes this pslurm.conf names (gres.conf, cgroup.conf beside it)")] = None,
    gpu_memory: Annotated[Optional[int], typer.Option(
        "--gpu-memory", help="memory of each simulated GPU, MB (jobs may then use --gpu-mem)")] = None,
    shards: Annotated[int, typer.Option("--shards", help="shards per GPU (--gres=shard:K)")] = 0,
    virtual: Annotated[bool, typer.Option(
        "--virtual", help="host the agents in a few processes (one per 250 nodes), not one each")] = False,
    controllers: Annotated[int, typer.Option(
        "--controllers", help="controllers: the first active, the others standing by (needs --db PostgreSQL)")] = 1,
) -> None:
    """Start a controller and NODES agents on loopback; returns once every node is idle."""
    from pslurm.cluster.local import ClusterError, LocalCluster, virtual_hosts

    if nodes < 1 or nodes > 1000 or gpus_per_node < 0 or cpus < 1:
        fail(PROG, "--nodes must be 1..1000, --gpus-per-node >= 0, --cpus >= 1")
    if (gpu_memory is not None and gpu_memory < 1) or shards < 0:
        fail(PROG, "--gpu-memory must be >= 1 (MB), --shards >= 0")
    if conf is not None and (gpu_memory is not None or shards or controllers != 1):
        fail(PROG, "--gpu-memory, --shards and --controllers shape the cluster: with --conf, its files say it")
    if not 1 <= controllers <= 8:
        fail(PROG, "--controllers must be 1..8")
    directory, default = _state_dir(state_dir)
    cluster = LocalCluster(directory)
    if cluster.running():
        if conf is None and _same_shape(cluster.conf_path, nodes, gpus_per_node, cpus, shards):
            print(f"pslurm: the cluster in {directory} is already up with {nodes} nodes of {gpus_per_node} GPUs")
            return  # up is idempotent: running the quickstart twice is fine
        fail(PROG, f"a different cluster is already running in {directory} ('pslurm down' stops it)")
    try:
        config = (cluster.write_config_from(conf.resolve(), db) if conf is not None
                  else cluster.write_config(nodes, gpus_per_node, cpus, memory, db, gpu_memory_mb=gpu_memory,
                                            shards=shards, controllers=controllers))
    except ClusterError as exc:
        fail(PROG, str(exc))
    try:
        hosts = virtual_hosts(len(config.nodes)) if virtual else 0
        drained = cluster.start(config, timeout=60.0 + len(config.nodes) / 10, virtual=hosts)
    except ClusterError as exc:
        fail(PROG, f"{exc} (logs in {cluster.log_dir})")
    from pslurm.core.hostlists import collect

    for name, reason in sorted(drained.items()):
        print(f"pslurm: warning: node {name} is drained: {reason}")
    if conf is not None:
        gpus = sum(n.gpus() for n in config.nodes.values())
        print(f"pslurm: cluster '{config.cluster_name}' is up: {len(config.nodes)} nodes "
              f"{collect(config.nodes)} from {conf} with {gpus} GPUs in all, controller on "
              f"{config.controller_target}")
    else:
        each = ", ".join(x for x in (f"{gpu_memory} MB" if gpu_memory else "",
                                      f"{shards} shards" if shards else "") if x)
        backups = "".join(f", backup on {addr}:{config.controller_port}" for _, addr in config.backup_controllers)
        print(f"pslurm: cluster '{config.cluster_name}' is up: {nodes} nodes {collect(config.nodes)} "
              f"with {gpus_per_node} GPUs{f' ({each} each)' if each and gpus_per_node else ''} and {cpus} CPUs "
              f"each, controller on {config.controller_target}{backups}")
    if not default:
        print(f"pslurm: use it with: export PSLURM_CONF={cluster.conf_path}")
    print("pslurm: try: psrun --gres=gpu:1 sh -c 'echo $SLURMD_NODENAME GPU $CUDA_VISIBLE_DEVICES'")
    print(f"pslurm: stop it with: pslurm down{'' if default else f' --state-dir {directory}'}")


def down(
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help="the cluster's state dir")] = None,
) -> None:
    """Stop the cluster's controller and agents (and the jobs they run)."""
    from pslurm.cluster.local import LocalCluster

    directory, _ = _state_dir(state_dir)
    stopped = LocalCluster(directory).stop()
    print(f"pslurm: stopped {len(stopped)} processes" if stopped else f"pslurm: no cluster running in {directory}")


def doctor(
    conf: Annotated[Optional[Path], typer.Option("--conf", "-f", help="pslurm.conf (default: $PSLURM_CONF, "
                                                 "/etc/pslurm/pslurm.conf, the per-user cluster's)")] = None,
    node_name: Annotated[Optional[str], typer.Option("--node-name", "-N", help="the node to check "
                                                     "(default: this host's name)")] = None,
    gpu: Annotated[bool, typer.Option("--gpu", help="also run a CUDA program in a probe job on each GPU")] = False,
) -> None:
    """Check this host for what pslurm needs: one line per check, what holds and what to fix."""
    argv = [sys.executable, "-m", "pslurm.doctor", *(["-f", str(conf)] if conf else []),
            *(["-N", node_name] if node_name else []), *(["--gpu"] if gpu else [])]
    os.execv(sys.executable, argv)  # a program of its own: it runs the agent's cgroup and GPU code


def dashboard() -> None:
    """Print a link that opens the web dashboard logged in as you (good once, for a minute)."""
    from pslurm.cli.common import connect_api, reporting

    with reporting(PROG):
        found = connect_api(PROG).request("POST", "/pslurm/v1/dashboard/link", {})
    print(f"Open the dashboard (the link works once, within {found['expires_in']} seconds):")
    print(found["url"])


def _same_shape(conf_path: Path, nodes: int, gpus_per_node: int, cpus: int, shards: int = 0) -> bool:
    """The running cluster's configuration has the node count, GPUs, CPUs and shards asked for."""
    from pslurm.core.config import ConfigError, load_cluster_config

    try:
        config = load_cluster_config(str(conf_path))
    except ConfigError:
        return False
    return len(config.nodes) == nodes and all(
        n.gpus() == gpus_per_node and n.cpus == cpus
        and sum(g.count for g in n.gres if g.name == "shard") == shards * gpus_per_node
        for n in config.nodes.values())


def _state_dir(given: Path | None) -> tuple[Path, bool]:
    """The state dir and whether it is the per-user default the CLIs find by themselves."""
    from pslurm.core.config import default_state_dir

    if given is not None:
        return given.resolve(), False
    return Path(default_state_dir()), "PSLURM_CONF" not in os.environ


def main() -> None:
    if sys.argv[1:] in (["-V"], ["--version"]):  # the release, before typer is built
        from pslurm import __version__

        print(f"pslurm {__version__}")
        return
    run(make_app(), PROG)
