"""pslurm dashboard's one-time login codes: each opens a session once, within its minute, for whom it was issued."""

from __future__ import annotations

import pytest

from pslurm.auth.credential import AuthError, Identity
from pslurm.controller.rest.dashlink import MAX_PER_USER, LoginCodes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_code_opens_once_for_whom_it_was_issued() -> None:
    codes = LoginCodes(clock=Clock())
    alice, bob = Identity(1001, 1001), Identity(1002, 1002)
    first, second = codes.issue(alice), codes.issue(bob)
    assert first != second and len(first) == 32
    assert codes.redeem(second) == bob and codes.redeem(first) == alice
    with pytest.raises(AuthError, match="this login link was used already"):
        codes.redeem(first)


def test_an_expired_or_unknown_code_is_refused_and_opens_nothing_later() -> None:
    clock = Clock()
    codes = LoginCodes(ttl=60, clock=clock)
    code = codes.issue(Identity(1001, 1001))
    clock.now += 60.5
    with pytest.raises(AuthError, match="this login link expired"):
        codes.redeem(code)
    with pytest.raises(AuthError, match="not one this controller gave"):
        codes.redeem(code)  # expired is forgotten: it never opens again
    with pytest.raises(AuthError, match="not one this controller gave"):
        codes.redeem("A" * 32)


def test_codes_are_bounded_the_oldest_dropped() -> None:
    codes = LoginCodes(clock=Clock(), max_codes=3)
    issued = [codes.issue(Identity(1000 + i, 1000)) for i in range(4)]
    with pytest.raises(AuthError, match="not one this controller gave"):
        codes.redeem(issued[0])
    assert codes.redeem(issued[3]).uid == 1003


def test_one_user_cannot_crowd_out_anothers_codes() -> None:
    codes = LoginCodes(clock=Clock(), max_codes=MAX_PER_USER + 2)
    others = codes.issue(Identity(1002, 1002))
    mine = [codes.issue(Identity(1001, 1001)) for _ in range(3 * MAX_PER_USER)]
    assert codes.redeem(others).uid == 1002  # still there: only the asker's own oldest went
    assert codes.redeem(mine[-1]).uid == 1001
    with pytest.raises(AuthError, match="not one this controller gave"):
        codes.redeem(mine[0])
