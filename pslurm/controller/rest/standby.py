"""The HTTP face of a controller's role (:mod:`pslurm.controller.failover`): ``ping`` and
``takeover`` in both modes, and what a standing-by controller answers to everything else.

A controller standing by serves no job: every other request gets 503 and the ``X-Pslurm-Standby``
header, having done nothing, so clients try the next SlurmctldHost (as Slurm's answer a backup's
``ESLURM_IN_STANDBY_MODE``). ``POST /pslurm/v1/takeover`` is for operators only.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Executor

from aiohttp import web

from pslurm.controller.failover import Role
from pslurm.controller.rest.routes import IDENTITY, error_body

STANDBY_HEADER = "X-Pslurm-Standby"


def _json(data: dict[str, object], status: int = 200) -> web.Response:
    body = {**data, "errors": data.get("errors", []), "warnings": []}
    return web.Response(status=status, body=json.dumps(body).encode(), content_type="application/json")


async def ping(role: Role, executor: Executor | None, request: web.Request) -> web.StreamResponse:
    """This controller's name, role and mode, the active one's name, the database's state, its clock."""
    return _json(await asyncio.get_running_loop().run_in_executor(executor, role.ping))


async def takeover(role: Role, executor: Executor | None, request: web.Request) -> web.StreamResponse:
    """scontrol takeover, asked of this controller: operators only."""
    if request[IDENTITY].uid not in role.operators:
        return _json(error_body("Access/permission denied", 403, request.path), 403)
    return _json(await asyncio.get_running_loop().run_in_executor(executor, role.takeover))


class StandbyApi:
    """The routes of a controller standing by (RestServer's ``api``)."""

    def __init__(self, role: Role) -> None:
        self.role = role

    def add_routes(self, app: web.Application, executor: Executor) -> None:
        app.router.add_get("/pslurm/v1/ping", lambda request: ping(self.role, executor, request))
        app.router.add_post("/pslurm/v1/takeover", lambda request: takeover(self.role, executor, request))
        app.router.add_route("*", "/{anything:.*}", self.refuse)

    async def refuse(self, request: web.Request) -> web.StreamResponse:
        me = self.role.me
        message = f"psctld {me.name} ({me.role(self.role.count)}) is in standby mode: ask the active controller"
        response = _json(error_body(message, 503, request.path), 503)
        response.headers[STANDBY_HEADER] = me.name
        return response

    async def close(self) -> None:
        return None
