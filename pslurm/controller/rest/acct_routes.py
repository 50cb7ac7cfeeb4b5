"""The accounting endpoints of the user API (issue 20): associations (sacctmgr), fair share (sshare),
usage (sreport), the controller's figures (sdiag) and tokens (scontrol token).

They hang off :class:`pslurm.controller.rest.routes.Api` (its error mapping and thread pool) through
its ``more`` list, so that routes.py stays the jobs' and the streams' module.
"""

from __future__ import annotations

import dataclasses
import pwd
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from pslurm.auth.credential import AuthError
from pslurm.auth.jwt import TOKEN_EXPIRES, TokenCheck
from pslurm.controller.assocs import AssocService
from pslurm.controller.diag import Diag
from pslurm.controller.metrics import Measurements
from pslurm.controller.privatedata import Viewer
from pslurm.controller.rest.routes import (
    PSLURM,
    ApiError,
    Route,
    caller_of,
    json_reply,
    parse_job_ids,
    path_job_id,
    viewer,
)
from pslurm.controller.rest.stats_relay import StatsRelay
from pslurm.controller.store.usage import job_measures, usage_summary
from pslurm.core.assoc import Associations

if TYPE_CHECKING:
    from pslurm.controller.rest.routes import Api

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ROUTES: tuple[Route, ...] = (
    Route("GET", f"{PSLURM}/assoc", "associations", "Every QOS, account, user and association, and the "
          "cluster (sacctmgr list)", tags=("pslurm",)),
    Route("POST", f"{PSLURM}/assoc", "change_associations", "sacctmgr add|modify|delete: the lines it prints; "
          "applied when commit is true (operators and AdminLevel Operator/Administrator)",
          body="{\"verb\": \"add\", \"entity\": \"account\", \"names\": [...], \"where\": [[k, v]], "
               "\"set\": [[k, v]], \"commit\": true}; reply {\"lines\": [...]}", tags=("pslurm",)),
    Route("POST", f"{PSLURM}/token", "token", "A JWT for slurmrestd's clients (scontrol token): "
          "X-SLURM-USER-TOKEN; only an operator may name another user",
          body="{\"lifespan\": 1800, \"username\": \"\"}; reply {\"token\": \"...\"}", tags=("pslurm",)),
    Route("GET", f"{PSLURM}/usage", "usage", "Each account's and user's CPU, GPU and memory seconds, and each "
          "job size's, between start and end (sreport)", query=("start", "end"), tags=("pslurm",)),
    Route("GET", f"{PSLURM}/efficiency", "efficiency", "What jobs held and what their agents measured: CPU "
          "time, MaxRSS, GPU use (seff)", query=("job_id",), tags=("pslurm",)),
    *(Route("GET", f"/slurm/{version}/diag", "diag_reply", "The controller's figures (sdiag): scheduler passes, job "
            "counters", tags=("slurm",)) for version in ("v0.0.40",)),  # v0.0.41+: rest/slurm_routes.py
    Route("GET", f"{PSLURM}/job/{{job_id}}/stat", "job_stat", "What a running job's tasks use now, from "
          "each of its nodes (sstat): CPU time, RSS, VM size, pages, I/O, the job's cgroup and GPUs",
          tags=("pslurm",)),
    Route("GET", f"{PSLURM}/shares", "shares", "The fair-share tree, each association's shares, usage and "
          "factor (sshare)", tags=("pslurm",)),
)


def assoc_json(snap: Associations, who: Viewer | None = None) -> dict[str, Any]:
    """The whole model as JSON: lists of its records' fields (``pslurm.core.assoc``), less what
    PrivateData hides from ``who`` (users: other users and their associations; accounts: the
    accounts they are not in)."""
    users, assocs, accounts = list(snap.users.values()), list(snap.assocs), list(snap.accounts)
    if who is not None:
        users = who.own("users", users, lambda u: u.name)
        assocs = who.own("users", assocs, lambda a: a.user or who.user)  # an account's own line stays
        accounts = who.accounts(accounts, {a.account for a in snap.assocs if a.user == who.user})
        assocs = [a for a in assocs if a.account in accounts]
    return {"qos": [dataclasses.asdict(q) for q in snap.qos.values()],
            "accounts": [dataclasses.asdict(snap.accounts[name]) for name in accounts],
            "users": [dataclasses.asdict(u) for u in users],
            "associations": [dataclasses.asdict(a) for a in assocs]}


def _pairs(value: Any, what: str) -> list[tuple[str, str]]:
    if not isinstance(value, list) or not all(isinstance(p, list) and len(p) == 2 for p in value):
        raise ApiError(400, f"Invalid request: {what} is a list of [key, value] pairs")
    return [(str(k), str(v)) for k, v in value]


