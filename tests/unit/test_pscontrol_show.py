"""pscontrol show hostnames / hostlist / config (no controller)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pslurm.cli import pscontrol
from pslurm.core.config import load_cluster_config


def test_hostnames_expand_in_order() -> None:
    assert pscontrol.hostnames("c[000-002],gpu1") == ["c000", "c001", "c002", "gpu1"]
    with pytest.raises(ValueError):
        pscontrol.hostnames("c[000-")


def test_hostlist_compresses_names() -> None:
    assert pscontrol.encode_hostlist("c000,c001,c002,c005") == "c[000-002,005]"
    assert pscontrol.encode_hostlist("c001,c[002-003]") == "c[001-003]"



def test_show_hostnames_reads_slurm_nodelist(monkeypatch: pytest.MonkeyPatch,
                                             run_pscontrol: Callable[..., tuple[int, str, str]]) -> None:
    monkeypatch.setenv("PSLURM_CONF", "/nonexistent/pslurm.conf")  # no controller, no file needed
    monkeypatch.setenv("SLURM_NODELIST", "c[001-002]")
    assert run_pscontrol("show", "hostnames") == (0, "c001\nc002\n", "")
    assert run_pscontrol("show", "hostnames", "x[1-3]") == (0, "x1\nx2\nx3\n", "")
    monkeypatch.delenv("SLURM_NODELIST")
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)
    assert run_pscontrol("show", "hostnames") == (0, "", "pscontrol: error: host list is empty\n")
    assert run_pscontrol("show", "hostlist", "a1,a2,a3") == (0, "a[1-3]\n", "")
    code, out, err = run_pscontrol("show", "hostlist")
    assert code == 1 and "invalid encode argument" in err


def test_show_config_pads_keys_as_scontrol(tmp_path: Path) -> None:
    conf = tmp_path / "pslurm.conf"
    conf.write_text("ClusterName=test\nSlurmctldHost=head(10.0.0.1)\nSlurmctldPort=7000\nRestPort=7001\n"
                    "MaxArraySize=5000\nSchedulerParameters=bf_interval=2\nPriorityWeightAge=100\n"
                    "NodeName=c[0-1] Port=7100 CPUs=2\nPartitionName=p Nodes=c[0-1] Default=YES\n")
    text = pscontrol.show_config(load_cluster_config(str(conf)), now=1_700_000_000)
    lines = text.splitlines()
    assert re.fullmatch(r"Configuration data as of \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", lines[0])
    pairs = dict(line.split(" = ", 1) for line in lines[1:])
    assert all(len(key) == 23 or not key.endswith(" ") for key in pairs)
    pairs = {k.strip(): v for k, v in pairs.items()}
    assert pairs["ClusterName"] == "test"
    assert pairs["SlurmctldHost[0]"] == "head(10.0.0.1)"
    assert pairs["SlurmctldPort"] == "7000" and pairs["RestPort"] == "7001" and pairs["SlurmdPort"] == "7100"
    assert pairs["MaxArraySize"] == "5000" and pairs["SchedulerParameters"] == "bf_interval=2"
    assert pairs["KillWait"] == "30 sec" and pairs["PriorityWeightAge"] == "100"
    assert lines[1].startswith("BatchStartTimeout       = ")
    keys = [k.strip() for k in pairs]
    assert keys == sorted(keys, key=str.lower)
