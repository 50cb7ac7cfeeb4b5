"""Where this node's job cgroups go and what they limit: cgroup.conf, the mounted hierarchies, and
what the agent can do here (it says what it cannot, in its log and in the node's isolation string).

The hierarchy is chosen as Slurm's ``CgroupPlugin`` does: ``autodetect`` takes cgroup v2 when
``CgroupMountpoint`` (default /sys/fs/cgroup) is a cgroup2 mount, else v1. On a v1 host that also
mounts the v2 hierarchy (hybrid: ``<mountpoint>/unified``, no controllers in it), the job's v2
directory is used for what v2 does without controllers: the eBPF device filter and
``cgroup.kill``; memory, cpuset and devices stay with the v1 controllers (both device checks
apply). A job's directories are ``<hierarchy>/pslurm_<cluster>/<node>/job_<id>``, so two clusters,
or two nodes (LXC containers, ``pslurm up``) on one host never share one.

Every job gets a cgroup whenever the agent can make one (as root), to be killed as a whole;
ConstrainDevices, ConstrainRAMSpace and ConstrainCores decide which limits it carries.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pslurm.core.config import CgroupConfig
from pslurm.nodeagent import bpfdev
from pslurm.nodeagent.cgroups import (
    BASIC_DEVICES,
    CgroupError,
    JobCgroup,
    device_rules,
    read_file,
    write,
)
from pslurm.nodeagent.cpus import format_cpu_list

log = logging.getLogger("psd")
PARENT_ATTEMPTS = 5  # tries at making a node's parent cgroups that another agent may be removing

_MOUNT_FLAGS = {"rw", "ro", "relatime", "noatime", "nodiratime", "strictatime", "nosuid", "nodev", "noexec",
                "clone_children", "noprefix", "xattr"}


@dataclass(frozen=True)
class Mounts:
    """The cgroup hierarchies mounted here: cgroup2 mount points, and v1 controller -> mount point."""

    v2: tuple[str, ...] = ()
    v1: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, mounts: str = "/proc/self/mounts") -> Mounts:
        v2: list[str] = []
        v1: dict[str, str] = {}
        try:
            with open(mounts) as f:
                lines = f.read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            fields = line.split()
            if len(fields) < 4:
                continue
            point = fields[1].replace("\\040", " ")
            if fields[2] == "cgroup2":
                v2.append(point)
            elif fields[2] == "cgroup":
                for opt in fields[3].split(","):
                    if opt not in _MOUNT_FLAGS:  # the controllers (and name=systemd)
                        v1.setdefault(opt, point)
        return cls(tuple(v2), v1)


@dataclass
class Layout:
    """Which hierarchy (its mount point) serves what; None: not here. ``version`` is the plugin's."""

    version: int
    v2: str | None = None  # the job's v2 directory: kill, device program (and all, on pure v2)
    freezer: str | None = None  # v1 kill, where there is no v2 hierarchy
    memory: str | None = None
    cpuset: str | None = None
    devices_v1: str | None = None
    problems: list[str] = field(default_factory=list)  # what cannot be applied here, and why

    @property
    def roots(self) -> list[str]:
        """The distinct hierarchies, the primary one (v2, else the freezer) first."""
        found = [self.v2, self.freezer, self.memory, self.cpuset, self.devices_v1]
        return list(dict.fromkeys(r for r in found if r is not None))