class AcctApi:
    """The handlers, over the association service and the parts the main Api holds."""

    def __init__(self, api: Api, assocs: AssocService, tokens: TokenCheck | None = None,
                 diag: Diag | None = None, stats: StatsRelay | None = None) -> None:
        self.api, self.assocs, self.tokens, self.stats = api, assocs, tokens, stats
        self.diag = diag or Diag(api.service.store, Measurements(time.time()))

    def add_routes(self, app: web.Application, wrap: Callable[[Handler], Handler]) -> None:
        for route in ROUTES:
            app.router.add_route(route.method, route.path, wrap(getattr(self, route.handler)))

    async def associations(self, request: web.Request) -> web.StreamResponse:
        config = self.api.config
        snap = await self.api._run(self.assocs.current)
        return json_reply({**assoc_json(snap, viewer(self.api, caller_of(request).uid)), "cluster": {
            "name": config.cluster_name, "control_host": config.controller_addr,
            "control_port": config.controller_port, "rest_port": config.rest_port}})

    async def change_associations(self, request: web.Request) -> web.StreamResponse:
        caller = caller_of(request)
        body = await self.api._body(request)
        names = body.get("names") or []
        if not isinstance(names, list):
            raise ApiError(400, "Invalid request: names is a list")
        where, values = _pairs(body.get("where") or [], "where"), _pairs(body.get("set") or [], "set")
        verb, entity, commit = str(body.get("verb") or ""), str(body.get("entity") or ""), bool(body.get("commit"))
        if verb not in ("add", "modify", "delete"):
            raise ApiError(400, f"Invalid request: verb {verb!r} (add, modify, delete)")
        lines = await self.api._run(lambda: self.assocs.execute(caller, verb, entity, [str(n) for n in names],
                                                                where, values, commit))
        return json_reply({"lines": lines})

    async def token(self, request: web.Request) -> web.StreamResponse:
        caller = caller_of(request)
        body = await self.api._body(request)
        if self.tokens is None:
            raise ApiError(400, "JWT authentication is not configured")
        lifespan = body.get("lifespan")
        if lifespan is not None and (not isinstance(lifespan, int) or lifespan <= 0):
            raise ApiError(400, "Invalid lifespan: a number of seconds above 0")
        try:
            own = pwd.getpwuid(caller.uid).pw_name
        except KeyError:
            raise ApiError(403, f"Invalid user id: {caller.uid}") from None
        user = str(body.get("username") or own)
        if user != own and caller.uid not in self.api.service.operators:
            raise ApiError(403, "Access/permission denied: only an operator may ask a token for another user")
        try:  # AuthAltParameters' bounds; never past the expiry of a token that asks (auth/jwt.py)
            token = self.tokens.issue(user, lifespan, operator=caller.uid in self.api.service.operators,
                                      not_after=request.get(TOKEN_EXPIRES))
        except AuthError as exc:
            raise ApiError(403, str(exc)) from None
        return json_reply({"token": token})

    async def diag_reply(self, request: web.Request) -> web.StreamResponse:
        return json_reply({"statistics": await self.api._run(self.diag.statistics)})

    async def usage(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        try:
            start, end = float(q["start"]), float(q["end"])
        except (KeyError, ValueError):
            raise ApiError(400, "Invalid request: start and end are epoch seconds") from None
        if end <= start:
            raise ApiError(400, "Invalid request: end is not after start")
        service, config = self.api.service, self.api.config
        found = await self.api._run(lambda: usage_summary(service.store, start, end, service.clock()))
        who = viewer(self.api, caller_of(request).uid)
        if who.hides("usage"):  # PrivateData=usage: the user's own lines; the sizes are everyone's: none
            found = {"assocs": who.own("usage", found["assocs"], lambda row: str(row["user"])), "sizes": []}
        nodes = config.nodes.values()
        return json_reply({**found, "cluster": {"name": config.cluster_name, "nodes": len(nodes),
                                            "cpus": sum(n.cpus for n in nodes), "gpus": sum(n.gpus() for n in nodes),
                                            "mem_mb": sum(n.real_memory for n in nodes)}})

    async def efficiency(self, request: web.Request) -> web.StreamResponse:
        ids = parse_job_ids(request.query.getall("job_id", []))  # ids of at most 10 digits: 400 for another
        if not ids:
            raise ApiError(400, "Invalid job id specified")
        store = self.api.service.store
        found = await self.api._run(lambda: job_measures(store, ids))
        who = viewer(self.api, caller_of(request).uid)
        found = [j for j in found if who.sees_job(int(j["uid"]))]  # PrivateData=jobs: the user's own
        return json_reply({"jobs": found, "cluster": self.api.config.cluster_name})

    async def job_stat(self, request: web.Request) -> web.StreamResponse:
        job_id, uid = path_job_id(request), caller_of(request).uid
        store = self.api.service.store

        def work() -> tuple[Any, list[str]]:
            job = store.get_job(job_id, light=True)
            nodes = [store.get_node(name) for name in job.all_nodes] if job is not None else []
            return job, [n.target for n in nodes if n is not None]

        job, targets = await self.api._run(work)
        if job is None:
            raise ApiError(404, f"Invalid job id specified: {job_id}")
        if uid not in self.api.service.operators and uid != job.spec.uid:
            raise ApiError(403, f"Access/permission denied: job {job_id} is not yours")
        if job.state.value not in ("RUNNING", "COMPLETING") or not targets or self.stats is None:
            raise ApiError(409, f"job {job.display_id} is not running")
        nodes = await self.stats.job_stats(targets, job_id)
        return json_reply({"job_id": job_id, "display_id": job.display_id, "nodes": nodes})

    async def shares(self, request: web.Request) -> web.StreamResponse:
        rows = await self.api._run(self.api.scheduler.fair_share)
        who = viewer(self.api, caller_of(request).uid)
        rows = who.own("usage", rows, lambda row: row.user or who.user)  # PrivateData=usage: accounts' lines stay
        return json_reply({"shares": [dataclasses.asdict(r) for r in rows]})
