"""A newcomer's first minutes with the API port, on a `pslurm up` cluster: a browser at `/` lands on
the dashboard, `pslurm dashboard` prints a login link that opens it once (reuse and a made-up code
refused with the login page's reason), and slurmrestd 25.11's probes answer without a credential."""

from __future__ import annotations

import http.client
import os
import re
import time

from pslurm.auth.credential import Identity, load_key, sign
from pslurm.core.config import load_cluster_config
from tests.conftest import Cluster


def request(c: Cluster, path: str, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """The reply (its body read: ``reply.text``)."""
    conn = http.client.HTTPConnection("127.0.0.1", load_cluster_config(str(c.conf)).rest_port, timeout=30)
    try:
        conn.request("GET", path, headers=headers or {})
        reply = conn.getresponse()
        reply.text = reply.read().decode()  # type: ignore[attr-defined]
        return reply
    finally:
        conn.close()


def body_of(c: Cluster, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    reply = request(c, path, headers)
    return reply.status, reply.text  # type: ignore[attr-defined]


def test_a_browser_at_the_api_port_lands_on_the_dashboard(cluster: Cluster) -> None:
    root = request(cluster, "/")
    assert root.status == 302 and root.headers["Location"] == "/dashboard/"
    proxied = request(cluster, "/", {"X-Forwarded-Prefix": "/cluster"})
    assert proxied.headers["Location"] == "/cluster/dashboard/"
    landing = request(cluster, "/dashboard/")  # no session yet: the login page
    assert landing.status == 303 and landing.headers["Location"].startswith("/dashboard/login")


def test_pslurm_dashboard_prints_a_link_that_logs_in_once(cluster: Cluster) -> None:
    out = cluster.run("pslurm", "dashboard")
    assert out.returncode == 0, out.stderr
    [url] = [line for line in out.stdout.splitlines() if line.startswith("http://")]
    match = re.fullmatch(r"http://[^/]+(/dashboard/login/link\?code=[A-Za-z0-9_-]{32})", url)
    assert match is not None, url
    first = request(cluster, match.group(1))
    assert first.status == 303 and first.headers["Location"] == "/dashboard/"
    cookie = first.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]
    status, page = body_of(cluster, "/dashboard/", {"Cookie": session})
    assert status == 200 and "Log out" in page  # in: the cluster's page, not the login form
    again, page = body_of(cluster, match.group(1))
    assert again == 401 and "Login refused: this login link was used already" in page
    made_up, page = body_of(cluster, "/dashboard/login/link?code=" + "A" * 32)
    assert made_up == 401 and "Login refused: this login link is not one this controller gave" in page
    assert body_of(cluster, "/slurm/v0.0.44/ping", {"Cookie": session})[0] == 401  # the cookie never opens the API


def test_the_probes_answer_as_slurmrestds(cluster: Cluster) -> None:
    for path in ("/livez", "/healthz", "/readyz"):
        reply = request(cluster, path)
        assert reply.status == 204, path
    status, text = body_of(cluster, "/readyz?verbose")  # who asks must say: root or the SlurmUser only
    assert status == 401 and text.startswith("slurmrestd HTTP server request for 'GET /readyz':\nFailed: ")
    key = load_key(str(cluster.conf.parent / "pslurm.key"))
    nobody = sign(key, Identity(65534, 65534), time.time())
    status, text = body_of(cluster, "/readyz?verbose", {"X-Pslurm-Cred": nobody})
    assert status == 403 and text.endswith("Failed: Access/permission denied\n")
    mine = sign(key, Identity(os.getuid(), os.getgid()), time.time())  # the cluster's owner: an operator
    status, text = body_of(cluster, "/readyz?verbose", {"X-Pslurm-Cred": mine})
    assert status == 200 and "controller: ready (" in text and "store: ready (ok)" in text, text
