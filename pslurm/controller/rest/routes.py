"""The user API's endpoints: HTTP/JSON in, a part's call, HTTP/JSON out, refusals as statuses.

slurmrestd v0.0.40's paths and fields where pslurm does what Slurm does (``/slurm/v0.0.40/...``),
pslurm's own under ``/pslurm/v1/...``. Every reply is a JSON object with slurmrestd's ``errors``
and ``warnings`` lists; an error's ``error`` is the one-line message the commands print. The
caller is the identity of the request's credential, admitted by the server's middleware.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from aiohttp import web

from pslurm.auth.credential import Identity
from pslurm.auth.transport import MAX_REQUEST_BYTES
from pslurm.controller import privatedata
from pslurm.controller.errors import NotFound, PermissionDenied
from pslurm.controller.failover import Role
from pslurm.controller.jobs import JobService
from pslurm.controller.monitor import NodeMonitor
from pslurm.controller.privatedata import private_data
from pslurm.controller.rest import access
from pslurm.controller.rest.listing import HEAD, PAGE_JOBS, TAIL, Listing, whole
from pslurm.controller.rest.openapi import Route, describe
from pslurm.controller.rest.relay import AgentRelay, AgentStreamError
from pslurm.controller.scheduler import Scheduler
from pslurm.controller.steps import StepService, step_request_from_json, step_to_json
from pslurm.controller.watch import JobWatch
from pslurm.core import restjson
from pslurm.core.assoc import Assoc
from pslurm.core.errors import shown
from pslurm.core.hostlists import expand
from pslurm.core.jobspec import JobRecord
from pslurm.core.lifecycle import StepBusy
from pslurm.core.states import JobState
from pslurm.core.steps import INTERACTIVE_STEP

T = TypeVar("T")
SLURM = "/slurm/v0.0.40"
PSLURM = "/pslurm/v1"
NDJSON = "application/x-ndjson"
_HTTP_STATUS = {access.INVALID: 400, access.NOT_FOUND: 404, access.PERMISSION: 403, access.CONFLICT: 409,
                access.UNAVAILABLE: 503}
_TRUE = frozenset({"1", "true", "yes", "y", "on"})


class ApiError(Exception):
    """A refusal: ``status`` and a one-line message (``node_target``: the agent that did not answer)."""

    def __init__(self, status: int, message: str, node_target: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.node_target = status, message, node_target


MAX_ERROR = 300  # characters of an error line: whatever a request echoes, the reply says it in one short line


def error_body(message: str, status: int, source: str, **extra: Any) -> dict[str, Any]:
    """slurmrestd's reply with one error (its message one line of at most MAX_ERROR characters)."""
    message = shown(" ".join(message.split()), MAX_ERROR)
    source = shown(source, 100)
    return {"errors": [{"error": message, "error_number": status, "description": message, "source": source,
                        **extra}], "warnings": []}


def json_reply(data: dict[str, Any], status: int = 200) -> web.Response:
    """A JSON reply in slurmrestd's shape: ``data`` with its ``errors`` and ``warnings`` lists (empty if none)."""
    return web.Response(status=status, body=_dumps(data), content_type="application/json")


def _dumps(data: dict[str, Any]) -> bytes:
    return json.dumps({**data, "errors": data.get("errors", []), "warnings": data.get("warnings", [])},
                      separators=(",", ":"), ensure_ascii=False).encode()


async def role_ping(role: Role, executor: Executor | None, request: web.Request) -> web.StreamResponse:
    """This controller's name, role and mode, the active one's name, the database's state, its clock
    (scontrol ping; answered by an active controller and by one standing by, rest/standby.py)."""
    return json_reply(await asyncio.get_running_loop().run_in_executor(executor, role.ping))


async def role_takeover(role: Role, executor: Executor | None, request: web.Request) -> web.StreamResponse:
    """scontrol takeover, asked of this controller: operators only."""
    if request[IDENTITY].uid not in role.operators:
        return json_reply(error_body("Access/permission denied", 403, request.path), 403)
    return json_reply(await asyncio.get_running_loop().run_in_executor(executor, role.takeover))


