"""``pslurm dashboard``'s login link: a one-time code that the dashboard exchanges for its session.

A user whose commands work asks for a link (``POST /pslurm/v1/dashboard/link``, with the credential
every command sends); the controller answers with a URL holding a random code, good once and for
``CODE_TTL`` seconds, for that user. Opening it (``GET /dashboard/login/link?code=...``) spends the
code and answers with the session cookie the login page gives, then the dashboard. A code used
again, unknown or expired is refused with the login page and its reason. The link carries no
lasting secret: the code is worth nothing once used or a minute old, and it opens the dashboard
only (the cookie never opens the API). Codes live in psctld's memory (only their hashes), bounded in all and per user.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from pslurm.auth.credential import AuthError, Identity
from pslurm.controller.rest.routes import PSLURM, caller_of, json_reply
from pslurm.controller.rest.session import COOKIE, SESSION_TTL

if TYPE_CHECKING:
    from pslurm.controller.rest.observed import WebObservability

CODE_TTL = 60.0  # seconds a link opens the dashboard
MAX_CODES = 1000  # codes (unused and recently spent) kept at most: past it the oldest go
MAX_PER_USER = 8  # a user's unused codes at most: past it their oldest goes (nobody crowds out the others')
LINK_PATH = "/dashboard/login/link"  # under the login page's open prefix: no session needed to reach it
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _digest(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class LoginCodes:
    """One-time codes -> who asked them; a spent code is remembered (its hash) until its expiry, so
    that its reuse is refused as such."""

    def __init__(self, ttl: float = CODE_TTL, clock: Callable[[], float] = time.time,
                 max_codes: int = MAX_CODES) -> None:
        self.ttl, self.clock, self.max_codes = ttl, clock, max_codes
        self._codes: OrderedDict[str, tuple[Identity | None, float]] = OrderedDict()  # None: spent
        self._lock = threading.Lock()

    def issue(self, who: Identity) -> str:
        """A new code for ``who``."""
        code = secrets.token_urlsafe(24)
        now = self.clock()
        with self._lock:
            for key in [k for k, (_, expiry) in self._codes.items() if expiry < now]:
                del self._codes[key]
            mine = [k for k, (i, _) in self._codes.items() if i is not None and i.uid == who.uid]
            for key in mine[:max(0, len(mine) - MAX_PER_USER + 1)]:
                del self._codes[key]
            while len(self._codes) >= self.max_codes:
                self._codes.popitem(last=False)
            self._codes[_digest(code)] = (who, now + self.ttl)
        return code

    def redeem(self, code: str) -> Identity:
        """Who ``code`` was issued to, spending it; AuthError when it was spent, expired or never issued."""
        key = _digest(code)
        with self._lock:
            found = self._codes.get(key)
            if found is None:
                raise AuthError("this login link is not one this controller gave (or it is long expired)")
            who, expiry = found
            if who is None:
                raise AuthError("this login link was used already: run 'pslurm dashboard' for another")
            if expiry < self.clock():
                del self._codes[key]
                raise AuthError("this login link expired: run 'pslurm dashboard' for another")
            self._codes[key] = (None, expiry)
        return who


class DashboardLink:
    """The link's two routes: asking one (the API's, with a credential) and opening it (the dashboard's)."""

    def __init__(self, web_side: WebObservability, codes: LoginCodes | None = None) -> None:
        self.web, self.codes = web_side, codes or LoginCodes()

    def add_routes(self, app: web.Application, wrap: Callable[[Handler], Handler]) -> None:
        app.router.add_post(f"{PSLURM}/dashboard/link", wrap(self.link))
        app.router.add_get(LINK_PATH, self.enter)

    async def link(self, request: web.Request) -> web.StreamResponse:
        """``{"url", "expires_in"}``: the link, at the address the caller reached this controller by."""
        code = self.codes.issue(caller_of(request))
        return json_reply({"url": f"{request.scheme}://{request.host}{LINK_PATH}?code={code}",
                       "expires_in": int(self.codes.ttl)})

    async def enter(self, request: web.Request) -> web.StreamResponse:
        from pslurm.controller.rest import pages
        from pslurm.controller.rest.dashboard import Dashboard

        base = Dashboard.base(request)
        try:
            who = self.codes.redeem(request.query.get("code", "")[:100])
        except AuthError as exc:
            page = pages.login_page(base, f"Login refused: {exc}")
            return web.Response(status=401, text=page, content_type="text/html",
                                headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})
        response = web.HTTPSeeOther(base + "/")
        secure = request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"
        response.set_cookie(COOKIE, self.web.sessions.open(who), max_age=SESSION_TTL, path=base, httponly=True,
                            samesite="Strict", secure=secure)
        response.headers["Referrer-Policy"] = "no-referrer"  # the spent code stays out of the next page's Referer
        return response
