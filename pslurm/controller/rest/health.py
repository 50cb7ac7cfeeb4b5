"""``/livez``, ``/healthz``, ``/readyz`` as Slurm 25.11's slurmrestd answers them (src/slurmrestd/http.c),
and ``/``: where a browser pointed at the API port lands (the dashboard).

No credential is needed (a load balancer's or Kubernetes' probe has none): ``204 No Content`` when
the probe passes, ``500`` when it fails, no body. ``/livez`` and ``/healthz``: the process serves.
``/readyz``: this controller is the active one and its store answers (a controller standing by, or
one whose database is unreachable, is not ready: 500). ``/readyz?verbose`` says each probe in a
line of text, to root and the SlurmUser only (a credential or a token; 401 without, 403 for
another user), as slurmrestd's does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from aiohttp import web

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.jwt import TOKEN_HEADER, TokenCheck
from pslurm.auth.transport import METADATA_KEY, Authenticator
from pslurm.core.states import JobState

log = logging.getLogger("psctld")
HEALTH_PATHS = frozenset({"/livez", "/healthz", "/readyz"})
ROOT_PATHS = frozenset({"/"}) | HEALTH_PATHS  # served without a credential
Probe = tuple[str, bool, str]  # name, passed, what it found
PROBE_REUSE = 1.0  # seconds a readiness answer is reused


def probes(api: Any) -> Callable[[], list[Probe]]:
    """The readiness probes of what the server serves: an active controller's Api (its role and store)
    or a standing-by one's StandbyApi (its role: its lease's database)."""
    role = getattr(api, "role", None)
    store = getattr(getattr(api, "service", None), "store", None)

    def run() -> list[Probe]:
        found: list[Probe] = []
        if role is not None:
            answer = role.ping()
            found.append(("controller", answer["mode"] == "active", f"{answer['name']} is {answer['mode']}"))
            found.append(("database", answer["database"] == "ok", answer["database"]))
        if store is not None:
            try:
                store.count_active(states=[JobState.PENDING])
                found.append(("store", True, "ok"))
            except Exception as exc:  # noqa: BLE001 - any failure of the store is the answer
                log.warning("readyz: the store did not answer: %s", exc)
                found.append(("store", False, f"unreachable: {type(exc).__name__}"))
        return found

    return run


class Health:
    """The probes' routes and the root's redirect (RestServer registers them before the API's)."""

    def __init__(self, api: Any, auth: Authenticator, tokens: TokenCheck | None, operators: frozenset[int],
                 dashboard: bool) -> None:
        self.probes, self.auth, self.tokens, self.operators = probes(api), auth, tokens, operators
        self.dashboard = dashboard
        self.executor: Executor | None = None
        self._found: tuple[float, list[Probe]] | None = None  # the last probes' answer and when
        self._probing: asyncio.Lock | None = None  # made on the server's loop

    def add_routes(self, app: web.Application, executor: Executor) -> None:
        self.executor = executor
        for path in ("/livez", "/healthz"):
            app.router.add_get(path, self.live)
        app.router.add_get("/readyz", self.ready)
        app.router.add_get("/", self.root)

    async def live(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=204)

    async def ready(self, request: web.Request) -> web.StreamResponse:
        verbose = request.query_string.lower() == "verbose"
        if verbose:
            refused = self._refusal(request)
            if refused is not None:
                return refused
        found = await self._probe()
        ready = all(ok for _, ok, _ in found)
        if not verbose:
            return web.Response(status=204 if ready else 500)
        text = "".join(f"{name}: {'ready' if ok else 'not ready'} ({what})\n" for name, ok, what in found)
        return web.Response(status=200 if ready else 500, text=text)

    async def _probe(self) -> list[Probe]:
        """The probes' answer: one run at a time, reused for PROBE_REUSE seconds, so that a flood of
        unauthenticated probes costs the store one read a second and holds one thread of the pool."""
        loop = asyncio.get_running_loop()
        if self._probing is None:
            self._probing = asyncio.Lock()
        async with self._probing:
            if self._found is not None and loop.time() - self._found[0] < PROBE_REUSE:
                return self._found[1]
            try:
                found = await loop.run_in_executor(self.executor, self.probes)
            except Exception as exc:  # noqa: BLE001 - a probe that fails is not ready
                found = [("controller", False, f"{type(exc).__name__}")]
            self._found = (loop.time(), found)
            return found

    def _refusal(self, request: web.Request) -> web.StreamResponse | None:
        """None when the caller may see the verbose probes (root or the SlurmUser), else slurmrestd's refusal."""
        try:
            who = self._caller(request)
        except AuthError as exc:
            return self._error(request, 401, f"Authentication failure: {exc}")
        if who.uid not in self.operators:
            return self._error(request, 403, "Access/permission denied")
        return None

    def _caller(self, request: web.Request) -> Identity:
        if self.tokens is not None and TOKEN_HEADER in request.headers:
            return self.tokens.admit(request.headers)
        credential = request.headers.get(METADATA_KEY, "")
        return self.auth.admit(((METADATA_KEY, credential),) if credential else ())

    @staticmethod
    def _error(request: web.Request, status: int, why: str) -> web.Response:
        return web.Response(status=status, text=f"slurmrestd HTTP server request for '{request.method} "
                                                f"{request.path}':\nFailed: {why}\n")

    async def root(self, request: web.Request) -> web.StreamResponse:
        """A browser at the API port: to the dashboard (behind a proxy, under its X-Forwarded-Prefix)."""
        if not self.dashboard:
            return web.Response(status=404, text="Unable to find requested URL endpoint. Please query the "
                                                 "'/openapi/v3' endpoint for the OpenAPI specification.")
        from pslurm.controller.rest.dashboard import Dashboard

        raise web.HTTPFound(Dashboard.base(request) + "/")
