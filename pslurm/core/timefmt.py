"""Slurm time syntax: ``--time`` limits, squeue-style durations, and timestamps."""

from __future__ import annotations

import time


class TimeFormatError(ValueError):
    """A malformed time limit or timestamp; the message is the one line the user sees."""


_INFINITE = frozenset({"INFINITE", "UNLIMITED", "-1"})


def _fields(text: str, sep: str) -> list[int]:
    parts = text.split(sep)
    if not all(p.isascii() and p.isdigit() for p in parts):  # [0-9]+ (re: milliseconds of a command's start)
        raise ValueError(text)
    return [int(p) for p in parts]


def parse_time_limit(text: str) -> int | None:
    """Parse a Slurm time limit into seconds; ``INFINITE``/``UNLIMITED``/``-1`` give None.

    Formats: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``. A zero limit (``0``,
    ``0:00``, ``0-0``) is None too: sbatch's "A time limit of zero requests that no time limit be
    imposed". Raises TimeFormatError otherwise.
    """
    s = text.strip()
    if s.upper() in _INFINITE:
        return None
    try:
        if "-" in s:
            day_text, _, rest = s.partition("-")
            (days,) = _fields(day_text, "-")
            hms = _fields(rest, ":")
            if len(hms) > 3:
                raise ValueError(s)
            hms += [0] * (3 - len(hms))  # D-H, D-H:M: missing fields are zero
            h, m, sec = hms
        else:
            days = 0
            f = _fields(s, ":")
            if len(f) == 1:
                h, m, sec = 0, f[0], 0
            elif len(f) == 2:
                h, m, sec = 0, f[0], f[1]
            elif len(f) == 3:
                h, m, sec = f
            else:
                raise ValueError(s)
    except ValueError:
        raise TimeFormatError(f"Invalid time limit specification: {text}") from None
    total = ((days * 24 + h) * 60 + m) * 60 + sec
    return total or None  # zero: no time limit, as Slurm


def format_duration(seconds: float | None) -> str:
    """Format seconds as squeue shows TIME and TIME_LIMIT: ``0:05``, ``1:02:03``, ``1-00:00:00``.

    None is ``UNLIMITED``; fractions are dropped and negative values (clock skew) show as ``0:00``.
    """
    if seconds is None:
        return "UNLIMITED"
    total = max(0, int(seconds))
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_slurm_duration(seconds: float | None) -> str:
    """Format seconds as sacct prints Elapsed, CPUTime and Timelimit (Slurm's secs2time_str):
    ``00:00:01``, ``01:01:40``, ``1-02:03:04``. None is ``UNLIMITED``; fractions are dropped and
    negative values (clock skew) show as ``00:00:00``."""
    if seconds is None:
        return "UNLIMITED"
    total = max(0, int(seconds))
    days, rem = divmod(total, 86400)
    text = f"{rem // 3600:02d}:{rem % 3600 // 60:02d}:{rem % 60:02d}"
    return f"{days}-{text}" if days else text


def format_timestamp(ts: float | None) -> str:
    """Format an epoch time as Slurm does (``2026-11-22T06:35:27``, local time).

    None, and 0 (Slurm's "not set"), are ``Unknown``.
    """
    if not ts:
        return "Unknown"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


# -- Slurm's parse_time (src/common/parse_time.c): every option that takes a time -------------------

_DELTA_UNITS = (("seconds", 1), ("second", 1), ("minutes", 60), ("minute", 60), ("hours", 3600), ("hour", 3600),
                ("days", 86400), ("day", 86400), ("weeks", 604800), ("week", 604800))
_NAMED_HOURS = (("midnight", 0), ("noon", 12), ("fika", 15), ("teatime", 16))


_LAST_TIME = 253402300799.0  # 9999-12-31T23:59:59 UTC: a later time has no timestamp to show


class _Bad(Exception):
    """Where Slurm's parser stopped (its ``pos``)."""

    def __init__(self, pos: int) -> None:
        super().__init__(pos)
        self.pos = pos


