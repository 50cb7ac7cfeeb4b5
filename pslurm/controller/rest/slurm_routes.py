"""slurmrestd's REST API as Slurm 25.11 serves it: v0.0.41 to v0.0.44, one set of handlers for all four.

Each route is registered once per version (``/slurm/v0.0.4x/...``, ``/slurmdb/v0.0.4x/...``); a
handler reads the parts, builds the objects in one representation (``slurmshapes``) and hands them
to its version's encoder (``slurmv``). Callers are admitted as on every API path (a pslurm
credential, or scontrol token's JWT in X-SLURM-USER-TOKEN); refusals are slurmrestd's ``errors``.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from pslurm.controller.errors import NotFound
from pslurm.controller.rest import access, slurmshapes
from pslurm.controller.rest.listing import PAGE_JOBS
from pslurm.controller.rest.routes import ApiError, caller_of, json_reply
from pslurm.controller.rest.slurmv import Json, Version
from pslurm.controller.rest.slurmv.v0041 import VERSION as V41
from pslurm.controller.rest.slurmv.v0042 import VERSION as V42
from pslurm.controller.rest.slurmv.v0043 import VERSION as V43
from pslurm.controller.rest.slurmv.v0044 import VERSION as V44
from pslurm.core.restjson import spec_from_json
from pslurm.core.signals import signal_number

if TYPE_CHECKING:
    from pslurm.controller.diag import Diag
    from pslurm.controller.rest.routes import Api
    from pslurm.core.assoc import Associations

VERSIONS: tuple[Version, ...] = (V41, V42, V43, V44)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# (method, path under /slurm/vX or /slurmdb/vX, handler name)
SLURM_ROUTES = (("GET", "/jobs", "jobs"), ("GET", "/job/{job_id}", "job"), ("POST", "/job/submit", "submit"),
                ("POST", "/job/{job_id}", "update"), ("DELETE", "/job/{job_id}", "cancel"),
                ("GET", "/nodes", "nodes"), ("GET", "/partitions", "partitions"), ("GET", "/ping", "ping"),
                ("GET", "/diag", "diag"))
SLURMDB_ROUTES = (("GET", "/jobs", "db_jobs"), ("GET", "/job/{job_id}", "db_job"), ("GET", "/accounts", "accounts"),
                  ("GET", "/associations", "associations"), ("GET", "/users", "users"))
# job_desc_msg's fields that an update (POST /slurm/vX/job/{id}) takes -> scontrol update's names
UPDATE_TEXT = {"name": "name", "partition": "partition", "account": "account", "comment": "comment"}


def _number(value: Any, what: str) -> int | None:
    """A job_desc_msg number: plain or ``{"set", "infinite", "number"}``; None when unset."""
    if isinstance(value, dict):
        if not value.get("set", True):
            return None
        if value.get("infinite"):
            return -1
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"Invalid request: {what} is a number")
    return value


def update_changes(desc: Json) -> tuple[dict[str, object], str]:
    """A job_desc_msg of an update -> (scontrol update's changes, hold/release action or "")."""
    changes: dict[str, object] = {k: str(desc[key]) for key, k in UPDATE_TEXT.items() if desc.get(key) is not None}
    for key in ("time_limit", "priority", "nice"):
        if key in desc:
            number = _number(desc[key], key)
            if number is not None:
                changes[key] = ("UNLIMITED" if number < 0 else str(number)) if key == "time_limit" else number
    action = "" if desc.get("hold") is None else ("hold" if desc["hold"] else "release")
    return changes, action


class SlurmApi:
    """The handlers, over the parts the main Api holds (its pool, error mapping) and sdiag's figures."""

    def __init__(self, api: Api, associations: Callable[[], Associations], diag: Diag) -> None:
        self.api, self._associations, self._diag = api, associations, diag

    def add_routes(self, app: web.Application, wrap: Callable[[Handler], Handler]) -> None:
        for version in VERSIONS:
            for prefix, routes in ((f"/slurm/{version.name}", SLURM_ROUTES),
                                   (f"/slurmdb/{version.name}", SLURMDB_ROUTES)):
                for method, path, name in routes:
                    handler = wrap(functools.partial(getattr(self, name), version))
                    for form in (path, path + "/"):  # slurmrestd takes both (25.11's spec names the second)
                        app.router.add_route(method, prefix + form, handler)

    def _reply(self, version: Version, data: Json, plugin: str = "slurmctld") -> web.Response:
        return json_reply({"meta": slurmshapes.meta(version.name, self.api.config.cluster_name, plugin), **data})

    # -- slurmctld's -------------------------------------------------------------------------

    def _every_job(self, include_finished: bool, encode: Callable[[Any], Json]) -> list[Json]:
        """Every job (the queue, or every one kept with ``include_finished``) encoded, read a page at a
        time: the whole requests (a job's directory, output paths, its group) are read, but no more
        than a page of them is held at once."""
        store, out, after, more = self.api.service.store, [], 0, True
        while more:
            found = store.job_page((), (), (), include_finished, None, False, after, PAGE_JOBS)
            out += [encode(job) for job in found.jobs]
            after, more = found.last_id, found.full
        return out

    async def jobs(self, version: Version, request: web.Request) -> web.StreamResponse:
        found = await self.api._run(lambda: self._every_job(False, slurmshapes.job_info))
        now = slurmshapes.no_val(int(time.time()))
        return self._reply(version, {"jobs": [version.shape("job_info", j) for j in found],
                                     "last_backfill": now, "last_update": now})

    async def job(self, version: Version, request: web.Request) -> web.StreamResponse:
        return self._jobs_reply(version, await self.api._run(functools.partial(self._named, request)))

    def _named(self, request: web.Request) -> list[Any]:
        text = request.match_info["job_id"]
        ids = self.api.service.resolve(text)
        found = self.api.service.store.jobs_with_ids(ids) if ids else []
        if not found:
            raise NotFound(f"Invalid job id specified: {text}")
        return found

    def _jobs_reply(self, version: Version, found: list[Any]) -> web.Response:
        now = slurmshapes.no_val(int(time.time()))
        return self._reply(version, {"jobs": [version.shape("job_info", slurmshapes.job_info(j)) for j in found],
                                     "last_backfill": now, "last_update": now})

    async def submit(self, version: Version, request: web.Request) -> web.StreamResponse:
        caller = caller_of(request)
        body = await self.api._body(request)
        desc = body.get("job")
        if desc is None and isinstance(body.get("jobs"), list):
            if len(body["jobs"]) != 1:
                raise ApiError(400, "Invalid request: heterogeneous jobs (more than one in \"jobs\") are not supported")
            desc = body["jobs"][0]
        job_id = await self.api._run(lambda: self.api.service.submit(spec_from_json(desc), caller))
        return self._reply(version, version.submitted(job_id))

    async def update(self, version: Version, request: web.Request) -> web.StreamResponse:
        text, uid = request.match_info["job_id"], caller_of(request).uid
        if not text.isdigit() or len(text) > 10:
            raise ApiError(400, f"Invalid job id specified: {text[:20]}")
        changes, action = update_changes(await self.api._body(request))
        errors = await self.api._run(lambda: self.api.service.update_job(text, uid, action, changes=changes))
        return self._reply(version, version.updated(int(text), errors))

    async def cancel(self, version: Version, request: web.Request) -> web.StreamResponse:
        text, uid = request.match_info["job_id"], caller_of(request).uid
        word = request.query.get("signal") or ""
        signal = signal_number(word) if word else 0
        if word and not signal:
            raise ApiError(400, f"Invalid signal specified: {word[:20]}")
        lines = await self.api._run(lambda: self.api.service.cancel([], uid, signal, [text]))
        if lines:
            status = 404 if "Invalid job id" in lines[0] else 403 if "permission denied" in lines[0] else 409
            raise ApiError(status, lines[0])
        ids = [int(text)] if text.isdigit() else []
        return self._reply(version, version.killed(ids, []))

    async def nodes(self, version: Version, request: web.Request) -> web.StreamResponse:
        found = await self.api._run(lambda: access.nodes(self.api.monitor))
        now = slurmshapes.no_val(int(time.time()))
        return self._reply(version, {"nodes": [version.shape("node", slurmshapes.node(n)) for n in found],
                                     "last_update": now})

    async def partitions(self, version: Version, request: web.Request) -> web.StreamResponse:
        config = self.api.config
        parts = [slurmshapes.partition(p, sum(config.nodes[n].cpus for n in p.nodes if n in config.nodes))
                 for p in access.partitions(config)]
        return self._reply(version, {"partitions": [version.shape("partition_info", p) for p in parts],
                                     "last_update": slurmshapes.no_val(int(time.time()))})

    async def ping(self, version: Version, request: web.Request) -> web.StreamResponse:
        role = self.api.role
        answer = await self.api._run(role.ping) if role is not None else {"name": self.api.config.controller_addr}
        one = slurmshapes.ping(answer, self.api.config.controller_addr)
        return self._reply(version, {"pings": [version.shape("ping", one)]})

    async def diag(self, version: Version, request: web.Request) -> web.StreamResponse:
        statistics = slurmshapes.diag(await self.api._run(self._diag.statistics))
        return self._reply(version, {"statistics": statistics})

    # -- slurmdbd's --------------------------------------------------------------------------

    async def db_jobs(self, version: Version, request: web.Request) -> web.StreamResponse:
        cluster = self.api.config.cluster_name
        found = await self.api._run(lambda: self._every_job(True, lambda job: slurmshapes.db_job(job, cluster)))
        return self._reply(version, {"jobs": [version.shape("db_job", j) for j in found]}, "slurmdbd")

    async def db_job(self, version: Version, request: web.Request) -> web.StreamResponse:
        return self._db_jobs(version, await self.api._run(functools.partial(self._named, request)))

    def _db_jobs(self, version: Version, found: list[Any]) -> web.Response:
        cluster = self.api.config.cluster_name
        return self._reply(version, {"jobs": [version.shape("db_job", slurmshapes.db_job(j, cluster))
                                              for j in found]}, "slurmdbd")

    async def _snapshot(self) -> Associations:
        return await self.api._run(self._associations)

    async def accounts(self, version: Version, request: web.Request) -> web.StreamResponse:
        found = slurmshapes.accounts(await self._snapshot(), self.api.config.cluster_name)
        return self._reply(version, {"accounts": found}, "slurmdbd")

    async def associations(self, version: Version, request: web.Request) -> web.StreamResponse:
        found = slurmshapes.associations(await self._snapshot(), self.api.config.cluster_name)
        return self._reply(version, {"associations": found}, "slurmdbd")

    async def users(self, version: Version, request: web.Request) -> web.StreamResponse:
        found = slurmshapes.users(await self._snapshot(), self.api.config.cluster_name)
        return self._reply(version, {"users": found}, "slurmdbd")
