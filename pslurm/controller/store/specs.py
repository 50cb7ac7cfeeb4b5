"""A job's request as the store keeps it: once per submit in ``job_specs``, shared by an array's tasks,
with each job's own changes since (``jobs.spec_overrides``) merged over it when it is read.

Why: a 1 MB script submitted as ``--array=0-1000`` is one row of ``job_specs``, not 1001 copies, and
a listing of those tasks reads and decodes it once. A task updated on its own (pscontrol update of
its time limit, name, ...) keeps the change in its own small overrides object: nothing shared is
copied (copy-on-write would write the whole script again for every task an update names).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, insert, select

from pslurm.controller.store.records import gres_to_column
from pslurm.controller.store.schema import job_specs
from pslurm.core.jobspec import JobSpec, spec_from_dict, spec_to_dict
from pslurm.core.layout import node_cpus_text

SpecKey = tuple[int, str]  # (spec_id, spec_overrides): the records that share it share one JobSpec
_CHUNK = 1000  # ids per IN list


# The ``jobs`` columns that hold a field of the request as it is (core/jobfields.py's ``column`` rows), by
# the field's name, for the reads that need no request (the scheduler's queue, listings, accounting).
# ``partition`` and ``time_limit`` are the job's own (the partition it was accepted into, the limit in
# force: admission's), ``gres`` is text; ``cpus`` and ``node_cpus`` are figures of the request.
SPEC_COLUMNS = {
    "name": "name", "user": "user_name", "uid": "uid", "num_nodes": "num_nodes", "mem_mb": "mem_mb",
    "account": "account", "nice": "nice", "dependency": "dependency", "kill_on_invalid_dep": "kill_on_invalid_dep",
    "nodelist": "req_nodes", "exclude": "exc_nodes", "constraint": "req_features", "exclusive": "exclusive",
    "begin_time": "begin_time", "deadline": "deadline", "comment": "comment", "qos": "qos",
}
JOB_OWN_COLUMNS = ("partition", "time_limit")


def spec_columns(spec: JobSpec) -> dict[str, Any]:
    """The ``jobs`` columns a request sets (but the job's own): at submit, and again once an update changed it."""
    values = {column: getattr(spec, name) for name, column in SPEC_COLUMNS.items()}
    values.update(gres=gres_to_column(spec.gres), cpus=spec.cpus, node_cpus=node_cpus_text(spec))
    return values


def json_ready(request: Mapping[str, Any]) -> dict[str, Any]:
    """Fields of a request (JobSpec's values) as the store keeps them (:func:`spec_to_dict`'s forms)."""
    return {k: [[g.name, g.type, g.count] for g in v] if k == "gres" else list(v) if k == "argv" else v
            for k, v in request.items()}


def insert_spec(conn: Connection, spec: JobSpec) -> int:
    """Store a submit's request; its ``spec_id``."""
    result = conn.execute(insert(job_specs), {"spec": json.dumps(spec_to_dict(spec))})
    return int(result.inserted_primary_key[0])  # type: ignore[index]


def merged_overrides(overrides: str, request: Mapping[str, Any]) -> str:
    """A job's ``spec_overrides`` with ``request`` (fields of its request set on it alone) merged in."""
    data = json.loads(overrides) if overrides else {}
    data.update(request)
    return json.dumps(data)


class SpecReader:
    """Decodes the requests of the rows of one read: each ``job_specs`` row is fetched and parsed once
    (:meth:`load`), each (spec, overrides) pair made into one JobSpec that all its records share."""

    def __init__(self) -> None:
        self._raw: dict[int, dict[str, Any]] = {}
        self._specs: dict[SpecKey, JobSpec] = {}

    def load(self, conn: Connection, spec_ids: Iterable[int | None]) -> None:
        """Fetch the ``job_specs`` rows of ``spec_ids`` not fetched yet."""
        missing = sorted({i for i in spec_ids if i is not None and i not in self._raw})
        for start in range(0, len(missing), _CHUNK):
            part = missing[start:start + _CHUNK]
            query = select(job_specs.c.spec_id, job_specs.c.spec).where(job_specs.c.spec_id.in_(part))
            for spec_id, text in conn.execute(query):
                self._raw[spec_id] = json.loads(text)

    def data(self, spec_id: int | None, overrides: str) -> dict[str, Any]:
        """The request of a row (after :meth:`load` of its spec_id) as the JSON object it is stored as."""
        data = self._raw.get(spec_id or 0)
        if data is None:
            raise LookupError(f"the request of a job (spec {spec_id}) is missing from the store")
        return {**data, **json.loads(overrides)} if overrides else data

    def spec(self, spec_id: int | None, overrides: str) -> JobSpec:
        """The JobSpec of a row (after :meth:`load` of its spec_id); the same object for the same pair."""
        key = (spec_id or 0, overrides or "")
        found = self._specs.get(key)
        if found is None:
            found = self._specs[key] = spec_from_dict(self.data(spec_id, overrides))
        return found

    def forget(self, keep: Collection[int] = ()) -> None:
        """Drop what was read (but the spec ids in ``keep``): a long listing reads page after page."""
        self._raw = {k: v for k, v in self._raw.items() if k in keep}
        self._specs = {k: v for k, v in self._specs.items() if k[0] in keep}
