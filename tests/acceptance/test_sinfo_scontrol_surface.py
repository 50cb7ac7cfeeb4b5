"""psinfo -s/-R/-t/%A and pscontrol show hostnames/hostlist/config against a `pslurm up` cluster
(the module-scoped ``cluster`` fixture of tests/conftest.py: 4 nodes x 2 GPUs)."""

from __future__ import annotations

import os
import pwd
import re

from tests.conftest import Cluster


def test_psinfo_summarize_and_allocated_idle(cluster: Cluster) -> None:
    lines = cluster.run("psinfo", "-s", check=True).stdout.splitlines()
    assert lines[0].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "NODES(A/I/O/T)", "NODELIST"]
    assert lines[1].split() == ["gpu*", "up", "infinite", "0/4/0/4", "c[000-003]"]
    assert cluster.run("psinfo", "-h", "-o", "%P %A", check=True).stdout.split() == ["gpu*", "0/4"]


def test_psinfo_reasons_and_states_follow_a_drained_node(cluster: Cluster) -> None:
    assert cluster.run("psinfo", "-R", check=True).stdout.splitlines() == [
        f"{'REASON':<20} {'USER':<9} {'TIMESTAMP':<19} NODELIST"]
    cluster.run("pscontrol", "update", "NodeName=c001", "State=DRAIN", "Reason=surface test", check=True)
    try:
        lines = cluster.run("psinfo", "-R", check=True).stdout.splitlines()
        me = pwd.getpwuid(os.getuid()).pw_name  # who set the reason, and when (slurmctld's reason_uid, _time)
        reason, who, when, nodes = lines[1][:20].strip(), lines[1][21:30].strip(), lines[1][31:50], lines[1][51:]
        assert (reason, who, nodes) == ("surface test", me, "c001")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", when)
        assert cluster.run("psinfo", "-h", "-N", "-n", "c001", "-o", "%U|%H", check=True).stdout.split() == [
            f"{me}({os.getuid()})|{when}"]
        shown = cluster.run("pscontrol", "show", "node", "c001", check=True).stdout
        assert f"Reason=surface test [{me}@{when}]" in shown
        drained = cluster.run("psinfo", "-h", "-t", "drain", "-o", "%N %t", check=True).stdout.split()
        assert drained == ["c001", "drain"]
        idle = cluster.run("psinfo", "-h", "-N", "-t", "IDLE", "-o", "%N", check=True).stdout.split()
        assert idle == ["c000", "c001", "c002", "c003"]  # sinfo: drained idle nodes are idle too
        # sinfo: a partition none of whose nodes is in the state is a line of 0 nodes, state n/a
        assert cluster.run("psinfo", "-h", "-t", "down", check=True).stdout.split() == [
            "gpu*", "up", "infinite", "0", "n/a"]
    finally:
        cluster.run("pscontrol", "update", "NodeName=c001", "State=RESUME", check=True)
    bad = cluster.run("psinfo", "-t", "bogus")
    assert bad.returncode == 1 and 'psinfo: error: Bad state string: "bogus"' in bad.stderr


def test_pscontrol_hostnames_hostlist_config(cluster: Cluster) -> None:
    env = {**cluster.env, "SLURM_NODELIST": "c[000-001]"}
    assert cluster.run("pscontrol", "show", "hostnames", env=env, check=True).stdout == "c000\nc001\n"
    out = cluster.run("pscontrol", "show", "hostnames", "c[002-003]", check=True).stdout
    assert out == "c002\nc003\n"
    assert cluster.run("pscontrol", "show", "hostlist", "c000,c001,c003", check=True).stdout == "c[000-001,003]\n"
    lines = cluster.run("pscontrol", "show", "config", check=True).stdout.splitlines()
    assert lines[0].startswith("Configuration data as of ")
    pairs = {line[:23].strip(): line[26:] for line in lines[1:]}
    assert all(line[23:26] == " = " for line in lines[1:])
    assert {"ClusterName", "SlurmctldHost[0]", "SlurmctldPort", "MaxArraySize", "RestPort"} <= set(pairs)
    assert pairs["SlurmctldPort"].isdigit()
