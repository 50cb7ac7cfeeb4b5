"""The standard-library fast paths of pslurm.core.hostlists give python-hostlist's own answers."""

import hostlist
from hypothesis import given
from hypothesis import strategies as st

from pslurm.core.hostlists import collect, expand

_EXPR = st.text(alphabet="c0123-,[]x", max_size=24)


@given(_EXPR)
def test_expand_is_python_hostlists(expr: str) -> None:
    try:
        want: object = list(hostlist.expand_hostlist(expr.strip()))
    except hostlist.BadHostlist:
        want = ValueError
    try:
        got: object = expand(expr)
    except ValueError:
        got = ValueError
    assert got == want


@given(st.sampled_from(["c", "gpu-", "n1x"]), st.integers(1, 4),
       st.lists(st.integers(0, 150), min_size=1, max_size=30))
def test_collect_is_python_hostlists(prefix: str, width: int, numbers: list[int]) -> None:
    names = [f"{prefix}{n:0{width}d}" for n in numbers]
    assert collect(names) == hostlist.collect_hostlist(names)


def test_mixed_names_still_collect() -> None:
    names = ["c000", "c001", "gpu1", "c9"]
    assert collect(names) == hostlist.collect_hostlist(names)
