"""Logs at a bounded rate (core.ratelog) and database errors in one bounded line (store.writer.brief)."""

from __future__ import annotations

import logging

from sqlalchemy.exc import OperationalError

from pslurm.controller.store.writer import MAX_LOGGED, brief
from pslurm.core.ratelog import RateLimit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, name: str = "psctld") -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, msg, args, None)


def test_a_repeating_message_is_held_back_past_its_burst_and_counted_later() -> None:
    clock = Clock()
    limit = RateLimit(burst=3, window=60, clock=clock)
    passed = [limit.filter(record("accept failed: %s", i)) for i in range(100_000)]
    assert passed.count(True) == 3
    assert limit.filter(record("another message"))  # others are not held back by it
    clock.now = 61
    later = record("accept failed: %s", "x")
    assert limit.filter(later) and "99997 more like this" in later.getMessage()


def test_a_database_error_is_one_bounded_line_without_its_statement() -> None:
    statement = "SELECT * FROM jobs WHERE job_id IN (" + ", ".join(["?"] * 1_000_000) + ")"
    exc = OperationalError(statement, {"p": "x" * 10_000}, Exception("too many SQL variables\nsecond line"))
    line = brief(exc)
    assert line == "Exception: too many SQL variables second line" and len(line) <= MAX_LOGGED + 40
    assert len(brief(Exception("y" * 100_000))) <= MAX_LOGGED + 20
