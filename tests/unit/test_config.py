"""pslurm.conf / gres.conf / cgroup.conf parsing, rendering and locations."""

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.core.config import (
    CgroupConfig,
    ClusterConfig,
    ConfigError,
    GresConfLine,
    NodeConfig,
    PartitionConfig,
    default_state_dir,
    find_config_path,
    gres_lines_for_node,
    load_cgroup_conf,
    load_cluster_config,
    load_gres_conf,
    parse_cgroup_conf,
    parse_gres_conf,
    parse_slurm_conf,
    render_slurm_conf,
)
from pslurm.core.gres import GresRequest

CONF = r"""
# a small cluster
clustername=lab SlurmctldHost=head(10.0.0.1)   # keys are case-insensitive
SlurmctldPort=7000
StateSaveLocation="/var/lib/my state"
SlurmdTimeout=60 KillWait=5
SchedulerType=sched/backfill
NodeName=DEFAULT CPUs=8 RealMemory=64000
NodeName=c[000-003] Port=7100 \
    Gres=gpu:2
NodeName=big NodeAddr=10.0.0.9 Gres=gpu:a100:4,gpu:v100:1 CPUs=64
PartitionName=DEFAULT MaxTime=1-00:00:00
PartitionName=gpu Nodes=ALL Default=YES DefaultTime=1:00:00
PartitionName=debug Nodes=c[000-001] MaxTime=30 State=down
"""


def test_parse_slurm_conf() -> None:
    cfg = parse_slurm_conf(CONF, "x.conf")
    assert (cfg.cluster_name, cfg.controller_host, cfg.controller_addr) == ("lab", "head", "10.0.0.1")
    assert cfg.controller_target == "10.0.0.1:7000"
    assert cfg.state_dir == "/var/lib/my state"
    assert (cfg.slurmd_timeout, cfg.kill_wait) == (60, 5)
    assert cfg.extra == {"SchedulerType": "sched/backfill"}
    assert list(cfg.nodes) == ["c000", "c001", "c002", "c003", "big"]
    assert cfg.nodes["c002"] == NodeConfig(
        "c002", "127.0.0.1", 7102, 8, 64000, (GresRequest("gpu", None, 2),)
    )
    assert (
        cfg.nodes["big"].port == 6818 and cfg.nodes["big"].cpus == 64 and cfg.nodes["big"].gpus("a100") == 4
    )
    gpu = cfg.partitions["gpu"]
    assert gpu == PartitionConfig("gpu", tuple(cfg.nodes), True, 86400, 3600, "UP")
    assert cfg.partitions["debug"].max_time == 1800 and cfg.partitions["debug"].state == "DOWN"
    assert cfg.default_partition is gpu


@pytest.mark.parametrize(
    ("host", "name", "addr"),
    [("localhost", "localhost", "127.0.0.1"), ("head", "head", "head"), ("h(1.2.3.4)", "h", "1.2.3.4")],
)
def test_slurmctld_host_forms(host: str, name: str, addr: str) -> None:
    cfg = parse_slurm_conf(f"SlurmctldHost={host}\n")
    assert (cfg.controller_host, cfg.controller_addr) == (name, addr)


