"""The HTTP server of the user API: aiohttp on its own asyncio loop, in its own thread of psctld.

Why this shape: a waiting client (psrun, ``psbatch -W``) is a coroutine parked on an event, not a
thread, so hundreds of them cost a few kilobytes each; blocking work (the store, the job service,
JSON of a long listing) runs on a small bounded pool, so a burst of requests cannot grow psctld's
threads. Every request's credential (``X-Pslurm-Cred``, single use) and declared size are checked
by a middleware before any handler runs, that is before the body is read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from aiohttp import web
from aiohttp.typedefs import Middleware

from pslurm.auth.credential import AuthError
from pslurm.auth.transport import MAX_REQUEST_BYTES, METADATA_KEY, Authenticator
from pslurm.controller.rest.routes import IDENTITY, Api, error_body

if TYPE_CHECKING:
    from pslurm.controller.rest.observed import WebObservability

log = logging.getLogger("psctld")
REST_WORKERS = 8  # threads for the API's blocking work (store reads and writes, conversions)
OPEN_PATHS = frozenset({"/openapi/v3"})  # served without a credential: it says nothing about the cluster
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _refusal(request: web.Request, status: int, message: str) -> web.Response:
    """An error answered without reading the body; the connection is closed after it, so that
    the unread body is never read either."""
    response = web.Response(status=status, body=json.dumps(error_body(message, status, request.path)).encode(),
                            content_type="application/json")
    response.force_close()
    return response


def guard_middleware(auth: Authenticator, checked_elsewhere: Callable[[str], bool] = lambda path: False
                     ) -> Middleware:
    """``checked_elsewhere``: paths whose callers another middleware checks (metrics, the dashboard)."""
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in OPEN_PATHS and not checked_elsewhere(request.path):
            credential = request.headers.get(METADATA_KEY, "")
            try:  # an HMAC and a set lookup: cheap enough for the loop itself
                request[IDENTITY] = auth.admit(((METADATA_KEY, credential),) if credential else ())
            except AuthError as exc:
                return _refusal(request, 401, f"authentication failed: {exc}")
        length = request.content_length
        if length is not None and length > MAX_REQUEST_BYTES:
            return _refusal(request, 413, f"request too large: {length} bytes (at most {MAX_REQUEST_BYTES})")
        return await handler(request)

    return guard


class RestServer:
    """The API's server: :meth:`start` binds ``host:port`` (raising OSError when it cannot) and
    serves from a thread of its own until :meth:`stop`."""

    def __init__(self, api: Api, auth: Authenticator, host: str, port: int, workers: int = REST_WORKERS,
                 observed: WebObservability | None = None) -> None:
        self.api, self.auth, self.host, self.port = api, auth, host, port
        self.observed = observed  # metrics and the dashboard (observed.py), with their own callers' checks
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rest")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    def make_app(self) -> web.Application:
        observed = self.observed
        middlewares = [guard_middleware(self.auth, observed.owns if observed is not None else lambda path: False)]
        if observed is not None:
            middlewares.insert(0, observed.middleware())
        app = web.Application(middlewares=middlewares, client_max_size=MAX_REQUEST_BYTES)
        self.api.add_routes(app, self.executor)
        if observed is not None:
            observed.add_routes(app, self.executor)
        return app

    def start(self) -> None:
        loop = asyncio.new_event_loop()
        started: dict[str, BaseException | None] = {"error": None}
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve())
            except BaseException as exc:  # noqa: BLE001 - handed to start()'s caller
                started["error"] = exc
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._cleanup())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="rest", daemon=True)
        self._thread.start()
        ready.wait()
        if started["error"] is not None:
            self._thread.join()
            raise started["error"]

    async def _serve(self) -> None:
        # handler_cancellation: a client that goes away (a waiter, an output stream) ends its handler at once
        self._runner = web.AppRunner(self.make_app(), handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, reuse_port=False)
        await site.start()

    async def _cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        await self.api.close()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        self.executor.shutdown(wait=False, cancel_futures=True)
