import pytest

from pslurm.core.lifecycle import JOB_TRANSITIONS, can_transition
from pslurm.core.states import FINAL_STATES, JobState, NodeState, node_display_state


def test_final_states_are_left_only_by_a_requeue():
    for to, allowed in JOB_TRANSITIONS.items():
        assert not (allowed & FINAL_STATES) or to is JobState.PENDING, f"{to} may follow a final state"
    assert FINAL_STATES <= JOB_TRANSITIONS[JobState.PENDING]


def test_pending_only_starts_or_is_cancelled_or_misses_its_deadline():
    assert {to for to in JobState if can_transition(JobState.PENDING, to)} == {
        JobState.RUNNING, JobState.CANCELLED, JobState.DEADLINE}


def test_every_final_state_is_reachable_from_running_or_completing():
    for state in FINAL_STATES - {JobState.CANCELLED, JobState.DEADLINE}:  # DEADLINE: a job that never started
        assert can_transition(JobState.RUNNING, state)
        assert can_transition(JobState.COMPLETING, state)


def test_completing_cannot_go_back_to_running():
    assert not can_transition(JobState.COMPLETING, JobState.RUNNING)


@pytest.mark.parametrize("text,state", [("R", JobState.RUNNING), ("pd", JobState.PENDING),
                                        ("node_fail", JobState.NODE_FAIL), ("CA", JobState.CANCELLED)])
def test_parse_long_and_short_names(text, state):
    assert JobState.parse(text) is state


def test_parse_rejects_unknown_state():
    with pytest.raises(ValueError, match="Invalid job state"):
        JobState.parse("RUNNNING")


def test_short_codes_are_slurms():
    assert [s.short for s in JobState] == ["PD", "R", "S", "CG", "CD", "F", "CA", "TO", "NF", "OOM", "DL"]


@pytest.mark.parametrize("args,word", [
    ((NodeState.UP, False, 0, 2, 0, 8, 0), "idle"),
    ((NodeState.UP, False, 1, 2, 1, 8, 1), "mix"),
    ((NodeState.UP, False, 2, 2, 2, 8, 2), "alloc"),
    ((NodeState.UP, True, 0, 2, 0, 8, 0), "drain"),
    ((NodeState.UP, True, 1, 2, 1, 8, 1), "drng"),
    ((NodeState.DOWN, False, 0, 2, 0, 8, 0), "down"),
])
def test_node_display_state(args, word):
    assert node_display_state(*args) == word
