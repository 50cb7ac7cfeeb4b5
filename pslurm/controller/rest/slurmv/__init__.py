"""slurmrestd's versions that Slurm 25.11 serves (v0.0.41 to v0.0.44): one small encoder module each.

The objects are built once, in v0.0.44's shapes (``rest/slurmshapes.py``); a version is what its
OpenAPI spec has otherwise: the fields it has not yet (taken out, by object), and the few replies
whose structure changed between versions (:class:`Version`'s flags). tests/integration/test_slurm_versions.py
and tests/acceptance/test_rest_versions.py parse every reply through the models generated from Slurm
25.11's spec (PyPI's ``slurmrestapi``), refusing any field a version's spec has not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


@dataclass(frozen=True)
class Version:
    """One REST version: its name (``v0.0.42``), the fields it lacks by object kind (``job_info``,
    ``node``, ``partition_info``, ``db_job``, ``ping``), and its replies' structural differences."""

    name: str
    absent: Mapping[str, frozenset[str]] = field(default_factory=dict)
    submit_result: bool = False  # v0.0.41: the job submit reply repeats its answer under "result"
    post_flat: bool = False  # v0.0.41: an update reply has job_id (text), step_id, the user message beside results
    kill_status: bool = True  # v0.0.42+: DELETE /job answers each job's status (v0.0.41: nothing but meta)

    def shape(self, kind: str, record: Json) -> Json:
        """``record`` (v0.0.44's shape) as this version has a ``kind``."""
        gone = self.absent.get(kind)
        return {k: v for k, v in record.items() if k not in gone} if gone else record

    def submitted(self, job_id: int, message: str = "") -> Json:
        """The reply to POST /slurm/vX/job/submit."""
        reply: Json = {"job_id": job_id, "step_id": "batch", "job_submit_user_msg": message}
        if self.submit_result:
            reply["result"] = {"job_id": job_id, "step_id": "batch", "error_code": 0, "error": "",
                               "job_submit_user_msg": message}
        return reply

    def updated(self, job_id: int, errors: list[str]) -> Json:
        """The reply to POST /slurm/vX/job/{id} (an update): one result for the job."""
        reply: Json = {"results": [{"job_id": job_id, "step_id": "batch", "error": errors[0] if errors else "",
                                    "error_code": 1 if errors else 0, "why": "; ".join(errors)}]}
        if self.post_flat:
            reply.update({"job_id": str(job_id), "step_id": "batch", "job_submit_user_msg": ""})
        return reply

    def killed(self, job_ids: list[int], errors: list[str]) -> Json:
        """The reply to DELETE /slurm/vX/job/{id}: each job's status (v0.0.42+)."""
        if not self.kill_status:
            return {}
        error = {"string": errors[0], "code": 1, "message": errors[0]} if errors else {"string": "", "code": 0,
                                                                                        "message": ""}
        return {"status": [{"job_id": {"set": True, "infinite": False, "number": i}, "step_id": "batch",
                            "error": error, "federation": {"sibling": ""}} for i in job_ids]}
