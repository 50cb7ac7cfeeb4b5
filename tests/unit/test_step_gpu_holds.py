"""psrun --exact, --gpus-per-task and --gpu-bind in the step service (fake agents, a real SQLite
store): what an exact step holds (its CPUs and GPUs, recorded in its row), distinct GPUs for
concurrent exact steps, waiting only when what it asks is not free; per-task GPU lists in
StepLaunch.task_gpus; the agent's per-task CUDA_VISIBLE_DEVICES; the placement rule itself."""

from __future__ import annotations

import dataclasses

import pytest

from pslurm.controller.steps import step_request_from_json
from pslurm.controller.store import StepEnd
from pslurm.core.gpubind import parse_gpu_bind, task_gpus
from pslurm.core.jobspec import SpecError
from pslurm.core.lifecycle import StepBusy, StepHold, place_step
from pslurm.core.states import JobState
from pslurm.core.steplaunch import StepLaunch
from pslurm.nodeagent.environment import task_environment
from tests.unit.test_steps_service import OWNER, ask, parts, running  # noqa: F401 (parts: the fixture)


def gres(n: int) -> tuple[str, ...]:
    return (f"gpu:{n}",)


def test_two_exact_steps_get_distinct_gpus_and_run_at_once(parts):  # noqa: F811
    store, steps, agents, _, _ = parts
    job = running(store, gres=(), ntasks=2, cpus_per_task=1)  # 2 CPUs, GPUs 0 and 1 (the fixture's run)
    a = steps.create(job, OWNER, ask(ntasks=1, gres=gres(1), exact=True))
    b = steps.create(job, OWNER, ask(ntasks=1, gres=gres(1), exact=True))
    assert (a.node_gpus, b.node_gpus) == (((0,),), ((1,),))
    assert (a.exact, a.node_cpus, b.node_cpus) == (True, (1,), (1,))
    assert [list(launch.gpu_indices) for _, launch in agents.steps] == [[0], [1]]
    assert store.get_step(job, b.step_id).node_gpus == ((1,),)  # recorded: the next step sees it
    with pytest.raises(StepBusy, match="Requested nodes are busy"):  # no GPU (nor CPU) left
        steps.create(job, OWNER, ask(ntasks=1, gres=gres(1), exact=True))
    with pytest.raises(StepBusy):  # a default step wants the whole allocation
        steps.create(job, OWNER, ask(ntasks=1))
    store.end_steps([StepEnd(job, a.step_id, "c000", JobState.COMPLETED, 0, 0, 1001.0)])
    c = steps.create(job, OWNER, ask(ntasks=1, gres=gres(1), exact=True))
    assert c.node_gpus == ((0,),)  # the freed one
    assert steps.create(job, OWNER, ask(ntasks=1, gres=gres(2), overlap=True)).node_gpus == ((0, 1),)


def test_an_exact_step_waits_only_for_what_it_asks(parts):  # noqa: F811
    store, steps, _, _, _ = parts
    job = running(store, ntasks=4, cpus_per_task=1)  # 4 CPUs, 2 GPUs
    steps.create(job, OWNER, ask(ntasks=3, gres=gres(0), exact=True))  # 3 CPUs, no GPU
    with pytest.raises(StepBusy):  # 2 CPUs: only 1 free
        steps.create(job, OWNER, ask(ntasks=2, gres=gres(0), exact=True))
    with pytest.raises(StepBusy):  # no GPUs asked: all of the job's, and they are free, but 2 CPUs are not
        steps.create(job, OWNER, ask(ntasks=2, exact=True))
    step = steps.create(job, OWNER, ask(ntasks=1, exact=True))  # 1 CPU and (none asked) all the GPUs
    assert step.node_gpus == ((0, 1),)


