"""Hostlist wrappers: expansion, compression, and errors."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.core.hostlists import collect, expand


def test_expand_range_keeps_padding() -> None:
    assert expand("c[000-003]") == ["c000", "c001", "c002", "c003"]


def test_expand_list_and_single() -> None:
    assert expand("c[0,2],gpu1") == ["c0", "c2", "gpu1"]


def test_collect_compresses() -> None:
    assert collect(["c000", "c001"]) == "c[000-001]"
    assert collect([]) == ""


@pytest.mark.parametrize("bad", ["c[", "c[3-1]", "c]"])
def test_expand_bad_syntax(bad: str) -> None:
    with pytest.raises(ValueError, match="Invalid hostlist"):
        expand(bad)


@given(st.sets(st.integers(0, 999), min_size=1, max_size=40))
def test_collect_expand_round_trip(ids: set[int]) -> None:
    names = sorted(f"c{i:03d}" for i in ids)
    assert expand(collect(names)) == names


@given(st.text(max_size=30))
def test_expand_raises_only_value_error(text: str) -> None:
    try:
        expand(text)
    except ValueError:
        pass