ROUTES: tuple[Route, ...] = (
    Route("POST", f"{SLURM}/job/submit", "submit", "Submit a job: the reply comes once it is stored PENDING",
          body="job_submit_req: {\"job\": job_desc_msg}", tags=("slurm",)),
    Route("POST", f"{PSLURM}/job/run", "run", "psrun's job in one request: submit it and follow it (NDJSON: "
          "{\"job_id\"}, {\"job\": job_info} at each change until it runs, its command's output as "
          "/step/0/output's lines, {\"job\": job_info} once it ended)", body="{\"job\": job_desc_msg}", streams=True,
          tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/will_run", "will_run", "When and where a job would start if submitted now "
          "(sbatch --test-only); nothing is stored", body="{\"job\": job_desc_msg}; reply {\"job_id\", "
          "\"start_time\", \"node_list\", \"proc_cnt\", \"part_name\"} (Slurm's will_run_response_msg)",
          tags=("pslurm",)),
    Route("GET", f"{SLURM}/jobs", "slurm_jobs", "The jobs not yet ended (squeue)", tags=("slurm",)),
    Route("GET", f"{SLURM}/job/{{job_id}}", "slurm_job", "A job (an array's id: its tasks), ended or not",
          tags=("slurm",)),
    Route("DELETE", f"{SLURM}/job/{{job_id}}", "slurm_cancel", "Cancel a job (14, 14_3, 14_[5-9]) or signal it",
          query=("signal",), tags=("slurm",)),
    Route("GET", f"{SLURM}/nodes", "slurm_nodes", "Every node: state, allocation, GPUs", tags=("slurm",)),
    Route("POST", f"{SLURM}/node/{{name}}", "slurm_update_node", "Set a node's state: DRAIN, RESUME, DOWN "
          "(operators only)", body="update_node_msg: {\"state\": [\"DRAIN\"], \"reason\": \"...\"}", tags=("slurm",)),
    Route("GET", f"{SLURM}/partitions", "slurm_partitions", "The partitions, in configuration order",
          tags=("slurm",)),
    Route("GET", f"{PSLURM}/jobs", "jobs", "Jobs, filtered (psqueue, psacct)",
          query=("job_id", "user", "state", "include_finished", "since", "light", "brief", "collapse_arrays", "steps"),
          tags=("pslurm",)),
    Route("POST", f"{PSLURM}/jobs/cancel", "cancel", "Cancel or signal jobs; one error line per job that could "
          "not be", body="{\"job_ids\": [14], \"job_specs\": [\"15_[1-3]\"], \"signal\": 0}", tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/update", "update_job", "Hold, release, requeue; scontrol update JobId= (TimeLimit=, "
          "Partition=, JobName=, Account=, Comment=, NumTasks=, MinMemoryNode=, Priority=, Nice=)",
          body="{\"job\": \"14_3\", \"action\": \"hold\", \"priority\": null, \"nice\": null, "
               "\"changes\": {\"time_limit\": \"+30\", \"partition\": \"gpu\", \"name\": \"x\"}}",
          tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/suspend", "suspend_job", "scontrol suspend / resume (operators only): the job's "
          "processes stopped on every node of its allocation, SUSPENDED, its time limit paused; or resumed",
          body="{\"job\": \"14\", \"resume\": false}; reply {\"job_errors\": [...]}", tags=("pslurm",)),
    Route("GET", f"{PSLURM}/priorities", "priorities", "Each pending job's priority factors and the weights",
          query=("job_id", "user"), tags=("pslurm",)),
    Route("GET", f"{PSLURM}/accounts", "accounts", "The accounts, their users and shares, and the fair-share "
          "tree with each account's and user's usage (sshare)", tags=("pslurm",)),
    Route("GET", f"{PSLURM}/cluster", "cluster", "The cluster's name, partitions and nodes in one reply",
          tags=("pslurm",)),
    Route("GET", f"{PSLURM}/job/{{job_id}}/wait", "wait", "The job now, then at each change until it ends",
          streams=True, tags=("pslurm",)),
    Route("GET", f"{PSLURM}/job/{{job_id}}/output", "output", "A running psrun job's output (its step 0's, as "
          "/step/0/output)", streams=True, tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/{{job_id}}/input", "send_input", "A running psrun job's stdin (its step 0's, as "
          "/step/0/input)", body="bytes (application/octet-stream)", tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/{{job_id}}/relinquish", "relinquish", "psalloc's end: the owner gives the "
          "allocation back; it ends COMPLETED (FAILED for a non-zero exit code) once its node has ended the run",
          body="{\"exit_code\": 0}", tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/{{job_id}}/steps", "create_step", "Create a step (psrun in an allocation) and "
          "launch its tasks; 409 with \"busy\": true while the allocation is busy (ask again)",
          body="{\"argv\": [...], \"environment\": {...}, \"workdir\", \"ntasks\", \"ntasks_per_node\", "
               "\"cpus_per_task\", \"gres\": [...], \"gpus_per_task\", \"overlap\", \"exact\", \"label\", "
               "\"pty\", \"name\"}; reply {\"step_id\", \"nodes\", \"ntasks\"}", tags=("pslurm",)),
    Route("GET", f"{PSLURM}/job/{{job_id}}/steps", "list_steps", "A job's steps: {\"steps\": [...]}",
          tags=("pslurm",)),
    Route("GET", f"{PSLURM}/job/{{job_id}}/step/{{step_id}}/wait", "wait_step",
          "The step now, then at each change until it ended: {\"step\": ...} a line", streams=True,
          tags=("pslurm",)),
    Route("GET", f"{PSLURM}/job/{{job_id}}/step/{{step_id}}/output", "step_output", "A running step's output "
          "from its nodes, merged: {\"stdout\", \"stderr\"} (base64) a line, the last with \"done\", how the step "
          "ended and each task's [rank, exit code, signal] (step 0 of a psrun job: its command)", streams=True,
          tags=("pslurm",)),
    Route("POST", f"{PSLURM}/job/{{job_id}}/step/{{step_id}}/input", "step_input", "A running step's stdin (its "
          "task 0's): the body, as it comes (chunked); its end is EOF", body="bytes (application/octet-stream)",
          tags=("pslurm",)),
    Route("DELETE", f"{PSLURM}/job/{{job_id}}/step/{{step_id}}", "cancel_step", "Cancel a step (J.S) or signal it",
          query=("signal",), tags=("pslurm",)),
    Route("GET", f"{PSLURM}/ping", "ping", "This controller (scontrol ping): name, role, mode (active or standby), "
          "the active controller's name, whether its database answers, its clock", tags=("pslurm",)),
    Route("POST", f"{PSLURM}/takeover", "takeover", "scontrol takeover: a standing-by controller asks the active "
          "one to hand over (operators only); a standing-by controller answers every other request 503",
          tags=("pslurm",)),
    Route("GET", "/openapi/v3", "openapi", "This description (no credential needed)", tags=("openapi",)),
)


MAX_JSON_DEPTH = 32  # nesting of a request's JSON: a job_desc_msg needs 4


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body: a JSON object nested at most MAX_JSON_DEPTH deep; ValueError (one short line)
    for anything else (not UTF-8, not JSON, nested past the parser's recursion, numbers of thousands
    of digits)."""
    try:
        data = json.loads(raw or b"{}")
    except RecursionError:
        raise ValueError(f"the body is not JSON of at most {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise ValueError(f"the body is not JSON ({str(exc)[:120]})") from None
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object")
    level: list[Any] = [data]
    for _ in range(MAX_JSON_DEPTH):  # one level at a time, no recursion: containers only
        level = [v for c in level for v in (c.values() if isinstance(c, dict) else c) if isinstance(v, (dict, list))]
        if not level:
            return data
    raise ValueError(f"the body is nested more than {MAX_JSON_DEPTH} levels deep")


def parse_job_ids(values: Sequence[str]) -> list[int]:
    """The job ids of a query's repeated, comma-separated values; ApiError 400 on one that is no id."""
    out = []
    for text in values:
        for item in text.split(","):
            if item:
                out.append(_number(item, "Invalid job id specified"))
    return out


def _strings(values: Sequence[str]) -> list[str]:
    return [item for text in values for item in text.split(",") if item]


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in _TRUE


def _small(text: str) -> bool:
    """A whole number of at most 10 digits: what an id or a signal can be."""
    return text.isascii() and text.isdigit() and len(text) <= 10


def _number(text: str, invalid: str) -> int:
    """An id or a signal; ApiError 400 ``invalid: <text, cut>`` for anything else."""
    if not _small(text):
        raise ApiError(400, f"{invalid}: {shown(text)}")
    return int(text)


def _step_id(request: web.Request) -> int:
    job, step = request.match_info["job_id"], request.match_info["step_id"]
    if not _small(step):
        raise ApiError(400, f"Invalid job id specified: {shown(job)}.{shown(step)}")
    return int(step)


def _signal(request: web.Request) -> int:
    return _number(request.query.get("signal") or "0", "Invalid signal specified")


def path_job_id(request: web.Request) -> int:
    """The job id in the request's path (``{job_id}``); ApiError 400 if it is none."""
    return _number(request.match_info["job_id"], "Invalid job id specified")


RELAY_PATIENCE = 10.0  # seconds a psrun job's output is asked again of an agent that has not had its launch yet
IDENTITY = web.RequestKey("identity", Identity)  # set by the server's guard, from the request's credential


def caller_of(request: web.Request) -> Identity:
    """Who made the request: the identity the server's guard read off its credential."""
    return request[IDENTITY]


def viewer(api: Api, uid: int) -> privatedata.Viewer:
    """Who ``uid`` is to PrivateData: their name, whether an operator, what it hides."""
    return privatedata.Viewer(uid, access.user_name(uid), uid in api.service.operators, api.private)


class Api:
    """The handlers, over the controller's parts. Blocking calls run on ``executor``."""

    def __init__(self, jobs: JobService, scheduler: Scheduler, monitor: NodeMonitor, watch: JobWatch,
                 relay: AgentRelay, steps: StepService | None = None, role: Role | None = None) -> None:
        self.service, self.scheduler, self.monitor, self.watch, self.relay = jobs, scheduler, monitor, watch, relay
        self.role = role  # ping and takeover (pslurm.controller.failover); None: answered 404
        self.steps = steps or StepService(jobs.store, jobs.agents, jobs.clock, jobs.operators)
        self.config = jobs.config
        self.private = private_data(self.config.extra)  # PrivateData's flags (controller/privatedata.py)
        self.executor: Executor | None = None
        self.more: list[Any] = []  # more routes over these parts: add_routes(app, wrap) (rest/acct_routes.py)

    def add_routes(self, app: web.Application, executor: Executor) -> None:
        self.executor = executor
        for route in ROUTES:
            app.router.add_route(route.method, route.path, self._wrap(getattr(self, route.handler)))
        for more in self.more:
            more.add_routes(app, self._wrap)

    async def close(self) -> None:
        await self.relay.close()

    def _wrap(self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
              ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except ApiError as exc:
                extra = {"node_target": exc.node_target} if exc.node_target else {}
                return json_reply(error_body(exc.message, exc.status, request.path, **extra), exc.status)
            except web.HTTPRequestEntityTooLarge as exc:
                message = f"request too large (at most {MAX_REQUEST_BYTES} bytes)"
                return json_reply(error_body(message, exc.status, request.path), exc.status)

        return handle

    async def _run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the pool; the parts' refusals become ApiErrors with their status."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, fn)
        except Exception as exc:
            kind = access.error_kind(exc)
            if kind is None:
                raise
            raise ApiError(_HTTP_STATUS[kind], str(exc)) from None

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            return json_object(await request.read())
        except ValueError as exc:
            raise ApiError(400, f"Invalid request: {exc}") from None

    # -- jobs ------------------------------------------------------------------------------

    async def submit(self, request: web.Request) -> web.StreamResponse:
        caller = caller_of(request)
        body = await self._body(request)

        def work() -> int:
            return self.service.submit(restjson.spec_from_json(body.get("job")), caller)

        job_id = await self._run(work)
        return json_reply({"job_id": job_id, "step_id": "batch", "job_submit_user_msg": "",
                       "result": {"job_id": job_id, "step_id": "batch"}})

    async def will_run(self, request: web.Request) -> web.StreamResponse:
        caller = caller_of(request)
        body = await self._body(request)

        def work() -> dict[str, Any]:
            checked = self.service.check_submission(restjson.spec_from_json(body.get("job")), caller)
            found = self.scheduler.will_run(checked.spec, checked.partition, checked.time_limit,
                                            self.service.store.next_job_id())
            return {"job_id": found.job_id, "start_time": found.start_time, "node_list": found.node_list,
                    "proc_cnt": found.proc_cnt, "part_name": found.part_name}

        return json_reply(await self._run(work))

    async def jobs_reply(self, request: web.Request, job_ids: Sequence[int] = (), users: Sequence[str] = (),
                         states: Sequence[JobState] = (), include_finished: bool = False,
                         since: float | None = None, light: bool = False,
                         collapse_arrays: bool = False, brief: bool = False, steps: bool = False
                         ) -> web.StreamResponse:
        """A listing (listing.py): a collapsed one (psqueue's, of the queue alone) in one reply, any
        other written page by page as it is read, so that psctld holds one page at a time."""
        uid = caller_of(request).uid
        listing = Listing(self.service.store, uid, self.service.operators, brief, steps,
                          only_own=viewer(self, uid).hides("jobs"))
        if collapse_arrays:
            def one() -> bytes:
                return whole(listing, self.service.jobs(job_ids, users, states, include_finished, since, light=light,
                                                        collapse_arrays=True))

            return web.Response(body=await self._run(one), content_type="application/json")

        def page(after: int) -> tuple[bytes, int, bool]:
            found = self.service.store.job_page(job_ids, users, states, include_finished, since, light, after,
                                                PAGE_JOBS)
            return listing.page(found.jobs, found.keys), found.last_id, found.full

        body, after, more = await self._run(lambda: page(0))  # the first read's refusal is still a status
        if not more:
            return web.Response(body=HEAD + body + TAIL, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(HEAD + body)
        while more:  # a failure from here on cuts the reply short: the client sees a broken reply, never a part
            body, after, more = await self._run(functools.partial(page, after))
            await response.write(body)
        await response.write(TAIL)
        await response.write_eof()
        return response

    async def jobs(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        try:
            states = [JobState.parse(s) for s in _strings(q.getall("state", []))]
        except ValueError as exc:
            raise ApiError(400, shown(str(exc), 80)) from None
        since = None
        if q.get("since"):
            try:
                since = float(q["since"])
            except ValueError:
                raise ApiError(400, f"Invalid time specified: {q['since']}") from None
        return await self.jobs_reply(request, parse_job_ids(q.getall("job_id", [])), _strings(q.getall("user", [])),
                                     states, _flag(request, "include_finished"), since, _flag(request, "light"),
                                     _flag(request, "collapse_arrays"), _flag(request, "brief"),
                                     _flag(request, "steps"))

    async def slurm_jobs(self, request: web.Request) -> web.StreamResponse:
        return await self.jobs_reply(request)

    async def slurm_job(self, request: web.Request) -> web.StreamResponse:
        text = request.match_info["job_id"]
        uid = caller_of(request).uid
        listing = Listing(self.service.store, uid, self.service.operators, only_own=viewer(self, uid).hides("jobs"))

        def work() -> bytes:
            ids = self.service.resolve(text)  # at most the array's tasks, whatever the selector spans
            found = self.service.store.jobs_with_ids(ids) if ids else []
            if not found:
                raise NotFound(f"Invalid job id specified: {text}")
            if listing.only_own and all(j.spec.uid != uid for j in found):
                raise PermissionDenied(privatedata.DENIED)  # PrivateData=jobs: another user's job
            return whole(listing, found)

        return web.Response(body=await self._run(work), content_type="application/json")

    async def slurm_cancel(self, request: web.Request) -> web.StreamResponse:
        text = request.match_info["job_id"]
        signal = _signal(request)
        uid = caller_of(request).uid
        lines = await self._run(lambda: self.service.cancel([], uid, signal, [text]))
        if not lines:
            return json_reply({})
        status = 404 if "Invalid job id" in lines[0] else 403 if "permission denied" in lines[0] else 409
        return json_reply({"errors": [error_body(line, status, request.path)["errors"][0] for line in lines]}, status)

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        uid = caller_of(request).uid
        try:
            job_ids = [int(i) for i in body.get("job_ids") or ()]
            signal = int(body.get("signal") or 0)
        except (TypeError, ValueError):
            raise ApiError(400, "Invalid request: job_ids are integers, signal an integer") from None
        specs = [str(s) for s in body.get("job_specs") or ()]
        scope = str(body.get("scope") or "")
        if scope not in ("", "batch", "full"):
            raise ApiError(400, f"Invalid request: scope is batch, full or none, not {scope[:20]!r}")
        return json_reply({"job_errors": await self._run(
            lambda: self.service.cancel(job_ids, uid, signal, specs, scope))})

    async def update_job(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        uid = caller_of(request).uid
        try:
            priority = None if body.get("priority") is None else int(body["priority"])
            nice = None if body.get("nice") is None else int(body["nice"])
        except (TypeError, ValueError):
            raise ApiError(400, "Invalid request: priority and nice are integers") from None
        changes = body.get("changes") or {}
        if not isinstance(changes, dict):
            raise ApiError(400, "Invalid request: changes is an object (time_limit, partition, name, ...)")
        job, action = str(body.get("job") or ""), str(body.get("action") or "").lower()
        errors = await self._run(lambda: self.service.update_job(job, uid, action, priority, nice, changes))
        return json_reply({"job_errors": errors})

    async def suspend_job(self, request: web.Request) -> web.StreamResponse:
        body = await self._body(request)
        uid = caller_of(request).uid
        job, resume = str(body.get("job") or ""), bool(body.get("resume"))
        return json_reply({"job_errors": await self._run(lambda: self.service.suspend(job, uid, resume))})

    async def priorities(self, request: web.Request) -> web.StreamResponse:
        ids, users = parse_job_ids(request.query.getall("job_id", [])), _strings(request.query.getall("user", []))
        rows, weights = await self._run(lambda: access.priorities(self.scheduler, ids, users))
        rows = viewer(self, caller_of(request).uid).own("jobs", rows, lambda row: str(row["user"]))
        return json_reply({"jobs": rows, "weights": weights})

    async def accounts(self, request: web.Request) -> web.StreamResponse:
        """The accounts (the store's associations), users' default accounts, and the fair-share tree."""
        rows = await self._run(self.scheduler.fair_share)
        snap = self.service.associations()
        who = viewer(self, caller_of(request).uid)
        rows = who.own("usage", rows, lambda row: row.user or who.user)  # an account's line stays
        shown = who.accounts(list(snap.accounts), {a.account for a in snap.assocs if a.user == who.user})
        return json_reply({"accounts": [{"name": name, "users": who.own("users", ["ALL" if a.user == "*" else a.user
                                                                              for a in snap.assocs
                                                                              if a.account == name and a.user],
                                                                    lambda user: user),
                                     "fairshare": (snap.account_assoc(name) or Assoc(name)).fairshare,
                                     "description": snap.accounts[name].description}
                                    for name in shown if name != "root"],
                       "default_accounts": {u.name: u.default_account for u in snap.users.values()
                                            if u.default_account != "root"},  # not Slurm's bootstrap root
                       "shares": [dataclasses.asdict(r) for r in rows]})

    # -- the cluster -------------------------------------------------------------------------

    def _partitions_json(self) -> list[restjson.Json]:
        return [restjson.partition_to_json(p) for p in access.partitions(self.config)]

    async def cluster(self, request: web.Request) -> web.StreamResponse:
        nodes = await self._run(lambda: access.nodes(self.monitor))
        return json_reply({"cluster_name": self.config.cluster_name, "partitions": self._partitions_json(),
                       "nodes": [restjson.node_to_json(n) for n in nodes]})

    async def slurm_nodes(self, request: web.Request) -> web.StreamResponse:
        nodes = await self._run(lambda: access.nodes(self.monitor))
        return json_reply({"nodes": [restjson.node_to_json(n) for n in nodes]})

    async def slurm_partitions(self, request: web.Request) -> web.StreamResponse:
        return json_reply({"partitions": self._partitions_json()})

    async def slurm_update_node(self, request: web.Request) -> web.StreamResponse:
        if caller_of(request).uid not in self.service.operators:
            raise ApiError(403, "Access/permission denied: only root or the SlurmUser may update nodes")
        body = await self._body(request)
        name = request.match_info["name"]
        state = body.get("state") or ""
        state = ",".join(map(str, state)) if isinstance(state, list) else str(state)
        reason = str(body.get("reason") or "")
        uid = caller_of(request).uid

        def work() -> restjson.Json:
            return restjson.node_to_json(access.node_status(self.monitor, self.monitor.update_node(name, state,
                                                                                                      reason, uid)))

        return json_reply({"nodes": [await self._run(work)]})

    # -- streams -----------------------------------------------------------------------------

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": NDJSON})
        response.enable_chunked_encoding()
        await response.prepare(request)
        return response

    async def wait(self, request: web.Request) -> web.StreamResponse:
        """NDJSON: ``{"job": job_info}`` a line, the job now and at each change, until it ends. The
        waiter is a coroutine on an event the store's commits set: it holds no thread."""
        job_id, uid = path_job_id(request), caller_of(request).uid
        who = viewer(self, uid)
        if who.hides("jobs"):  # PrivateData=jobs: another user's job is not followed either
            job = await self._run(lambda: self.service.store.get_job(job_id, light=True))
            if job is not None and not who.sees_job(job.spec.uid):
                raise ApiError(403, privatedata.DENIED)

        def line(job: Any) -> bytes:
            [seen] = access.visible_to(uid, self.service.operators, [job])
            return json.dumps({"job": restjson.job_to_json(seen)}).encode()

        return await self._updates(request, self.watch.wait_async(job_id, self.executor), line)

    async def _updates(self, request: web.Request, waiter: Any, line: Callable[[Any], bytes]) -> web.StreamResponse:
        """An NDJSON stream of ``waiter``'s updates, ``line(update)`` each; 404 before the first line,
        an error line after it, when the waited-for thing is not there."""
        response: web.StreamResponse | None = None
        async with contextlib.aclosing(waiter) as updates:
            try:
                async for update in updates:
                    if response is None:
                        response = await self._stream(request)
                    await response.write(line(update) + b"\n")
            except NotFound as exc:
                if response is None:
                    raise ApiError(404, str(exc)) from None
                await response.write(json.dumps(error_body(str(exc), 404, request.path)).encode() + b"\n")
        if response is None:  # stopping: nothing was read
            response = await self._stream(request)
        await response.write_eof()
        return response

    async def relinquish(self, request: web.Request) -> web.StreamResponse:
        """psalloc's end: the caller's allocation job ends (COMPLETED once its node ended the run)."""
        job_id, uid = path_job_id(request), caller_of(request).uid
        body = await self._body(request)
        code = body.get("exit_code", 0)
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
            raise ApiError(400, f"Invalid exit code: {code!r}")
        await self._run(lambda: self.service.relinquish(job_id, uid, code))
        return json_reply({})

    # -- steps -------------------------------------------------------------------------------

    async def create_step(self, request: web.Request) -> web.StreamResponse:
        """A step of the caller's running job; 409 with ``busy`` while another step holds the
        allocation (psrun asks again), 409 without it when the job is not running."""
        job_id, uid = path_job_id(request), caller_of(request).uid
        body = await self._body(request)
        try:
            step = await asyncio.get_running_loop().run_in_executor(
                self.executor, lambda: self.steps.create(job_id, uid, step_request_from_json(body)))
        except StepBusy as exc:
            return json_reply({**error_body(str(exc), 409, request.path), "busy": True}, 409)
        except Exception as exc:
            kind = access.error_kind(exc)
            if kind is None:
                raise
            raise ApiError(_HTTP_STATUS[kind], str(exc)) from None
        return json_reply({"job_id": step.job_id, "step_id": step.step_id, "name": step.name, "nodes": step.nodes,
                       "ntasks": step.ntasks}, 201)

    async def list_steps(self, request: web.Request) -> web.StreamResponse:
        job_id, who = path_job_id(request), viewer(self, caller_of(request).uid)

        def work() -> list[Any]:
            job = self.service.store.get_job(job_id, light=True) if who.hides("jobs") else None
            if job is not None and not who.sees_job(job.spec.uid):
                raise PermissionDenied(privatedata.DENIED)  # PrivateData=jobs: another user's job
            return self.steps.steps(job_id)

        steps = await self._run(work)
        return json_reply({"steps": [step_to_json(s) for s in steps]})

    async def cancel_step(self, request: web.Request) -> web.StreamResponse:
        job_id, step_id, signal, uid = path_job_id(request), _step_id(request), _signal(request), caller_of(request).uid
        await self._run(lambda: self.steps.cancel(job_id, step_id, uid, signal))
        return json_reply({})

    async def wait_step(self, request: web.Request) -> web.StreamResponse:
        """NDJSON: ``{"step": step}`` a line, the step now and at each change, until it ended."""
        job_id, step_id = path_job_id(request), _step_id(request)
        return await self._updates(request, self.watch.wait_step_async(job_id, step_id, self.executor),
                                   lambda step: json.dumps({"step": step_to_json(step)}).encode())

    async def step_output(self, request: web.Request) -> web.StreamResponse:
        """NDJSON: the step's output from each of its nodes' agents, merged; the last line with
        ``done``, how the step ended and each task's end. ``/job/{id}/output`` is step 0's."""
        job_id, step_id, uid, targets = await self._step_targets(request)
        response: list[web.StreamResponse] = []
        try:
            await self._relay_output(request, response, targets, job_id, step_id, uid)
        except AgentStreamError as exc:  # before any line: the request's error
            raise ApiError(exc.status, str(exc), targets[0] if exc.status == 502 else "") from None
        if not response:
            response.append(await self._stream(request))
        await response[0].write_eof()
        return response[0]

    async def _relay_output(self, request: web.Request, response: list[web.StreamResponse], targets: list[str],
                            job_id: int, step_id: int, uid: int) -> bool:
        """Write the step's output lines to ``response[0]`` (made at the first line when the list is
        empty). AgentStreamError when the agents refuse before any line of output; a stream that fails
        later ends with an error line. Whether the step's end came."""
        wrote = False
        async with contextlib.aclosing(self.relay.merged_output(targets, job_id, step_id, uid)) as pieces:
            try:
                async for (out, err, end), _source in pieces:
                    if not response:
                        response.append(await self._stream(request))
                    await response[0].write(json.dumps(restjson.output_chunk_to_json(out, err, end)).encode() + b"\n")
                    wrote = True
                    if end is not None:
                        return True
            except AgentStreamError as exc:
                if not wrote:
                    raise
                extra = {"node_target": targets[0]} if exc.status == 502 else {}
                await response[0].write(json.dumps(error_body(str(exc), exc.status, request.path, **extra)).encode()
                                        + b"\n")
        return False

    async def _relay_command(self, request: web.Request, response: web.StreamResponse, job: JobRecord,
                             uid: int) -> None:
        """A psrun job's command's output (its step 0's) into ``response``. Its agent may not have its
        launch yet (it waits 2 s for a job it has not heard of): asked again while the job runs, for
        RELAY_PATIENCE seconds; a refusal after that is an error line."""
        node = await self._run(lambda: self.service.store.get_node(job.node or ""))
        if node is None:
            return
        deadline = asyncio.get_running_loop().time() + RELAY_PATIENCE
        while True:
            try:
                await self._relay_output(request, [response], [node.target], job.job_id, INTERACTIVE_STEP, uid)
                return
            except AgentStreamError as exc:
                now = await self._run(lambda: self.service.store.get_job(job.job_id, light=True))
                if exc.status != 404 or now is None or now.state is not JobState.RUNNING or \
                        asyncio.get_running_loop().time() > deadline:
                    extra = {"node_target": node.target} if exc.status == 502 else {}
                    await response.write(json.dumps(error_body(str(exc), exc.status, request.path, **extra)).encode()
                                         + b"\n")
                    return
                await asyncio.sleep(0.2)

    async def run(self, request: web.Request) -> web.StreamResponse:
        """psrun's job in one request (what submit, wait, output and a last wait would be): the job is
        stored as submit stores it, then NDJSON: ``{"job_id"}``, ``{"job": job_info}`` at each change
        until it is no longer pending, its command's output (step 0's lines), and ``{"job": job_info}``
        once it ended. No thread is held while it waits."""
        caller = caller_of(request)
        body = await self._body(request)
        job_id = await self._run(lambda: self.service.submit(restjson.spec_from_json(body.get("job")), caller))
        response = await self._stream(request)
        await response.write(json.dumps({"job_id": job_id}).encode() + b"\n")

        def line(job: JobRecord) -> bytes:
            [seen] = access.visible_to(caller.uid, self.service.operators, [job])
            return json.dumps({"job": restjson.job_to_json(seen)}).encode() + b"\n"

        started: JobRecord | None = None
        async with contextlib.aclosing(self.watch.wait_async(job_id, self.executor)) as updates:
            async for job in updates:
                await response.write(line(job))
                if job.state is not JobState.PENDING:
                    started = job
                    break
        if started is not None and started.state is JobState.RUNNING and started.node:
            await self._relay_command(request, response, started, caller.uid)
        async with contextlib.aclosing(self.watch.wait_async(job_id, self.executor)) as updates:
            async for job in updates:
                if job.state.is_final:
                    await response.write(line(job))
                    break
        await response.write_eof()
        return response

    output = step_output

    async def step_input(self, request: web.Request) -> web.StreamResponse:
        """The step's stdin (its task 0's, on its first node): the body as it comes; its end is EOF.
        ``/job/{id}/input`` is step 0's."""
        job_id, step_id, uid, targets = await self._step_targets(request)
        try:
            await self.relay.send_input(targets[0], job_id, step_id, request.content.iter_any(), uid)
        except AgentStreamError as exc:
            raise ApiError(exc.status, str(exc), targets[0] if exc.status == 502 else "") from None
        return json_reply({})

    send_input = step_input

    async def _step_targets(self, request: web.Request) -> tuple[int, int, int, list[str]]:
        """The step a stream names (``step_id`` in the path, else 0: a psrun job's command), once the
        caller may reach it (its job's owner, or an operator): job id, step id, the caller's uid, and
        the host:port of each of the step's nodes' agents (its job's first node for step 0 of a psrun
        job, which has no step record)."""
        job_id, uid = path_job_id(request), caller_of(request).uid
        step_id = _step_id(request) if "step_id" in request.match_info else INTERACTIVE_STEP

        def work() -> tuple[JobRecord | None, list[str]]:
            store = self.service.store
            job = store.get_job(job_id, light=True)
            if job is None or not job.node:
                return job, []
            step = store.get_step(job_id, step_id)
            names = expand(step.nodes) if step is not None and step.nodes else [job.node]
            return job, [n.target for name in names if (n := store.get_node(name)) is not None]

        job, targets = await self._run(work)
        if job is None:
            raise ApiError(404, f"Invalid job id specified: {job_id}")
        if uid not in self.service.operators and uid != job.spec.uid:
            raise ApiError(403, f"Access/permission denied: job {job_id} is not yours")
        if not targets:
            raise ApiError(400, f"Job {job.display_id} is not running on any node")
        return job_id, step_id, uid, targets

    async def openapi(self, request: web.Request) -> web.StreamResponse:
        return web.json_response(describe(ROUTES))

    async def ping(self, request: web.Request) -> web.StreamResponse:
        return await role_ping(self._role(), self.executor, request)

    async def takeover(self, request: web.Request) -> web.StreamResponse:
        return await role_takeover(self._role(), self.executor, request)

    def _role(self) -> Role:
        if self.role is None:
            raise ApiError(404, "this controller has no role to report (assembled without one)")
        return self.role

