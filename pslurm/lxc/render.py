"""Render the files of an LXC cluster from the Jinja2 templates in ``pslurm/templates/lxc``.

Rendering is pure: :func:`render_all` returns ``{path: (text, mode)}`` and :func:`write_all` writes it,
so the templates are tested without LXC.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2

from pslurm.core.config import ClusterConfig, NodeConfig, PartitionConfig, render_slurm_conf
from pslurm.core.gres import GresRequest
from pslurm.core.hostlists import collect
from pslurm.lxc.plan import LxcPlan, NodePlan


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pslurm", "templates/lxc"), undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
    )
    env.filters["hostlist"] = lambda names: collect(list(names))
    return env


def render(template: str, plan: LxcPlan, node: NodePlan) -> str:
    shares = sorted(plan.shares, key=lambda p: p.count("/"))  # parents before what lies inside them
    return environment().get_template(template).render(plan=plan, node=node, shares=shares)


def cluster_config(plan: LxcPlan) -> ClusterConfig:
    """pslurm.conf of the cluster: the controller on the bridge address, each agent on its container's."""
    names = [n.name for n in plan.nodes]
    state = plan.state_dir
    return ClusterConfig(
        path=str(plan.conf_path), cluster_name=plan.prefix, controller_host=f"{plan.prefix}-ctld",
        controller_addr=plan.bridge_addr, controller_port=plan.controller_port,
        rest_port=plan.rest_port,
        # the controller's store in a directory of its own, which psctld makes 0700; the spool beside it
        # stays reachable for the jobs, which run as their users
        database_url=f"sqlite:///{state / 'ctld' / 'pslurm.db'}", state_dir=str(state / "ctld"),
        spool_dir=str(state / "spool"),
        slurmd_timeout=10, kill_wait=5,
        nodes={n.name: NodeConfig(n.name, n.addr, plan.agent_port, plan.cpus, plan.memory_mb,
                                  (GresRequest("gpu", None, len(n.gpus)),) if n.gpus else ())
               for n in plan.nodes},
        partitions={"gpu": PartitionConfig("gpu", tuple(names), default=True)},
    )


def render_all(plan: LxcPlan) -> dict[Path, tuple[str, int]]:
    """Every file ``up`` writes before starting anything: {path: (text, mode)}."""
    conf = render_slurm_conf(cluster_config(plan))
    files: dict[Path, tuple[str, int]] = {plan.conf_path: (conf, 0o644)}
    for node in plan.nodes:
        node_dir, delta = plan.node_dir(node), plan.delta_dir(node)
        files[node_dir / "pslurm.conf"] = (conf, 0o644)  # the same file: the agent reads gres.conf beside it
        files[node_dir / "gres.conf"] = (render("gres.conf.j2", plan, node), 0o644)
        files[node_dir / "cgroup.conf"] = (render("cgroup.conf.j2", plan, node), 0o644)
        files[node_dir / "start-agent.sh"] = (render("start-agent.sh.j2", plan, node), 0o755)
        files[plan.container_dir(node) / "config"] = (render("container.conf.j2", plan, node), 0o644)
        # the rootfs is an overlay: files in its upper dir replace the lower root's
        files[delta / "etc" / "hosts"] = (render("hosts.j2", plan, node), 0o644)
        files[delta / "etc" / "hostname"] = (node.name + "\n", 0o644)
        files[delta / "etc" / "resolv.conf"] = ("# no DNS inside the cluster: names are in /etc/hosts\n", 0o644)
    return files


def write_all(files: dict[Path, tuple[str, int]]) -> None:
    for path, (text, mode) in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(mode)
