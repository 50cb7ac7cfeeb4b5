"""Metrics and the dashboard over real HTTP, a controller and an agent as processes: who may read
what (credentials, sessions, open metrics), Slurm's metric names, the requests and RPCs counted,
a session cookie that opens the dashboard and nothing else, other users' output kept from them,
pages of a long queue, and every value escaped."""

from __future__ import annotations

import http.client
import os
import pwd
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for, wait_until_one_node_idle
from tests.integration.test_rest_api import NOBODY, Api

Reply = tuple[int, dict[str, str], str]


def get(api: Api, path: str, headers: dict[str, str] | None = None, method: str = "GET",
        body: str | None = None) -> Reply:
    conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read().decode()
    finally:
        conn.close()


def login(api: Api, uid: int | None = None, token: str | None = None) -> Reply:
    body = urllib.parse.urlencode({"token": token or api.credential(uid)})
    return get(api, "/dashboard/login", {"Content-Type": "application/x-www-form-urlencoded"}, "POST", body)


def session(api: Api, uid: int | None = None) -> dict[str, str]:
    status, headers, _ = login(api, uid)
    assert status == 303, headers
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/dashboard" in cookie
    return {"Cookie": cookie.split(";")[0]}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    found = Api(tmp_path_factory.mktemp("obs"))
    try:
        wait_until_one_node_idle(found.call)
        yield found
    finally:
        found.close()


def test_metrics_need_a_credential_and_carry_slurms_names(api: Api) -> None:
    assert get(api, "/metrics/nodes")[0] == 401
    assert get(api, "/metrics/nodes", {"Authorization": "Bearer not-a-token"})[0] == 401
    status, _, text = get(api, "/metrics", {"X-Pslurm-Cred": api.credential()})
    assert status == 200 and text.split() == [f"/metrics/{e}" for e in ("jobs", "nodes", "partitions", "scheduler",
                                                                        "jobs-users-accts", "pslurm")]
    status, headers, text = get(api, "/metrics/nodes", {"X-Pslurm-Cred": api.credential()})
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'slurm_node_cpus{node="c000"} 4' in text and "\nslurm_nodes 1\n" in text and "slurm_nodes_idle 1" in text
    status, headers, text = get(api, "/metrics/partitions", {"X-Pslurm-Cred": api.credential(NOBODY),
                                                             "Accept": "application/openmetrics-text"})
    assert status == 200 and headers["content-type"].startswith("application/openmetrics-text")
    assert 'slurm_partition_nodes{partition="debug"} 1' in text and text.endswith("# EOF\n")
    assert get(api, "/metrics/nope", {"X-Pslurm-Cred": api.credential()})[0] == 404


def test_jobs_requests_and_heartbeats_are_counted(api: Api) -> None:
    held = [api.submit(api.spec(name="counted", hold=True)) for _ in range(3)]
    api.call("GET", "/slurm/v0.0.40/nodes")
    _, _, jobs = get(api, "/metrics/jobs", {"X-Pslurm-Cred": api.credential()})
    pending = int(re.search(r"^slurm_jobs_pending (\d+)$", jobs, re.M).group(1))  # type: ignore[union-attr]
    assert pending >= 3 and int(re.search(r"^slurm_jobs_hold (\d+)$", jobs, re.M).group(1)) >= 3  # type: ignore[union-attr]
    _, _, users = get(api, "/metrics/jobs-users-accts", {"X-Pslurm-Cred": api.credential()})
    me = pwd.getpwuid(os.getuid()).pw_name  # a job's user is its uid's name, whatever the request said
    assert re.search(rf'^slurm_user_jobs_pending\{{username="{me}"\}} [1-9]', users, re.M)
    def own_metrics() -> str:
        return get(api, "/metrics/pslurm", {"X-Pslurm-Cred": api.credential()})[2]

    beat = r'^pslurm_grpc_requests_total\{method="Heartbeat",code="OK"\} [1-9]'
    own = wait_for(lambda: re.search(beat, text := own_metrics(), re.M) and text)  # the first heartbeat may be due
    assert re.search(r'^pslurm_grpc_requests_total\{method="RegisterNode",code="OK"\} 1$', own, re.M)
    assert re.search(r'^pslurm_http_requests_total\{method="GET",route="/slurm/v0.0.40/nodes",code="200"\} [1-9]',
                     own, re.M)
    assert re.search(r'^pslurm_node_heartbeat_age_seconds\{node="c000"\} \d', own, re.M)
    assert 'pslurm_scheduler_pass_duration_seconds_bucket{pass="backfill",le="+Inf"}' in own
    _, _, sched = get(api, "/metrics/scheduler", {"X-Pslurm-Cred": api.credential()})
    assert re.search(r"^slurm_bf_cycle_cnt [1-9]", sched, re.M) and re.search(r"^slurm_schedule_queue_len [3-9]",
                                                                               sched, re.M)
    api.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": held})


