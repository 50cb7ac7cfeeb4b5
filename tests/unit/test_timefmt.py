"""Slurm time limits, durations and timestamps."""

import time
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.core.timefmt import (
    TimeFormatError,
    format_duration,
    format_timestamp,
    parse_time_limit,
    parse_timestamp,
)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5", 300),
        ("1:30", 90),
        ("1:02:03", 3723),
        ("2-3", 2 * 86400 + 3 * 3600),
        ("2-3:04", 2 * 86400 + 3 * 3600 + 240),
        ("2-3:04:05", 2 * 86400 + 3 * 3600 + 245),
        ("0:30", 30),
        (" 10 ", 600),
    ],
)
def test_parse_time_limit_formats(text: str, seconds: int) -> None:
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["INFINITE", "unlimited", "-1"])
def test_parse_time_limit_infinite(text: str) -> None:
    assert parse_time_limit(text) is None


@pytest.mark.parametrize(
    "text", ["", "1:xx", "-5", "1:2:3:4", "1-2:3:4:5", "1-", "-1-2", "a", "1.5", "1--2"]
)
def test_parse_time_limit_rejects(text: str) -> None:
    with pytest.raises(TimeFormatError, match="Invalid time limit specification"):
        parse_time_limit(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0:00"), (5, "0:05"), (65, "1:05"), (3723, "1:02:03"), (86400, "1-00:00:00"), (None, "UNLIMITED"),
     (59.9, "0:59"), (-3, "0:00"), (90061, "1-01:01:01")],
)  # fmt: skip
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(1, 10**7))
def test_format_then_parse_round_trip(seconds: int) -> None:
    assert parse_time_limit(format_duration(seconds)) == seconds


@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_d_h_m_s_round_trip(d: int, h: int, m: int, s: int) -> None:
    total = ((d * 24 + h) * 60 + m) * 60 + s
    text = f"{d}-{h}:{m:02d}:{s:02d}"
    if total == 0:  # zero is no time limit, as Slurm
        assert parse_time_limit(text) is None
        return
    assert parse_time_limit(text) == total
    assert parse_time_limit(format_duration(total)) == total
    if d:
        assert format_duration(total) == f"{d}-{h:02d}:{m:02d}:{s:02d}"


@given(st.text(max_size=20))
def test_parse_time_limit_raises_only_its_error(text: str) -> None:
    try:
        result = parse_time_limit(text)
    except TimeFormatError:
        return
    assert result is None or result > 0


def test_format_timestamp() -> None:
    ts = datetime(2026, 11, 22, 6, 35, 27).timestamp()
    assert format_timestamp(ts) == "2026-11-22T06:35:27"
    assert format_timestamp(None) == "Unknown"


def test_parse_timestamp_absolute() -> None:
    assert parse_timestamp("2026-11-22") == datetime(2026, 11, 22).timestamp()
    assert parse_timestamp("2026-11-22T10:00") == datetime(2026, 11, 22, 10).timestamp()
    assert parse_timestamp("2026-11-22T10:00:05") == datetime(2026, 11, 22, 10, 0, 5).timestamp()


def test_parse_timestamp_relative() -> None:
    now = 1_800_000_000.0
    assert parse_timestamp("now", now=now) == now
    assert parse_timestamp("now-1hours", now=now) == now - 3600
    assert parse_timestamp("now-2days", now=now) == now - 2 * 86400
    assert parse_timestamp("now+30", now=now) == now + 30
    assert parse_timestamp("NOW-5minutes", now=now) == now - 300
    midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    assert parse_timestamp("today", now=now) == midnight.timestamp()
    assert parse_timestamp("10:30", now=now) == midnight.replace(hour=10, minute=30).timestamp()


def test_parse_timestamp_default_now_is_current() -> None:
    assert abs(parse_timestamp("now") - time.time()) < 5


@pytest.mark.parametrize(
    "text", ["", "yesterday-ish", "2026-13-01", "now-1fortnights", "now-", "2026/11/22x"]
)
def test_parse_timestamp_rejects(text: str) -> None:
    with pytest.raises(TimeFormatError, match="Invalid time specification"):
        parse_timestamp(text)


@given(st.text(max_size=30))
def test_parse_timestamp_raises_only_its_error(text: str) -> None:
    try:
        assert isinstance(parse_timestamp(text, now=1e9), float)
    except TimeFormatError:
        pass
