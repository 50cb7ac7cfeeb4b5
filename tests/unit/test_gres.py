"""GRES parsing and formatting: --gres, --gpus, node Gres=."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.core.gres import (
    GresError,
    GresRequest,
    format_gres,
    parse_gpus,
    parse_gres,
    parse_node_gres,
    total_gpus,
)

G = GresRequest


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu", (G("gpu", None, 1),)),
        ("gpu:2", (G("gpu", None, 2),)),
        ("gpu:a100:2", (G("gpu", "a100", 2),)),
        ("gres/gpu:2", (G("gpu", None, 2),)),
        ("gpu:a100", (G("gpu", "a100", 1),)),
        ("gpu:3g.20gb:1", (G("gpu", "3g.20gb", 1),)),
        ("gpu:0", ()),
        ("none", ()),
        ("gpu:1,gpu:2", (G("gpu", None, 3),)),
        ("gpu:a100:2,gpu:1,mps:50", (G("gpu", "a100", 2), G("gpu", None, 1), G("mps", None, 50))),
    ],
)
def test_parse_gres(text: str, expected: tuple[GresRequest, ...]) -> None:
    assert parse_gres(text) == expected


@pytest.mark.parametrize("text", ["", "gpu,", ",gpu", "gpu:-1", "gpu:x:y:z", "gpu:a100:", ":2", "gpu:2:2",
                                  "gpu:a 100:1", "gpu::1", "gpu:a100:1.5", "gpu/2"])  # fmt: skip
def test_parse_gres_rejects(text: str) -> None:
    with pytest.raises(GresError, match=r"^Invalid generic resource \(gres\) specification: "):
        parse_gres(text)


def test_parse_gpus() -> None:
    assert parse_gpus("2") == (G("gpu", None, 2),)
    assert parse_gpus("a100:2") == (G("gpu", "a100", 2),)
    assert parse_gpus("a100:1,v100:1") == (G("gpu", "a100", 1), G("gpu", "v100", 1))
    assert parse_gpus("0") == ()


@pytest.mark.parametrize("text", ["", "a100", "-1", "gpu:a100:2", "a100:", "2:2"])
def test_parse_gpus_rejects(text: str) -> None:
    with pytest.raises(GresError, match="^Invalid GPU specification: "):
        parse_gpus(text)


def test_parse_node_gres() -> None:
    assert parse_node_gres("gpu:2") == (G("gpu", None, 2),)
    assert parse_node_gres("gpu:a100:2,gpu:v100:1") == (G("gpu", "a100", 2), G("gpu", "v100", 1))
    assert parse_node_gres("(null)") == ()
    assert parse_node_gres("") == ()
    for bad in ("gpu", "gpu:a100", "gpu:-2"):
        with pytest.raises(GresError):
            parse_node_gres(bad)


def test_format_and_total() -> None:
    reqs = (G("gpu", "a100", 2), G("gpu", None, 1), G("mps", None, 100))
    assert format_gres(reqs) == "gpu:a100:2,gpu:1,mps:100"
    assert format_gres(()) == ""
    assert total_gpus(reqs) == 3
    assert total_gpus(reqs, "a100") == 2
    assert total_gpus(reqs, "v100") == 0


_word = st.from_regex(r"[a-z][a-z0-9_.-]{0,7}", fullmatch=True)
_reqs = st.dictionaries(st.tuples(_word, st.none() | _word), st.integers(1, 10**6), max_size=6).map(
    lambda d: tuple(G(n, t, c) for (n, t), c in d.items())
)


@given(_reqs)
def test_format_parse_round_trip(reqs: tuple[GresRequest, ...]) -> None:
    text = format_gres(reqs)
    if reqs:
        assert parse_gres(text) == reqs
        assert parse_node_gres(text) == reqs
    else:
        assert parse_node_gres(text) == ()


@given(st.text(max_size=40))
def test_parsers_raise_only_gres_error(text: str) -> None:
    for parse in (parse_gres, parse_gpus, parse_node_gres):
        try:
            result = parse(text)
        except GresError as exc:
            assert "\n" not in str(exc).strip() or "\n" in text
            continue
        assert all(r.count > 0 for r in result)


@given(st.text(alphabet="gpu:a10,0-/ ", max_size=20))
def test_parsers_on_near_miss_text(text: str) -> None:
    for parse in (parse_gres, parse_gpus, parse_node_gres):
        try:
            result = parse(text)
        except GresError as exc:
            assert str(exc).startswith("Invalid ")
            continue
        assert all(isinstance(r, GresRequest) and r.count > 0 for r in result)
