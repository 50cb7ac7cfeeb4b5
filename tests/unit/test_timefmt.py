"""Slurm time limits, durations and timestamps."""

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.core.timefmt import (
    TimeFormatError,
    format_duration,
    format_timestamp,
    parse_time,
    parse_time_limit,
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


def test_parse_time_past_absolute() -> None:
    now = datetime(2026, 6, 15, 12, 0).timestamp()
    assert parse_time("2026-11-22", now, past=True) == datetime(2026, 11, 22).timestamp()
    assert parse_time("2026-11-22T10:00", now, past=True) == datetime(2026, 11, 22, 10).timestamp()
    assert parse_time("2026-11-22T10:00:05", now, past=True) == datetime(2026, 11, 22, 10, 0, 5).timestamp()


def test_parse_time_past_relative() -> None:
    now = 1_800_000_000.0
    assert parse_time("now", now, past=True) == now
    assert parse_time("now-1hours", now, past=True) == now - 3600
    assert parse_time("now-1days", now, past=True) == now - 86400
    assert parse_time("now-2days", now, past=True) == now - 2 * 86400
    assert parse_time("now+30", now, past=True) == now + 30
    assert parse_time("NOW-5minutes", now, past=True) == now - 300
    midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    assert parse_time("today", now, past=True) == midnight.timestamp()
    assert parse_time("midnight", now, past=True) == midnight.timestamp()


def test_parse_time_past_looks_back() -> None:
    """sacct's forms: a time of day is today's even when later than now; a date without a year is
    this year's unless its month is ahead (then last year's). Looking ahead (sbatch --begin) the
    same texts are tomorrow's and next year's."""
    now = datetime(2026, 6, 15, 12, 0).timestamp()
    assert parse_time("14:30", now, past=True) == datetime(2026, 6, 15, 14, 30).timestamp()
    assert parse_time("10:30", now, past=True) == datetime(2026, 6, 15, 10, 30).timestamp()
    assert parse_time("10:30", now) == datetime(2026, 6, 16, 10, 30).timestamp()
    assert parse_time("noon", now, past=True) == datetime(2026, 6, 15, 12, 0).timestamp()
    for text in ("0301", "03/01", "03.01"):  # MMDD, MM/DD, MM.DD: March, behind us
        assert parse_time(text, now, past=True) == datetime(2026, 3, 1).timestamp()
        assert parse_time(text, now) == datetime(2027, 3, 1).timestamp()
    assert parse_time("1201", now, past=True) == datetime(2025, 12, 1).timestamp()  # December: last year's
    assert parse_time("120125", now, past=True) == datetime(2025, 12, 1).timestamp()  # MMDDYY
    assert parse_time("12/01/25", now, past=True) == datetime(2025, 12, 1).timestamp()
    assert parse_time("06/15-08:00", now, past=True) == datetime(2026, 6, 15, 8).timestamp()
    assert parse_time("uts1700000000", now, past=True) == 1700000000.0


@pytest.mark.parametrize(
    ("text", "pos"), [("yesterday-ish", 0), ("2026-13-01", 5), ("now-1fortnights", 4), ("now-", 3),
                      ("2026/11/22x", 0), ("now-1h", 4), ("1301", 0), ("10am", 2)]
)
def test_parse_time_past_rejects(text: str, pos: int) -> None:
    with pytest.raises(TimeFormatError, match=rf"^Invalid time specification \(pos={pos}\): "):
        parse_time(text, 1e9, past=True)


def test_parse_time_nothing_is_refused() -> None:
    with pytest.raises(TimeFormatError, match="Invalid time specification"):
        parse_time("", 1e9, past=True)


@given(st.text(max_size=30))
def test_parse_time_past_raises_only_its_error(text: str) -> None:
    try:
        assert isinstance(parse_time(text, 1e9, past=True), float)
    except TimeFormatError:
        pass
