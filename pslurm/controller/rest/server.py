"""The HTTP server of the user API: aiohttp on its own asyncio loop, in its own thread of psctld.

Why this shape: a waiting client (psrun, ``psbatch -W``) is a coroutine parked on an event, not a
thread, so hundreds of them cost a few kilobytes each; blocking work (the store, the job service,
JSON of a long listing) runs on a small bounded pool, so a burst of requests cannot grow psctld's
threads. Every request's credential (``X-Pslurm-Cred``, single use) and declared size are checked
by a middleware before any handler runs, that is before the body is read.

What one user may take of it (controller/limits.py, docs/security.md), so that nobody starves another:

- connections: at most ``conmgr_max_connections`` (under the process's descriptors: accept() never
  fails for want of one); a connection past it takes the place of the oldest one that has no request
  being handled (an idle or half-sent one), or, when every one is busy, is answered 503 and closed;
- time: a request's head must arrive within ``conmgr_read_timeout`` of the connection's start (or
  of its last reply), its body within as long again, else the connection is closed (408 for a body);
- requests: at most ``MaxRequestsPerUser`` of one user's in flight and ``MaxStreamsPerUser`` streams
  open (waits, output, input), optionally ``rl_*``'s token bucket; past them 429 with Slurm's words
  ("Rate limit exceeded, please retry momentarily"), which the client waits on and retries;
- threads: one user's requests hold at most half of the pool's threads at once (the others wait).

The dashboard and metrics (rest/observed.py says who their callers are) are bounded alike: their
requests count against their caller's share, or, with none (the login page, open metrics), against
their address's; their bodies are forms, at most ``MAX_FORM_BYTES`` with a Content-Length.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol

from aiohttp import web
from aiohttp.typedefs import Middleware
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from pslurm.auth.credential import AuthError, Identity
from pslurm.auth.jwt import TOKEN_EXPIRES, TOKEN_HEADER, TokenCheck
from pslurm.auth.ratelimit import TokenBuckets
from pslurm.auth.transport import MAX_REQUEST_BYTES, METADATA_KEY, Authenticator
from pslurm.controller.limits import ServerLimits
from pslurm.controller.rest.health import ROOT_PATHS, Health
from pslurm.controller.rest.routes import IDENTITY, ROUTES, error_body

if TYPE_CHECKING:
    from pslurm.controller.rest.observed import WebObservability

log = logging.getLogger("psctld")
SHUTDOWN_GRACE = 1.0  # seconds a stopping server gives the requests under way
LINGER = 0.5  # seconds a refused request's body is still read (and dropped) before its connection closes
# served without a credential: they say nothing about the cluster (health.py: the probes and the root's redirect)
OPEN_PATHS = frozenset({"/openapi/v3"}) | ROOT_PATHS
MAX_FORM_BYTES = 16 * 1024  # a body on a path but the API's (the dashboard's login: a token of at most 8 KiB)
# the routes whose handler lasts as long as what it follows: a job's or step's updates, output, input
STREAMS = frozenset((r.method, r.path) for r in ROUTES if r.streams or r.body.startswith("bytes"))
RATE_LIMITED = "Rate limit exceeded, please retry momentarily"  # slurm_strerror(SLURMCTLD_COMMUNICATIONS_BACKOFF)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Content-Length: %d\r\n\r\n%b")


class Routes(Protocol):
    """What the server serves: the API's routes (routes.Api), or a standing-by controller's (standby.StandbyApi)."""

    def add_routes(self, app: web.Application, executor: Executor) -> None: ...

    async def close(self) -> None: ...


def _refusal(request: web.Request, status: int, message: str) -> web.Response:
    """An error answered without reading the body; the connection is closed after it, so that
    the unread body is never read either."""
    response = web.Response(status=status, body=json.dumps(error_body(message, status, request.path)).encode(),
                            content_type="application/json")
    response.force_close()
    return response


class Gate:
    """What each user has in flight (requests, streams, the pool's threads), the connections being
    handled, and the per-user token buckets; used on the API's loop only."""

    def __init__(self, limits: ServerLimits, operators: frozenset[int]) -> None:
        self.limits, self.operators = limits, operators
        # keyed by uid, or by an anonymous caller's address (server._anonymous)
        self.requests: dict[int | str, int] = {}
        self.streams: dict[int | str, int] = {}
        self.threads: dict[int | str, asyncio.Semaphore] = {}
        self.busy: set[RequestHandler] = set()  # connections with a request being handled
        self.buckets = (TokenBuckets(limits.refill_rate / limits.refill_period, limits.bucket_size)
                        if limits.rate_limit else None)

    def over(self, who: int | str, stream: bool) -> str | None:
        """Why ``who`` (a uid, or an anonymous caller's address) may not start another request now
        (None: they may); operators are not limited."""
        if who in self.operators:
            return None
        if self.buckets is not None and not self.buckets.take(who):
            return RATE_LIMITED
        held, limit = (self.streams, self.limits.streams_per_user) if stream else \
            (self.requests, self.limits.requests_per_user)
        return RATE_LIMITED if held.get(who, 0) >= limit else None


def guard_middleware(auth: Authenticator, gate: Gate, checked_elsewhere: Callable[[str], bool] = lambda path: False,
                     tokens: TokenCheck | None = None) -> Middleware:
    """``checked_elsewhere``: paths whose callers another middleware checks (metrics, the dashboard):
    it sets the caller (or none, on the login page and open metrics) and this one bounds them as the
    API's own; ``tokens``: slurmrestd's JWT (X-SLURM-USER-TOKEN, auth/jwt.py) admitted beside the credential."""
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        own = request.path not in OPEN_PATHS and not checked_elsewhere(request.path)
        if own:
            credential = request.headers.get(METADATA_KEY, "")
            try:  # an HMAC and a set lookup: cheap enough for the loop itself
                if tokens is not None and TOKEN_HEADER in request.headers:  # slurmrestd's JWT (auth/jwt.py)
                    request[IDENTITY], request[TOKEN_EXPIRES] = tokens.admitted(request.headers)
                else:
                    request[IDENTITY] = auth.admit(((METADATA_KEY, credential),) if credential else ())
            except AuthError as exc:
                return _refusal(request, 401, f"authentication failed: {exc}")
        most = MAX_REQUEST_BYTES if own else MAX_FORM_BYTES
        length = request.content_length
        if length is not None and length > most:
            return _refusal(request, 413, f"request too large: {length} bytes (at most {most})")
        if length is None and request.body_exists and not own:  # a form is sent whole: no chunked bodies here
            return _refusal(request, 411, "a body here needs its Content-Length")
        who: Identity | None = request.get(IDENTITY)
        return await _limited(request, handler, gate, who.uid if who is not None else _anonymous(request))

    return guard


def _anonymous(request: web.Request) -> str:
    """Whose share a request without a caller (the login page, open metrics) counts against: its
    address's (all of a host's anonymous requests are one user to the limits)."""
    peer = request.transport.get_extra_info("peername") if request.transport is not None else None
    return f"anonymous {peer[0] if isinstance(peer, tuple) and peer else '?'}"


async def _limited(request: web.Request, handler: Handler, gate: Gate, who: int | str) -> web.StreamResponse:
    """``handler`` within the share of ``who`` (a uid, or an anonymous caller's address): refused
    past their limits, its body read within the read timeout (a stream's is its own), their
    requests on at most half of the pool's threads."""
    route = request.match_info.route.resource
    stream = (request.method, route.canonical if route is not None else "") in STREAMS
    why = gate.over(who, stream)
    if why is not None:
        response = _refusal(request, 429, why)
        response.headers["Retry-After"] = "1"
        return response
    held = gate.streams if stream else gate.requests
    held[who] = held.get(who, 0) + 1
    gate.busy.add(request.protocol)
    try:
        if stream:
            return await handler(request)
        if request.body_exists:
            try:  # read here, within the deadline; the handler gets it from aiohttp's cache
                await asyncio.wait_for(request.read(), gate.limits.read_timeout)
            except TimeoutError:
                return _refusal(request, 408, f"request timeout: the body did not arrive within "
                                              f"{gate.limits.read_timeout:g} s")
            except web.HTTPRequestEntityTooLarge:  # a chunked body past the bound
                return _refusal(request, 413, f"request too large (at most {MAX_REQUEST_BYTES} bytes)")
        if who in gate.operators:
            return await handler(request)
        threads = gate.threads.get(who)
        if threads is None:
            threads = gate.threads[who] = asyncio.Semaphore(gate.limits.threads_per_user)
        async with threads:
            return await handler(request)
    finally:
        gate.busy.discard(request.protocol)
        left = held.get(who, 1) - 1
        if left:
            held[who] = left
        else:
            held.pop(who, None)
            if not stream and not gate.requests.get(who):
                gate.threads.pop(who, None)


class _Handler(RequestHandler):
    """aiohttp's connection handler, its own refusals (a request line past 8190 bytes, a malformed
    head, a handler's fault) answered as the API answers: JSON with one short line."""

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if status >= 500:
            self.log_exception("Error handling request", exc_info=exc)  # bounded by core.ratelog
            line = "internal error (see the controller's log)"
        else:
            line = " ".join(str(getattr(exc, "message", None) or message or exc or "bad request").split())
            line = f"Invalid request: {line[:120]}"
        if request.writer.output_size > 0:
            raise ConnectionError("the reply had begun: no error reply can follow")
        response = web.Response(status=status, body=json.dumps(error_body(line, status, "")).encode(),
                                content_type="application/json")
        response.force_close()
        return response


class _Connection(asyncio.Protocol):
    """An accepted connection: aiohttp's handler, seen by the server's count from its accept (aiohttp
    counts a connection only once the loop has made it, after a whole burst of accepts) to its end."""

    def __init__(self, handler: RequestHandler, open_now: dict[_Connection, None]) -> None:
        self.handler, self._open = handler, open_now
        self._transport: asyncio.BaseTransport | None = None
        self._evicted = False
        open_now[self] = None

    def evict(self) -> None:
        """Close it (now, or as soon as it is made) to make room for a new one."""
        self._open.pop(self, None)
        self._evicted = True
        if self._transport is not None:
            self.handler.force_close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self.handler.connection_made(transport)
        if self._evicted:
            self.handler.force_close()

    def data_received(self, data: bytes) -> None:
        self.handler.data_received(data)

    def eof_received(self) -> None:
        self.handler.eof_received()

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._open.pop(self, None)
        self.handler.connection_lost(exc)


class _Busy(asyncio.Protocol):
    """A connection past the limit when every open one is handling a request: 503, closed."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        body = json.dumps(error_body("too many connections to the controller: try again shortly", 503, "")).encode()
        transport.write(_BUSY % (len(body), body))  # type: ignore[attr-defined]
        transport.close()


class RestServer:
    """The API's server: :meth:`start` binds ``host:port`` (raising OSError when it cannot) and
    serves from a thread of its own until :meth:`stop`."""

    def __init__(self, api: Routes, auth: Authenticator, host: str, port: int, limits: ServerLimits | None = None,
                 operators: frozenset[int] = frozenset({0}), observed: WebObservability | None = None,
                 tokens: TokenCheck | None = None) -> None:
        self.api, self.auth, self.host, self.port, self.tokens = api, auth, host, port, tokens
        self.limits = limits or ServerLimits()
        self.gate = Gate(self.limits, operators)
        self.observed = observed  # metrics and the dashboard (observed.py), with their own callers' checks
        self.executor = ThreadPoolExecutor(max_workers=self.limits.threads, thread_name_prefix="rest")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self._open: dict[_Connection, None] = {}  # the connections open, oldest first
        self._thread: threading.Thread | None = None

    def make_app(self) -> web.Application:
        observed = self.observed
        middlewares = [guard_middleware(self.auth, self.gate,
                                        observed.owns if observed is not None else lambda path: False, self.tokens)]
        if observed is not None:
            middlewares.insert(0, observed.middleware())
        app = web.Application(middlewares=middlewares, client_max_size=MAX_REQUEST_BYTES)
        health = Health(self.api, self.auth, self.tokens, self.gate.operators, dashboard=observed is not None)
        health.add_routes(app, self.executor)  # first: before a standing-by controller's catch-all refusal
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
        # handler_cancellation: a client that goes away (a waiter, an output stream) ends its handler at once;
        # keepalive_timeout: a connection without a whole request's head that long (since it opened, or since
        # its last reply: idle, half-sent, or sent a byte at a time) is closed
        # (the connections' handlers are made by _connection, with the same options);
        # shutdown_timeout: a stopping controller (one that lost its lease, too) cuts the requests under way
        # at once, so their clients go to the next controller rather than wait for a reply that never comes
        self._runner = web.AppRunner(self.make_app(), handler_cancellation=True, access_log=None,
                                     keepalive_timeout=self.limits.read_timeout, shutdown_timeout=SHUTDOWN_GRACE)
        await self._runner.setup()
        self._listener = await asyncio.get_running_loop().create_server(
            self._connection, self.host, self.port, reuse_address=True, backlog=512)

    def _connection(self) -> asyncio.Protocol:
        """A new connection's protocol, within the connection limit (see the module's doc)."""
        server = self._runner.server if self._runner is not None else None
        assert server is not None
        if len(self._open) >= self.limits.max_connections:
            idle = next((c for c in self._open if c.handler not in self.gate.busy), None)  # the oldest first
            if idle is None:
                return _Busy()
            idle.evict()
        # a request refused before its body (413, 408, 401) has what comes of that body read and dropped for
        # LINGER seconds, not aiohttp's 10: a client that sends its whole body before it reads (http.client)
        # still gets its 413 rather than a broken pipe, and a body held back is cut within LINGER
        handler = _Handler(server, loop=asyncio.get_running_loop(), keepalive_timeout=self.limits.read_timeout,
                           access_log=None, lingering_time=LINGER)  # type: ignore[arg-type]  # None: no access log
        return _Connection(handler, self._open)

    async def _cleanup(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.api.close()

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
        self.executor.shutdown(wait=False, cancel_futures=True)
