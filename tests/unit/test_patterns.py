"""Slurm output filename patterns."""

from pslurm.core.patterns import default_output_pattern, expand_output_pattern


def expand(pattern: str, array_job_id: int | None = None, array_task_id: int | None = None) -> str:
    """The pattern for job 42 'train' of alice on c001."""
    return expand_output_pattern(
        pattern, job_id=42, job_name="train", user="alice", node="c001",
        array_job_id=array_job_id, array_task_id=array_task_id,
    )  # fmt: skip


def test_all_letters() -> None:
    assert expand("o_%x_%j_%N_%u.out") == "o_train_42_c001_alice.out"


def test_array_ids() -> None:
    out = expand("arr_%A_%a.out", array_job_id=10, array_task_id=3)
    assert out == "arr_10_3.out"


def test_not_an_array_uses_job_id_and_no_val() -> None:
    assert expand("%A_%a") == "42_4294967294"


def test_padding_percent_and_unknown() -> None:
    assert expand("%4j-%%-%c-%3a", array_task_id=7) == "0042-%-%c-007"


def test_padding_is_capped() -> None:
    assert expand("%99j") == "42".zfill(10)


def test_percent_percent_is_not_a_pattern() -> None:
    assert expand("%%j") == "%j"


def test_defaults() -> None:
    assert default_output_pattern(False) == "slurm-%j.out"
    assert default_output_pattern(True) == "slurm-%A_%a.out"


def test_batch_step_letters() -> None:
    # slurmd's _batch_path_check (22.05): %J is the job id alone for the batch step, %s "batch"
    assert expand("%J-%s-%t-%n") == "42-batch-0-0"
    assert expand("%4J_%3s_%2t_%3n") == "0042_batch_00_000"
    assert expand("a%%J%%s") == "a%J%s"


def test_numbered_step_letters() -> None:
    out = expand_output_pattern("%J_%s_%t_%n_%3s", job_id=42, job_name="x", user="u", node="c001",
                                step_id=1, task_id=3, node_id=2)
    assert out == "42.1_1_3_2_001"
