"""The HTTP side of observability: every request timed (by route, not by URL: a bounded set of
labels), the ``/metrics`` endpoints, and who a dashboard or metrics request is.

The API's own guard (``server.py``) takes only ``X-Pslurm-Cred``; the paths here take more, so they
are let through it (:meth:`WebObservability.owns`) and checked here instead:

- ``/metrics``: a credential, a token (``Authorization: Bearer``, for Prometheus), or a dashboard
  session; nothing when pslurm.conf opens them (``observe.metrics_open``); operators only under
  PrivateData=jobs, usage or users (controller/privatedata.py);
- ``/dashboard``: its session cookie (``session.py``); only the login page and the static files
  are open.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from aiohttp import web
from aiohttp.typedefs import Middleware

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.transport import METADATA_KEY, Authenticator
from pslurm.controller.observe import ENDPOINTS, Observer
from pslurm.controller.rest.routes import IDENTITY, Api, viewer
from pslurm.controller.rest.session import COOKIE, JwtCheck, Sessions, no_jwt, token_identity

METRICS, DASHBOARD = "/metrics", "/dashboard"
OPEN_DASHBOARD = ("/dashboard/login", "/dashboard/static/")  # the login page and the stylesheet and script
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


class WebObservability:
    """The middleware and routes of metrics and the dashboard, over the controller's parts."""

    def __init__(self, observer: Observer, auth: Authenticator, api: Api, jwt: JwtCheck = no_jwt) -> None:
        from pslurm.controller.rest.dashboard import Dashboard

        self.observer, self.auth, self.api, self.jwt = observer, auth, api, jwt
        self.sessions = Sessions()
        self.dashboard = Dashboard(api, observer, self)
        self.executor: Executor | None = None

    @staticmethod
    def owns(path: str) -> bool:
        """The paths whose callers this module checks (the API's guard lets them through)."""
        return _under(path, METRICS) or _under(path, DASHBOARD)

    def login(self, token: str) -> Identity:
        """A login's token -> who it is (AuthError when it does not check out)."""
        return token_identity(self.auth, token, self.jwt)

    def session_identity(self, request: web.Request) -> Identity | None:
        sid = request.cookies.get(COOKIE, "")
        return self.sessions.identity(sid) if sid else None

    def _caller(self, request: web.Request) -> Identity | None:
        """A metrics reader: a credential, a bearer token or a dashboard session (None: none given).
        AuthError when one was given and does not check out."""
        credential = request.headers.get(METADATA_KEY, "")
        if credential:
            return self.auth.admit(((METADATA_KEY, credential),))
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token:
            return token_identity(self.auth, token, self.jwt)
        return self.session_identity(request)

    def middleware(self) -> Middleware:
        record = self.observer.measurements.http.record

        @web.middleware
        async def observed(request: web.Request, handler: Handler) -> web.StreamResponse:
            began = time.perf_counter()
            resource = request.match_info.route.resource
            labels = (("method", request.method), ("route", resource.canonical if resource is not None else "other"))
            status = 500
            try:
                refused = self._admit(request)
                response = refused if refused is not None else await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                record(labels, str(status), time.perf_counter() - began)

        return observed

    def _admit(self, request: web.Request) -> web.StreamResponse | None:
        """Sets the caller of an owned path, or returns its refusal; None for the API's own paths."""
        path = request.path
        if _under(path, METRICS):
            try:
                who = self._caller(request)
            except AuthError as exc:
                return _unauthorized(f"authentication failed: {exc}")
            if who is None and not self.observer.open:
                return _unauthorized("authentication failed: metrics need a credential, a token "
                                     "(Authorization: Bearer) or a dashboard session")
            if who is not None:
                request[IDENTITY] = who
                if not viewer(self.api, who.uid).metrics():  # as Slurm, which disables them with PrivateData
                    response = web.Response(status=403, text="Access/permission denied: PrivateData="
                                            f"{','.join(sorted(self.api.private))} leaves metrics to operators\n")
                    response.force_close()
                    return response
        elif _under(path, DASHBOARD) and not path.startswith(OPEN_DASHBOARD):
            who = self.session_identity(request)
            if who is None:
                return self.dashboard.not_logged_in(request)
            request[IDENTITY] = who
        return None

    def add_routes(self, app: web.Application, executor: Executor) -> None:
        self.executor = executor
        app.router.add_get(METRICS, self.index)
        app.router.add_get(METRICS + "/{endpoint}", self.metrics)
        self.dashboard.add_routes(app, executor)

    async def index(self, request: web.Request) -> web.StreamResponse:
        """What Slurm's ``GET /metrics`` prints: the endpoints there are."""
        return web.Response(text="".join(f"{METRICS}/{name}\n" for name in ENDPOINTS), content_type="text/plain")

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        endpoint = request.match_info["endpoint"]
        if endpoint not in ENDPOINTS:
            raise web.HTTPNotFound(text=f"no metrics endpoint {endpoint}: {', '.join(ENDPOINTS)}")
        openmetrics = "application/openmetrics-text" in request.headers.get("Accept", "")
        writer = await asyncio.get_running_loop().run_in_executor(
            self.executor, lambda: self.observer.exposition(endpoint, openmetrics))
        return web.Response(body=writer.text().encode(), headers={"Content-Type": writer.content_type})


def _unauthorized(message: str) -> web.Response:
    response = web.Response(status=401, text=message + "\n", headers={"WWW-Authenticate": 'Bearer realm="pslurm"'})
    response.force_close()
    return response
