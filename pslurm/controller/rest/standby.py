"""What a controller standing by serves on its HTTP port (:mod:`pslurm.controller.failover`): ``ping``
and ``takeover``, as the active controller's API does (``routes.role_ping``, ``routes.role_takeover``),
and a refusal to everything else.

A controller standing by serves no job: every other request gets 503 and the ``X-Pslurm-Standby``
header, having done nothing, so clients try the next SlurmctldHost (as Slurm's answer a backup's
``ESLURM_IN_STANDBY_MODE``). ``POST /pslurm/v1/takeover`` is for operators only.
"""

from __future__ import annotations

from concurrent.futures import Executor

from aiohttp import web

from pslurm.controller.failover import Role
from pslurm.controller.rest.routes import error_body, role_ping, role_takeover

STANDBY_HEADER = "X-Pslurm-Standby"


class StandbyApi:
    """The routes of a controller standing by (RestServer's ``api``)."""

    def __init__(self, role: Role) -> None:
        self.role = role

    def add_routes(self, app: web.Application, executor: Executor) -> None:
        app.router.add_get("/pslurm/v1/ping", lambda request: role_ping(self.role, executor, request))
        app.router.add_post("/pslurm/v1/takeover", lambda request: role_takeover(self.role, executor, request))
        app.router.add_route("*", "/{anything:.*}", self.refuse)

    async def refuse(self, request: web.Request) -> web.StreamResponse:
        me = self.role.me
        message = f"psctld {me.name} ({me.role(self.role.count)}) is in standby mode: ask the active controller"
        response = web.json_response(error_body(message, 503, request.path), status=503)
        response.headers[STANDBY_HEADER] = me.name
        return response

    async def close(self) -> None:
        return None
