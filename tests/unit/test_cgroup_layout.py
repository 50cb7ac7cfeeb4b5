"""Which hierarchies a job cgroup uses (CgroupPlugin, CgroupMountpoint, the Constrain* keys) on v2,
v1 and hybrid hosts, cgroup.conf parsing, and the choice of a job's CPUs; no root needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.core.config import CgroupConfig, ConfigError
from pslurm.core.confparse import parse_cgroup_conf
from pslurm.nodeagent.cgroupnode import Layout, Mounts, plan_layout
from pslurm.nodeagent.cpus import format_cpu_list, parse_cpu_list, pick_cpus

ALL = CgroupConfig(constrain_devices=True, constrain_cores=True, constrain_ram_space=True)
V1 = {c: f"/sys/fs/cgroup/{c}" for c in ("cpuset", "memory", "devices", "freezer", "pids")}


def test_mounts_are_read_from_proc_mounts(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\n"
                      "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,relatime,cpu,cpuacct 0 0\n"
                      "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n"
                      "cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,xattr,name=systemd 0 0\n"
                      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
    assert Mounts.read(str(mounts)) == Mounts(("/sys/fs/cgroup/unified",), {
        "cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct", "memory": "/sys/fs/cgroup/memory",
        "name=systemd": "/sys/fs/cgroup/systemd"})
    assert Mounts.read(str(tmp_path / "none")) == Mounts()


def test_hybrid_host_uses_v2_for_kill_and_bpf_and_v1_for_the_rest() -> None:
    layout = plan_layout(ALL, Mounts(("/sys/fs/cgroup/unified",), V1))
    assert layout == Layout(1, v2="/sys/fs/cgroup/unified", memory=V1["memory"], cpuset=V1["cpuset"],
                            devices_v1=V1["devices"])
    assert layout.roots[0] == "/sys/fs/cgroup/unified"
    # nothing constrained: still a cgroup, to be killed as a whole
    assert plan_layout(CgroupConfig(), Mounts(("/sys/fs/cgroup/unified",), V1)).roots == ["/sys/fs/cgroup/unified"]


def test_v1_host_kills_through_the_freezer() -> None:
    layout = plan_layout(CgroupConfig(constrain_devices=True), Mounts((), V1))
    assert layout.version == 1 and layout.v2 is None
    assert layout.roots == [V1["freezer"], V1["devices"]]
    missing = plan_layout(ALL, Mounts((), {"freezer": V1["freezer"]}))
    assert missing.problems == ["ConstrainRAMSpace=yes but no cgroup v1 memory controller is mounted",
                                "ConstrainCores=yes but no cgroup v1 cpuset controller is mounted",
                                "ConstrainDevices=yes but no cgroup v1 devices controller is mounted"]


def test_v2_host_puts_everything_in_one_directory(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    conf = CgroupConfig(True, True, True, mountpoint=str(tmp_path))
    layout = plan_layout(conf, Mounts((str(tmp_path),), {}))
    assert layout == Layout(2, v2=str(tmp_path), memory=str(tmp_path), cpuset=str(tmp_path))
    assert layout.roots == [str(tmp_path)]
    (tmp_path / "cgroup.controllers").write_text("pids\n")
    assert plan_layout(conf, Mounts((str(tmp_path),), {})).problems == [
        f"ConstrainRAMSpace=yes but the cgroup v2 hierarchy at {tmp_path} has no memory controller",
        f"ConstrainCores=yes but the cgroup v2 hierarchy at {tmp_path} has no cpuset controller"]


def test_the_plugin_overrides_autodetect(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("")
    hybrid = Mounts((str(tmp_path),), V1)
    forced_v2 = plan_layout(CgroupConfig(plugin="cgroup/v2"), hybrid)
    assert forced_v2.version == 2 and forced_v2.v2 == str(tmp_path)
    assert plan_layout(CgroupConfig(plugin="cgroup/v2"), Mounts((), V1)).problems == [
        "CgroupPlugin=cgroup/v2 but no cgroup2 hierarchy is mounted (at /sys/fs/cgroup or anywhere)"]
    pure_v2 = Mounts(("/sys/fs/cgroup",), {})
    assert plan_layout(CgroupConfig(plugin="cgroup/v1"), pure_v2).version == 1


def test_cgroup_conf_keys() -> None:
    conf = parse_cgroup_conf("CgroupPlugin=cgroup/v2\nCgroupMountpoint=/cg/\nConstrainRAMSpace=yes\n"
                             "ConstrainCores=yes ConstrainDevices=yes AllowedRAMSpace=100\n", "c")
    assert conf == CgroupConfig(True, True, True, plugin="cgroup/v2", mountpoint="/cg")
    assert parse_cgroup_conf("", "c") == CgroupConfig(plugin="autodetect", mountpoint="/sys/fs/cgroup")
    with pytest.raises(ConfigError, match="^c:2: CgroupPlugin=cgroup/v3: expected autodetect, cgroup/v1"):
        parse_cgroup_conf("\nCgroupPlugin=cgroup/v3", "c")
    with pytest.raises(ConfigError, match="^c:1: CgroupMountpoint=cg: expected an absolute path"):
        parse_cgroup_conf("CgroupMountpoint=cg", "c")
    with pytest.raises(ConfigError, match="^c:1: ConstrainRAMSpace=maybe"):
        parse_cgroup_conf("ConstrainRAMSpace=maybe", "c")


def test_cpus_are_picked_near_the_gpus_and_apart_from_other_jobs() -> None:
    cpus = range(8)
    assert pick_cpus(2, cpus) == {0, 1}
    assert pick_cpus(2, cpus, preferred={5, 6, 7}) == {5, 6}
    assert pick_cpus(3, cpus, preferred={5, 6}, busy=[{5}, {0, 1}]) == {6, 2, 3}
    assert pick_cpus(20, cpus) == set(cpus)  # more than there are: all of them
    assert pick_cpus(0, cpus) == {0}
    assert pick_cpus(2, [0, 1], busy=[{0, 1}, {1}]) == {0, 1}  # too few: shared, the least used first


def test_cpu_lists_round_trip() -> None:
    assert format_cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert format_cpu_list([]) == ""
    assert parse_cpu_list(format_cpu_list({3, 4, 9})) == (3, 4, 9)