def test_node_addr_list_gives_one_address_each_and_same_port() -> None:
    cfg = parse_slurm_conf("NodeName=n[1-2] NodeAddr=10.0.0.[1-2] Port=9000\n")
    assert [(n.addr, n.port) for n in cfg.nodes.values()] == [("10.0.0.1", 9000), ("10.0.0.2", 9000)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("NodeName=a\nPartitionName=p Nodes=a,zz\n", "f:2: partition p: node zz is not defined"),
        ("NodeName=a CPUs=many\n", "f:1: CPUs=many: expected a whole number"),
        ("NodeName=a Gres=gpu:x:y:z\n", "f:1: Invalid generic resource (gres) specification: gpu:x:y:z"),
        ("\n\nNodeName=a Gres=gpu\n", "f:3: Invalid generic resource"),
        ("ClusterName\n", "f:1: expected Key=Value"),
        ("ClusterName='x\n", "f:1: cannot parse line"),
        ("NodeName=a\nNodeName=a\n", "f:2: node a is defined twice"),
        ("NodeName=c[1-\n", "f:1: NodeName=c[1-: Invalid hostlist"),
        ("PartitionName=p MaxTime=1:xx\n", "f:1: MaxTime: Invalid time limit specification: 1:xx"),
        ("PartitionName=p Default=maybe\n", "f:1: Default=maybe: expected YES or NO"),
        ("PartitionName=p State=SLEEPY\n", "f:1: State=SLEEPY"),
        ("PartitionName=p\nPartitionName=p\n", "f:2: partition p is defined twice"),
        ("NodeName=n[1-3] NodeAddr=a,b\n", "f:1: NodeAddr= names 2 addresses for 3 nodes"),
        ("NodeName=n[1-2] Port=65535\n", "f:1: Port=65535: node n2 would get port 65536"),
        ("SlurmctldPort=70000\n", "f:1: SlurmctldPort=70000"),
        ("KillWait=3 \\\n", "f:1: line continuation"),
    ],
)
def test_slurm_conf_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_slurm_conf(text, "f")
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)


def test_gres_conf() -> None:
    text = (
        "AutoDetect=nvml\n"
        "NodeName=c[000-001] Name=gpu Type=a100 File=/dev/nvidia[0-3] Cores=0-7,16-17\n"
        "Name=gpu Count=4  # static\n"
        "NodeName=c002 AutoDetect=off\n"
        "Name=mps Count=2k\n"
    )
    lines = parse_gres_conf(text)
    assert lines[0] == GresConfLine(None, autodetect="nvml")
    assert lines[1].files == tuple(f"/dev/nvidia{i}" for i in range(4)) and lines[1].count == 4
    assert lines[1].node_names == ("c000", "c001") and lines[1].type == "a100"
    assert lines[1].cores == (*range(8), 16, 17)
    assert lines[2] == GresConfLine("gpu", count=4)
    assert lines[3] == GresConfLine(None, ("c002",), autodetect="off")
    assert lines[4].count == 2048
    assert gres_lines_for_node(lines, "c000") == [lines[0], lines[1], lines[2], lines[4]]
    assert gres_lines_for_node(lines, "c002") == [lines[0], lines[2], lines[3], lines[4]]


@pytest.mark.parametrize(
    "text",
    ["Type=a100 File=/dev/nvidia0", "Name=gpu File=/dev/nvidia[0-1] Count=3", "Name=gpu Cores=7-3",
     "AutoDetect=magic", "Name=gpu Count=x", "Name=gpu File=/dev/nvidia[0-"],
)  # fmt: skip
def test_gres_conf_errors(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^g:1: "):
        parse_gres_conf(text, "g")


def test_cgroup_conf() -> None:
    assert parse_cgroup_conf("ConstrainDevices=yes\nCgroupPlugin=autodetect\n", "c") == CgroupConfig(
        True, False
    )
    assert parse_cgroup_conf("constraincores=YES constraindevices=no", "c") == CgroupConfig(False, True)
    with pytest.raises(ConfigError, match="c:1: ConstrainCores=perhaps"):
        parse_cgroup_conf("ConstrainCores=perhaps", "c")


def test_load_files(tmp_path: Path) -> None:
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"StateSaveLocation={tmp_path}\nNodeName=n1 Gres=gpu:1\n")
    cfg = load_cluster_config(str(conf))
    assert cfg.path == str(conf) and cfg.database_url == f"sqlite:///{tmp_path}/pslurm.db"
    assert load_gres_conf(str(conf)) == [] and load_cgroup_conf(str(conf)) == CgroupConfig()
    (tmp_path / "gres.conf").write_text("Name=gpu File=/dev/nvidia0\n")
    (tmp_path / "cgroup.conf").write_text("ConstrainDevices=yes\n")
    assert load_gres_conf(str(conf))[0].count == 1
    assert load_cgroup_conf(str(conf)).constrain_devices
    with pytest.raises(ConfigError, match=r"nope\.conf: cannot read: No such file or directory$"):
        load_cluster_config(str(tmp_path / "nope.conf"))


