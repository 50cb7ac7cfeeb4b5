"""Who a dashboard or metrics request is: a login's token exchanged for a session, kept in memory.

A user logs in once with a token: the signed credential the commands send (``X-Pslurm-Cred``'s
text, single use, five minutes) or a JWT from ``pscontrol token`` (:func:`token_identity`, the one
place that checks either). The controller answers with a random session id in an HttpOnly,
SameSite=Strict cookie; the session says who the user is for ``SESSION_TTL`` seconds. A cookie is
good for the dashboard's own paths only, never for the API's (which take only credentials), so a
page of another site cannot act through it.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from pslurm.auth.credential import VERSION, AuthError, Identity
from pslurm.auth.transport import METADATA_KEY, Authenticator

COOKIE = "pslurm_session"
SESSION_TTL = 8 * 3600  # a working day
MAX_SESSIONS = 10_000  # sessions kept at most: past it the least recently used one goes
MAX_PER_USER = 16  # a user's sessions at most (browsers, machines): past it their oldest goes
MAX_TOKEN = 8192  # bytes of a token at login

# A JWT from `pscontrol token` (HS256: auth/jwt.py's TokenCheck.identity, wired in app.py).
# It takes the token and now, and returns the identity or raises AuthError.
JwtCheck = Callable[[str, float], Identity]


def no_jwt(token: str, now: float) -> Identity:
    """The JWT check of a controller with no AuthAltTypes=auth/jwt: it refuses every token."""
    raise AuthError("this controller takes pslurm's signed credential at login (tokens: not configured)")


def token_identity(auth: Authenticator, token: str, jwt: JwtCheck = no_jwt,
                   clock: Callable[[], float] = time.time) -> Identity:
    """Who ``token`` vouches for: a pslurm credential (spent: single use) or a JWT. AuthError saying why not."""
    token = token.strip()
    if not token or len(token) > MAX_TOKEN:
        raise AuthError("no token given" if not token else "token too long")
    if token.startswith(f"{VERSION}."):
        return auth.admit(((METADATA_KEY, token),))
    return jwt(token, clock())


def token_expiry(token: str) -> float | None:
    """When a JWT that :func:`token_identity` admitted expires (None for a pslurm credential, or a
    token without ``exp``): a session it opens ends no later."""
    token = token.strip()
    if token.startswith(f"{VERSION}.") or token.count(".") != 2:
        return None
    payload = token.split(".")[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    return float(exp) if isinstance(exp, (int, float)) else None


class Sessions:
    """Session id -> (identity, expiry); bounded in all and per user."""

    def __init__(self, ttl: float = SESSION_TTL, max_sessions: int = MAX_SESSIONS, max_per_user: int = MAX_PER_USER,
                 clock: Callable[[], float] = time.time) -> None:
        self.ttl, self.max_sessions, self.max_per_user, self.clock = ttl, max_sessions, max_per_user, clock
        self._sessions: OrderedDict[str, tuple[Identity, float]] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, who: Identity, until: float | None = None) -> str:
        """A new session for ``who``, to ``until`` at the latest (a token's expiry); its id (the cookie's value)."""
        sid = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            mine = [s for s, (i, _) in self._sessions.items() if i.uid == who.uid]
            for old in mine[:max(0, len(mine) - self.max_per_user + 1)]:
                del self._sessions[old]
            while len(self._sessions) >= self.max_sessions:
                self._sessions.popitem(last=False)
            self._sessions[sid] = (who, now + self.ttl if until is None else min(now + self.ttl, until))
        return sid

    def identity(self, sid: str) -> Identity | None:
        """Who the session is, or None (unknown or expired)."""
        with self._lock:
            found = self._sessions.get(sid)
            if found is None:
                return None
            if found[1] < self.clock():
                del self._sessions[sid]
                return None
            self._sessions.move_to_end(sid)
            return found[0]

    def close(self, sid: str) -> None:
        with self._lock:
            self._sessions.pop(sid, None)
