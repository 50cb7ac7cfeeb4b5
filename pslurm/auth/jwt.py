"""Slurm's JWT (auth/jwt, ``AuthAltTypes=auth/jwt``): HS256 tokens for slurmrestd's clients, standard library only.

``scontrol token`` (``pscontrol token``) asks the controller for a token; the controller signs
``{"iat", "exp", "sun"}`` (issued, expires, Slurm user name) with the key in ``jwt_hs256.key``, a
file only the controller's user may read (StateSaveLocation/jwt_hs256.key, or
``AuthAltParameters=jwt_key=PATH``), made at the controller's first start. A REST client sends it as
``X-SLURM-USER-TOKEN`` with its name in ``X-SLURM-USER-NAME``; :class:`TokenCheck` admits the request
as that user (the same permissions as the user's own credential), or refuses it: expired, forged,
malformed, or for another user than the name sent.

Slurm's bounds (``AuthAltParameters``): ``max_token_lifespan=S`` caps the lifespan of a token asked
by a user (operators are not capped, as Slurm's SlurmUser); unset, pslurm caps it at
``DEFAULT_MAX_LIFESPAN`` (a day: a token that leaks is good for a day at most; Slurm sets none).
``disable_token_creation`` lets only operators ask for tokens. A token never outlives the token that
asked for it. Revocation: the key file is read again when it changes, so a new key (rotation)
invalidates every token at once; ``<key>.revoked`` (lines ``USER EPOCH``) refuses the tokens of
USER issued at or before EPOCH. docs/security.md says how.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import pwd
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from pslurm.auth.credential import AuthError, Identity

TOKEN_HEADER = "X-SLURM-USER-TOKEN"
USER_HEADER = "X-SLURM-USER-NAME"
KEY_FILE = "jwt_hs256.key"
DEFAULT_LIFESPAN = 1800  # seconds: auth/jwt's default when scontrol token names none
DEFAULT_MAX_LIFESPAN = 86400  # seconds: a user's token at most, where max_token_lifespan is not set
MAX_TOKEN = 8192  # bytes of a token we read at all
TOKEN_EXPIRES = "pslurm.token_expires"  # a request's key: when the JWT it came with expires
CREATION_DISABLED = "Access/permission denied: token creation is disabled (AuthAltParameters=disable_token_creation)"
T = TypeVar("T")
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


@dataclass(frozen=True)
class TokenPolicy:
    """``AuthAltParameters``' bounds on the tokens users ask for."""

    max_lifespan: int = DEFAULT_MAX_LIFESPAN  # seconds a user's token lasts at most
    creation_disabled: bool = False  # only operators ask for tokens


def _alt_parameters(extra: Mapping[str, str]) -> dict[str, str]:
    params = {k.lower(): v for k, v in extra.items()}.get("authaltparameters", "")
    found = {}
    for item in params.split(","):
        name, _, value = item.partition("=")
        found[name.strip().lower()] = value.strip()
    return found


def token_policy(extra: Mapping[str, str]) -> TokenPolicy:
    """``AuthAltParameters=max_token_lifespan=S,disable_token_creation`` of pslurm.conf (``extra``);
    ValueError names a bad lifespan."""
    params = _alt_parameters(extra)
    text = params.get("max_token_lifespan", "")
    if text and not (text.isascii() and text.isdigit() and 0 < int(text) < 2**31):
        raise ValueError(f"AuthAltParameters max_token_lifespan={text[:20]}: expected seconds above 0")
    return TokenPolicy(int(text) if text else DEFAULT_MAX_LIFESPAN, "disable_token_creation" in params)


def key_path(state_dir: str, extra: Mapping[str, str]) -> str:
    """Where the key is: ``AuthAltParameters=jwt_key=PATH``, else StateSaveLocation/jwt_hs256.key."""
    return _alt_parameters(extra).get("jwt_key") or os.path.join(state_dir, KEY_FILE)


