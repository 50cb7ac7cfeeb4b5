"""The LXC cluster's plan and generated files, checked without LXC."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from pslurm.core.config import parse_gres_conf, parse_slurm_conf
from pslurm.lxc.plan import LxcPlan, PlanError, choose_subnet, make_plan
from pslurm.lxc.render import render_all

NET = ipaddress.IPv4Network("10.99.7.0/24")


def fake_plan(tmp_path: Path, nodes: int = 2, gpus: int = 2, **kw: object) -> LxcPlan:
    return make_plan(tmp_path, nodes, gpus, network=NET, fake_gpus=True, python="/py/bin/python",
                     shares=("/tmp",), **kw)  # type: ignore[arg-type]


def text(files: dict[Path, tuple[str, int]], path: Path) -> str:
    return files[path][0]


def test_plan_addresses_names_and_own_gpus(tmp_path: Path) -> None:
    plan = fake_plan(tmp_path)
    assert plan.bridge == "pslurm-br0" and plan.bridge_addr == "10.99.7.1"
    assert [(n.name, n.container, n.addr) for n in plan.nodes] == [
        ("c000", "pslurm-c000", "10.99.7.10"), ("c001", "pslurm-c001", "10.99.7.11")]
    assert [d.minor for d in plan.nodes[1].gpus] == [2, 3]
    assert [d.target for d in plan.nodes[1].gpus] == ["/dev/nvidia2", "/dev/nvidia3"]
    assert plan.nodes[1].gpus[0].source == str(tmp_path / "dev" / "nvidia2")
    assert plan.fake_device_paths()[-1] == str(tmp_path / "dev" / "nvidiactl")


def test_container_config_isolates_devices_and_network(tmp_path: Path) -> None:
    plan = fake_plan(tmp_path)
    files = render_all(plan)
    conf = text(files, tmp_path / "lxc" / "pslurm-c001" / "config")
    lines = [ln for ln in conf.splitlines() if ln and not ln.startswith("#")]
    assert f"lxc.rootfs.path = overlay:/:{tmp_path}/lxc/pslurm-c001/delta0" in lines
    assert "lxc.mount.auto = proc:mixed sys:ro cgroup:mixed:force" in lines
    assert "lxc.net.0.link = pslurm-br0" in lines
    assert "lxc.net.0.ipv4.address = 10.99.7.11/24 10.99.7.255" in lines  # explicit broadcast
    assert not any("gateway" in ln for ln in lines)  # no route out: no NAT, no forwarding
    assert lines.index("lxc.cgroup.devices.deny = a") < lines.index("lxc.cgroup.devices.allow = c 195:2 rwm")
    gpu_rules = {ln for ln in lines if ln.startswith("lxc.cgroup.devices.allow = c 195:")}
    assert gpu_rules == {f"lxc.cgroup.devices.allow = c 195:{m} rwm" for m in (2, 3, 254, 255)}
    assert not any(ln.startswith("lxc.cgroup2.") for ln in lines)
    assert f"lxc.mount.entry = {tmp_path}/dev/nvidia2 dev/nvidia2 none bind,optional,create=file 0 0" in lines
    assert not any("nvidia0 " in ln or "nvidia1 " in ln for ln in lines)  # c000's GPUs are not bound in
    assert f"lxc.init.cmd = /bin/sh {tmp_path}/nodes/c001/start-agent.sh" in lines
    assert "lxc.mount.entry = /tmp tmp none rbind,create=dir 0 0" in lines


def test_cgroup_v2_host_gets_cgroup2_keys(tmp_path: Path) -> None:
    conf = text(render_all(fake_plan(tmp_path, cgroup_version=2)), tmp_path / "lxc" / "pslurm-c000" / "config")
    assert "lxc.cgroup2.devices.deny = a" in conf and "lxc.cgroup2.devices.allow = c 195:0 rwm" in conf
    assert "lxc.cgroup.devices" not in conf


def test_agent_files_parse_as_the_agent_reads_them(tmp_path: Path) -> None:
    plan = fake_plan(tmp_path)
    files = render_all(plan)
    node_dir = tmp_path / "nodes" / "c001"
    conf = parse_slurm_conf(text(files, node_dir / "pslurm.conf"))
    assert (conf.controller_addr, conf.controller_port) == ("10.99.7.1", 6817)
    assert {n: (c.addr, c.port, c.gpus()) for n, c in conf.nodes.items()} == {
        "c000": ("10.99.7.10", 6818, 2), "c001": ("10.99.7.11", 6818, 2)}
    assert text(files, tmp_path / "pslurm.conf") == text(files, node_dir / "pslurm.conf")
    (gres,) = parse_gres_conf(text(files, node_dir / "gres.conf"))
    assert gres.node_names == ("c001",) and gres.files == ("/dev/nvidia2", "/dev/nvidia3")
    assert "ConstrainDevices=yes" in text(files, node_dir / "cgroup.conf")
    script, mode = files[node_dir / "start-agent.sh"]
    assert mode == 0o755
    assert f"exec /py/bin/python -m pslurm.nodeagent.app -f {node_dir}/pslurm.conf -N c001" in script


def test_hosts_name_every_node_and_the_controller(tmp_path: Path) -> None:
    files = render_all(fake_plan(tmp_path, nodes=3))
    delta = tmp_path / "lxc" / "pslurm-c002" / "delta0" / "etc"
    hosts = [ln.split() for ln in text(files, delta / "hosts").splitlines() if ln and not ln.startswith("#")]
    assert ["10.99.7.1", "pslurm-ctld"] in hosts
    assert [h[:2] for h in hosts if h[1].startswith("c0")] == [
        ["10.99.7.10", "c000"], ["10.99.7.11", "c001"], ["10.99.7.12", "c002"]]
    assert text(files, delta / "hostname") == "c002\n"
    assert "nameserver" not in text(files, delta / "resolv.conf")


def test_real_gpus_split_in_order_with_shared_nodes(tmp_path: Path) -> None:
    host = [(f"/dev/nvidia{i}", i) for i in range(4)]
    plan = make_plan(tmp_path, 2, 2, network=NET, gpu_devices=host,
                     shared_devices=[("/dev/nvidiactl", 195, 255), ("/dev/nvidia-uvm", 508, 0)])
    assert [d.source for d in plan.nodes[1].gpus] == ["/dev/nvidia2", "/dev/nvidia3"]
    assert plan.fake_device_paths() == []
    conf = text(render_all(plan), tmp_path / "lxc" / "pslurm-c000" / "config")
    assert "lxc.cgroup.devices.allow = c 508:0 rwm" in conf
    assert "lxc.mount.entry = /dev/nvidia-uvm dev/nvidia-uvm none bind,optional,create=file 0 0" in conf


def test_no_gpus_means_no_gpu_rules(tmp_path: Path) -> None:
    conf = text(render_all(fake_plan(tmp_path, gpus=0)), tmp_path / "lxc" / "pslurm-c000" / "config")
    assert "195:" not in conf and "nvidia" not in conf


@pytest.mark.parametrize("kwargs, message", [
    ({"prefix": "Bad_Prefix"}, "--prefix"),
    ({"nodes": 0}, "--nodes"),
    ({"network": ipaddress.IPv4Network("10.99.7.0/30")}, "room for"),
    ({"fake_gpus": False}, "need 4 GPU devices and the host has 0"),
])
def test_bad_options_are_refused(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"nodes": 2, "gpus_per_node": 2, "network": NET, "fake_gpus": True, **kwargs}
    with pytest.raises(PlanError, match=message):
        make_plan(tmp_path, **args)  # type: ignore[arg-type]


def test_subnet_is_chosen_clear_of_the_hosts_networks() -> None:
    used = [ipaddress.IPv4Network("10.99.0.0/24"), ipaddress.IPv4Network("10.99.1.128/25"),
            ipaddress.IPv4Network("192.0.2.0/24")]
    assert choose_subnet(used) == ipaddress.IPv4Network("10.99.2.0/24")
    with pytest.raises(PlanError, match="--subnet"):
        choose_subnet([ipaddress.IPv4Network("10.0.0.0/8")])
