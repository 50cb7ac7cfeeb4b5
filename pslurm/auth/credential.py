"""Credentials and the cluster key: pure functions over bytes and strings."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

VERSION = "p1"
TTL = 300  # seconds a credential is good for (MUNGE's default)


class AuthError(Exception):
    """A credential that cannot be made or does not check out; the message says why."""


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int


def sign(key: bytes, who: Identity, now: float, ttl: int = TTL) -> str:
    """``p1.<uid>.<gid>.<expires>.<nonce>.<hmac-sha256>``."""
    body = f"{VERSION}.{who.uid}.{who.gid}.{int(now) + ttl}.{secrets.token_hex(8)}"
    return f"{body}.{_mac(key, body)}"


def verify(key: bytes, credential: str, now: float) -> Identity:
    """The identity ``credential`` vouches for; AuthError when it is malformed, signed with
    another key, or expired (or dated further ahead than clock skew explains)."""
    body, _, mac = credential.rpartition(".")
    parts = body.split(".")
    if len(parts) != 5 or parts[0] != VERSION or not all(p.isdigit() for p in parts[1:4]):
        raise AuthError("malformed credential")
    if not hmac.compare_digest(mac, _mac(key, body)):
        raise AuthError("credential not signed with this cluster's key")
    uid, gid, expires = int(parts[1]), int(parts[2]), int(parts[3])
    if now > expires:
        raise AuthError("credential expired")
    if expires > now + 2 * TTL:
        raise AuthError("credential dated in the future (are the clocks apart?)")
    return Identity(uid, gid)


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


def create_key(path: str) -> bool:
    """Write a new random key to ``path`` (mode 0600) unless one is there; True if written."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
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