def test_an_exact_step_waits_for_a_default_one_and_a_default_one_for_an_exact_one(parts):  # noqa: F811
    store, steps, _, _, _ = parts
    job = running(store, ntasks=4, cpus_per_task=1)
    first = steps.create(job, OWNER, ask(ntasks=1))
    assert first.node_gpus == ((0, 1),) and not first.exact and first.node_cpus == (4,)  # the whole allocation
    with pytest.raises(StepBusy):
        steps.create(job, OWNER, ask(ntasks=1, gres=gres(1), exact=True))
    store.end_steps([StepEnd(job, first.step_id, "c000", JobState.COMPLETED, 0, 0, 1001.0)])
    steps.create(job, OWNER, ask(ntasks=1, gres=gres(1), exact=True))
    with pytest.raises(StepBusy):
        steps.create(job, OWNER, ask(ntasks=1))


def test_gpus_per_task_gives_each_task_its_own(parts):  # noqa: F811
    store, steps, agents, _, _ = parts
    job = running(store)
    step = steps.create(job, OWNER, ask(ntasks=2, gpus_per_task=1))
    assert step.node_gpus == ((0, 1),)
    [(_, launch)] = agents.steps
    assert list(launch.gpu_indices) == [0, 1]
    assert [list(t) for t in launch.task_gpus] == [[0], [1]]
    with pytest.raises(SpecError, match="Invalid generic resource"):
        steps.create(job, OWNER, ask(ntasks=2, gpus_per_task=2, overlap=True))  # 4 GPUs: the job has 2


def test_exact_gpus_per_task_takes_tasks_times_n(parts):  # noqa: F811
    store, steps, agents, _, _ = parts
    job = running(store, ntasks=2, cpus_per_task=1)
    a = steps.create(job, OWNER, ask(ntasks=1, gpus_per_task=1, exact=True))
    b = steps.create(job, OWNER, ask(ntasks=1, gpus_per_task=1, exact=True))
    assert (a.node_gpus, b.node_gpus) == (((0,),), ((1,),))
    assert [[list(t) for t in launch.task_gpus] for _, launch in agents.steps] == [[[0]], [[1]]]


def test_gpu_bind_in_the_launch(parts):  # noqa: F811
    store, steps, agents, _, _ = parts
    job = running(store, ntasks=4, cpus_per_task=1)
    steps.create(job, OWNER, ask(ntasks=3, gpu_bind="map_gpu:1,0", overlap=True))
    steps.create(job, OWNER, ask(ntasks=2, gpus_per_task=1, gpu_bind="none", overlap=True))
    steps.create(job, OWNER, ask(ntasks=2, gpu_bind="closest", overlap=True))
    binds = [[list(t) for t in launch.task_gpus] for _, launch in agents.steps]
    assert binds == [[[1], [0], [1]], [], []]


def test_the_json_request_checks_gpu_bind():
    assert step_request_from_json({"argv": ["a"], "gpu_bind": "map_gpu:0,1"}).gpu_bind == "map_gpu:0,1"
    with pytest.raises(SpecError, match="Invalid --gpu-bind argument: bogus"):
        step_request_from_json({"argv": ["a"], "gpu_bind": "bogus"})


def test_parse_gpu_bind():
    assert parse_gpu_bind("none") == ("none", ())
    assert parse_gpu_bind("verbose,closest") == ("closest", ())
    assert parse_gpu_bind("single:2") == ("single", (2,))
    assert parse_gpu_bind("per_task:1") == ("per_task", (1,))
    assert parse_gpu_bind("map_gpu:0,1*2") == ("map_gpu", (0, 1, 1))
    assert parse_gpu_bind("mask_gpu:0x3,1") == ("mask_gpu", (3, 1))
    for bad in ("", "map_gpu:", "map_gpu:x", "single:0", "none:1", "what"):
        assert parse_gpu_bind(bad) is None


def test_task_gpus_as_slurmstepd_binds():
    assert task_gpus([4, 5, 6, 7], 2, 2, "") == [[4, 5], [6, 7]]  # --gpus-per-task: per_task:N
    assert task_gpus([4, 5], 3, 1, "") == [[4], [5], [4]]  # more tasks than GPUs: cycling
    assert task_gpus([4, 5], 2, None, "") is None  # no binding: every task sees the step's
    assert task_gpus([4, 5], 2, 1, "none") is None and task_gpus([4, 5], 2, None, "single:1") is None
    assert task_gpus([4, 5, 6], 4, None, "map_gpu:2,0") == [[6], [4], [6], [4]]  # positions in the step's
    assert task_gpus([4, 5, 6], 2, None, "mask_gpu:0x5,0x2") == [[4, 6], [5]]
    assert task_gpus([4, 5], 1, None, "map_gpu:7") == [[4]]  # none of the step's: its first (Slurm's fallback)
    assert task_gpus([], 2, 1, "") is None


