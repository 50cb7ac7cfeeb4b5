"""Credentials and the cluster key: pure functions over bytes and strings, and the replay cache."""

from __future__ import annotations

import hashlib
import heapq
import hmac
import os
import threading
from collections import namedtuple

VERSION = "p1"
TTL = 300  # seconds a credential is good for (MUNGE's default)


class AuthError(Exception):
    """A credential that cannot be made or does not check out; the message says why."""


class Identity(namedtuple("Identity", "uid gid")):
    """Who a credential vouches for. A named tuple, not a dataclass: every command signs one, and
    ``dataclasses`` (with ``inspect``) would add some 10 ms to each command's start."""

    uid: int
    gid: int


def sign(key: bytes, who: Identity, now: float, ttl: int = TTL) -> str:
    """``p1.<uid>.<gid>.<expires>.<nonce>.<hmac-sha256>``."""
    body = f"{VERSION}.{who.uid}.{who.gid}.{int(now) + ttl}.{os.urandom(8).hex()}"
    return f"{body}.{_mac(key, body)}"


def verify(key: bytes, credential: str, now: float) -> Identity:
    """The identity ``credential`` vouches for; AuthError when it is malformed, signed with
    another key, or expired (or dated further ahead than clock skew explains). Says nothing about
    whether it was used before: that is :class:`ReplayCache`'s."""
    return _checked(key, credential, now)[0]


def _checked(key: bytes, credential: str, now: float) -> tuple[Identity, int, str]:
    """verify(), and the credential's expiry and nonce."""
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
    return Identity(uid, gid), expires, parts[4]


REPLAY_CACHE_MAX = 500_000  # credentials remembered at most (~50 MB); hundreds of calls a second need far fewer


class ReplayCache:
    """Single use: remembers the nonce of every credential accepted until that credential expires,
    and refuses a credential whose nonce it has seen (MUNGE's replay cache), so that a credential
    captured on the wire is worth nothing. Memory is bounded: entries leave when their credential
    expires (at most ``2 * TTL`` ahead), and past ``max_entries`` live ones new credentials are
    refused rather than old ones forgotten (forgetting would let a replay through)."""

    def __init__(self, max_entries: int = REPLAY_CACHE_MAX) -> None:
        self.max_entries = max_entries
        self._seen: set[str] = set()
        self._by_expiry: dict[int, list[str]] = {}  # expiry second -> nonces that expire then
        self._expiries: list[int] = []  # heap of the keys of _by_expiry
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def verify_once(self, key: bytes, credential: str, now: float) -> Identity:
        """verify(), and refuse a credential already accepted (AuthError)."""
        who, expires, nonce = _checked(key, credential, now)
        with self._lock:
            self._forget_expired(now)
            if nonce in self._seen:
                raise AuthError("credential already used (credentials are single-use)")
            if len(self._seen) >= self.max_entries:
                raise AuthError("too many credentials in use at once: try again shortly")
            self._seen.add(nonce)
            bucket = self._by_expiry.get(expires)
            if bucket is None:
                bucket = self._by_expiry[expires] = []
                heapq.heappush(self._expiries, expires)
            bucket.append(nonce)
        return who

    def _forget_expired(self, now: float) -> None:
        # an expired credential is refused as expired: its nonce need not be kept
        while self._expiries and self._expiries[0] < now:
            for nonce in self._by_expiry.pop(heapq.heappop(self._expiries)):
                self._seen.discard(nonce)


def _mac(key: bytes, body: str) -> str:
    return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()


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