def plan_layout(conf: CgroupConfig, mounts: Mounts) -> Layout:
    """Choose the hierarchies for ``conf`` on a host with ``mounts`` (v1 controllers are used where
    they are mounted; of a v2 hierarchy only ``cgroup.controllers`` is read)."""
    top = os.path.normpath(conf.mountpoint)
    pure_v2 = top in mounts.v2
    v2 = top if pure_v2 else next((m for m in [os.path.join(top, "unified"), *mounts.v2] if m in mounts.v2), None)
    version = {"cgroup/v1": 1, "cgroup/v2": 2}.get(conf.plugin, 2 if pure_v2 else 1)
    layout = Layout(version, v2=v2)
    if version == 2:
        if v2 is None:
            layout.problems.append(f"CgroupPlugin=cgroup/v2 but no cgroup2 hierarchy is mounted (at {top} or anywhere)")
            return layout
        controllers = (read_file(os.path.join(v2, "cgroup.controllers")) or "").split()
        for wanted, key, name in ((conf.constrain_ram_space, "memory", "ConstrainRAMSpace"),
                                  (conf.constrain_cores, "cpuset", "ConstrainCores")):
            if not wanted:
                continue
            if key in controllers:
                setattr(layout, key, v2)
            else:
                layout.problems.append(f"{name}=yes but the cgroup v2 hierarchy at {v2} has no {key} controller")
        return layout

    if v2 is None:
        layout.freezer = mounts.v1.get("freezer")
    for wanted, key, name in ((conf.constrain_ram_space, "memory", "ConstrainRAMSpace"),
                              (conf.constrain_cores, "cpuset", "ConstrainCores"),
                              (conf.constrain_devices, "devices", "ConstrainDevices")):
        if wanted:
            setattr(layout, "devices_v1" if key == "devices" else key, mounts.v1.get(key))
            if key not in mounts.v1 and not (key == "devices" and v2 is not None):  # v2 may filter devices
                layout.problems.append(f"{name}=yes but no cgroup v1 {key} controller is mounted")
    return layout


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