def parse_time(text: str, now: float, past: bool = False) -> float:
    """An absolute time as sbatch's ``--begin`` and ``--deadline`` take it (Slurm's parse_time,
    looking ahead: a time of day that has passed today is tomorrow's, a date that has passed this
    year is next year's), in epoch seconds; local time, as Slurm's. ``now`` is the clock.
    ``past``: looking back, as sacct's and sreport's start and end times (Slurm's ``past`` flag): a
    time of day is today's, a date without a year whose month is after this one is last year's.

    Forms, combinable as in Slurm: ``today``, ``tomorrow``; ``midnight``, ``noon``, ``fika`` (15:00),
    ``teatime`` (16:00); ``HH:MM[:SS] [AM|PM]``; ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``;
    ``MM/DD[/YY]-HH:MM[:SS]``; ``YYYY-MM-DD[THH:MM[:SS]]``; ``now[{+|-}count[seconds|minutes|hours|
    days|weeks]]`` (no unit: seconds); ``uts<epoch>``. A date without a time is its midnight.
    Raises TimeFormatError (``Invalid time specification (pos=N): TEXT``, Slurm's words) otherwise,
    and for a text that names no time at all."""
    try:
        found = _parse_time(text, now, past)
    except _Bad as bad:
        raise TimeFormatError(f"Invalid time specification (pos={bad.pos}): {text}") from None
    if found is None or not 0 < found <= _LAST_TIME:  # nothing given: Slurm's parse_time returns 0, refused
        raise TimeFormatError(f"Invalid time specification (pos=0): {text}")
    return found


