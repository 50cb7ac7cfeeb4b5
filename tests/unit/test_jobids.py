"""Job ids as Slurm's commands read them (core/jobids.py): every command reads them so."""

from __future__ import annotations

import pytest

from pslurm.core.jobids import display_id, parse_job_id, split_ids


@pytest.mark.parametrize(("text", "job", "tasks", "step", "het"), [
    ("5", 5, None, None, None), ("5_1", 5, (1,), None, None), ("5_[1-3]", 5, (1, 2, 3), None, None),
    ("5_[1,3-4]", 5, (1, 3, 4), None, None), ("5_[0-6:3]", 5, (0, 3, 6), None, None), ("5.0", 5, None, "0", None),
    ("5.batch", 5, None, "batch", None), ("5.extern", 5, None, "extern", None), ("5+0", 5, None, None, 0),
    ("5_1.0", 5, (1,), "0", None),
])
def test_the_forms_slurm_takes(text: str, job: int, tasks: tuple[int, ...] | None, step: str | None,
                               het: int | None) -> None:
    found = parse_job_id(text)
    assert (found.job_id, found.tasks, found.step, found.het) == (job, tasks, step, het)


@pytest.mark.parametrize("text", ["abc", "5_", "5.x", "0", "5+", "5_a", "", "51_x", "5_1+0", "-5"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_job_id(text)


def test_5_1_is_task_1_of_array_5_never_job_51() -> None:
    task = parse_job_id("5_1")
    assert task.selects(7, 5, 1) and not task.selects(51, None, None) and not task.selects(5, None, None)
    whole = parse_job_id("5")
    assert whole.selects(5, None, None) and whole.selects(8, 5, 3) and not whole.selects(51, None, None)


def test_lists_keep_brackets_and_ids_print_as_slurm() -> None:
    assert split_ids("1,14_[3-5,7],9") == ["1", "14_[3-5,7]", "9"]
    assert display_id(14) == "14" and display_id(17, 14, 3) == "14_3"
