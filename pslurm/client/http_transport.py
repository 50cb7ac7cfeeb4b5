"""The client's wire: the controller's HTTP/JSON API (docs/api.md), standard library only.

:class:`pslurm.client.Client` loads this module on its first request. It turns domain objects into
JSON (:mod:`pslurm.core.restjson`), replies back into domain objects, and failures into
:class:`~pslurm.client.ClientError`\\ s: an unreachable controller, or the HTTP status of an error
with its one-line message. A job's output and input go through the controller too, which relays
them from and to the job's node agent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pslurm.auth.credential import AuthError
from pslurm.auth.credentials import Credentials
from pslurm.client.errors import (
    AuthenticationFailed,
    ClientError,
    ControllerUnreachable,
    InvalidRequest,
    NodeUnreachable,
    NotFound,
    PermissionDenied,
)
from pslurm.client.http import Connection, ProtocolError, Response, query_string, quote
from pslurm.client.models import ClusterStatus, JobPriority, OutputChunk, PriorityWeights
from pslurm.core import restjson
from pslurm.core.config import ClusterConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import NodeStatus
from pslurm.core.states import JobState

SLURM = "/slurm/v0.0.40"
PSLURM = "/pslurm/v1"
CRED_HEADER = "X-Pslurm-Cred"
INPUT_CLOSE_TIMEOUT = 5.0
IDLE_KEPT = 4  # idle connections kept for reuse

# An error reply's HTTP status -> what it means to the caller (502: the job's node did not answer).
_ERRORS: dict[int, type[ClientError]] = {400: InvalidRequest, 409: InvalidRequest, 413: InvalidRequest,
                                         404: NotFound, 403: PermissionDenied, 401: AuthenticationFailed}


def _error(data: Any, status: int) -> ClientError:
    """The ClientError for an error reply (or an error line of a stream)."""
    errors = data.get("errors") if isinstance(data, dict) else None
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    message = str(first.get("error") or first.get("description") or f"HTTP status {status}")
    if status == 502 and first.get("node_target"):
        return NodeUnreachable(str(first["node_target"]))
    return _ERRORS.get(status, ClientError)(message, remote=True)


class HttpTransport:
    """Requests to the controller's API, each with a fresh credential for this process."""

    def __init__(self, config: ClusterConfig, timeout: float) -> None:
        self.config = config
        self.timeout = timeout
        self.target = config.controller_target  # what ControllerUnreachable names (the controller, as ever)
        self._credentials = Credentials.for_cluster(config)
        self._lock = threading.Lock()
        self._idle: list[Connection] = []

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _headers(self, content_type: str | None = "application/json") -> dict[str, str]:
        try:
            credential = self._credentials.token()
        except AuthError as exc:
            raise AuthenticationFailed(f"cannot authenticate: {exc}") from None
        headers = {CRED_HEADER: credential}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _connect(self, timeout: float | None) -> Connection:
        try:
            return Connection(self.config.controller_addr, self.config.rest_port, timeout)
        except OSError:
            raise ControllerUnreachable(self.target) from None

    def _open(self, method: str, path: str, body: bytes | None, stream: bool) -> Response:
        """Send a request and read its reply's head. A kept-alive connection the server has closed
        meanwhile is replaced once (safe: a request the server did handle spent its credential, so
        its replay would be refused, never done twice)."""
        headers = self._headers()
        for attempt in (0, 1):
            conn = None
            if not stream and attempt == 0:
                with self._lock:
                    conn = self._idle.pop() if self._idle else None
            fresh = conn is None
            if conn is None:
                conn = self._connect(self.timeout)
            try:
                conn.send(method, path, headers, body)
                response = conn.response()
            except (OSError, ProtocolError) as exc:
                conn.close()
                if not fresh and not isinstance(exc, TimeoutError):
                    continue
                raise ControllerUnreachable(self.target) from None
            if stream:
                conn.settimeout(None)  # a stream's next line comes when something happens
            return response
        raise AssertionError("unreachable")

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        body = None if payload is None else json.dumps(payload, separators=(",", ":")).encode()
        response = self._open(method, path, body, stream=False)
        try:
            raw = response.read()
        except OSError:
            response.conn.close()
            raise ControllerUnreachable(self.target) from None
        self._release(response)
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            raise ClientError(f"the controller's reply is not JSON (HTTP status {response.status})",
                              remote=True) from None
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

    def _stream(self, path: str) -> Iterator[dict[str, Any]]:
        """A streamed reply's JSON lines as they come; an error line raises. Leaving the loop closes
        the connection (the controller stops)."""
        response = self._open("GET", path, None, stream=True)
        try:
            if response.status >= 300:
                try:
                    data = json.loads(response.read() or b"{}")
                except ValueError:
                    data = {}
                raise _error(data, response.status)
            for line in response.lines():
                data = json.loads(line)
                if data.get("errors"):
                    raise _error(data, int(data["errors"][0].get("error_number") or 500))
                yield data
        except (OSError, ValueError):
            raise ControllerUnreachable(self.target) from None
        finally:
            response.conn.close()

    # -- the controller ----------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> int:
        return int(self._request("POST", f"{SLURM}/job/submit", {"job": restjson.spec_to_json(spec)})["job_id"])

    def jobs(self, job_ids: list[int], users: list[str], states: list[JobState], include_finished: bool,
             since: float | None, light: bool, collapse_arrays: bool) -> list[JobRecord]:
        params = [("job_id", ",".join(map(str, job_ids)))] if job_ids else []
        params += [("user", ",".join(users))] if users else []
        params += [("state", ",".join(s.value for s in states))] if states else []
        params += [(name, "1") for name, on in (("include_finished", include_finished), ("light", light),
                                                ("collapse_arrays", collapse_arrays)) if on]
        if since is not None:
            params.append(("since", repr(float(since))))
        reply = self._request("GET", f"{PSLURM}/jobs{query_string(params)}")
        specs: dict[int, JobSpec] = {}  # an array's tasks share one converted spec
        return [restjson.job_from_json(j, specs) for j in reply["jobs"]]

    def wait(self, job_id: int) -> Iterator[JobRecord]:
        for data in self._stream(f"{PSLURM}/job/{job_id}/wait"):
            yield restjson.job_from_json(data["job"])

    def cancel(self, job_ids: list[int], signal: int, job_specs: list[str]) -> list[str]:
        reply = self._request("POST", f"{PSLURM}/jobs/cancel", {"job_ids": job_ids, "signal": signal,
                                                                "job_specs": job_specs})
        return [str(line) for line in reply["job_errors"]]

    def update_job(self, job: str, action: str, priority: int | None, nice: int | None) -> list[str]:
        reply = self._request("POST", f"{PSLURM}/job/update", {"job": job, "action": action, "priority": priority,
                                                               "nice": nice})
        return [str(line) for line in reply["job_errors"]]

    def priorities(self, job_ids: list[int], users: list[str]) -> tuple[list[JobPriority], PriorityWeights]:
        params = [("job_id", ",".join(map(str, job_ids)))] if job_ids else []
        params += [("user", ",".join(users))] if users else []
        reply = self._request("GET", f"{PSLURM}/priorities{query_string(params)}")
        return [JobPriority(**row) for row in reply["jobs"]], PriorityWeights(**reply["weights"])

    def cluster(self) -> ClusterStatus:
        reply = self._request("GET", f"{PSLURM}/cluster")
        return ClusterStatus(name=reply["cluster_name"],
                             partitions=tuple(restjson.partition_from_json(p) for p in reply["partitions"]),
                             nodes=tuple(restjson.node_from_json(n) for n in reply["nodes"]))

    def update_node(self, name: str, state: str, reason: str) -> NodeStatus:
        reply = self._request("POST", f"{SLURM}/node/{quote(name)}", {"state": [state] if state else [],
                                                                      "reason": reason})
        return restjson.node_from_json(reply["nodes"][0])

    # -- a running job's output and input (relayed by the controller from its node's agent) ----

    def output(self, job: JobRecord) -> Iterator[OutputChunk]:
        if not job.node:
            raise InvalidRequest(f"Job {job.display_id} is not running on any node")
        for data in self._stream(f"{PSLURM}/job/{job.job_id}/output"):
            stdout, stderr, done, state, code, sig = restjson.output_chunk_from_json(data)
            yield OutputChunk(stdout=stdout, stderr=stderr, done=done, state=state, exit_code=code, exit_signal=sig)

    def send_input(self, job: JobRecord, chunks: Iterable[bytes]) -> _InputCall:
        if not job.node:
            raise InvalidRequest(f"Job {job.display_id} is not running on any node")
        headers = self._headers("application/octet-stream")
        return _InputCall(lambda: self._connect(self.timeout), f"{PSLURM}/job/{job.job_id}/input", headers, chunks)


class _InputCall:
    """A job's stdin being sent in the background: one chunked POST, its body as ``chunks`` yields
    (pslurm.client.models.InputStream)."""

    def __init__(self, connect: Callable[[], Connection], path: str, headers: dict[str, str],
                 chunks: Iterable[bytes]) -> None:
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._send, args=(connect, path, headers, chunks), daemon=True,
                                        name="input")
        self._thread.start()

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

    def close(self, timeout: float = INPUT_CLOSE_TIMEOUT) -> None:
        self._thread.join(timeout)
        if self._thread.is_alive() and self._conn is not None:
            self._conn.abort()  # the job's stdin was never read to the end: nothing more to say
            self._thread.join(1)
