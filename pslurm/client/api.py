"""The user API as it is on the wire: requests to the controller, replies as their JSON.

:class:`Api` sends each request of docs/api.md with a fresh credential and returns the reply's
JSON (slurmrestd's shapes, :mod:`pslurm.core.restjson`) or raises a
:class:`~pslurm.client.ClientError`. It is the layer under :class:`pslurm.client.Client`, which
turns that JSON into domain objects; the commands on the hot path (psqueue, psbatch, pscancel,
psacct, pscontrol, psrun) use it directly and read the JSON with :mod:`pslurm.cli.jobview`, so a
command's start imports neither the domain's dataclasses nor ``typing``.

Standard library only, and little of it (``_json``, ``_socket``): every command imports this on its
path.
"""

from __future__ import annotations

import gc
import os
import time
from _thread import allocate_lock, start_new_thread

from pslurm.client.errors import (
    AuthenticationFailed,
    ClientError,
    ConfigurationError,
    ControllerUnreachable,
    InvalidRequest,
    NodeUnreachable,
    NotFound,
    PermissionDenied,
    StepBusy,
)
from pslurm.client.http import Connection, ProtocolError, Response, query_string, quote
from pslurm.client.wirejson import dumps, loads

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from typing import Any, Protocol

    from pslurm.auth.credentials import Credentials

    Json = dict[str, Any]

    class WireConfig(Protocol):
        """What the API needs of a configuration: a ClusterConfig or a ClientConf."""

        @property
        def controller_addr(self) -> str: ...
        @property
        def controller_port(self) -> int: ...
        @property
        def controller_hosts(self) -> tuple[tuple[str, str], ...]: ...
        @property
        def slurmctld_timeout(self) -> int: ...
        @property
        def rest_port(self) -> int: ...
        @property
        def controller_target(self) -> str: ...
        @property
        def auth_key_path(self) -> str: ...
        @property
        def auth_socket_path(self) -> str: ...
        @property
        def cluster_name(self) -> str: ...

SLURM = "/slurm/v0.0.40"
PSLURM = "/pslurm/v1"
CRED_HEADER = "X-Pslurm-Cred"
INPUT_CLOSE_TIMEOUT = 5.0
IDLE_KEPT = 4  # idle connections kept for reuse
BACKOFF_TRIES = 12  # a request refused with 429 is sent this many times in all (waits of 0.1 s to 2 s: ~15 s)
DEFAULT_TIMEOUT = 30.0  # seconds a request may take before the controller counts as unreachable
CONNECT_TIMEOUT = 5.0  # with backup controllers: seconds to connect before trying the next one
FAILOVER_RETRY = 0.5  # seconds between rounds over the controllers while none serves (a backup taking over)

# An error reply's HTTP status -> what it means to the caller (502: the job's node did not answer).
_ERRORS: dict[int, type[ClientError]] = {400: InvalidRequest, 409: InvalidRequest, 413: InvalidRequest,
                                         404: NotFound, 403: PermissionDenied, 401: AuthenticationFailed}


def config_path(config: str | os.PathLike[str] | None) -> str:
    """The pslurm.conf to use (None: where the commands look); ConfigurationError when there is none."""
    if config is None:
        from pslurm.core.clientconf import find_config_path

        config = find_config_path()
    path = os.fspath(config)
    if not os.path.exists(path):
        raise ConfigurationError(f"no cluster configuration at {path}: start one with 'pslurm up' or set PSLURM_CONF")
    return path


def _error(data: Any, status: int) -> ClientError:
    """The ClientError for an error reply (or an error line of a stream)."""
    errors = data.get("errors") if isinstance(data, dict) else None
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    message = str(first.get("error") or first.get("description") or f"HTTP status {status}")
    if status == 502 and first.get("node_target"):
        return NodeUnreachable(str(first["node_target"]))
    if status == 409 and isinstance(data, dict) and data.get("busy"):
        return StepBusy(message, remote=True)
    return _ERRORS.get(status, ClientError)(message, remote=True)