class NodeCgroups:
    """This node's job cgroups: made by :meth:`setup` (which probes), one :meth:`create` per run."""

    def __init__(self, conf: CgroupConfig, layout: Layout, cluster: str, node: str) -> None:
        self.conf = conf
        self.layout = layout
        self.relative = os.path.join(f"pslurm_{_safe(cluster)}", _safe(node))
        self.bpf = False  # device programs attach here (set by setup's probe)
        self.isolation = "none: ConstrainDevices=no"  # what registration reports

    @classmethod
    def setup(cls, conf: CgroupConfig, cluster: str, node: str, mounts: Mounts | None = None) -> NodeCgroups | None:
        """Make this node's parent cgroups and find out what works here; None when the agent
        cannot make cgroups at all. Whatever cannot be done is logged as a warning."""
        if conf.plugin == "disabled":
            log.info("CgroupPlugin=disabled: jobs get no cgroup")
            return None
        if os.geteuid() != 0:
            log.info("jobs get no cgroup: that needs root (the agent runs as uid %d)", os.geteuid())
            return None
        self = cls(conf, plan_layout(conf, mounts or Mounts.read()), cluster, node)
        layout = self.layout
        for root in layout.roots:
            if (why := self._make_parents(root)) is not None:
                layout.problems.append(why)
                for key in ("v2", "freezer", "memory", "cpuset", "devices_v1"):
                    if getattr(layout, key) == root:
                        setattr(layout, key, None)
        if layout.v2 is not None and conf.constrain_devices:
            why_not = bpfdev.probe(self.node_dir(layout.v2))
            self.bpf = why_not is None
            if why_not is not None:
                layout.problems.append(f"cannot attach cgroup v2 device programs: {why_not}")
        for problem in layout.problems:
            log.warning("job cgroups: %s", problem)
        if not layout.roots:
            log.warning("jobs get no cgroup: no usable cgroup hierarchy")
            return None
        self.isolation = self._describe_isolation()
        log.info("job cgroups in %s (%s)", ", ".join(self.node_dir(r) for r in layout.roots), self.isolation)
        self.remove_parents()  # made again with the first job: an agent never stopped leaves nothing
        return self

    def _describe_isolation(self) -> str:
        if not self.conf.constrain_devices:
            return "none: ConstrainDevices=no"
        mechanisms = (["cgroup v2 bpf"] if self.bpf else []) + (["cgroup v1"] if self.layout.devices_v1 else [])
        if mechanisms:
            return f"devices ({' + '.join(mechanisms)})"
        device_problems = [p for p in self.layout.problems if "device" in p.lower()] or self.layout.problems
        text = f"none: {'; '.join(device_problems) or 'no device controller here'}"
        return text if len(text) <= 256 else text[:253] + "..."  # the controller keeps 256 characters

    def node_dir(self, root: str) -> str:
        return os.path.join(root, self.relative)

    def _make_parents(self, root: str) -> str | None:
        """Create ``pslurm_<cluster>/<node>`` in ``root``; a reason when it cannot be used."""
        for attempt in range(PARENT_ATTEMPTS):
            path = root
            try:
                for part in self.relative.split(os.sep):
                    parent, path = path, os.path.join(path, part)
                    os.makedirs(path, exist_ok=True)
                    if root == self.layout.cpuset and root != self.layout.v2:
                        _inherit_cpuset(parent, path)  # v1: an empty cpuset takes no tasks
                break
            except OSError as exc:
                # another node's agent of this cluster removed the cluster's directory between our
                # makedirs (remove_parents: agents starting together, many in a process with --virtual)
                if exc.errno not in (errno.ENOENT, errno.EEXIST) or attempt == PARENT_ATTEMPTS - 1:
                    return f"cannot use {path}: {exc.strerror}"
        if root == self.layout.v2:
            self._enable_v2_controllers(root)
        return None

    def _enable_v2_controllers(self, root: str) -> None:
        """v2: a controller works in a cgroup only when enabled in each ancestor's subtree_control."""
        path = root
        for part in [*self.relative.split(os.sep), ""]:
            for controller in ("memory", "cpuset"):
                if getattr(self.layout, controller) != root:
                    continue
                control = os.path.join(path, "cgroup.subtree_control")
                if controller in (read_file(control) or "").split():
                    continue
                try:
                    write(control, f"+{controller}")
                except OSError as exc:  # e.g. EBUSY: processes in that cgroup (an LXC container's root)
                    self.layout.problems.append(f"cannot enable the {controller} controller in {path}: {exc.strerror}")
                    setattr(self.layout, controller, None)
            path = os.path.join(path, part)

    def create(self, job_id: int, gpu_minors: Iterable[int] = (), mem_mb: int = 0,
               cpus: Iterable[int] | None = None) -> JobCgroup:
        """Make the run's cgroup with the limits cgroup.conf asks for: its devices, ``mem_mb`` MB of
        memory (0: no limit), ``cpus`` as its cpuset. An empty leftover of the same job is replaced
        (a device program attached to it would deny this run's GPUs).

        CgroupError when it cannot be made, or when a GPU cannot be allowed (e.g. the node's own
        parent cgroup, an LXC container's, does not allow it)."""
        layout, name = self.layout, f"job_{job_id}"
        for root in layout.roots:
            if not os.path.isdir(self.node_dir(root)) and (why := self._make_parents(root)) is not None:
                raise CgroupError(errno.ENOENT, why)
        dirs = [os.path.join(self.node_dir(root), name) for root in layout.roots]
        stale = JobCgroup([d for d in dirs if os.path.isdir(d)])
        if stale.pids():
            raise CgroupError(errno.EBUSY, f"cgroup {stale.path} of job {job_id} still has processes {stale.pids()}")
        if not stale.remove(timeout=0.5):
            raise CgroupError(errno.EBUSY, f"cannot remove the leftover cgroup {stale.path} of job {job_id}")
        for d in dirs:
            try:
                os.mkdir(d)
            except OSError as exc:
                JobCgroup(dirs).remove(timeout=0)
                raise CgroupError(exc.errno, f"cannot create cgroup {d}: {exc.strerror}") from None
        cpuset = frozenset(cpus) if cpus and layout.cpuset else None
        job = JobCgroup(dirs, devices=self.conf.constrain_devices and (self.bpf or layout.devices_v1 is not None),
                        cpus=cpuset)
        try:
            self._limit(job_id, gpu_minors, mem_mb, cpuset)
        except BaseException:
            job.remove(timeout=0)
            raise
        return job

    def _limit(self, job_id: int, gpu_minors: Iterable[int], mem_mb: int, cpus: frozenset[int] | None) -> None:
        """Write the job's limits into its (new, empty) directories."""
        layout = self.layout

        def at(root: str) -> str:
            return os.path.join(self.node_dir(root), f"job_{job_id}")

        def put(root: str, name: str, value: str) -> None:
            try:
                write(os.path.join(at(root), name), value)
            except OSError as exc:
                raise CgroupError(exc.errno, f"cannot set {name}={value} in {at(root)}: {exc.strerror}") from None

        if cpus and layout.cpuset:
            put(layout.cpuset, "cpuset.cpus", format_cpu_list(cpus))
            if layout.cpuset != layout.v2:  # v1: mems too, or no task may join
                mems = read_file(os.path.join(self.node_dir(layout.cpuset), "cpuset.mems")) or ""
                put(layout.cpuset, "cpuset.mems", mems.strip())
        if mem_mb > 0 and layout.memory:
            limit = str(mem_mb * 1024 * 1024)
            v2 = layout.memory == layout.v2
            put(layout.memory, "memory.max" if v2 else "memory.limit_in_bytes", limit)
            swap = "memory.swap.max" if v2 else "memory.memsw.limit_in_bytes"  # --mem is RAM, not RAM + swap
            if os.path.exists(os.path.join(at(layout.memory), swap)):
                put(layout.memory, swap, "0" if v2 else limit)
        if not self.conf.constrain_devices:
            return
        rules = device_rules(gpu_minors)
        if layout.devices_v1:
            put(layout.devices_v1, "devices.deny", "a")
            for rule in rules:
                try:
                    write(os.path.join(at(layout.devices_v1), "devices.allow"), str(rule))
                except OSError as exc:
                    if rule not in BASIC_DEVICES:  # a basic device the node itself lacks, the job cannot have either
                        raise CgroupError(exc.errno, f"cannot allow '{rule}' in {at(layout.devices_v1)}: "
                                                     f"{exc.strerror}") from None
        if self.bpf and layout.v2:
            try:
                bpfdev.attach(at(layout.v2), rules)
            except OSError as exc:
                raise CgroupError(exc.errno, f"cannot attach the device program to {at(layout.v2)}: {exc}") from None

    def leftovers(self, keep: Iterable[str] = ()) -> list[JobCgroup]:
        """The job cgroups under this node's path in any hierarchy, but those whose path is in
        ``keep`` (live runs'): what a previous agent left."""
        names: set[str] = set()
        for root in self.layout.roots:
            try:
                names.update(n for n in os.listdir(self.node_dir(root)) if n.startswith("job_"))
            except OSError:
                pass
        found = []
        for name in sorted(names):
            dirs = [d for r in self.layout.roots if os.path.isdir(d := os.path.join(self.node_dir(r), name))]
            if dirs and not set(dirs) & set(keep):
                found.append(JobCgroup(dirs))
        return found

    def remove_parents(self) -> None:
        """rmdir this node's parent cgroups and, when no other node uses it, the cluster's."""
        for root in self.layout.roots:
            path = self.node_dir(root)
            while os.path.normpath(path) != os.path.normpath(root):
                try:
                    os.rmdir(path)
                except OSError:
                    break  # not empty (a job still there, or another node's): leave it
                path = os.path.dirname(path)


def _inherit_cpuset(parent: str, path: str) -> None:
    for name in ("cpuset.cpus", "cpuset.mems"):
        if not (read_file(os.path.join(path, name)) or "").strip():
            write(os.path.join(path, name), (read_file(os.path.join(parent, name)) or "").strip())
