"""--constraint against node Features=: parsing, admission, the scheduler's allowed nodes, carriage."""

from __future__ import annotations

import pytest

from pslurm.controller.admission import admit
from pslurm.core import restjson
from pslurm.core.config import parse_slurm_conf, render_slurm_conf
from pslurm.core.errors import SpecError
from pslurm.core.features import parse_constraint, satisfies
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobSpec, spec_from_dict, spec_to_dict
from pslurm.proto import convert

CONF = """NodeName=a[1-2] CPUs=4 RealMemory=1000 Features=a100,ib
NodeName=h1 CPUs=4 RealMemory=1000 Features=h100
NodeName=p1 CPUs=4 RealMemory=1000
PartitionName=gpu Nodes=a[1-2],h1,p1 Default=YES
PartitionName=plain Nodes=p1
"""


def spec(**kw: object) -> JobSpec:
    return JobSpec(name="j", user="u", uid=1, gid=1, workdir="/", script="#!/bin/sh\n", **kw)  # type: ignore[arg-type]


def test_parse_and_satisfy() -> None:
    assert parse_constraint("") == ()
    assert parse_constraint("a100") == (frozenset({"a100"}),)
    assert parse_constraint("a100&ib|h100") == (frozenset({"a100", "ib"}), frozenset({"h100"}))
    assert satisfies((), ())
    assert satisfies(parse_constraint("a100&ib"), ("a100", "ib", "x"))
    assert not satisfies(parse_constraint("a100&ib"), ("a100",))
    assert satisfies(parse_constraint("v100|a100"), ("a100",))
    for bad in ("[a|b]", "a*2", "(a&b)", "a&", "|a", "a b", "a,b"):
        with pytest.raises(SpecError, match="Invalid feature specification"):
            parse_constraint(bad)


def test_features_in_the_config_round_trip() -> None:
    cfg = parse_slurm_conf(CONF, "x")
    assert cfg.nodes["a2"].features == ("a100", "ib") and cfg.nodes["p1"].features == ()
    assert parse_slurm_conf(render_slurm_conf(cfg), "y").nodes == cfg.nodes


def test_admission() -> None:
    cfg = parse_slurm_conf(CONF, "x")
    admit(spec(constraint="a100"), cfg)
    admit(spec(constraint="a100&ib", num_nodes=2), cfg)
    admit(spec(constraint="h100|a100", num_nodes=3), cfg)
    with pytest.raises(SpecError, match="^Invalid feature specification"):
        admit(spec(constraint="v100"), cfg)
    with pytest.raises(SpecError, match="^Invalid feature specification"):
        admit(spec(constraint="a100", partition="plain"), cfg)
    with pytest.raises(SpecError, match="Node count specification invalid"):
        admit(spec(constraint="a100", num_nodes=3), cfg)  # two nodes have it
    with pytest.raises(SpecError, match="Requested node configuration is not available"):
        admit(spec(constraint="a100", nodelist="h1"), cfg)
    with pytest.raises(SpecError, match="Requested node configuration is not available"):
        admit(spec(constraint="h100", exclude="h1"), cfg)


def test_the_constraint_travels() -> None:
    s = spec(constraint="a100&ib")
    assert convert.spec_from_pb(convert.spec_to_pb(s)) == s
    assert restjson.spec_from_json(restjson.spec_to_json(s)) == s
    assert restjson.spec_to_json(s)["constraints"] == "a100&ib"
    assert spec_from_dict(spec_to_dict(s)) == s
    old = spec_to_dict(spec())
    del old["constraint"]  # a spec stored before the field existed
    assert spec_from_dict(old).constraint == ""


def test_scheduler_narrows_allowed_nodes() -> None:
    from pslurm.controller.scheduler import Scheduler

    sched = Scheduler.__new__(Scheduler)  # only _allowed_nodes' state
    sched.config = parse_slurm_conf(CONF, "x")
    sched._allowed_cache = {}
    assert sched._allowed_nodes("", "", 1, "") is None
    assert sched._allowed_nodes("", "", 1, "a100") == {"a1", "a2"}
    assert sched._allowed_nodes("", "a1", 1, "a100|h100") == {"a2", "h1"}
    assert sched._allowed_nodes("a1", "", 1, "h100") == frozenset()
    assert sched._allowed_nodes("", "", 2, "ib") == {"a1", "a2"}
    assert sched._allowed_nodes("", "a2", 1, "") == {"a1", "h1", "p1"}


def test_exclusive_travels_and_parses() -> None:
    from pslurm.core.jobdesc import exclusive_option

    s = spec(exclusive=True)
    assert convert.spec_from_pb(convert.spec_to_pb(s)) == s
    assert restjson.spec_from_json(restjson.spec_to_json(s)) == s
    assert spec_from_dict(spec_to_dict(s)) == s
    assert [exclusive_option(v) for v in (None, "", "user", "MCS")] == [False, True, True, True]
    with pytest.raises(SpecError, match="Invalid --exclusive specification"):
        exclusive_option("topo")
    with pytest.raises(SpecError, match="not a share"):
        admit(spec(exclusive=True, gres=(GresRequest("shard", None, 1),)), parse_slurm_conf(CONF, "x"))