def test_place_step_rules():
    alloc_cpus, alloc_gpus = {"a": 4, "b": 4}, {"a": (0, 1), "b": (2, 3)}
    one = StepHold(("a", "b"), (2, 2), ((0,), (2,)), exact=True)
    want = StepHold(("a", "b"), (2, 2), (), exact=True)
    assert place_step(want, (1, 1), alloc_cpus, alloc_gpus, [one]) == ((1,), (3,))
    with pytest.raises(StepBusy):
        place_step(want, (2, 1), alloc_cpus, alloc_gpus, [one])
    with pytest.raises(StepBusy):  # CPUs
        place_step(StepHold(("b",), (3,), (), exact=True), (0,), alloc_cpus, alloc_gpus, [one])
    # a step from before the holds were recorded (no cpus/gpus): the whole allocation
    old = StepHold(("a",), (), (), exact=False)
    with pytest.raises(StepBusy):
        place_step(StepHold(("a",), (1,), (), exact=True), (0,), alloc_cpus, alloc_gpus, [old])
    assert place_step(StepHold(("b",), (1,), (), exact=True), (1,), alloc_cpus, alloc_gpus, [old]) == ((2,),)
    overlapping = StepHold(("a",), (4,), ((0, 1),), overlap=True)
    assert place_step(want, (None, None), alloc_cpus, alloc_gpus, [overlapping]) == ((0, 1), (2, 3))


def test_the_agent_gives_each_task_its_gpus():
    job_env = {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0,1,2"}
    launch = StepLaunch(job_id=7, step_id=1, ntasks=2, total_tasks=2, step_nodelist="c000", tasks_per_node="2",
                        gpu_indices=(3, 5), task_gpus=((3,), (5,)))
    envs = [task_environment(job_env, launch, i, (1, 3, 5), (0, 1, 2)) for i in range(2)]
    assert [(e["SLURM_STEP_GPUS"], e["CUDA_VISIBLE_DEVICES"], e["GPU_DEVICE_ORDINAL"]) for e in envs] == [
        ("3,5", "1", "1"), ("3,5", "2", "2")]
    launch = dataclasses.replace(launch, task_gpus=())
    assert task_environment(job_env, launch, 1, (1, 3, 5), (0, 1, 2))["CUDA_VISIBLE_DEVICES"] == "1,2"


def test_a_step_asking_no_gpus_gets_none(parts):  # noqa: F811
    store, steps, agents, _, _ = parts
    job = running(store, ntasks=2, cpus_per_task=1)
    step = steps.create(job, OWNER, ask(ntasks=1, gres=("none",), exact=True))
    [(_, launch)] = agents.steps
    assert step.node_gpus == ((),) and launch.no_gpus and not launch.gpu_indices
    env = task_environment({"CUDA_VISIBLE_DEVICES": "0,1"}, launch, 0, (0, 1), (0, 1))
    assert "CUDA_VISIBLE_DEVICES" not in env and "SLURM_STEP_GPUS" not in env
    assert steps.create(job, OWNER, ask(ntasks=1, gres=gres(2), exact=True)).node_gpus == ((0, 1),)


def test_psrun_sends_gpu_bind_and_warns_when_it_has_no_effect(capsys):
    from pslurm.cli.psrun import step_body
    body = step_body({"gpu_bind": "map_gpu:1,0", "exact": True, "gres": "gpu:0"}, ("true",), {"PATH": "/bin"})
    assert (body["gpu_bind"], body["exact"], body["gres"]) == ("map_gpu:1,0", True, ["none"])
    assert step_body({"gpu_bind": "single:1"}, ("true",), {})["gpu_bind"] == "single:1"
    assert "--gpu-bind=single:1 has no effect here" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        step_body({"gpu_bind": "sideways"}, ("true",), {})
    assert "Invalid --gpu-bind argument: sideways" in capsys.readouterr().err
