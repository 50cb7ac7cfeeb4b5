import pytest

from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import SpecError, spec_from_dict, spec_to_dict
from pslurm.core.request import JobOptions, build_spec, export_environment, parse_mem

IDENT = dict(user="u", uid=1, gid=1, cwd="/home/u", environ={"PATH": "/bin", "HOME": "/home/u"})


def test_command_line_wins_over_directives():
    cli = JobOptions(job_name="cli", time="5")
    directives = JobOptions(job_name="dir", partition="p", time="10")
    assert cli.over(directives) == JobOptions(job_name="cli", partition="p", time="5")


def test_gres_gpus_and_gpus_per_node_are_the_same_request():
    a = build_spec(JobOptions(gres="gpu:a100:2"), **IDENT).gres
    b = build_spec(JobOptions(gpus="a100:2"), **IDENT).gres
    c = build_spec(JobOptions(gpus_per_node="a100:2"), **IDENT).gres
    assert a == b == c == (GresRequest("gpu", "a100", 2),)


@pytest.mark.parametrize("opts,message", [
    (JobOptions(gres="gpu:x:y:z"), "gres"), (JobOptions(time="1:xx"), "time"),
    (JobOptions(ntasks="0"), "ntasks"), (JobOptions(mem="lots"), "mem"), (JobOptions(nodes="two"), "node"),
])
def test_malformed_options_are_refused(opts, message):
    with pytest.raises(SpecError, match=message):
        build_spec(opts, **IDENT)


def test_time_and_chdir():
    spec = build_spec(JobOptions(time="1-00:00:30", chdir="sub"), **IDENT)
    assert spec.time_limit == 86430 and spec.workdir == "/home/u/sub"


@pytest.mark.parametrize("text,mb", [("100", 100), ("4G", 4096), ("512M", 512), ("1T", 1048576), ("2048K", 2)])
def test_parse_mem(text, mb):
    assert parse_mem(text) == mb


def test_export():
    env = {"PATH": "/bin", "X": "1"}
    assert export_environment(None, env) == env
    assert export_environment("NONE", env) == {}
    assert export_environment("X,Y=2", env) == {"X": "1", "Y": "2"}
    assert export_environment("ALL,Y=2", env) == {**env, "Y": "2"}


def test_spec_round_trips_through_json_dict():
    spec = build_spec(JobOptions(gres="gpu:a100:2,gpu:1", time="5"), argv=("a", "b"), **IDENT)
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_nodelist_and_exclude_are_hostlists():
    built = build_spec(JobOptions(nodelist="c001", exclude="c[002-003]"), user="u", uid=1, gid=1, cwd="/tmp",
                       environ={}, script="#!/bin/sh\n")
    assert (built.nodelist, built.exclude) == ("c001", "c[002-003]")
    with pytest.raises(SpecError, match=r"^Invalid --exclude specification: Invalid hostlist: c\[2-1\]"):
        build_spec(JobOptions(exclude="c[2-1]"), user="u", uid=1, gid=1, cwd="/tmp", environ={}, script="x")


def test_the_submitters_umask_travels_as_slurm_umask():
    spec = build_spec(JobOptions(), umask=0o027, **IDENT)
    assert spec.environment["SLURM_UMASK"] == "0027"
    assert "SLURM_UMASK" not in build_spec(JobOptions(), **IDENT).environment


@pytest.mark.parametrize("given,mode", [(None, ""), ("append", "append"), ("A", "append"), ("truncate", "truncate"),
                                        ("t", "truncate")])
def test_open_mode_by_its_first_letter_and_stored_with_the_spec(given, mode):
    spec = build_spec(JobOptions(open_mode=given), **IDENT)
    assert spec.open_mode == mode
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_a_bad_open_mode_is_refused_and_an_old_stored_spec_reads():
    with pytest.raises(SpecError, match="Invalid --open-mode specification"):
        build_spec(JobOptions(open_mode="sideways"), **IDENT)
    old = spec_to_dict(build_spec(JobOptions(), **IDENT))
    del old["open_mode"]
    assert spec_from_dict(old).open_mode == ""