def test_a_session_opens_the_dashboard_and_nothing_else(api: Api) -> None:
    status, headers, _ = get(api, "/dashboard/queue")
    assert status == 303 and headers["location"] == "/dashboard/login"
    assert get(api, "/dashboard/api/job/1/tail")[0] == 401
    status, _, page = login(api, token="p2.api.0.0.1.abc.def")
    assert status == 401 and "Login refused: credential not signed with this cluster&#x27;s key" in page
    credential = api.credential()
    assert login(api, token=credential)[0] == 303
    status, _, page = login(api, token=credential)  # single use: a login cannot be replayed
    assert status == 401 and "already used" in page
    cookie = session(api)
    status, _, page = get(api, "/dashboard/", cookie)
    assert status == 200 and "<td>c000</td>" in page and "Log out" in page
    status, _, _ = get(api, "/slurm/v0.0.40/jobs", cookie)  # the API takes credentials, never the cookie
    assert status == 401
    assert get(api, "/metrics/jobs", cookie)[0] == 200  # reading metrics: a session will do
    status, headers, _ = get(api, "/dashboard/logout", cookie, "POST")
    assert status == 303 and get(api, "/dashboard/", cookie)[0] == 303


def test_another_users_job_shows_but_not_its_output(api: Api, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    tmp_path.chmod(0o755)
    job = api.submit(api.spec(name="talker", hold=False, workdir=str(tmp_path), stdout=str(out),
                              script="#!/bin/sh\necho secret-output-line\nsleep 60\n"))
    wait_for(lambda: api.call("GET", f"/slurm/v0.0.40/job/{job}")[1]["jobs"][0]["job_state"] == ["RUNNING"])
    mine, theirs = session(api), session(api, NOBODY)
    status, _, page = get(api, f"/dashboard/job/{job}", theirs)
    assert status == 200 and "talker" in page and 'id="tail-refused"' in page and 'id="tail"' not in page
    status, _, body = get(api, f"/dashboard/api/job/{job}/tail", theirs)
    assert status == 403 and "secret-output-line" not in body
    status, _, page = get(api, f"/dashboard/job/{job}", mine)
    assert status == 200 and f'data-src="/dashboard/api/job/{job}/tail"' in page
    found = wait_for(lambda: "secret-output-line" in (b := get(api, f"/dashboard/api/job/{job}/tail", mine)[2])
                     and b)
    assert f'"path": "{out}"' in found
    api.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": [job]})


def test_a_long_queue_comes_in_pages_and_every_value_is_escaped(api: Api) -> None:
    ids = [api.submit(api.spec(name=f"<script>alert({i})</script>", hold=True)) for i in range(55)]
    cookie = session(api)
    status, _, page = get(api, "/dashboard/queue?state=pending", cookie)
    assert status == 200 and "page 1 of 2" in page and "<script>alert" not in page
    assert "&lt;script&gt;alert(" in page and page.count('href="/dashboard/job/') == 50
    status, _, second = get(api, "/dashboard/queue?state=pending&page=2", cookie)
    assert status == 200 and second.count('href="/dashboard/job/') >= 5
    assert get(api, "/dashboard/queue?page=0", cookie)[0] == 400
    assert get(api, "/dashboard/queue?state=weird", cookie)[0] == 400
    behind = {"X-Forwarded-Prefix": "/hpc", **cookie}
    assert 'href="/hpc/dashboard/queue"' in get(api, "/dashboard/queue", behind)[2]
    api.call("POST", "/pslurm/v1/jobs/cancel", {"job_ids": ids})


def test_usage_and_open_metrics(tmp_path: Path) -> None:
    """MetricsType=metrics/openmetrics (Slurm's key) serves the metrics without a credential."""
    api = Api(tmp_path, extra_conf="MetricsType=metrics/openmetrics\n")
    try:
        wait_until_one_node_idle(api.call)
        status, _, text = get(api, "/metrics/nodes")
        assert status == 200 and "slurm_nodes 1" in text
        assert get(api, "/slurm/v0.0.40/jobs")[0] == 401  # the API stays closed
        status, _, page = get(api, "/dashboard/usage?from=2020-01-01", session(api))
        assert status == 200 and "Fair share" in page and time.strftime("%Y") in page
    finally:
        api.close()
