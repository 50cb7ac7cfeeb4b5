"""`pslurm up --virtual`: many nodes' agents in one process, each node on its own port, on the real wire."""

from __future__ import annotations

import os
from pathlib import Path

from tests.acceptance.test_local_cluster import processes_mentioning
from tests.conftest import cli, wait_for


def test_one_process_serves_every_node_and_each_call_reaches_its_own_node(tmp_path):
    state = tmp_path / "state"
    env = {**os.environ, "PSLURM_CONF": str(state / "pslurm.conf")}

    def run(*args: str) -> str:
        return cli(*args, env=env, cwd=tmp_path, check=True).stdout

    try:
        up = cli("pslurm", "up", "--virtual", "-N", "6", "-G", "2", "--state-dir", str(state), timeout=120)
        assert up.returncode == 0, up.stderr
        assert sorted(p.name for p in (state / "run").glob("*.pid")) == ["psctld.pid", "psd-virtual-0.pid"]
        ports = {line.split("Port=")[1].split()[0] for line in (state / "pslurm.conf").read_text().splitlines()
                 if line.startswith("NodeName=")}
        assert len(ports) == 6  # every node its own address, as on separate hosts
        assert run("psinfo", "-h", "-o", "%D %t") == "6 idle\n"
        # batch jobs on chosen nodes: each launch reached that node's agent, which ran a real process
        ids = {node: run("psbatch", "--parsable", "-w", node, "-o", f"{tmp_path}/%N.out", "--wrap",
                         "echo $SLURMD_NODENAME $SLURM_JOB_ID").strip() for node in ("c001", "c004")}
        for node, job_id in ids.items():
            wait_for(lambda n=node: Path(tmp_path / f"{n}.out").exists() and Path(tmp_path / f"{n}.out").read_text())
            assert Path(tmp_path / f"{node}.out").read_text() == f"{node} {job_id}\n"
        # a cancel is routed to the node that runs the job, not its neighbours
        sleeper = run("psbatch", "--parsable", "-w", "c003", "--wrap", "sleep 300").strip()
        wait_for(lambda: run("psqueue", "-h", "-j", sleeper, "-o", "%T %N") == "RUNNING c003\n")
        run("pscancel", sleeper)
        # sacct's "CANCELLED by 0"
        wait_for(lambda: run("psacct", "-n", "-X", "-j", sleeper, "-o", "State%20").split()[:1] == ["CANCELLED"])
        # psrun's output streams come from the nodes' agents through the controller's relay
        out = run("psrun", "-N", "3", "-w", "c[000,002,005]", "sh", "-c", "echo $SLURMD_NODENAME")
        assert sorted(out.split()) == ["c000", "c002", "c005"]
    finally:
        cli("pslurm", "down", "--state-dir", str(state), timeout=60)
    assert processes_mentioning(str(state)) == []
