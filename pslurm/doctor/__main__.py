"""``python -m pslurm.doctor [-f CONF] [-N NODE] [--gpu]`` (what ``pslurm doctor`` runs)."""

from __future__ import annotations

import argparse
import socket
import sys

from pslurm.core.config import (
    ConfigError,
    find_config_path,
    load_cgroup_conf,
    load_cluster_config,
    load_gres_conf,
)
from pslurm.doctor.cluster import check_cluster
from pslurm.doctor.files import check_config, check_database_file, check_key
from pslurm.doctor.node import (
    check_cgroup,
    check_cuda,
    check_gres,
    check_isolation,
    check_mps,
    check_nvml,
    node_view,
    unknown_node,
)
from pslurm.doctor.report import Check, fail, print_report, skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="pslurm doctor", description="Check this host for what pslurm needs: "
                                     "one line per check, what holds and what to fix; exit 1 when any failed.")
    parser.add_argument("-f", "--conf", default=None, help="pslurm.conf (default: $PSLURM_CONF, /etc/pslurm/...)")
    parser.add_argument("-N", "--node-name", default=None, help="the node to check (default: this host's name)")
    parser.add_argument("--gpu", action="store_true", help="also run a CUDA program in a probe job on each GPU")
    args = parser.parse_args(argv)
    sys.exit(print_report(run(args.conf or find_config_path(), args.node_name, args.gpu)))


def run(conf_path: str, node_name: str | None = None, gpu: bool = False) -> list[Check]:
    """Every check, in the order they are printed."""
    try:
        config = load_cluster_config(conf_path)
        cgroup_conf = load_cgroup_conf(conf_path)
        gres_lines = load_gres_conf(conf_path)
    except ConfigError as exc:
        return [fail("config", f"{exc}")]
    host = socket.gethostname().split(".")[0]
    checks = [check_config(config), check_key(config),
              check_database_file(config, host in {name for name, _ in config.controller_hosts})]
    name = node_name or host
    node = config.nodes.get(name)
    if node is None:
        checks.append(unknown_node(name, conf_path))
        if gpu:
            checks.append(skip("cuda", "this host is no node: the CUDA probe runs on a node"))
    else:
        view = node_view(config, node, gres_lines)
        checks += [check_gres(view), check_cgroup(cgroup_conf), check_isolation(view, cgroup_conf)]
        nvml, gpus = check_nvml(view)
        checks += [nvml, check_mps(view)]
        if gpu:
            checks += check_cuda(view, gpus, cgroup_conf)
    return checks + check_cluster(config)


if __name__ == "__main__":
    main()