def _revocations(path: str) -> dict[str, float]:
    """``path``'s lines ``USER EPOCH``: each user's tokens issued at or before EPOCH are refused."""
    found: dict[str, float] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                words = line.split("#", 1)[0].split()
                if len(words) == 2 and words[1].replace(".", "", 1).isdigit():
                    found[words[0]] = max(found.get(words[0], 0.0), float(words[1]))
    except FileNotFoundError:
        pass
    return found


class _Watched(Generic[T]):
    """A file read again whenever it changes (its inode, size or modification time)."""

    def __init__(self, path: str, read: Callable[[str], T]) -> None:
        self.path, self.read = path, read
        self.seen: tuple[int, int, int] | None = None
        self.value: T | None = None

    def get(self) -> T:
        try:
            info = os.stat(self.path)
            now = (info.st_ino, info.st_size, info.st_mtime_ns)
        except FileNotFoundError:
            now = (0, 0, 0)
        if now != self.seen:
            self.value, self.seen = self.read(self.path), now
        assert self.value is not None
        return self.value


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
    """Admits a request by its JWT: the key (read again from ``path`` when it changes), the clock,
    the revocations beside the key, the user database, and the policy on issuing them."""

    def __init__(self, key: bytes, clock: object = time.time, path: str | None = None,
                 policy: TokenPolicy | None = None) -> None:
        self.key, self.clock, self.policy = key, clock, policy or TokenPolicy()
        self._key = _Watched(path, load_or_create_key) if path else None
        self._revoked = _Watched(path + ".revoked", _revocations) if path else None

    def _current_key(self) -> bytes:
        if self._key is not None:
            self.key = self._key.get()
        return self.key

    def issue(self, user: str, lifespan: int | None = None, *, operator: bool = False,
              not_after: float | None = None) -> str:
        """A token for ``user``: ``lifespan`` seconds (the default when None), capped for all but
        operators at the policy's most, and never past ``not_after`` (the asking token's expiry).
        AuthError when the policy lets only operators ask."""
        if self.policy.creation_disabled and not operator:
            raise AuthError(CREATION_DISABLED)
        now = int(self.clock())  # type: ignore[operator]
        span = lifespan or DEFAULT_LIFESPAN
        if not operator:
            span = min(span, self.policy.max_lifespan)
        expires = now + span if not_after is None else min(now + span, int(not_after))
        return encode({"iat": now, "exp": expires, "sun": user}, self._current_key())

    def admit(self, headers: Mapping[str, str]) -> Identity:
        """The identity of a request carrying ``X-SLURM-USER-TOKEN`` (and ``X-SLURM-USER-NAME``, which
        must be the token's user when given). AuthError (one line) for anything else."""
        return self.admitted(headers)[0]

    def admitted(self, headers: Mapping[str, str]) -> tuple[Identity, float]:
        """:meth:`admit`'s identity and when the token expires."""
        return self._check(headers.get(TOKEN_HEADER, ""), self.clock(), headers.get(USER_HEADER))  # type: ignore[operator]

    def identity(self, token: str, now: float, named: str | None = None) -> Identity:
        """Who a token is for (the dashboard's login takes one too: session.JwtCheck); AuthError."""
        return self._check(token, now, named)[0]

    def _check(self, token: str, now: float, named: str | None) -> tuple[Identity, float]:
        claims = decode(token, self._current_key(), now)
        user = str(claims["sun"])
        if named is not None and named != user:
            raise AuthError(f"token is for user {user}, not {named}")
        revoked = self._revoked.get() if self._revoked is not None else {}
        issued = claims.get("iat")
        if user in revoked and (not isinstance(issued, (int, float)) or issued <= revoked[user]):
            raise AuthError("token revoked")
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise AuthError(f"token: no such user {user}") from None
        return Identity(entry.pw_uid, entry.pw_gid), float(claims["exp"])  # type: ignore[arg-type]
