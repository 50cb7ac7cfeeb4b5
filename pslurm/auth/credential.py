"""Credentials and the cluster key: pure functions over bytes and strings, and the replay cache."""

from __future__ import annotations

import os
from _operator import _compare_digest as compare_digest  # hmac.compare_digest itself, without hmac's import
from _operator import itemgetter

VERSION = "p2"  # p1 credentials had no audience: they are refused
TTL = 300  # seconds a credential is good for (MUNGE's default)
# Audiences: who a credential is for. A server takes only credentials made for it, so that one seen on
# its way to one server is worth nothing at another (each keeps its own replay cache).
API = "api"  # the controller's user API (HTTP): users' credentials, the credential socket's only kind
CONTROLLER = "ctld"  # the controller's gRPC: the agents' registrations, heartbeats and job ends


def node_audience(name: str) -> str:
    """The audience of node ``name``'s agent: what the controller signs its launches and signals for."""
    safe = name.isascii() and all(c.isalnum() or c in "-_" for c in name) and bool(name)
    return f"node-{name}" if safe else "nodex-" + name.encode().hex()


class AuthError(Exception):
    """A credential that cannot be made or does not check out; the message says why."""


class Identity(tuple[int, int]):
    """Who a credential vouches for: ``(uid, gid)``, named. A tuple, not a dataclass or a namedtuple:
    every command signs one, and ``dataclasses`` (with ``inspect``) would add some 10 ms to each command's
    start, ``collections`` (namedtuple's) a few."""

    __slots__ = ()

    def __new__(cls, uid: int, gid: int) -> Identity:
        return tuple.__new__(cls, (uid, gid))

    uid = property(itemgetter(0), doc="the user's id")
    gid = property(itemgetter(1), doc="the group's id")

    def __getnewargs__(self) -> tuple[int, int]:
        return (self[0], self[1])

    def __repr__(self) -> str:
        return f"Identity(uid={self[0]!r}, gid={self[1]!r})"


def sign(key: bytes, who: Identity, now: float, ttl: int = TTL, audience: str = API) -> str:
    """``p2.<audience>.<uid>.<gid>.<expires>.<nonce>.<hmac-sha256>``."""
    body = f"{VERSION}.{audience}.{who.uid}.{who.gid}.{int(now) + ttl}.{os.urandom(8).hex()}"
    return f"{body}.{_mac(key, body)}"


def verify(key: bytes, credential: str, now: float, audience: str = API) -> Identity:
    """The identity ``credential`` vouches for; AuthError when it is malformed, signed with
    another key, made for another audience, or expired (or dated further ahead than clock skew
    explains). Says nothing about whether it was used before: that is :class:`ReplayCache`'s."""
    return verify_parts(key, credential, now, audience)[0]


def verify_parts(key: bytes, credential: str, now: float, audience: str) -> tuple[Identity, int, str]:
    """verify(), and the credential's expiry and nonce: what the replay cache keeps, and until when."""
    body, _, mac = credential.rpartition(".")
    parts = body.split(".")
    if len(parts) != 6 or parts[0] != VERSION or not all(p.isdigit() and len(p) <= 12 for p in parts[2:5]):
        raise AuthError("malformed credential")
    if not compare_digest(mac, _mac(key, body)):
        raise AuthError("credential not signed with this cluster's key")
    if parts[1] != audience:
        raise AuthError(f"credential made for {parts[1][:40]}, not for {audience}")
    uid, gid, expires = int(parts[2]), int(parts[3]), int(parts[4])
    if now > expires:
        raise AuthError("credential expired")
    if expires > now + 2 * TTL:
        raise AuthError("credential dated in the future (are the clocks apart?)")
    return Identity(uid, gid), expires, parts[5]


# HMAC-SHA256 (RFC 2104) over CPython's own SHA-256: ``hmac`` imports ``hashlib``, which loads OpenSSL,
# some 2.5 ms of every command's start for one small digest. The pads as hmac.py makes them.
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


def _sha256() -> type:
    try:
        from _sha256 import sha256  # CPython 3.11
    except ImportError:
        try:
            from _sha2 import sha256  # type: ignore[import-not-found,no-redef]  # CPython 3.12 on
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment]
    return sha256  # type: ignore[return-value]


def _mac(key: bytes, body: str) -> str:
    sha256 = _sha256()
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(key.translate(_IPAD) + body.encode()).digest()
    return str(sha256(key.translate(_OPAD) + inner).hexdigest())


def create_key(path: str) -> bool:
    """Write a new random key to ``path`` (mode 0600) unless one is there; True if written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(os.urandom(32).hex() + "\n")
    return True


def load_key(path: str) -> bytes:
    """The key in ``path``; AuthError saying why it cannot be read."""
    try:
        with open(path, "rb") as f:
            key = f.read().strip()
    except OSError as exc:
        raise AuthError(f"cannot read the cluster key {path}: {exc.strerror}") from None
    if len(key) < 32:
        raise AuthError(f"the cluster key {path} is too short (at least 32 bytes)")
    return key
