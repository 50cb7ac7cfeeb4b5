"""Job-id selectors are bounded: ``1_[0-10000000]`` names at most its array's tasks, is parsed into
ranges (never a list of ten million ids), and cancels the array in one transaction; ids past ten
digits are refused in one line (the job service over a real SQLite store, fake agents)."""

from __future__ import annotations

import time

import pytest

from pslurm.core.arrays import parse_job_selector
from pslurm.core.jobids import MAX_SELECTOR_ITEMS, TaskRanges
from pslurm.core.jobspec import SpecError
from pslurm.core.states import JobState
from tests.unit.test_update_job import ANA, config, service, start, store, submit  # noqa: F401 - fixtures


def test_a_selector_is_ranges_not_ids() -> None:
    job_id, tasks = parse_job_selector("1_[0-10000000]")
    assert job_id == 1 and isinstance(tasks, TaskRanges) and tasks.ranges == ((0, 10_000_000, 1),)
    assert 9_999_999 in tasks and 10_000_001 not in tasks
    assert parse_job_selector("14_[0-15:4,20]")[1] == (0, 4, 8, 12, 20)
    found = parse_job_selector("3_[0-10000000:7]")[1]
    assert found is not None and list(found.clipped(5, 30)) == [7, 14, 21, 28]
    assert found.clipped(5, 30).text() == "7-30:7" and parse_job_selector("1_[0-10000000]")[1].text() == "0-10000000"


@pytest.mark.parametrize("text", ["1" * 5000, "1_" + "9" * 5000, "12345678901", "2147483648", "1_[0-2147483648]",
                                  "1_[" + ",".join(["1"] * (MAX_SELECTOR_ITEMS + 1)) + "]", "1_[5-3]", "-1", "1_x"])
def test_ids_a_job_cannot_have_are_refused_in_one_short_line(text: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_job_selector(text)
    assert str(err.value).startswith("Invalid job id specified") and len(str(err.value)) < 80


def test_a_huge_selector_cancels_the_arrays_tasks_in_one_commit(service, store) -> None:  # noqa: F811
    jobs, _ = service
    array = submit(store, array=tuple(range(1001)))
    start(store, array + 3)
    commits = store._writer.commits
    began = time.perf_counter()
    assert jobs.cancel([], ANA, job_specs=[f"{array}_[0-10000000]"]) == []
    assert time.perf_counter() - began < 5  # generous: the point is that it does not grow with the span
    assert store._writer.commits == commits + 1
    states = {j.state for j in store.get_jobs(job_ids=[array], include_finished=True)}
    assert states == {JobState.CANCELLED, JobState.COMPLETING}


def test_a_selector_outside_the_array_or_malformed_is_an_error_line(service, store) -> None:  # noqa: F811
    jobs, _ = service
    array = submit(store, array=(0, 1, 2))
    assert jobs.cancel([], ANA, job_specs=[f"{array}_[500-10000000]"]) == [
        f"Kill job error on job id {array}_[500-10000000]: Invalid job id specified"]
    [line] = jobs.cancel([], ANA, job_specs=["7" * 5000])
    assert line.startswith("Kill job error on job id 777") and len(line) < 160
    with pytest.raises(SpecError, match="Too many job ids"):
        jobs.cancel(list(range(1, 10_002)), ANA)
    assert {j.state for j in store.get_jobs(job_ids=[array])} == {JobState.PENDING}


def test_hold_and_update_name_at_most_the_arrays_tasks(service, store) -> None:  # noqa: F811
    jobs, _ = service
    array = submit(store, array=tuple(range(20)))
    with pytest.raises(SpecError, match="Invalid job id specified"):
        jobs.update_job(f"{array}_[10-4000000000]", ANA, "hold")  # past MAX_ID: no job has it
    assert jobs.update_job(f"{array}_[10-2000000000]", ANA, "hold") == []
    held = {j.array_task_id for j in store.get_jobs(job_ids=[array]) if j.hold}
    assert held == set(range(10, 20))
    assert jobs.update_job(f"{array}_[0-2000000000:5]", ANA, changes={"time_limit": "5"}) == []
    limits = {j.array_task_id: j.time_limit for j in store.get_jobs(job_ids=[array])}
    assert {t for t, limit in limits.items() if limit == 300} == {0, 5, 10, 15}