class Api:
    """Requests to the controller's user API, each with a fresh credential for this process.

    ``config``: a :class:`~pslurm.core.config.ClusterConfig` or a
    :class:`~pslurm.core.clientconf.ClientConf` (see :meth:`load`). Nothing is sent before the first
    request; connections are kept alive between requests. May be shared by threads."""

    def __init__(self, config: WireConfig, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.config = config
        self.timeout = timeout
        self._hosts = [addr for _, addr in config.controller_hosts]  # SlurmctldHost= order: primary first
        self._serving = self._hosts[0]  # the controller that answered last: asked first
        # what ControllerUnreachable names: the controller, or every one of them
        self.target = ", ".join(f"{addr}:{config.controller_port}" for addr in self._hosts)
        self._credentials: Credentials | None = None
        self._lock = allocate_lock()  # threading's Lock, without threading (it imports collections)
        self._idle: list[Connection] = []

    @classmethod
    def load(cls, config: str | os.PathLike[str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> Api:
        """The API of the cluster whose pslurm.conf is at ``config`` (None: where the commands look),
        reading only the keys a client needs (:func:`pslurm.core.clientconf.read_client_conf`).
        ConfigurationError when it is missing or unreadable."""
        from pslurm.core.clientconf import ConfigError, read_client_conf

        path = config_path(config)
        try:
            return cls(read_client_conf(path), timeout)
        except ConfigError as exc:
            raise ConfigurationError(str(exc)) from None

    def close(self) -> None:
        """Close the idle connections (a later request opens one again)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the wire --------------------------------------------------------------------------

    def _headers(self, content_type: str | None = "application/json") -> dict[str, str]:
        from pslurm.auth.credential import AuthError
        from pslurm.auth.credentials import Credentials

        if self._credentials is None:
            self._credentials = Credentials(self.config.auth_key_path, self.config.auth_socket_path)
        try:
            credential = self._credentials.token()
        except AuthError as exc:
            raise AuthenticationFailed(f"cannot authenticate: {exc}") from None
        headers = {CRED_HEADER: credential}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _connect(self, timeout: float | None) -> Connection:
        """A connection to the first controller that takes one: the one that served last, then the
        others in SlurmctldHost= order (an input stream's; requests go through :meth:`_open`)."""
        for host in self._in_order():
            conn = self._connect_to(host, timeout)
            if conn is not None:
                return conn
        raise ControllerUnreachable(self.target)

    def _connect_to(self, host: str, timeout: float | None) -> Connection | None:
        """A connection to ``host``'s API, or None when it takes none (refused, or no answer in time)."""
        several = len(self._hosts) > 1
        try:  # with backups to try, a dead host is given up on sooner than a request may take
            conn = Connection(host, self.config.rest_port, min(timeout or CONNECT_TIMEOUT, CONNECT_TIMEOUT)
                              if several else timeout)
        except OSError:
            return None
        if several:
            conn.settimeout(timeout)
        return conn

    def _in_order(self) -> list[str]:
        return [self._serving, *(h for h in self._hosts if h != self._serving)]

    def _open(self, method: str, path: str, body: bytes | None, stream: bool) -> Response:
        """Send a request and read its reply's head. Refused with 429 (this user has too many
        requests in flight, or is over the controller's rate: nothing was done), it is sent again
        after a growing wait, as Slurm's clients back off from SLURMCTLD_COMMUNICATIONS_BACKOFF."""
        for attempt in range(BACKOFF_TRIES):
            response = self._open_once(method, path, body, stream)
            if response.status != 429 or attempt == BACKOFF_TRIES - 1:
                return response
            try:
                response.read()
                self._release(response)
            except OSError:
                response.conn.close()
            time.sleep(min(2.0, 0.1 * 2**attempt))
        raise AssertionError("unreachable")

    def _open_once(self, method: str, path: str, body: bytes | None, stream: bool) -> Response:
        """Send a request and read its reply's head, once (429 aside).

        With several controllers (SlurmctldHost= lines) it goes to the one that served last, then to
        the others in order: a host that takes no connection, or answers 503 (it stands by, or lost
        the lease: it did nothing), passes the request on; a GET also when its connection failed.
        When none serves, it asks again for up to 1.5 x SlurmctldTimeout, the time a backup has to
        take over (Slurm's commands wait so too); then ControllerUnreachable. A request that was
        sent and not answered is never sent elsewhere: it may have been done."""
        deadline = None
        while True:
            for host in self._in_order():
                response = self._open_at(host, method, path, body, stream)
                if response is None:
                    continue
                if response.status == 503 and len(self._hosts) > 1:
                    response.conn.close()  # not served here: nothing was done
                    continue
                self._serving = host
                return response
            if len(self._hosts) == 1:
                raise ControllerUnreachable(self.target)
            now = time.monotonic()
            deadline = deadline or now + 1.5 * self.config.slurmctld_timeout
            if now >= deadline:
                raise ControllerUnreachable(self.target)
            time.sleep(min(FAILOVER_RETRY, deadline - now))

    def _open_at(self, host: str, method: str, path: str, body: bytes | None, stream: bool) -> Response | None:
        """The request sent to ``host``, its reply's head read; None when it was not sent (no
        connection), or when a GET's connection failed and other controllers may answer it. A kept-alive
        connection the server has closed meanwhile is replaced once, to the same host with the same
        credential (safe: a request the server did handle spent it, so its replay would be refused,
        never done twice); when that host takes no new connection (it died: perhaps after doing it),
        ControllerUnreachable, never another controller."""
        headers = self._headers()  # a credential per controller: each keeps its own replay cache
        sent = False  # the request went out to this host: it may have been done there
        for attempt in (0, 1):
            conn = None
            if not stream and attempt == 0:
                with self._lock:
                    mine = [c for c in self._idle if c.host == host]
                    if mine:
                        conn = mine[-1]
                        self._idle.remove(conn)
                if conn is not None and conn.dropped():  # closed while idle (its server went): nothing sent
                    conn.close()
                    conn = None
            fresh = conn is None
            if conn is None:
                conn = self._connect_to(host, self.timeout)
                if conn is None:
                    if sent and method != "GET":  # its kept-alive connection died: done there or not, unknown
                        raise ControllerUnreachable(self.target)
                    return None
            try:
                sent = True
                conn.send(method, path, headers, body)
                response = conn.response()
            except (OSError, ProtocolError) as exc:
                conn.close()
                if not fresh and not isinstance(exc, TimeoutError):
                    continue
                if method == "GET" and len(self._hosts) > 1:
                    return None
                raise ControllerUnreachable(self.target) from None
            if stream:
                conn.settimeout(None)  # a stream's next line comes when something happens
            return response
        raise AssertionError("unreachable")

    def request(self, method: str, path: str, payload: Json | None = None) -> Json:
        """One request (``path`` under the API's root, e.g. ``/pslurm/v1/jobs``); its reply's JSON."""
        body = None if payload is None else dumps(payload).encode()
        response = self._open(method, path, body, stream=False)
        try:
            raw = response.read()
        except OSError:
            response.conn.close()
            raise ControllerUnreachable(self.target) from None
        self._release(response)
        gc_was = gc.isenabled()
        gc.disable()  # a listing's JSON is 100,000s of containers, no cycles: collections only slow it (2x)
        try:
            data = loads(raw) if raw else {}
        except ValueError:
            raise ClientError(f"the controller's reply is not JSON (HTTP status {response.status})",
                              remote=True) from None
        finally:
            if gc_was:
                gc.enable()
        if response.status >= 300:
            raise _error(data, response.status)
        return data  # type: ignore[no-any-return]

    def _release(self, response: Response) -> None:
        conn = response.conn
        if response.reusable:
            with self._lock:
                if len(self._idle) < IDLE_KEPT:
                    self._idle.append(conn)
                    return
        conn.close()

    def stream(self, path: str, payload: Json | None = None) -> Iterator[Json]:
        """A streamed reply's JSON lines as they come; an error line raises. Leaving the loop closes
        the connection (the controller stops). With a ``payload`` the request is a POST of it."""
        body = None if payload is None else dumps(payload).encode()
        response = self._open("GET" if body is None else "POST", path, body, stream=True)
        try:
            if response.status >= 300:
                try:
                    data = loads(response.read() or b"{}")
                except ValueError:
                    data = {}
                raise _error(data, response.status)
            for line in response.lines():
                data = loads(line)
                if data.get("errors"):
                    raise _error(data, int(data["errors"][0].get("error_number") or 500))
                yield data
        except (OSError, ValueError):
            raise ControllerUnreachable(self.target) from None
        finally:
            response.conn.close()

    # -- the endpoints ---------------------------------------------------------------------

    def submit(self, job: Json) -> int:
        """Submit a ``job_desc_msg`` (:func:`pslurm.core.restjson.desc_to_json`); the job's id."""
        return int(self.request("POST", f"{SLURM}/job/submit", {"job": job})["job_id"])

    def run(self, job: Json) -> Iterator[Json]:
        """psrun's job in one request: submit a ``job_desc_msg`` and follow it. The lines: ``{"job_id"}``
        once it is stored, ``{"job": job_info}`` at each change until it runs (or ends), its command's
        output (step 0's lines, :meth:`output`'s), then ``{"job": job_info}`` once it ended. A refused
        submission raises before any line, as :meth:`submit` does."""
        return self.stream(f"{PSLURM}/job/run", {"job": job})

    def will_run(self, job: Json) -> Json:
        """When and where a ``job_desc_msg`` would start if submitted now (sbatch --test-only), nothing
        stored: ``{"job_id", "start_time", "node_list", "proc_cnt", "part_name"}``."""
        return self.request("POST", f"{PSLURM}/job/will_run", {"job": job})

    def jobs(self, job_ids: Iterable[int] = (), users: Iterable[str] = (), states: Iterable[str] = (),
             include_finished: bool = False, since: float | None = None, light: bool = False,
             collapse_arrays: bool = False, brief: bool = False, steps: bool = False) -> list[Json]:
        """The jobs' ``job_info`` objects (as :meth:`pslurm.client.Client.jobs`; ``states``: names,
        ``PENDING``). ``brief``: a listing's (docs/api.md): ``light``, without the fields that are
        unset or empty. Every listing sends each request once; every record comes back with its
        ``pslurm.job`` (records that share a request share its dict). ``steps``: each job's steps as
        ``pslurm.steps``."""
        job_ids, users, states = list(job_ids), list(users), list(states)
        params = [("job_id", ",".join(map(str, job_ids)))] if job_ids else []
        params += [("user", ",".join(users))] if users else []
        params += [("state", ",".join(states))] if states else []
        params += [(name, "1") for name, on in (("include_finished", include_finished), ("light", light),
                                                ("brief", brief), ("collapse_arrays", collapse_arrays),
                                                ("steps", steps)) if on]
        if since is not None:
            params.append(("since", repr(float(since))))
        found: list[Json] = self.request("GET", f"{PSLURM}/jobs{query_string(params)}")["jobs"]
        from pslurm.core.jobinfo import share_specs

        return share_specs(found)  # a listing says each request once (records share it by pslurm.spec_ref)

    def wait(self, job_id: int) -> Iterator[Json]:
        """The job's ``job_info`` now and at each change, until it ends (see Client.wait)."""
        for data in self._resumed(f"{PSLURM}/job/{int(job_id)}/wait"):
            yield data["job"]

    def _resumed(self, path: str) -> Iterator[Json]:
        """A wait's stream (:meth:`stream`); with several controllers, opened again when the one that
        served it went away mid-stream: a backup takes over and sends the state again, so a waiter
        misses no end. A stream that could not be opened again raises ControllerUnreachable."""
        while True:
            got = False
            try:
                for data in self.stream(path):
                    got = True
                    yield data
                return
            except ControllerUnreachable:
                if not got or len(self._hosts) == 1:
                    raise

    def cancel(self, job_ids: Iterable[int] = (), signal: int = 0, job_specs: Iterable[str] = (),
               scope: str = "") -> list[str]:
        """Cancel or signal jobs; one error line per job that could not be. ``scope``: where a signal
        goes, as scancel's flags say: "" a batch job's steps, ``batch`` its shell, ``full`` both."""
        body: Json = {"job_ids": list(job_ids), "signal": signal, "job_specs": list(job_specs)}
        if scope:
            body["scope"] = scope
        reply = self.request("POST", f"{PSLURM}/jobs/cancel", body)
        return [str(line) for line in reply["job_errors"]]

    def update_job(self, job: str, action: str = "", priority: int | None = None,
                   nice: int | None = None, changes: Json | None = None) -> list[str]:
        """hold / uhold / release / requeue, priority, nice, and scontrol update's ``changes``
        (pslurm.core.jobupdate's fields: time_limit, partition, name, ...); one error line per job it
        could not be done to."""
        body: Json = {"job": job, "action": action, "priority": priority, "nice": nice}
        if changes:
            body["changes"] = changes
        reply = self.request("POST", f"{PSLURM}/job/update", body)
        return [str(line) for line in reply["job_errors"]]

    def suspend_job(self, job: str, resume: bool = False) -> list[str]:
        """scontrol suspend (``resume`` False) or resume of ``job`` (operators only); one error line
        per job it could not be done to, scontrol's (``Job is not suspended for job 14``)."""
        reply = self.request("POST", f"{PSLURM}/job/suspend", {"job": job, "resume": resume})
        return [str(line) for line in reply["job_errors"]]

    def priorities(self, job_ids: Iterable[int] = (), users: Iterable[str] = ()) -> Json:
        """``{"jobs": [...], "weights": {...}}``: sprio's rows and the configured weights."""
        job_ids, users = list(job_ids), list(users)
        params = [("job_id", ",".join(map(str, job_ids)))] if job_ids else []
        params += [("user", ",".join(users))] if users else []
        return self.request("GET", f"{PSLURM}/priorities{query_string(params)}")

    def accounts(self) -> Json:
        """``{"accounts": [...], "default_accounts": {...}, "shares": [...]}``: the accounts in pslurm.conf and
        the fair-share tree (sshare's rows: account, user, raw_shares, norm_shares, raw_usage,
        effective_usage, fairshare)."""
        return self.request("GET", f"{PSLURM}/accounts")

    def cluster(self) -> Json:
        """``{"cluster_name", "partitions", "nodes"}``."""
        return self.request("GET", f"{PSLURM}/cluster")

    def ping(self, host: str) -> Json:
        """Controller ``host`` (an address of a SlurmctldHost= line) about itself, asked of it alone:
        ``{"name", "index", "role", "mode", "active", "database", "time"}``. ControllerUnreachable when it
        does not answer."""
        return self._at(host, "GET", f"{PSLURM}/ping")

    def takeover(self, host: str) -> Json:
        """Ask controller ``host`` to take control (scontrol takeover; operators only): ``{"name", "mode"}``."""
        return self._at(host, "POST", f"{PSLURM}/takeover", {})

    def _at(self, host: str, method: str, path: str, payload: Json | None = None) -> Json:
        body = None if payload is None else dumps(payload).encode()
        response = self._open_at(host, method, path, body, stream=False)
        if response is None:
            raise ControllerUnreachable(f"{host}:{self.config.controller_port}")
        try:
            data = loads(response.read() or b"{}")
        except (OSError, ValueError):
            raise ControllerUnreachable(f"{host}:{self.config.controller_port}") from None
        finally:
            response.conn.close()
        if response.status >= 300:
            raise _error(data, response.status)
        return data  # type: ignore[no-any-return]

    def update_node(self, name: str, state: str, reason: str = "") -> Json:
        """The node as it is after the change."""
        reply = self.request("POST", f"{SLURM}/node/{quote(name)}", {"state": [state] if state else [],
                                                                     "reason": reason})
        return reply["nodes"][0]  # type: ignore[no-any-return]

    # -- a running step's output and input (relayed by the controller from its nodes' agents) ----

    def output(self, job_id: int, step_id: int = 0) -> Iterator[Json]:
        """Step ``job_id.step_id``'s output lines (0: a psrun job's command), merged from its nodes, the
        last with the step's end (restjson.output_chunk_from_json reads one)."""
        return self.stream(f"{PSLURM}/job/{int(job_id)}/step/{int(step_id)}/output")

    def send_input(self, job_id: int, chunks: Iterable[bytes], step_id: int = 0) -> InputCall:
        """Send ``chunks`` to the step's stdin (its task 0's) in the background (see Client.send_input)."""
        headers = self._headers("application/octet-stream")
        return InputCall(lambda: self._connect(self.timeout), f"{PSLURM}/job/{int(job_id)}/step/{int(step_id)}/input",
                         headers, chunks)

    # -- job steps (psrun inside an allocation) and psalloc's end ----------------------------------

    def create_step(self, job_id: int, body: Json) -> Json:
        """Create a step of running job ``job_id`` (body: docs/api.md's ``argv``, ``environment``,
        ``workdir``, ``ntasks``, ...) and launch it: ``{"job_id", "step_id", "name", "nodes", "ntasks"}``.
        StepBusy while the allocation is busy (ask again); InvalidRequest when the job is not running
        (``Job/step already completing or completed``), NotFound, PermissionDenied."""
        return self.request("POST", f"{PSLURM}/job/{int(job_id)}/steps", body)

    def steps(self, job_id: int) -> list[Json]:
        """The job's steps: ``{"job_id", "step_id", "name", "state", "nodes", "ntasks", "start_time",
        "end_time", "exit_code", "exit_signal", "argv", ...}`` each, in step order."""
        return list(self.request("GET", f"{PSLURM}/job/{int(job_id)}/steps")["steps"])

    def wait_step(self, job_id: int, step_id: int) -> Iterator[Json]:
        """The step now and at each change, until it ended."""
        for data in self._resumed(f"{PSLURM}/job/{int(job_id)}/step/{int(step_id)}/wait"):
            yield data["step"]

    def cancel_step(self, job_id: int, step_id: int, signal: int = 0) -> None:
        """Cancel step J.S (``signal`` 0) or send its tasks a signal. NotFound (``Invalid job id
        specified``), PermissionDenied, InvalidRequest (``Job/step already completing or completed``)."""
        query = f"?signal={int(signal)}" if signal else ""
        self.request("DELETE", f"{PSLURM}/job/{int(job_id)}/step/{int(step_id)}{query}")

    def relinquish(self, job_id: int, exit_code: int = 0) -> None:
        """psalloc's end: give the allocation job back; it ends COMPLETED (FAILED with a non-zero
        ``exit_code``, the command's) once its node has ended the run."""
        self.request("POST", f"{PSLURM}/job/{int(job_id)}/relinquish", {"exit_code": int(exit_code)})


class InputCall:
    """A job's stdin being sent in the background: one chunked POST, its body as ``chunks`` yields
    (pslurm.client.models.InputStream)."""

    def __init__(self, connect: Callable[[], Connection], path: str, headers: dict[str, str],
                 chunks: Iterable[bytes]) -> None:
        self._conn: Connection | None = None
        self._sent = allocate_lock()  # held until the call is over (a daemon thread of _thread's: threading
        self._sent.acquire()  # and its imports cost psrun's start more than the rest of the stream)
        start_new_thread(self._send, (connect, path, headers, chunks))

    def _send(self, connect: Callable[[], Connection], path: str, headers: dict[str, str],
              chunks: Iterable[bytes]) -> None:
        try:
            self._conn = conn = connect()
            conn.settimeout(None)  # the body comes as the user types
            conn.send_chunked("POST", path, headers, chunks)
            conn.response().read()
        except (OSError, ClientError):
            pass  # the node or the controller went away: how the job ended is the controller's to say
        finally:
            if self._conn is not None:
                self._conn.close()
            self._sent.release()

    def close(self, timeout: float = INPUT_CLOSE_TIMEOUT) -> None:
        if not self._sent.acquire(timeout=timeout):
            if self._conn is None:
                return
            self._conn.abort()  # the job's stdin was never read to the end: nothing more to say
            if not self._sent.acquire(timeout=1):
                return
        self._sent.release()  # over: a later close returns at once
