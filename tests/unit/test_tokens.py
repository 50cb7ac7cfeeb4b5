"""scontrol token's JWTs as Slurm's: AuthAltParameters' bounds, a token never outliving its asker, and
revocation by a new key or by the revocation file (auth/jwt.py)."""

from __future__ import annotations

import os
import pwd
import re
from pathlib import Path

import pytest

from pslurm.auth.credential import AuthError
from pslurm.auth.jwt import (
    CREATION_DISABLED,
    DEFAULT_MAX_LIFESPAN,
    TOKEN_HEADER,
    TokenCheck,
    TokenPolicy,
    decode,
    load_or_create_key,
    token_policy,
)

ME = pwd.getpwuid(os.getuid()).pw_name


def _check(tmp_path: Path, policy: TokenPolicy | None = None, now: float = 1000.0) -> TokenCheck:
    path = str(tmp_path / "jwt_hs256.key")
    return TokenCheck(load_or_create_key(path), clock=lambda: now, path=path, policy=policy)


def _expires(check: TokenCheck, token: str) -> object:
    return decode(token, check.key, 0)["exp"]


def test_alt_parameters_are_read_and_a_cap_holds_when_unset() -> None:
    assert token_policy({}) == TokenPolicy(DEFAULT_MAX_LIFESPAN, False)
    assert token_policy({"AuthAltParameters": "jwt_key=/k,max_token_lifespan=60,disable_token_creation"}) == \
        TokenPolicy(60, True)
    with pytest.raises(ValueError, match="max_token_lifespan=forever"):
        token_policy({"authaltparameters": "max_token_lifespan=forever"})


def test_a_users_lifespan_is_capped_and_an_operators_is_not(tmp_path: Path) -> None:
    check = _check(tmp_path, TokenPolicy(max_lifespan=600))
    assert _expires(check, check.issue(ME, 1_000_000_000)) == 1000 + 600
    assert _expires(check, check.issue(ME, 1_000_000_000, operator=True)) == 1000 + 1_000_000_000
    assert _expires(check, check.issue(ME)) == 1000 + 600  # the default (1800) under the cap too
    assert _expires(_check(tmp_path), _check(tmp_path).issue(ME, 10**9)) == 1000 + DEFAULT_MAX_LIFESPAN


def test_a_token_never_outlives_the_token_that_asked(tmp_path: Path) -> None:
    check = _check(tmp_path)
    asking = check.issue(ME, 60)
    _, expires = check.admitted({TOKEN_HEADER: asking})
    assert expires == 1060
    assert _expires(check, check.issue(ME, 3600, not_after=expires)) == 1060
    assert _expires(check, check.issue(ME, 3600, operator=True, not_after=expires)) == 1060


def test_token_creation_disabled_is_for_operators_only(tmp_path: Path) -> None:
    check = _check(tmp_path, TokenPolicy(creation_disabled=True))
    with pytest.raises(AuthError, match=f"^{re.escape(CREATION_DISABLED)}$"):
        check.issue(ME)
    assert check.issue(ME, operator=True)


def test_a_new_key_revokes_every_token_and_the_revocation_file_a_users(tmp_path: Path) -> None:
    check = _check(tmp_path)
    token = check.issue(ME)
    assert check.identity(token, 1001).uid == os.getuid()
    revoked = tmp_path / "jwt_hs256.key.revoked"
    revoked.write_text(f"# revoked by the operator\n{ME} 1000\n")
    with pytest.raises(AuthError, match="^token revoked$"):
        check.identity(token, 1001)
    revoked.write_text(f"{ME} 999\n")  # tokens issued after that time are good again
    assert check.identity(token, 1001).uid == os.getuid()
    key = tmp_path / "jwt_hs256.key"
    new = tmp_path / "new.key"
    new.write_bytes(os.urandom(32))
    new.chmod(0o600)
    new.replace(key)  # rotation: read again at the next request
    with pytest.raises(AuthError, match="signature is not valid"):
        check.identity(token, 1001)
    assert check.identity(check.issue(ME), 1001).uid == os.getuid()


def test_a_dashboard_session_opened_with_a_token_ends_with_it(tmp_path: Path) -> None:
    from pslurm.auth.credential import Identity
    from pslurm.controller.rest.session import Sessions, token_expiry

    check = _check(tmp_path)
    token = check.issue(ME, 60)
    assert token_expiry(token) == 1060 and token_expiry("p2.api.1.1.2.x.y") is None
    now = [1000.0]
    sessions = Sessions(ttl=8 * 3600, clock=lambda: now[0])
    sid = sessions.open(Identity(1, 1), until=token_expiry(token))
    assert sessions.identity(sid) == Identity(1, 1)
    now[0] = 1061.0
    assert sessions.identity(sid) is None
