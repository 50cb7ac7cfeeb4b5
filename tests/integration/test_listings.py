"""Listings never repeat per task what an array shares: a 1 MB script submitted as --array=0-1000 is
listed with the script once, page after page (a chunked reply past one page), in every listing
(pslurm's, slurmrestd's, brief), and the reader's records share it again. A controller and one
agent as real processes (test_rest_api's)."""

from __future__ import annotations

import http.client
import json

from pslurm.controller.rest.listing import PAGE_JOBS
from pslurm.core.jobinfo import share_specs
from tests.integration.test_rest_api import NOBODY, Api, api  # noqa: F401 - the fixture

SCRIPT = "#!/bin/sh\n" + "#" * (1 << 20) + "\n"
TASKS = 1001


def raw(api: Api, path: str, uid: int | None = None) -> tuple[bytes, str]:  # noqa: F811
    """The reply's body as it came, and its transfer encoding."""
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=60)
    try:
        conn.request("GET", path, headers={"X-Pslurm-Cred": api.credential(uid)})
        reply = conn.getresponse()
        assert reply.status == 200
        return reply.read(), reply.getheader("Transfer-Encoding") or ""
    finally:
        conn.close()


def test_an_arrays_script_is_listed_once_in_every_listing(api: Api) -> None:  # noqa: F811
    array = api.submit(api.spec(name="big", script=SCRIPT, array=f"0-{TASKS - 1}"))
    for path in (f"/pslurm/v1/jobs?job_id={array}", f"/pslurm/v1/jobs?job_id={array}&brief=1",
                 f"/pslurm/v1/jobs?job_id={array}&include_finished=1&steps=1", "/slurm/v0.0.40/jobs",
                 f"/slurm/v0.0.40/job/{array}", f"/slurm/v0.0.40/job/{array}_[0-10000000]"):
        body, encoding = raw(api, path)
        assert body.count(b"#" * 1000) == (1 << 20) // 1000, path  # the script once
        assert len(body) < 3 * len(SCRIPT), (path, len(body))
        jobs = share_specs(json.loads(body)["jobs"])
        mine = [j for j in jobs if j.get("array_job_id", {}).get("number") == array]
        assert len(mine) == TASKS, path
        assert all(j["pslurm"]["job"]["script"] == SCRIPT for j in mine), path
        if "job_id=" in path and "brief" not in path:
            assert encoding == "chunked" and TASKS > PAGE_JOBS  # written page by page
    api.call("DELETE", f"/slurm/v0.0.40/job/{array}")


def test_another_users_listing_of_the_array_has_no_script(api: Api) -> None:  # noqa: F811
    array = api.submit(api.spec(name="theirs", script=SCRIPT, array="0-600"))
    body, _ = raw(api, f"/pslurm/v1/jobs?job_id={array}", uid=NOBODY)
    jobs = share_specs(json.loads(body)["jobs"])
    assert len(jobs) == 601 and b"####" not in body and all("script" not in j["pslurm"]["job"] for j in jobs)
    api.call("DELETE", f"/slurm/v0.0.40/job/{array}")
