"""Slurm's JWT (auth/jwt, ``AuthAltTypes=auth/jwt``): HS256 tokens for slurmrestd's clients, standard library only.

``scontrol token`` (``pscontrol token``) asks the controller for a token; the controller signs
``{"iat", "exp", "sun"}`` (issued, expires, Slurm user name) with the key in ``jwt_hs256.key``, a
file only the controller's user may read (StateSaveLocation/jwt_hs256.key, or
``AuthAltParameters=jwt_key=PATH``), made at the controller's first start. A REST client sends it as
``X-SLURM-USER-TOKEN`` with its name in ``X-SLURM-USER-NAME``; :class:`TokenCheck` admits the request
as that user (the same permissions as the user's own credential), or refuses it: expired, forged,
malformed, or for another user than the name sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import pwd
import time
from collections.abc import Mapping

from pslurm.auth.credential import AuthError, Identity

TOKEN_HEADER = "X-SLURM-USER-TOKEN"
USER_HEADER = "X-SLURM-USER-NAME"
KEY_FILE = "jwt_hs256.key"
DEFAULT_LIFESPAN = 1800  # seconds: auth/jwt's default when scontrol token names none
MAX_TOKEN = 8192  # bytes of a token we read at all
_HEADER = {"alg": "HS256", "typ": "JWT"}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(claims: Mapping[str, object], key: bytes) -> str:
    """``header.payload.signature``, HS256, base64url without padding (RFC 7519)."""
    body = f"{_b64(json.dumps(_HEADER, separators=(',', ':')).encode())}." \
           f"{_b64(json.dumps(dict(claims), separators=(',', ':')).encode())}"
    return f"{body}.{_b64(hmac.new(key, body.encode(), hashlib.sha256).digest())}"


def decode(token: str, key: bytes, now: float) -> dict[str, object]:
    """The claims of a token this key signed and that has not expired; AuthError (one line) otherwise."""
    if len(token) > MAX_TOKEN or token.count(".") != 2:
        raise AuthError("malformed token")
    head, payload, signature = token.split(".")
    try:
        header = json.loads(_unb64(head))
        sig = _unb64(signature)
    except ValueError:
        raise AuthError("malformed token") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise AuthError("token: only HS256 is accepted")
    if not hmac.compare_digest(sig, hmac.new(key, f"{head}.{payload}".encode(), hashlib.sha256).digest()):
        raise AuthError("token signature is not valid")
    try:
        claims = json.loads(_unb64(payload))
    except ValueError:
        raise AuthError("malformed token") from None
    if not isinstance(claims, dict) or not isinstance(claims.get("sun"), str) \
            or not isinstance(claims.get("exp"), (int, float)):
        raise AuthError("token: expected the claims exp and sun")
    if claims["exp"] <= now:
        raise AuthError("token expired")
    return claims


def key_path(state_dir: str, extra: Mapping[str, str]) -> str:
    """Where the key is: ``AuthAltParameters=jwt_key=PATH``, else StateSaveLocation/jwt_hs256.key."""
    params = {k.lower(): v for k, v in extra.items()}.get("authaltparameters", "")
    for item in params.split(","):
        name, _, value = item.partition("=")
        if name.strip().lower() == "jwt_key" and value:
            return value
    return os.path.join(state_dir, KEY_FILE)


def load_or_create_key(path: str) -> bytes:
    """The key at ``path``, made (32 random bytes, mode 0600) when missing. AuthError when another
    user could read it, as for the cluster key."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(32))
    info = os.stat(path)
    if info.st_mode & 0o077:
        raise AuthError(f"{path}: the JWT key must be readable by its owner only (mode 0600), "
                        f"not {info.st_mode & 0o777:04o}")
    with open(path, "rb") as fh:
        key = fh.read()
    if len(key) < 16:
        raise AuthError(f"{path}: the JWT key is too short ({len(key)} bytes)")
    return key


class TokenCheck:
    """Admits a request by its JWT: the key, the clock, and the user database."""

    def __init__(self, key: bytes, clock: object = time.time) -> None:
        self.key, self.clock = key, clock

    def issue(self, user: str, lifespan: int | None = None) -> str:
        now = int(self.clock())  # type: ignore[operator]
        return encode({"iat": now, "exp": now + (lifespan or DEFAULT_LIFESPAN), "sun": user}, self.key)

    def admit(self, headers: Mapping[str, str]) -> Identity:
        """The identity of a request carrying ``X-SLURM-USER-TOKEN`` (and ``X-SLURM-USER-NAME``, which
        must be the token's user when given). AuthError (one line) for anything else."""
        return self.identity(headers.get(TOKEN_HEADER, ""), self.clock(), headers.get(USER_HEADER))  # type: ignore[operator]

    def identity(self, token: str, now: float, named: str | None = None) -> Identity:
        """Who a token is for (the dashboard's login takes one too: session.JwtCheck); AuthError."""
        user = str(decode(token, self.key, now)["sun"])
        if named is not None and named != user:
            raise AuthError(f"token is for user {user}, not {named}")
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise AuthError(f"token: no such user {user}") from None
        return Identity(entry.pw_uid, entry.pw_gid)
