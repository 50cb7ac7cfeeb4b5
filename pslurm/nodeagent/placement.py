"""Where a run's processes go on the node: its cgroup (cgroup.conf's limits, its GPUs' devices) and
its CPUs (ConstrainCores, or affinity to its GPUs' cores), and how the node isolates jobs."""

from __future__ import annotations

import logging
import os
import threading

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord
from pslurm.nodeagent.cgroupnode import NodeCgroups
from pslurm.nodeagent.cgroups import JobCgroup
from pslurm.nodeagent.cpus import affinity_for, pick_cpus
from pslurm.nodeagent.environment import node_counts
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.link import RunKey
from pslurm.nodeagent.runtable import RunTable

log = logging.getLogger("psd")


class Placement:
    """One node's cgroups and CPUs for its runs (see the module's docstring)."""

    def __init__(self, config: ClusterConfig, node: NodeConfig, devices: list[GpuDevice],
                 cgroup_conf: CgroupConfig, runs: RunTable) -> None:
        self.devices = devices
        self.cgroup_conf = cgroup_conf
        self.runs = runs
        # every job gets a cgroup when the agent can make one; cgroup.conf decides its limits
        self.cgroups = NodeCgroups.setup(cgroup_conf, config.cluster_name, node.name)
        self.isolation = isolation(self.cgroups, cgroup_conf)  # reported at registration: pscontrol's DeviceIsolation
        if cgroup_conf.constrain_devices and self.isolation.startswith("none"):
            log.warning("ConstrainDevices=yes but jobs will not be isolated: %s", self.isolation[len("none: "):])
        self.whole_cpus = {name: n.cpus for name, n in config.nodes.items()}  # each node's CPUs: an --exclusive job's
        self._lock = threading.Lock()
        self._run_cpus: dict[RunKey, frozenset[int]] = {}  # ConstrainCores: the CPUs each run was given

    def cgroup_for(self, job: JobRecord) -> tuple[JobCgroup | None, set[int] | None]:
        """The run's cgroup (None where the agent cannot make cgroups) and the CPUs to pin it to
        with sched_setaffinity (None: its cpuset does, or nothing to pin). ConstrainCores=yes: the
        job's ``cpus`` CPUs, those near its GPUs and unused by other runs first, as its cpuset
        (affinity where there is no cpuset); otherwise affinity to its GPUs' cores, if known.
        CgroupError when the cgroup cannot be made."""
        near = affinity_for(self.devices, job.gpu_indices) if job.gpu_indices else None
        cpus: set[int] | None = near
        if self.cgroup_conf.constrain_cores:
            cpus = set(self._pick_cpus(job, near))
        if self.cgroups is None:
            return None, cpus
        by_index = {d.index: d for d in self.devices}
        minors = [m for i in job.gpu_indices
                  if (m := by_index[i].minor if i in by_index else None) is not None]
        cgroup = self.cgroups.create(job.job_id, minors, mem_mb=job.spec.mem_mb,
                                     cpus=cpus if self.cgroup_conf.constrain_cores else None)
        return cgroup, None if cgroup.cpus else cpus

    def _pick_cpus(self, job: JobRecord, near: set[int] | None) -> frozenset[int]:
        with self._lock:  # forget the CPUs of runs that ended
            self._run_cpus = {k: c for k, c in self._run_cpus.items()
                              if (r := self.runs.get(k)) is not None and r.end is None}
            run = self.runs.get((job.job_id, job.restarts))
            _, per_node = node_counts(job, self.whole_cpus)  # this node's share (an exclusive job: all)
            here = per_node[min(run.node_index if run is not None else 0, len(per_node) - 1)]
            picked = pick_cpus(here, os.sched_getaffinity(0), near or (), self._run_cpus.values())
            self._run_cpus[(job.job_id, job.restarts)] = picked
        return picked

    def remove_leftovers(self, reap_timeout: float) -> None:
        """Kill and remove the job cgroups under this node's path that no live run owns: a previous
        agent's, even those whose records were lost (their processes may have left the session the
        record names)."""
        if self.cgroups is None:
            return
        for cgroup in self.cgroups.leftovers(keep=self.runs.live_cgroup_dirs()):
            found = len(cgroup.pids())
            left = cgroup.kill_all(reap_timeout)
            if left:
                log.error("leftover cgroup %s: %d process(es) survived SIGKILL: %s", cgroup.path, len(left), left)
            elif not cgroup.remove(timeout=1.0):
                log.error("leftover cgroup %s could not be removed", cgroup.path)
            else:
                log.warning("removed leftover cgroup %s%s", cgroup.path,
                            f" and killed its {found} process(es)" if found else "")

    def close(self) -> None:
        """The agent stops: its node's cgroup parents go."""
        if self.cgroups is not None:
            self.cgroups.remove_parents()


def isolation(cgroups: NodeCgroups | None, conf: CgroupConfig) -> str:
    """How jobs' devices are isolated on this node, as pscontrol's DeviceIsolation says it."""
    if cgroups is not None:
        return cgroups.isolation
    if not conf.constrain_devices:
        return "none: ConstrainDevices=no"
    if conf.plugin == "disabled":
        return "none: CgroupPlugin=disabled"
    if os.geteuid() != 0:
        return f"none: device cgroups need root (the agent runs as uid {os.geteuid()})"
    return "none: no usable cgroup hierarchy"
