"""The web dashboard's handlers: the cluster, the queue, a job, usage; login and logout.

Every page reads one page of what it shows (50 nodes, 50 jobs) from the parts, on the API's pool,
and renders it with :mod:`pages`. A user sees what the commands show them: every node and job (as
psqueue and psinfo), a job's output only when it is theirs (or they are an operator).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import grpc.aio
from aiohttp import web

from pslurm.auth.credential import AuthError
from pslurm.controller.observe import Observer
from pslurm.controller.privatedata import DENIED
from pslurm.controller.rest import access, pages
from pslurm.controller.rest.charts import Line, line_chart
from pslurm.controller.rest.routes import IDENTITY, Api
from pslurm.controller.rest.routes import viewer as routes_viewer
from pslurm.controller.rest.session import COOKIE, SESSION_TTL, token_expiry
from pslurm.controller.store.stats import QUEUE, RECENT, gpu_hours, job_page
from pslurm.core.states import FINAL_STATES, JobState

if TYPE_CHECKING:
    from pslurm.auth.credential import Identity
    from pslurm.controller.rest.session import Sessions

    class WebObservability(Protocol):
        """What the dashboard uses of rest.observed.WebObservability (its login and sessions)."""

        sessions: Sessions

        def login(self, token: str) -> Identity: ...

T = TypeVar("T")
PAGE_SIZE = 50
TAIL_BYTES = 16 * 1024  # the end of a job's output a page shows
TAIL_TIMEOUT = 3.0  # seconds an agent has to answer a tail (it reads a regular file, or refuses at once)
MAX_PAGE = 100_000  # a page number past this is refused (a listing of 100,000 jobs has 2,000 pages)
_PREFIX = re.compile(r"^(/[A-Za-z0-9._~-]+)*$")  # X-Forwarded-Prefix: a plain path, or nothing
STATIC_TYPES = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}
QUEUE_STATES: dict[str, tuple[Sequence[JobState], str]] = {
    "active": ((JobState.PENDING, JobState.RUNNING, JobState.COMPLETING), QUEUE),
    "pending": ((JobState.PENDING,), QUEUE),
    "running": ((JobState.RUNNING, JobState.COMPLETING), QUEUE),
    "finished": (tuple(sorted(FINAL_STATES, key=lambda s: s.value)), RECENT),
    "all": ((), RECENT),
}


def _page_number(request: web.Request) -> int:
    text = request.query.get("page", "1")
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE:
        raise web.HTTPBadRequest(text=f"Invalid page: {text[:20]}")
    return int(text)


def _pages(total: int, number: int) -> pages.Page:
    return pages.Page(number, max(1, math.ceil(total / PAGE_SIZE)), total)


def _day(text: str, default: float, end_of_day: bool) -> float:
    """``YYYY-MM-DD`` (local time) -> its start, or its end with ``end_of_day``."""
    if not text:
        return default
    try:
        day = time.strptime(text, "%Y-%m-%d")
    except ValueError:
        raise web.HTTPBadRequest(text=f"Invalid date: {text[:20]} (YYYY-MM-DD)") from None
    return time.mktime(day) + (86400 if end_of_day else 0)


def month_start(now: float) -> float:
    t = time.localtime(now)
    return time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1))


class Dashboard:
    """The pages, over the parts the API holds (``api``) and the observer's GPU history."""

    def __init__(self, api: Api, observer: Observer, web_side: WebObservability) -> None:
        self.api, self.observer, self.web = api, observer, web_side
        self.executor: Executor | None = None

    def add_routes(self, app: web.Application, executor: Executor) -> None:
        self.executor = executor
        root = "/dashboard"
        app.router.add_get(root, self.root)
        for path, handler in (("/", self.cluster), ("/queue", self.queue), ("/job/{job_id}", self.job),
                              ("/usage", self.usage), ("/api/job/{job_id}/tail", self.tail),
                              ("/login", self.login_form), ("/static/{name}", self.static)):
            app.router.add_get(root + path, self._errors(handler))
        app.router.add_post(root + "/login", self._errors(self.login))
        app.router.add_post(root + "/logout", self._errors(self.logout))

    # -- the request's frame -----------------------------------------------------------------

    @staticmethod
    def base(request: web.Request) -> str:
        """The dashboard's root as the browser sees it: behind a proxy that serves it under a path,
        the proxy says which in ``X-Forwarded-Prefix``."""
        prefix = request.headers.get("X-Forwarded-Prefix", "").rstrip("/")
        return (prefix if _PREFIX.match(prefix) else "") + "/dashboard"

    def viewer(self, request: web.Request) -> pages.Viewer:
        who = request[IDENTITY]
        return pages.Viewer(self.base(request), access.user_name(who.uid), who.uid,
                            who.uid in self.api.service.operators)

    async def root(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPSeeOther(self.base(request) + "/")

    def not_logged_in(self, request: web.Request) -> web.StreamResponse:
        """A request without a session: the login page for a page, 401 for the dashboard's API."""
        if request.path.startswith("/dashboard/api/"):
            return web.json_response({"error": "not logged in"}, status=401)
        return web.HTTPSeeOther(self.base(request) + "/login")

    def _errors(self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except web.HTTPBadRequest as exc:
                if IDENTITY not in request:
                    raise
                return self._html(pages.error_page(self.viewer(request), 400, exc.text or "bad request"), 400)

        return handle

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    @staticmethod
    def _html(text: str, status: int = 200) -> web.Response:
        return web.Response(text=text, status=status, content_type="text/html",
                            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                     "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'"})

    # -- login -------------------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return self._html(pages.login_page(self.base(request)))

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token = str(form.get("token") or "")
        try:
            who = self.web.login(token)
        except AuthError as exc:
            return self._html(pages.login_page(self.base(request), f"Login refused: {exc}"), 401)
        response = web.HTTPSeeOther(self.base(request) + "/")
        secure = request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"
        until = token_expiry(token)  # a session opened with a JWT ends when the token does
        age = SESSION_TTL if until is None else max(1, min(SESSION_TTL, int(until - time.time())))
        response.set_cookie(COOKIE, self.web.sessions.open(who, until), path=self.base(request), max_age=age,
                            httponly=True, samesite="Strict", secure=secure)
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        self.web.sessions.close(request.cookies.get(COOKIE, ""))
        response = web.HTTPSeeOther(self.base(request) + "/login")
        response.del_cookie(COOKIE, path=self.base(request))
        return response

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in STATIC_TYPES:
            raise web.HTTPNotFound()
        body = resources.files("pslurm.controller.rest").joinpath("static", name).read_bytes()
        return web.Response(body=body, content_type=STATIC_TYPES[name], headers={"Cache-Control": "max-age=300"})

    # -- pages -------------------------------------------------------------------------------

    async def cluster(self, request: web.Request) -> web.StreamResponse:
        viewer, number, state = self.viewer(request), _page_number(request), request.query.get("state", "")
        monitor, store = self.api.monitor, self.api.service.store
        private = routes_viewer(self.api, viewer.uid)

        def read() -> str:
            statuses = monitor.nodes()
            words: dict[str, int] = defaultdict(int)
            for s in statuses:
                words[s.word] += 1
            gpus = sum(len(s.gpus) for s in statuses)
            busy = sum(1 for s in statuses for g in s.gpus if g.jobs)
            measured = [g.util for s in statuses for g in s.gpus if g.util is not None]
            summary = {"nodes": len(statuses), **{w: words[w] for w in ("idle", "mix", "alloc", "drain", "drng", "down")
                                                  if words[w]},
                       "GPUs in use": busy, "GPUs": gpus,
                       "mean GPU util %": round(sum(measured) / len(measured)) if measured else 0,
                       "running jobs": store.count_active(states=[JobState.RUNNING]),
                       "pending jobs": store.count_active(states=[JobState.PENDING])}
            chosen = [s for s in statuses if not state or s.word == state]
            shown = chosen[(number - 1) * PAGE_SIZE:number * PAGE_SIZE]
            names = {s.node.name for s in shown}
            holders: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
            for a in store.allocations():
                if a.node in names and (not private.hides("jobs") or a.user == viewer.user):
                    for index in sorted(set(a.gpu_indices)):
                        holders[(a.node, index)].append((a.job_id, a.user))
            return pages.cluster_page(viewer, summary, shown, holders, _pages(len(chosen), number), state,
                                      self.observer.clock())

        return self._html(await self._run(read))

    async def queue(self, request: web.Request) -> web.StreamResponse:
        viewer, number = self.viewer(request), _page_number(request)
        state, user = request.query.get("state", "active"), request.query.get("user", "").strip()[:64]
        if state not in QUEUE_STATES:
            raise web.HTTPBadRequest(text=f"Invalid state: {state[:20]} ({', '.join(QUEUE_STATES)})")
        states, order = QUEUE_STATES[state]
        if routes_viewer(self.api, viewer.uid).hides("jobs"):
            user = viewer.user  # PrivateData=jobs: a user's queue is their own jobs

        def read() -> str:
            found, total = job_page(self.api.service.store, states, [user] if user else [],
                                    (number - 1) * PAGE_SIZE, PAGE_SIZE, order)
            return pages.queue_page(viewer, found, _pages(total, number), state, user, self.observer.clock())

        return self._html(await self._run(read))

    def _job_id(self, request: web.Request) -> int:
        text = request.match_info["job_id"]
        if not text.isdigit() or len(text) > 12:
            raise web.HTTPBadRequest(text=f"Invalid job id specified: {text[:20]}")
        return int(text)

    async def job(self, request: web.Request) -> web.StreamResponse:
        viewer, job_id = self.viewer(request), self._job_id(request)
        service, history = self.api.service, self.observer.history

        def read() -> tuple[int, str]:
            found = service.store.get_job(job_id)
            if found is None:
                return 404, pages.error_page(viewer, 404, f"Invalid job id specified: {job_id}")
            if not routes_viewer(self.api, viewer.uid).sees_job(found.spec.uid):
                return 403, pages.error_page(viewer, 403, f"{DENIED}: job {job_id} is another user's")
            [job] = access.visible_to(viewer.uid, service.operators, [found])
            steps = service.store.steps([job_id]).get(job_id, [])
            factors = None
            if job.state is JobState.PENDING:
                found_factors = self.api.scheduler.priorities([job_id])
                factors = found_factors[0][1] if found_factors else None
            now = self.observer.clock()
            charts = self._charts(job, history, now)
            mine = viewer.operator or viewer.uid == job.spec.uid
            return 200, pages.job_page(viewer, job, steps, factors, charts, mine, now)

        status, text = await self._run(read)
        return self._html(text, status)

    def _charts(self, job: Any, history: Any, now: float) -> list[str]:
        """The job's GPUs' utilisation and memory over its run, from the controller's history."""
        if job.start_time is None:
            return []
        start, end = job.start_time, job.end_time or now
        util: list[Line] = []
        memory: list[Line] = []
        top_mb = 1.0
        for node, indices in zip(job.all_nodes, job.node_gpus or (job.gpu_indices,), strict=False):
            record = self.api.service.store.get_node(node)
            sizes = {g.index: g.memory_mb or 0 for g in record.gpus} if record is not None else {}
            for index in indices:
                samples = history.series(node, index, start, end)
                label = f"{node} gpu{index}"
                util.append(Line(label, [(s.time, s.util) for s in samples]))
                memory.append(Line(label, [(s.time, s.memory_mb / 1024) for s in samples]))
                top_mb = max(top_mb, sizes.get(index, 0), *(s.memory_mb for s in samples))
        if not util:
            return []
        return [line_chart("GPU utilisation", util, start, end, 100, "%"),
                line_chart("GPU memory used", memory, start, end, top_mb / 1024, " GB")]

    async def usage(self, request: web.Request) -> web.StreamResponse:
        viewer, now = self.viewer(request), self.observer.clock()
        start = _day(request.query.get("from", ""), month_start(now), False)
        end = min(_day(request.query.get("to", ""), now, True), now)
        if end <= start:
            raise web.HTTPBadRequest(text="Invalid period: it ends before it starts")

        def read() -> str:
            who = routes_viewer(self.api, viewer.uid)  # PrivateData=usage: the user's own lines
            rows = who.own("usage", gpu_hours(self.api.service.store, start, end, now), lambda row: row.user)
            shares = who.own("usage", self.api.scheduler.fair_share(), lambda row: row.user or viewer.user)
            return pages.usage_page(viewer, start, end, rows, shares)

        return self._html(await self._run(read))

    async def tail(self, request: web.Request) -> web.StreamResponse:
        """JSON: the end of a running job's output file, for its owner (or an operator). The agent's
        answer is awaited on the loop (grpc.aio): it holds none of the threads other users need."""
        who, job_id = request[IDENTITY], self._job_id(request)
        service = self.api.service

        def read() -> tuple[int, dict[str, Any], str]:
            job = service.store.get_job(job_id, light=True)
            if job is None:
                return 404, {"error": f"Invalid job id specified: {job_id}"}, ""
            if who.uid not in service.operators and who.uid != job.spec.uid:
                return 403, {"error": f"Access/permission denied: job {job_id} is not yours"}, ""
            if not job.state.holds_resources or not job.node:
                where = job.node or "its node"
                return 200, {"state": job.state.value, "running": False, "data": "",
                             "error": f"job {job_id} is not running: its output is in its file on {where}"}, ""
            node = service.store.get_node(job.node)
            if node is None:
                return 404, {"error": f"node {job.node} is not known"}, ""
            return 200, {"state": job.state.value, "running": True}, node.target

        status, body, target = await self._run(read)
        if target:
            try:
                reply = await self.api.relay.tail(target, job_id, TAIL_BYTES, TAIL_TIMEOUT)
                body.update(path=reply.path, truncated=reply.truncated, data=reply.data.decode(errors="replace"),
                            error="")
            except grpc.aio.AioRpcError as exc:
                body.update(data="", error=exc.details() or str(exc.code()))
        return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json",
                            headers={"Cache-Control": "no-store"})
