"""Every case of the corpus: identical to Slurm 22.05's answer, or a difference listed with its reason
(tests/conformance/differences.py). A listed difference that is gone fails too: the list only shrinks."""

from __future__ import annotations

import pytest

from tests.conformance.corpus import CASES, Case
from tests.conformance.differences import DIFFERENT, NOT_YET, UNSTABLE, reason_for
from tests.conformance.run import Run, show


def test_the_corpus_is_large_and_covers_each_command() -> None:
    commands = {c.command for c in CASES}
    assert len(CASES) >= 400
    assert {"squeue", "sinfo", "scancel", "sacct", "scontrol", "sprio", "sbatch", "srun"} <= commands


# the first case's set-up runs every case (the session's fixture): minutes, more on a loaded machine
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(conformance: Run, case: Case) -> None:
    outcome = conformance.outcomes[case.id]
    listed = reason_for(case.id, DIFFERENT) or reason_for(case.id, NOT_YET)
    if outcome.differs and not listed:
        pytest.fail(f"differs from Slurm 22.05 ({outcome.differs}):\n{show(case, outcome)}")
    if not outcome.differs and listed and case.id in {**DIFFERENT, **NOT_YET} and case.id not in UNSTABLE:
        pytest.fail(f"identical to Slurm 22.05 now: take it off the list of differences ({listed})")