def test_locations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_state_dir() == os.path.join(str(tmp_path), "pslurm")
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_state_dir() == os.path.expanduser("~/.local/state/pslurm")
    monkeypatch.setenv("PSLURM_CONF", "/x/y.conf")
    assert find_config_path() == "/x/y.conf"
    monkeypatch.delenv("PSLURM_CONF")
    expected = "/etc/pslurm/pslurm.conf"
    if not os.path.exists(expected):
        expected = os.path.join(default_state_dir(), "pslurm.conf")
    assert find_config_path() == expected


_name = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True).filter(lambda s: s not in ("default", "all"))
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")), max_size=12)
_gres = st.dictionaries(st.tuples(_name, st.none() | _name), st.integers(1, 64), max_size=3).map(
    lambda d: tuple(GresRequest(n, t, c) for (n, t), c in d.items())
)
_limit = st.none() | st.integers(1, 10**7)


@st.composite
def _configs(draw: st.DrawFn) -> ClusterConfig:
    names = draw(st.lists(_name, unique=True, max_size=6))
    nodes = {
        n: NodeConfig(n, draw(st.sampled_from(["127.0.0.1", "10.0.0.2", "host-a"])), draw(st.integers(1, 65535)),
                      draw(st.integers(1, 512)), draw(st.integers(1, 10**6)), draw(_gres))
        for n in names
    }  # fmt: skip
    parts = {}
    for p in draw(st.lists(_name, unique=True, max_size=3)):
        members = tuple(draw(st.lists(st.sampled_from(names), unique=True))) if names else ()
        parts[p] = PartitionConfig(p, members, draw(st.booleans()), draw(_limit), draw(_limit),
                                   draw(st.sampled_from(["UP", "DOWN", "DRAIN", "INACTIVE"])))  # fmt: skip
    return ClusterConfig(
        path="r.conf",
        cluster_name=draw(_text.filter(bool)),
        controller_host=draw(_name),
        controller_addr=draw(st.sampled_from(["127.0.0.1", "10.1.2.3", "head"])),
        controller_port=draw(st.integers(1, 65535)),
        database_url=draw(st.sampled_from(["", "sqlite:////tmp/a b.db", "postgresql://u:p#w@db/x"])),
        state_dir=draw(_text),
        spool_dir=draw(_text),
        slurmd_timeout=draw(st.integers(0, 10**6)),
        kill_wait=draw(st.integers(0, 10**4)),
        nodes=nodes,
        partitions=parts,
        extra=draw(st.dictionaries(st.from_regex(r"X[A-Za-z]{0,6}", fullmatch=True), _text, max_size=2)),
    )


@settings(max_examples=150)
@given(_configs())
def test_render_parse_round_trip(cfg: ClusterConfig) -> None:
    assert parse_slurm_conf(render_slurm_conf(cfg), "r.conf") == cfg


@given(st.text(max_size=120))
def test_parsers_raise_only_config_error(text: str) -> None:
    for parse in (parse_slurm_conf, parse_gres_conf, parse_cgroup_conf):
        try:
            result = parse(text, "t")
        except ConfigError as exc:
            assert str(exc).startswith("t:")
            continue
        assert result is not None


@given(st.lists(st.sampled_from(["NodeName=", "n[1-2]", "PartitionName=", "p", " Nodes=", "ALL", " Gres=", "gpu:2",
                                 " Port=", "9", "\n", "\\\n", "#", "'", "=", " MaxTime=",
                                 "1-2"]), max_size=16))  # fmt: skip
def test_slurm_conf_near_miss_text(parts: list[str]) -> None:
    try:
        cfg = parse_slurm_conf("".join(parts), "t")
    except ConfigError as exc:
        assert str(exc).startswith("t:")
        return
    assert all(n in cfg.nodes for p in cfg.partitions.values() for n in p.nodes)
