"""The servers' replay cache: each credential is good once (MUNGE's replay cache). Apart from
:mod:`pslurm.auth.credential`, which every command imports: only the servers need it."""

from __future__ import annotations

import heapq
import threading

from pslurm.auth.credential import API, AuthError, Identity, verify_parts

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
        who, expires, nonce = verify_parts(key, credential, now, audience)
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
