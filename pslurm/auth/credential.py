"""Credentials and the cluster key: pure functions over bytes and strings, and the replay cache."""

from __future__ import annotations

import hashlib
import heapq
import hmac
import os
import threading
from collections import namedtuple

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


class Identity(namedtuple("Identity", "uid gid")):
    """Who a credential vouches for. A named tuple, not a dataclass: every command signs one, and
    ``dataclasses`` (with ``inspect``) would add some 10 ms to each command's start."""

    uid: int
    gid: int


def sign(key: bytes, who: Identity, now: float, ttl: int = TTL, audience: str = API) -> str:
    """``p2.<audience>.<uid>.<gid>.<expires>.<nonce>.<hmac-sha256>``."""
    body = f"{VERSION}.{audience}.{who.uid}.{who.gid}.{int(now) + ttl}.{os.urandom(8).hex()}"
    return f"{body}.{_mac(key, body)}"


def verify(key: bytes, credential: str, now: float, audience: str = API) -> Identity:
    """The identity ``credential`` vouches for; AuthError when it is malformed, signed with
    another key, made for another audience, or expired (or dated further ahead than clock skew
    explains). Says nothing about whether it was used before: that is :class:`ReplayCache`'s."""
    return _checked(key, credential, now, audience)[0]


def _checked(key: bytes, credential: str, now: float, audience: str) -> tuple[Identity, int, str]:
    """verify(), and the credential's expiry and nonce."""
    body, _, mac = credential.rpartition(".")
    parts = body.split(".")
    if len(parts) != 6 or parts[0] != VERSION or not all(p.isdigit() and len(p) <= 12 for p in parts[2:5]):
        raise AuthError("malformed credential")
    if not hmac.compare_digest(mac, _mac(key, body)):
        raise AuthError("credential not signed with this cluster's key")
    if parts[1] != audience:
        raise AuthError(f"credential made for {parts[1][:40]}, not for {audience}")
    uid, gid, expires = int(parts[2]), int(parts[3]), int(parts[4])
    if now > expires:
        raise AuthError("credential expired")
    if expires > now + 2 * TTL:
        raise AuthError("credential dated in the future (are the clocks apart?)")
    return Identity(uid, gid), expires, parts[5]


REPLAY_CACHE_MAX = 500_000  # credentials remembered at most (~50 MB); hundreds of calls a second need far fewer
REPLAY_PER_UID = 100_000  # of them one uid's at most: one user spending credentials fast cannot fill it for all


class ReplayCache:
    """Single use: remembers the nonce of every credential accepted until that credential expires,
    and refuses a credential whose nonce it has seen (MUNGE's replay cache), so that a credential
    captured on the wire is worth nothing. Memory is bounded: entries leave when their credential
    expires (at most ``2 * TTL`` ahead), and past ``max_entries`` live ones (``max_per_uid`` of
    one uid) new credentials are refused rather than old ones forgotten (forgetting would let a
    replay through). Each server has its own (the API's and the agents' gRPC apart, each agent's):
    a user who fills theirs stalls nobody else's path."""

    def __init__(self, max_entries: int = REPLAY_CACHE_MAX, max_per_uid: int = REPLAY_PER_UID) -> None:
        self.max_entries, self.max_per_uid = max_entries, max_per_uid
        self._seen: set[str] = set()
        self._per_uid: dict[int, int] = {}
        self._by_expiry: dict[int, list[tuple[str, int]]] = {}  # expiry second -> (nonce, uid) that expire then
        self._expiries: list[int] = []  # heap of the keys of _by_expiry
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def verify_once(self, key: bytes, credential: str, now: float, audience: str = API) -> Identity:
        """verify(), and refuse a credential already accepted (AuthError)."""
        who, expires, nonce = _checked(key, credential, now, audience)
        with self._lock:
            self._forget_expired(now)
            if nonce in self._seen:
                raise AuthError("credential already used (credentials are single-use)")
            held = self._per_uid.get(who.uid, 0)
            if len(self._seen) >= self.max_entries or held >= self.max_per_uid:
                raise AuthError("too many credentials in use at once: try again shortly")
            self._seen.add(nonce)
            self._per_uid[who.uid] = held + 1
            bucket = self._by_expiry.get(expires)
            if bucket is None:
                bucket = self._by_expiry[expires] = []
                heapq.heappush(self._expiries, expires)
            bucket.append((nonce, who.uid))
        return who

    def _forget_expired(self, now: float) -> None:
        # an expired credential is refused as expired: its nonce need not be kept
        while self._expiries and self._expiries[0] < now:
            for nonce, uid in self._by_expiry.pop(heapq.heappop(self._expiries)):
                self._seen.discard(nonce)
                left = self._per_uid.pop(uid, 1) - 1
                if left:
                    self._per_uid[uid] = left


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
