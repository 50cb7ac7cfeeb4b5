"""Every bad input to the user API is a 4xx with one line, never a 500: a hostile corpus sent to every
route (deep and wide JSON, numbers past any bound, wrong types, bytes that are not UTF-8, NUL bytes,
ids of thousands of digits, selectors that span billions), as an ordinary user. A controller and one
agent as real processes (test_rest_api's)."""

from __future__ import annotations

import http.client
import json
from typing import Any

from pslurm.controller.rest.acct_routes import ROUTES as ACCT_ROUTES
from pslurm.controller.rest.routes import ROUTES as JOB_ROUTES
from tests.integration.test_rest_api import NOBODY, Api, api  # noqa: F401 - the fixture

ROUTES = (*JOB_ROUTES, *ACCT_ROUTES)
DEEP = b"[" * 100_000 + b"]" * 100_000
HUGE = "9" * 5000
PATH_VALUES = [HUGE, "1_[0-10000000]", "-1", "1.5", "%00", "1_" + HUGE, "abc", "1_[" + "1," * 2000 + "1]",
               "99999999999", "1e9", "0x10"]
BODIES: list[bytes] = [
    DEEP, b'{"job":' * 50_000 + b"1" + b"}" * 50_000, b"\xff\xfe\x00garbage", b"null", b"[]", b'"x"', b"1" * 5000,
    json.dumps({"job": {"name": "x\x00y"}}).encode(), json.dumps({"job": {"tasks": "#"}}).replace('"#"', HUGE).encode(),
    json.dumps({"job": {"tasks": 10**30, "cpus_per_task": -5, "time_limit": {"number": 10**40, "set": True}}}).encode(),
    json.dumps({"job": {"environment": {"a": 1}, "argv": [1, 2], "minimum_nodes": "x"}}).encode(),
    json.dumps({"job": {"array": "0-" + HUGE, "dependency": "afterok:" + HUGE}}).encode(),
    json.dumps({"job_ids": ["#"], "signal": 10**30}).replace('"#"', HUGE).encode(),
    json.dumps({"job_ids": ["x"], "job_specs": [HUGE, {"a": 1}]}).encode(),
    json.dumps({"job_specs": ["1_[0-10000000]"] * 20_000}).encode(),
    json.dumps({"job": HUGE, "action": "hold"}).encode(), json.dumps({"job": "1", "changes": [1]}).encode(),
    json.dumps({"job": "1", "changes": {"time_limit": HUGE, "priority": 10**40}, "nice": 10**40}).encode(),
    json.dumps({"state": [[["DRAIN"]]], "reason": {"x": 1}}).encode(), json.dumps({"exit_code": 10**30}).encode(),
    json.dumps({"argv": ["x"] * 10, "ntasks": 10**30, "environment": [1]}).encode(),
    json.dumps({"argv": ["true"], "gres": [HUGE], "gpu_bind": "map_gpu:" + HUGE}).encode(),
]
QUERIES = ["?job_id=" + HUGE, "?job_id=1," + HUGE, "?since=1e999", "?since=nan", "?since=" + HUGE, "?state=" + HUGE,
           "?signal=" + HUGE, "?user=%00", "?job_id=%ff%fe", "?light=" + HUGE]


def send(api: Api, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:  # noqa: F811
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=60)
    try:
        headers = {"X-Pslurm-Cred": api.credential(NOBODY), "Content-Type": "application/json"}
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.read()
    finally:
        conn.close()


def one_line_error(status: int, raw: bytes) -> bool:
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return False
    message = data["errors"][0]["error"] if isinstance(data, dict) and data.get("errors") else ""
    return 400 <= status < 500 and bool(message) and "\n" not in message and len(message) < 400


def concrete(path: str, value: str) -> str:
    return path.replace("{job_id}", value).replace("{step_id}", value).replace("{name}", value)


def test_every_route_answers_a_hostile_corpus_with_a_4xx_of_one_line(api: Api) -> None:  # noqa: F811
    failures = []
    routes = [r for r in ROUTES if r.path != "/openapi/v3" and not r.streams]
    for route in routes:
        benign = b"{}" if route.method == "POST" else None
        paths = {concrete(route.path, v) for v in PATH_VALUES} if "{" in route.path else {route.path}
        paths |= {concrete(route.path, "1") + q for q in QUERIES}
        tries = [(path, benign) for path in sorted(paths)]
        if route.method == "POST":
            tries += [(concrete(route.path, "1"), body) for body in BODIES]
        for path, body in tries:
            status, raw = send(api, route.method, path, body)
            if status >= 500 or (status >= 400 and not one_line_error(status, raw)):
                failures.append(f"{route.method} {path[:60]} {(body or b'')[:40]!r}: {status} {raw[:120]!r}")
    assert not failures, "\n".join(failures[:40]) + f"\n({len(failures)} in all)"


def test_the_streams_refuse_bad_ids_with_a_4xx_too(api: Api) -> None:  # noqa: F811
    failures = []
    for route in (r for r in ROUTES if r.streams or r.body.startswith("bytes")):
        for value in PATH_VALUES:
            status, raw = send(api, route.method, concrete(route.path, value), b"" if route.method == "POST" else None)
            if not one_line_error(status, raw):
                failures.append(f"{route.method} {concrete(route.path, value)[:60]}: {status} {raw[:120]!r}")
    assert not failures, "\n".join(failures[:40])
