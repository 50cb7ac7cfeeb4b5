"""Slurm time syntax: ``--time`` limits, squeue-style durations, and timestamps."""

from __future__ import annotations

import re
import time


class TimeFormatError(ValueError):
    """A malformed time limit or timestamp; the message is the one line the user sees."""


_INFINITE = frozenset({"INFINITE", "UNLIMITED", "-1"})
_DIGITS = re.compile(r"[0-9]+")


def _fields(text: str, sep: str) -> list[int]:
    parts = text.split(sep)
    if not all(_DIGITS.fullmatch(p) for p in parts):
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


_RELATIVE = re.compile(r"now(?:([+-])([0-9]+)([a-z]*))?")
_UNITS = {
    "": 1, "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}  # fmt: skip
_ABSOLUTE = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d")
_CLOCK = ("%H:%M:%S", "%H:%M")


def parse_timestamp(text: str, now: float | None = None) -> float:
    """Parse a sacct ``-S``/``-E`` time into epoch seconds (local time).

    Accepts ``YYYY-MM-DD[THH:MM[:SS]]``, ``HH:MM[:SS]`` (today), ``now``, ``now-1hours``,
    ``now+30minutes`` (no unit: seconds), ``today``/``midnight``, ``tomorrow``.
    Raises TimeFormatError otherwise.
    """
    now = time.time() if now is None else now
    s = text.strip().lower()
    rel = _RELATIVE.fullmatch(s)
    if rel:
        sign, count, unit = rel.groups()
        if sign is None:
            return now
        if unit not in _UNITS:
            raise TimeFormatError(f"Invalid time specification: {text} (unknown unit '{unit}')")
        delta = int(count) * _UNITS[unit]
        if delta > 1e12:  # beyond any date; also keeps float() from overflowing
            raise TimeFormatError(f"Invalid time specification: {text} (out of range)")
        return now + delta if sign == "+" else now - delta
    from datetime import datetime, timedelta  # here: listings format times without it (a command pays each import)

    midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if s in ("today", "midnight"):
        return midnight.timestamp()
    if s == "tomorrow":
        return (midnight + timedelta(days=1)).timestamp()
    for fmt in _ABSOLUTE:
        try:
            return datetime.strptime(s.upper(), fmt).timestamp()
        except (ValueError, OverflowError, OSError):  # OSError: year 1 on some platforms
            pass
    for fmt in _CLOCK:
        try:
            clock = datetime.strptime(s, fmt)
        except ValueError:
            continue
        return midnight.replace(hour=clock.hour, minute=clock.minute, second=clock.second).timestamp()
    raise TimeFormatError(f"Invalid time specification: {text}")
