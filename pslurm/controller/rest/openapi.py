"""The API's OpenAPI 3 description, generated from the route table (``GET /openapi/v3``, as
slurmrestd serves its own), so that it lists every route the server has. A :class:`Route` is one
row of that table (``routes.ROUTES``): this module describes routes and imports nothing of the
handlers'."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Route:
    """One endpoint: what the OpenAPI description says of it, and its handler's name on ``routes.Api``."""

    method: str
    path: str
    handler: str
    summary: str
    query: tuple[str, ...] = ()  # query parameters
    body: str = ""  # what the request body is ("" none)
    streams: bool = False  # the reply is NDJSON, one object a line, as things happen
    tags: tuple[str, ...] = field(default=())


_PARAM = re.compile(r"{(\w+)}")
_ERRORS = {"400": "Invalid request", "401": "No good credential (X-Pslurm-Cred)", "403": "Permission denied",
           "404": "No such job or node", "409": "Not in the job's present state", "413": "Request too large"}
_QUERY_DOC = {
    "job_id": "job ids, comma-separated or repeated", "user": "user names, comma-separated or repeated",
    "state": "job states (names or short codes: PD, R), comma-separated or repeated",
    "include_finished": "true: ended jobs too", "since": "only jobs ended at or after this time (epoch seconds), "
    "or not ended", "light": "true: leave out each job's environment and script",
    "collapse_arrays": "true: one record for an array's pending tasks that share a reason",
    "signal": "a signal number; 0 or none: cancel",
}


def _schema_ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _operation(route: Route) -> dict[str, Any]:
    params: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PARAM.findall(route.path)
    ]
    params += [{"name": name, "in": "query", "required": False, "description": _QUERY_DOC.get(name, name),
                "schema": {"type": "string"}} for name in route.query]
    media = "application/x-ndjson" if route.streams else "application/json"
    op: dict[str, Any] = {
        "operationId": route.handler, "summary": route.summary, "tags": list(route.tags), "parameters": params,
        "responses": {"200": {"description": "OK" + (" (one JSON object a line, as it happens)" if route.streams
                                                     else ""),
                              "content": {media: {"schema": _schema_ref("reply")}}},
                      **{code: {"description": why, "content": {"application/json": {"schema": _schema_ref("reply")}}}
                         for code, why in _ERRORS.items()}},
    }
    if route.body:
        body_media = "application/octet-stream" if route.body.startswith("bytes") else "application/json"
        op["requestBody"] = {"required": True, "description": route.body,
                             "content": {body_media: {"schema": {"type": "string", "format": "binary"}
                                                      if body_media != "application/json" else {"type": "object"}}}}
    if route.path == "/openapi/v3":
        op["security"] = []
    return op


def describe(routes: Iterable[Route]) -> dict[str, Any]:
    """The OpenAPI 3.0 document for ``routes``."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    error = {"type": "object", "properties": {"error": {"type": "string"}, "error_number": {"type": "integer"},
                                              "description": {"type": "string"}, "source": {"type": "string"}}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "pslurm", "version": "v0.0.40",
                 "description": "pslurm's user API: slurmrestd v0.0.40's shapes where they overlap (/slurm/v0.0.40), "
                                "pslurm's own under /pslurm/v1. Fields pslurm adds live under each object's "
                                "'pslurm' key."},
        "paths": paths,
        "components": {
            "securitySchemes": {"pslurm_cred": {"type": "apiKey", "in": "header", "name": "X-Pslurm-Cred",
                                                "description": "a signed single-use credential (pslurm.auth)"}},
            "schemas": {"error": error,
                        "reply": {"type": "object", "additionalProperties": True,
                                  "properties": {"errors": {"type": "array", "items": _schema_ref("error")},
                                                 "warnings": {"type": "array", "items": {"type": "object"}}}}},
        },
        "security": [{"pslurm_cred": []}],
    }
