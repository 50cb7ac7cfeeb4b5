"""Listings of jobs (``GET /pslurm/v1/jobs``, ``/slurm/v0.0.40/jobs``, ``/slurm/v0.0.40/job/{id}``),
written as they are read: page by page, each request once.

Bounds: psctld holds one page (:data:`PAGE_JOBS` jobs and the requests they refer to) at a time,
whatever the listing's length, and the reply says each request once: the first record that has it
carries it (``pslurm.job``), and every record its number (``pslurm.spec_ref``), which a reader
resolves (``pslurm.core.jobinfo.share_specs``). An array of 1001 tasks with a 1 MB script is listed
with the script once, in a reply of some 1 MB, not 1 GB. Like squeue, a listing has no bound on
its number of jobs: its memory does not grow with it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Hashable, Sequence
from typing import Any

from pslurm.controller.rest import access
from pslurm.controller.steps import step_to_json
from pslurm.controller.store import Store
from pslurm.core import restjson
from pslurm.core.jobspec import JobRecord

PAGE_JOBS = 500  # jobs read and converted at once
HEAD, TAIL = b'{"jobs":[', b'],"errors":[],"warnings":[]}'  # a listing's reply around its records
_NO_SPEC: dict[str, Any] = {}  # given to restjson for a request already said: nothing is converted


class Listing:
    """One reply's records, page after page: who sees them (``uid``: other users' environment and
    script left out), their shape (``brief``: restjson's brief records), and their steps (psacct)."""

    def __init__(self, store: Store, uid: int, operators: Collection[int], brief: bool = False,
                 steps: bool = False, only_own: bool = False) -> None:
        self.store, self.uid, self.operators, self.brief, self.steps = store, uid, operators, brief, steps
        self.only_own = only_own  # PrivateData=jobs for a user: other users' jobs are left out
        self._refs: dict[Hashable, int] = {}  # a request's key -> its number in this reply
        self.written = 0  # records so far

    def page(self, jobs: list[JobRecord], keys: Sequence[Hashable] | None = None) -> bytes:
        """The records of ``jobs`` as JSON, comma-separated (with a leading comma after an earlier
        page's). ``keys``: a key per job naming its request across pages (Store.job_page); None for a
        reply of one page (the records' own spec objects tell shared requests apart)."""
        if self.only_own:
            mine = [i for i, j in enumerate(jobs) if j.spec.uid == self.uid]
            jobs, keys = [jobs[i] for i in mine], [keys[i] for i in mine] if keys is not None else None
        visible = access.visible_to(self.uid, self.operators, jobs)
        by_job = self.store.steps([j.job_id for j in visible if j.start_time is not None]) if self.steps else {}
        parts = []
        for i, job in enumerate(visible):
            key = keys[i] if keys is not None else ("one page", id(jobs[i].spec))
            data = self._record(job, key)
            if self.steps:  # psacct's step lines: each job's steps as pslurm.steps
                data["pslurm"]["steps"] = [step_to_json(s) for s in by_job.get(job.job_id, ())]
            parts.append(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
        out = (b"," if self.written and parts else b"") + b",".join(parts)
        self.written += len(parts)
        return out

    def _record(self, job: JobRecord, key: Hashable) -> dict[str, Any]:
        """One record: its request in full the first time the reply meets it, else only its number."""
        ref = self._refs.get(key)
        if self.brief:
            data = restjson.job_to_brief_json(job, {id(job.spec): ref} if ref is not None else {})
        else:
            data = restjson.job_to_json(job, specs={id(job.spec): _NO_SPEC} if ref is not None else {})
        own = data["pslurm"]
        if ref is None:
            ref = self._refs[key] = len(self._refs) + 1
            if not self.brief:
                own["job"]["pslurm"]["spec_ref"] = ref
        else:
            own.pop("job", None)
        own["spec_ref"] = ref
        return data


def whole(listing: Listing, jobs: list[JobRecord]) -> bytes:
    """A reply of one page: ``{"jobs": [...], "errors": [], "warnings": []}``."""
    return HEAD + listing.page(jobs) + TAIL
