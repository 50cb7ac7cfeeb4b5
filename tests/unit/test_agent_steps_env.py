"""A step's task environment (srun's and slurmstepd's variables over the job's) and srun's --label framing."""

from __future__ import annotations

from pslurm.core.steplaunch import StepLaunch
from pslurm.nodeagent.environment import task_environment
from pslurm.nodeagent.stepio import Framer, label_width

JOB_ENV = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_NPROCS": "4", "SLURM_TASKS_PER_NODE": "4",
           "SLURM_STEP_ID": "0", "CUDA_VISIBLE_DEVICES": "0,1,2", "SLURM_JOB_GPUS": "1,3,5", "HOME": "/home/u"}


def launch(**kw: object) -> StepLaunch:
    base: dict[str, object] = dict(job_id=7, step_id=2, ntasks=3, task_offset=0, total_tasks=3, node_index=0,
                                   step_nodelist="c000", tasks_per_node="3", workdir="/work")
    base.update(kw)
    return StepLaunch(**base)  # type: ignore[arg-type]


def test_each_task_gets_the_step_variables_over_the_job_ones() -> None:
    envs = [task_environment(JOB_ENV, launch(), i, (1, 3, 5), (0, 1, 2)) for i in range(3)]
    assert [e["SLURM_PROCID"] for e in envs] == ["0", "1", "2"]
    assert [e["SLURM_LOCALID"] for e in envs] == ["0", "1", "2"]
    env = envs[1]
    assert env["SLURM_JOB_ID"] == "7" and env["HOME"] == "/home/u"  # the job's stay
    assert (env["SLURM_STEP_ID"], env["SLURM_STEPID"], env["SLURM_NODEID"]) == ("2", "2", "0")
    assert (env["SLURM_STEP_NODELIST"], env["SLURM_STEP_NUM_NODES"], env["SLURM_STEP_NUM_TASKS"]) == ("c000", "1", "3")
    assert env["SLURM_STEP_TASKS_PER_NODE"] == env["SLURM_TASKS_PER_NODE"] == "3"
    assert env["SLURM_NTASKS"] == env["SLURM_NPROCS"] == "3"  # the step's, not the job's 4
    assert env["SLURM_GTIDS"] == "0,1,2" and env["PWD"] == "/work"
    # all of the job's GPUs by default, renumbered as the job's (a device cgroup: 0..n-1)
    assert (env["SLURM_STEP_GPUS"], env["CUDA_VISIBLE_DEVICES"]) == ("1,3,5", "0,1,2")


def test_ranks_on_a_second_node_and_a_subset_of_gpus() -> None:
    step = launch(ntasks=2, task_offset=3, total_tasks=5, node_index=1, step_nodelist="c[000-001]",
                  tasks_per_node="3,2", gpu_indices=[5], cpus_per_task=2)
    env = task_environment(JOB_ENV, step, 1, (1, 3, 5), (0, 1, 2))
    assert (env["SLURM_PROCID"], env["SLURM_LOCALID"], env["SLURM_NODEID"]) == ("4", "1", "1")
    assert (env["SLURM_STEP_NUM_NODES"], env["SLURM_STEP_NUM_TASKS"], env["SLURM_STEP_TASKS_PER_NODE"]) == (
        "2", "5", "3,2")
    assert env["SLURM_GTIDS"] == "3,4" and env["SLURM_CPUS_PER_TASK"] == "2"
    assert (env["SLURM_STEP_GPUS"], env["CUDA_VISIBLE_DEVICES"]) == ("5", "2")
    # no device cgroup: CUDA sees the node's indices
    assert task_environment(JOB_ENV, step, 0, (1, 3, 5), (1, 3, 5))["CUDA_VISIBLE_DEVICES"] == "5"
    # under MPS the one GPU is device 0
    assert task_environment(JOB_ENV, step, 0, (1, 3, 5), (0, 1, 2), mps=True)["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_step_without_gpus_sees_none() -> None:
    env = task_environment(JOB_ENV, launch(), 0, (), ())
    assert "CUDA_VISIBLE_DEVICES" not in env and "SLURM_STEP_GPUS" not in env


def test_label_width_is_that_of_the_largest_rank() -> None:
    assert [label_width(n) for n in (1, 2, 10, 11, 100, 101)] == [1, 1, 1, 2, 2, 3]


def test_label_framing_whole_lines_and_the_partial_last_one() -> None:
    framer = Framer(3, 2, label=True, lines=True)
    assert framer.feed(b"hel") == b""
    assert framer.feed(b"lo\nwor") == b" 3: hello\n"
    assert framer.feed(b"ld\n\nx\n") == b" 3: world\n 3: \n 3: x\n"
    assert framer.feed(b"tail") == b""
    assert framer.flush() == b" 3: tail\n"  # srun adds the newline in label mode
    assert framer.flush() == b""


def test_without_label_lines_or_raw() -> None:
    lines = Framer(0, 1, label=False, lines=True)
    assert lines.feed(b"a\nb") == b"a\n" and lines.flush() == b"b"
    raw = Framer(0, 1, label=False, lines=False)
    assert raw.feed(b"prompt> ") == b"prompt> " and raw.flush() == b""
