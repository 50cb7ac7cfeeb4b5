"""A multi-node job as psqueue, pscontrol, psacct and the JSON shapes show it, from a record and from
the API's JSON (JobInfo); psbatch's --ntasks-per-node is a real option."""

from __future__ import annotations

import json

import pytest

from pslurm.cli import slurmjson
from pslurm.cli.options import parse_command_line
from pslurm.cli.psacct import account_fields
from pslurm.cli.pscontrol import show_job
from pslurm.cli.psqueue import render_queue
from pslurm.core import restjson
from pslurm.core.gres import GresRequest
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobReason, JobState


def running(**spec_kw: object) -> JobRecord:
    kw: dict[str, object] = {"num_nodes": 3, "ntasks": 7, "cpus_per_task": 2, "mem_mb": 1000, **spec_kw}
    spec = JobSpec(name="mpi", user="ana", uid=1000, gid=100, workdir="/w", script="#!/bin/sh\n",
                   gres=(GresRequest("gpu", None, 2),), **kw)  # type: ignore[arg-type]
    return JobRecord(job_id=9, spec=spec, state=JobState.RUNNING, reason=JobReason.NONE, submit_time=1.0,
                     start_time=2.0, node="c001", nodes=("c001", "c002", "c003"),
                     node_gpus=((0, 1), (0, 1), (2, 3)), gpu_indices=(0, 1), partition="gpu", time_limit=600)


def pending() -> JobRecord:
    spec = JobSpec(name="w", user="ana", uid=1000, gid=100, workdir="/w", script="#!/bin/sh\n", num_nodes=2,
                   max_nodes=4)
    return JobRecord(job_id=10, spec=spec, state=JobState.PENDING, reason=JobReason.RESOURCES, submit_time=1.0,
                     partition="gpu")


def as_info(record: JobRecord) -> JobInfo:
    return JobInfo(json.loads(json.dumps(restjson.job_to_json(record))))


@pytest.fixture(params=["record", "info"])
def view(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    return (lambda r: r) if request.param == "record" else as_info


def test_psqueue_nodes_nodelist_and_cpus(view) -> None:  # type: ignore[no-untyped-def]
    lines = render_queue("%i %D %N %C %R", [view(running()), view(pending())], header=True)
    assert lines == ["JOBID NODES NODELIST CPUS NODELIST(REASON)", "9 3 c[001-003] 14 c[001-003]",
                     "10 2  2 (Resources)"]


def test_pscontrol_show_job(view) -> None:  # type: ignore[no-untyped-def]
    text = show_job(view(running()))
    assert "NodeList=c[001-003]\n" in text and "   BatchHost=c001\n" in text
    assert "NumNodes=3 NumCPUs=14 NumTasks=7 CPUs/Task=2" in text
    assert "TRES=cpu=14,mem=3000M,node=3,billing=14,gres/gpu=6" in text  # slurmctld's order
    waiting = show_job(view(pending()))
    assert "NodeList=\n" in waiting and "BatchHost" not in waiting
    assert "NumNodes=2-4 NumCPUs=2 NumTasks=2 " in waiting


def test_pscontrol_show_job_of_a_job_cancelled_while_it_waited(view) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    cancelled = replace(pending(), state=JobState.CANCELLED, reason=JobReason.JOB_HELD_USER, end_time=3.0)
    text = show_job(view(cancelled))
    assert "JobState=CANCELLED Reason=JobHeldUser " in text  # the reason it waited for, as slurmctld keeps it
    assert " NumTasks=N/A " in text  # its task count never set, as slurmctld's


def test_psacct_fields(view) -> None:  # type: ignore[no-untyped-def]
    fields = account_fields(100.0)
    job = view(running())
    got = {name: fields[name](job) for name in ("nodelist", "nnodes", "alloccpus", "alloctres", "ntasks")}
    assert got == {"nodelist": "c[001-003]", "nnodes": "3", "alloccpus": "14",
                   "alloctres": "billing=14,cpu=14,gres/gpu=6,mem=3000M,node=3", "ntasks": ""}  # by name
    waiting = view(pending())
    assert (fields["nodelist"](waiting), fields["nnodes"](waiting)) == ("None assigned", "2")


def test_slurm_json_shapes(view) -> None:  # type: ignore[no-untyped-def]
    data = slurmjson.job_json(view(running()), "cl")
    assert (data["nodes"], data["batch_host"], data["node_count"], data["cpus"], data["tasks"]) == (
        "c[001-003]", "c001", 3, 14, 7)
    assert [n["nodename"] for n in data["job_resources"]["allocated_nodes"]] == ["c001", "c002", "c003"]
    assert data["tres_alloc_str"] == "cpu=14,mem=3000M,node=3,billing=14,gres/gpu=6"
    acct = slurmjson.account_json(view(running()), "cl", 100.0)
    assert (acct["nodes"], acct["allocation_nodes"]) == ("c[001-003]", 3)
    assert slurmjson.job_json(view(pending()), "cl")["max_nodes"] == 4


def test_psbatch_takes_ntasks_per_node() -> None:
    parsed = parse_command_line(["-N", "2-3", "--ntasks-per-node=4", "--gpus=3", "job.sh"], "sbatch")
    assert parsed.job_values() == {"nodes": "2-3", "ntasks_per_node": "4", "gpus": "3"}
    assert not parsed.inert


def test_psallocs_command_gets_the_allocations_variables() -> None:
    from pslurm.cli.psalloc import job_environment

    env = job_environment(as_info(running()), "cl", ntasks=True)
    assert (env["SLURM_JOB_NODELIST"], env["SLURM_NNODES"], env["SLURM_JOB_NUM_NODES"]) == ("c[001-003]", "3", "3")
    assert (env["SLURM_TASKS_PER_NODE"], env["SLURM_JOB_CPUS_PER_NODE"], env["SLURM_NTASKS"]) == (
        "3,2(x2)", "6,4(x2)", "7")
    per_node = job_environment(as_info(running(ntasks_per_node=2, ntasks=6)), "cl", ntasks=False)
    assert (per_node["SLURM_NTASKS_PER_NODE"], per_node["SLURM_TASKS_PER_NODE"], per_node["SLURM_NTASKS"]) == (
        "2", "2(x3)", "6")
