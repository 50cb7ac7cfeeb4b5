"""Slurm's JWT on the REST API (issue 20 item 3): `pscontrol token` as `scontrol token`, the token in
X-SLURM-USER-NAME / X-SLURM-USER-TOKEN beside pslurm's own credential, refusals as 401, and a real
slurmrestd client (pyslurmutils' SlurmRestExecutor, from PyPI) running two functions as jobs.
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import sys
from pathlib import Path
from typing import Any

from pslurm.auth import jwt
from tests.acceptance.pyslurm_tasks import add, where
from tests.conftest import Cluster


def rest_port(c: Cluster) -> int:
    from pslurm.core.config import load_cluster_config

    return load_cluster_config(str(c.conf)).rest_port


def get(c: Cluster, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", rest_port(c), timeout=30)
    try:
        conn.request("GET", path, headers=headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read() or b"{}")
    finally:
        conn.close()


def token(c: Cluster, *words: str) -> str:
    proc = c.run("pscontrol", "token", *words)
    assert proc.returncode == 0, proc.stderr
    name, _, value = proc.stdout.strip().partition("=")
    assert name == "SLURM_JWT" and value.count(".") == 2
    return value


def test_a_token_opens_the_api_as_its_user_and_nothing_else_does(cluster: Cluster) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    good = token(cluster, "lifespan=60")
    status, body = get(cluster, "/slurm/v0.0.40/jobs", {jwt.USER_HEADER: me, jwt.TOKEN_HEADER: good})
    assert status == 200 and body["errors"] == []
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    key = (cluster.state_dir / "ctld" / jwt.KEY_FILE).read_bytes()
    expired = jwt.encode({"iat": 1, "exp": 2, "sun": me}, key)
    other = token(cluster, "username=nobody")  # an operator may ask one for another user
    for headers in ({jwt.USER_HEADER: me, jwt.TOKEN_HEADER: forged}, {jwt.USER_HEADER: me, jwt.TOKEN_HEADER: expired},
                    {jwt.USER_HEADER: me, jwt.TOKEN_HEADER: other}, {jwt.USER_HEADER: me, jwt.TOKEN_HEADER: "x.y.z"}):
        status, body = get(cluster, "/slurm/v0.0.40/jobs", headers)
        assert status == 401, (headers, body)
        assert body["errors"][0]["error"].startswith("authentication failed: ")
    assert (cluster.state_dir / "ctld" / jwt.KEY_FILE).stat().st_mode & 0o777 == 0o600
    bad = cluster.run("pscontrol", "token", "lifetime=5")
    assert bad.returncode == 1 and bad.stderr == "Invalid option: `lifetime=5`\n"


def test_pyslurmutils_runs_two_functions_as_jobs_with_a_token(cluster: Cluster, tmp_path: Path) -> None:
    from pyslurmutils.concurrent.rest import SlurmRestExecutor

    me = pwd.getpwuid(os.getuid()).pw_name
    with SlurmRestExecutor(url=f"http://127.0.0.1:{rest_port(cluster)}", user_name=me, token=token(cluster),
                           api_version="v0.0.40", log_directory=str(tmp_path), max_workers=2,
                           python_cmd=sys.executable, use_env_credentials=False,
                           parameters={"time_limit": 5, "current_working_directory": str(tmp_path)}) as executor:
        first, second = executor.submit(add, 20, 22), executor.submit(where, "second")
        assert first.result(timeout=120) == 42
        assert second.result(timeout=120) == f"second in job {second.job_id}"
        assert first.job_id != second.job_id  # two jobs (max_workers=2)
