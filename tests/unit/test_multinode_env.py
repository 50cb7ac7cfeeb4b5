"""Multi-node jobs: Slurm's per-node count form, the job's environment on each of its nodes, and
the options -N MIN-MAX, --ntasks-per-node and --gpus (the job's total)."""

from __future__ import annotations

import pytest

from pslurm.core.errors import SpecError
from pslurm.core.gres import GresRequest
from pslurm.core.jobdesc import spec_values
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.layout import compress_counts
from pslurm.core.states import JobState
from pslurm.nodeagent.environment import job_environment


@pytest.mark.parametrize("counts, text", [
    ((2, 2, 2, 1), "2(x3),1"), ((4,), "4"), ((1, 1), "1(x2)"), ((3, 1, 3), "3,1,3"), ((2, 1, 1, 5, 5), "2,1(x2),5(x2)"),
    ((), "")])
def test_slurms_compressed_per_node_counts(counts: tuple[int, ...], text: str) -> None:
    assert compress_counts(counts) == text


def record(**spec_kw: object) -> JobRecord:
    spec = JobSpec(name="t", user="u", uid=1000, gid=1000, workdir="/w", script="#!/bin/sh\n",
                   environment={"SLURM_NTASKS_PER_NODE": "9", "PATH": "/bin"}, **spec_kw)  # type: ignore[arg-type]
    return JobRecord(job_id=5, spec=spec, state=JobState.RUNNING, node="c001",
                     nodes=("c001", "c002", "c003"), gpu_indices=(0,))


def test_the_environment_on_the_first_and_a_later_node_of_a_three_node_job() -> None:
    job = record(num_nodes=3, ntasks=7, cpus_per_task=2, mem_mb=100)
    first = job_environment(job, "c001", "cl", [0])
    second = job_environment(job, "c002", "cl", [0], node_index=1)
    for env in (first, second):
        assert (env["SLURM_JOB_NODELIST"], env["SLURM_NODELIST"]) == ("c[001-003]", "c[001-003]")
        assert (env["SLURM_JOB_NUM_NODES"], env["SLURM_NNODES"]) == ("3", "3")
        assert (env["SLURM_NTASKS"], env["SLURM_TASKS_PER_NODE"]) == ("7", "3,2(x2)")
        assert env["SLURM_JOB_CPUS_PER_NODE"] == "6,4(x2)"
        assert env["SLURM_MEM_PER_NODE"] == "100"
        assert "SLURM_NTASKS_PER_NODE" not in env  # not given: never the submitter's
    assert (first["SLURM_NODEID"], first["SLURMD_NODENAME"], first["SLURM_CPUS_ON_NODE"]) == ("0", "c001", "6")
    assert (second["SLURM_NODEID"], second["SLURMD_NODENAME"], second["SLURM_CPUS_ON_NODE"]) == ("1", "c002", "4")


def test_ntasks_per_node_is_set_and_spreads_the_tasks() -> None:
    job = record(num_nodes=3, ntasks=6, ntasks_per_node=2)
    env = job_environment(job, "c003", "cl", [0], node_index=2)
    assert (env["SLURM_NTASKS_PER_NODE"], env["SLURM_TASKS_PER_NODE"], env["SLURM_NTASKS"]) == ("2", "2(x3)", "6")
    assert env["SLURM_NODEID"] == "2"


def test_nodes_without_ntasks_run_a_task_each() -> None:
    env = job_environment(record(num_nodes=3), "c001", "cl", [0])
    assert (env["SLURM_NTASKS"], env["SLURM_TASKS_PER_NODE"], env["SLURM_JOB_CPUS_PER_NODE"]) == ("3", "1(x3)", "1(x3)")


def test_a_single_node_job_is_as_before() -> None:
    job = JobRecord(job_id=5, spec=JobSpec(name="t", user="u", uid=1, gid=1, workdir="/w", ntasks=4),
                    state=JobState.RUNNING, node="c007")
    env = job_environment(job, "c007", "cl", [])
    assert (env["SLURM_JOB_NODELIST"], env["SLURM_JOB_NUM_NODES"], env["SLURM_TASKS_PER_NODE"]) == ("c007", "1", "4")
    assert (env["SLURM_JOB_CPUS_PER_NODE"], env["SLURM_CPUS_ON_NODE"], env["SLURM_NODEID"]) == ("4", "4", "0")


def values(**opts: str) -> dict[str, object]:
    return spec_values(opts, user="u", uid=1, gid=1, cwd="/w", environ={})


def test_node_counts_min_and_max() -> None:
    assert (values(nodes="2-4")["num_nodes"], values(nodes="2-4")["max_nodes"]) == (2, 4)
    assert (values(nodes="3")["num_nodes"], values(nodes="3")["max_nodes"]) == (3, 3)  # sbatch sends -N 3 as 3-3
    assert (values()["num_nodes"], values()["max_nodes"]) == (1, 0)
    for bad in ("0", "3-2", "x", "2-", "-3"):
        with pytest.raises(SpecError, match="Invalid node count specification"):
            values(nodes=bad)


def test_ntasks_per_node_makes_the_task_count_and_may_raise_the_node_count() -> None:
    got = values(nodes="2", ntasks_per_node="3")
    assert (got["num_nodes"], got["ntasks"], got["ntasks_per_node"]) == (2, 6, 3)
    got = values(nodes="2-4", ntasks="7", ntasks_per_node="2")  # slurmctld: as many nodes as the tasks need
    assert (got["num_nodes"], got["ntasks"]) == (4, 7)
    with pytest.raises(SpecError, match="Requested node configuration is not available"):
        values(nodes="2", ntasks="7", ntasks_per_node="2")
    with pytest.raises(SpecError, match="Invalid --ntasks-per-node specification"):
        values(ntasks_per_node="0")
    assert values(nodes="3", ntasks="2")["num_nodes"] == 2  # sbatch: "setting nnodes to 2"


def test_gpus_is_the_jobs_total_spread_over_its_nodes() -> None:
    assert values(nodes="2", gpus="3")["gres"] == (GresRequest("gpu", None, 2),)
    assert values(nodes="3", gpus="a100:3")["gres"] == (GresRequest("gpu", "a100", 1),)
    assert values(nodes="2", gpus_per_node="3")["gres"] == (GresRequest("gpu", None, 3),)
    assert values(gpus="3")["gres"] == (GresRequest("gpu", None, 3),)