# long: Slurm's parse_time() ported as one scan, so that its refusals name the positions Slurm's do
def _parse_time(s: str, now: float, past: bool) -> float | None:
    """Slurm's parse_time(s, past), position for position (its quirks kept: ``4pm`` is a bad date)."""
    if s[:3].lower() == "uts":
        digits = s[3:]
        if not digits.isdigit() or int(digits) < 1000000:
            raise _Bad(0)
        return float(int(digits))

    def at(i: int) -> str:
        return s[i] if 0 <= i < len(s) else ""

    def digit(i: int) -> bool:
        return "0" <= at(i) <= "9"

    today = time.localtime(now)
    hour = minute = month = mday = year = -1
    second = 0
    pos = 0
    while pos < len(s) and s[pos] != "\n":
        c = s[pos]
        rest = s[pos:].lower()
        if c in " \t-T":
            pos += 1
            continue
        if rest.startswith("today"):
            month, mday, year = today.tm_mon, today.tm_mday, today.tm_year
            pos += 5
            continue
        if rest.startswith("tomorrow"):
            later = time.localtime(now + 86400)
            month, mday, year = later.tm_mon, later.tm_mday, later.tm_year
            pos += 8
            continue
        named = next(((name, h) for name, h in _NAMED_HOURS if rest.startswith(name)), None)
        if named is not None:
            hour, minute, second = named[1], 0, 0
            pos += len(named[0])
            continue
        if rest.startswith("now"):
            delta = 0
            i = pos + 3
            while True:
                ch = at(i)
                if ch in ("+", "-"):
                    count, pos = _delta(s, i)
                    delta = count if ch == "+" else -count
                    break
                if ch in (" ", "\t"):
                    i += 1
                    continue
                if ch in ("", "\n"):
                    pos = i
                    break
                raise _Bad(i)
            later = time.localtime(now + delta)
            month, mday, year = later.tm_mon, later.tm_mday, later.tm_year
            hour, minute, second = later.tm_hour, later.tm_min, later.tm_sec
            continue
        if not digit(pos):
            raise _Bad(pos)
        if at(pos + 1) == ":" or at(pos + 2) == ":":
            (hour, minute, second), pos = _clock(s, pos)
        else:
            (month, mday, got_year), pos = _date(s, pos)
            if got_year is not None:
                year = got_year
    if hour == -1 and month == -1:
        return None
    if hour == -1:  # a date without a time: its midnight
        hour, minute = 0, 0
    elif month == -1:  # a time without a date: today's (looking back), else the next such time
        if past or (hour, minute) > (today.tm_hour, today.tm_min):
            month, mday, year = today.tm_mon, today.tm_mday, today.tm_year
        else:
            later = time.localtime(now + 86400)
            month, mday, year = later.tm_mon, later.tm_mday, later.tm_year
    if year == -1 and past:  # a date without a year, looking back: this year's, last year's if its month is ahead
        year = today.tm_year - 1 if month > today.tm_mon else today.tm_year
    if year == -1:  # a date without a year: the next one, this year or the next
        ahead = (month, mday, hour, minute) > (today.tm_mon, today.tm_mday, today.tm_hour, today.tm_min)
        year = today.tm_year if ahead else today.tm_year + 1
    try:
        return time.mktime((year, month, mday, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError):
        raise _Bad(len(s)) from None


def _delta(s: str, sign_at: int) -> tuple[int, int]:
    """``now+N[unit]``: the count in seconds and where parsing goes on (Slurm's _get_delta)."""
    count, digits = 0, 0
    i = sign_at + 1
    while i < len(s) and s[i] != "\n":
        if s[i] in " \t":
            i += 1
            continue
        unit = next(((name, factor) for name, factor in _DELTA_UNITS if s[i:i + len(name)].lower() == name), None)
        if unit is not None:
            i += len(unit[0])
            count *= unit[1]
            break
        if "0" <= s[i] <= "9":
            count = count * 10 + int(s[i])
            digits += 1
            i += 1
            continue
        raise _Bad(i - 1)
    if not digits:
        raise _Bad(sign_at)
    if count > 10**11:  # past any date mktime takes
        raise _Bad(i - 1)
    return count, i


def _clock(s: str, pos: int) -> tuple[tuple[int, int, int], int]:
    """``HH:MM[:SS] [AM|PM]`` (Slurm's _get_time)."""
    def digit(i: int) -> bool:
        return i < len(s) and "0" <= s[i] <= "9"

    def two(i: int, top: int) -> int:  # exactly two digits at i, at most ``top``
        for j in (i, i + 1):
            if not digit(j):
                raise _Bad(j)
        value = int(s[i:i + 2])
        if value > top:
            raise _Bad(i)
        return value

    i = pos
    hour = int(s[i])
    i += 1
    if s[i] != ":":  # two digits
        if not digit(i):
            raise _Bad(i)
        hour = hour * 10 + int(s[i])
        i += 1
        if hour > 23:
            raise _Bad(pos)
    if i >= len(s) or s[i] != ":":
        raise _Bad(i)
    minute = two(i + 1, 59)
    i += 3
    second = 0
    if i < len(s) and s[i] == ":":
        second = two(i + 1, 59)
        i += 3
    while i < len(s) and s[i] in " \t":
        i += 1
    half = s[i:i + 2].lower()
    if half == "pm":
        hour += 12
        if hour > 23:
            if hour != 24:
                raise _Bad(i)
            hour = 12
        i += 2
    elif half == "am":
        if hour > 11:
            if hour != 12:
                raise _Bad(i)
            hour = 0
        i += 2
    return (hour, minute, second), i


def _date(s: str, pos: int) -> tuple[tuple[int, int, int | None], int]:
    """``YYYY-MM-DD``, ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]`` (Slurm's _get_date): month, day,
    year (None when not given)."""
    def num(i: int, most: int) -> tuple[int, int]:  # up to ``most`` digits from i; (value, next i)
        j = i
        while j < len(s) and j - i < most and "0" <= s[j] <= "9":
            j += 1
        if j == i:
            raise _Bad(i)
        return int(s[i:j]), j

    if len(s) >= pos + 8 and s[pos + 4:pos + 5] == "-" and s[pos + 7:pos + 8] == "-":
        if not all("0" <= ch <= "9" for ch in s[pos:pos + 4]):
            raise _Bad(pos)
        year = int(s[pos:pos + 4])
        month, i = num(pos + 5, 2)
        if not 1 <= month <= 12:
            raise _Bad(pos + 5)
        day, i = num(i + 1, 2)
        if not 1 <= day <= 31:
            raise _Bad(i - 2)
        return (month, day, year), i
    month, i = num(pos, 2)
    if not 1 <= month <= 12:
        raise _Bad(pos)
    if i < len(s) and s[i] in "./":
        i += 1
    day, i = num(i, 2)
    if not 1 <= day <= 31:
        raise _Bad(i - 2)
    if i < len(s) and s[i] in "./":
        i += 1
    short_year = None
    if i < len(s) and "0" <= s[i] <= "9":
        if not (i + 1 < len(s) and "0" <= s[i + 1] <= "9"):
            raise _Bad(i + 1)
        short_year = 2000 + int(s[i:i + 2]) if int(s[i:i + 2]) else None  # Slurm: "00" is no year
        i += 2
    return (month, day, short_year), i
