"""Seeing the cluster, end to end: a real Prometheus (Debian's) scrapes a `pslurm up` cluster and
answers a PromQL query with the GPU utilisation of a running job's GPU; headless Chromium (Debian's,
through chromedriver) logs in to the dashboard, sees the cluster, a job's page with its charts and
live output, and is refused that output as another user.

The browser test writes a screenshot of each page; with ``PSLURM_SCREENSHOTS=docs/dashboard`` they
are docs/dashboard.md's pictures (``bash docs/dashboard-screenshots.sh`` regenerates them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.auth.credential import Identity, load_key, sign
from pslurm.cluster.local import free_ports
from pslurm.core.config import load_cluster_config
from tests.acceptance.webdriver import Browser, available
from tests.conftest import Cluster, ask_credential_as, cluster_from_conf, wait_for

NOBODY = 65534
CONF = """ClusterName=seeing
SlurmdTimeout=10
KillWait=1
MetricsType=metrics/openmetrics
NodeName=c[000-001] CPUs=8 RealMemory=16000 Gres=gpu:2
PartitionName=gpu Nodes=c[000-001] Default=YES MaxTime=1:00:00
"""
GRES = "NodeName=c[000-001] Name=gpu Count=2 Memory=16000\n"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def need(why_not: str) -> None:
    """A missing install fails under CI (.ci/run installs it) and skips, saying what, elsewhere."""
    if why_not:
        if os.environ.get("CI"):
            pytest.fail(why_not)
        pytest.skip(why_not)


@pytest.fixture(scope="module")
def seeing() -> Iterator[Cluster]:
    where = Path(tempfile.mkdtemp(prefix="pslurm-seeing-"))
    where.chmod(0o755)  # nobody reaches the configuration and the credential socket
    try:
        with cluster_from_conf(where, CONF, GRES) as c:
            yield c
    finally:
        shutil.rmtree(where)


def rest_url(c: Cluster) -> str:
    config = load_cluster_config(str(c.conf))
    return f"http://127.0.0.1:{config.rest_port}"


def busy_job(c: Cluster, tmp: Path, seconds: int = 120) -> str:
    """A job that holds 5000 MB of its simulated GPU (so 100 % utilisation) and prints a line a second."""
    tmp.chmod(0o755)
    wrap = f"echo 5000 > $PSLURM_SIMULATED_GPU_DIR/$$; for i in $(seq 1 {seconds}); do echo step $i; sleep 1; done"
    proc = c.run("psbatch", "--parsable", "-J", "train", "--gres=gpu:1", "-o", str(tmp / "%j.out"), "--wrap", wrap,
                 cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    job = proc.stdout.strip()
    wait_for(lambda: c.run("psqueue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING", timeout=30)
    return job


def test_prometheus_scrapes_the_gpu_utilisation_of_a_running_jobs_gpu(seeing: Cluster, tmp_path: Path) -> None:
    need("" if os.access(PROMETHEUS, os.X_OK) else "prometheus missing (Debian's prometheus; .ci/run installs it)")
    job = busy_job(seeing, tmp_path)
    target = rest_url(seeing).removeprefix("http://")
    jobs = "\n".join(f"""  - job_name: {name.replace('-', '_')}
    metrics_path: /metrics/{name}
    static_configs: [{{targets: ['{target}']}}]""" for name in ("pslurm", "nodes", "jobs", "scheduler"))
    (tmp_path / "prometheus.yml").write_text(f"global: {{scrape_interval: 1s, scrape_timeout: 1s}}\n"
                                             f"scrape_configs:\n{jobs}\n")
    [port] = free_ports(1)
    with open(tmp_path / "prometheus.log", "wb") as log:
        prom = subprocess.Popen([PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def query(promql: str) -> list[dict[str, object]]:
            url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    return list(json.loads(reply.read())["data"]["result"])
            except OSError:
                return []

        found = wait_for(lambda: query(f'pslurm_gpu_utilization_percent{{jobid="{job}"}}'), timeout=60)
        [series] = found
        assert series["value"][1] == "100"  # type: ignore[index]
        assert series["metric"]["user"] == "root" and series["metric"]["node"] in ("c000", "c001")  # type: ignore[index]
        assert wait_for(lambda: query("slurm_nodes"))[0]["value"][1] == "2"  # type: ignore[index]
        assert float(wait_for(lambda: query("slurm_jobs_running"))[0]["value"][1]) >= 1  # type: ignore[index]
        up = wait_for(lambda: len(r := query("up == 1")) == 4 and r)  # every endpoint parses as Prometheus reads it
        assert {s["metric"]["job"] for s in up} == {"pslurm", "nodes", "jobs", "scheduler"}  # type: ignore[index]
        grafana = json.loads((Path(__file__).parents[2] / "conf" / "grafana-pslurm.json").read_text())
        exprs = [t["expr"].replace("$node", ".*") for p in grafana["panels"] for t in p["targets"]]
        empty = [e for e in exprs if "rate(" not in e and not query(e)]  # rates need two scrapes a window apart
        assert empty == [], f"conf/grafana-pslurm.json asks for what is not scraped: {empty}"
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        seeing.run("pscancel", job)


def test_a_browser_logs_in_sees_the_cluster_and_a_jobs_live_output_and_not_another_users(
        seeing: Cluster, tmp_path: Path) -> None:
    need(available())
    shots = Path(os.environ.get("PSLURM_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    job = busy_job(seeing, tmp_path)
    base = rest_url(seeing) + "/dashboard"
    config = load_cluster_config(str(seeing.conf))
    browser = Browser()
    try:
        browser.get(base + "/")
        assert browser.current_url == base + "/login"  # no session yet
        browser.screenshot(shots / "login.png")
        browser.type("#token", "p2.api.0.0.0.0.forged")
        browser.click("#login")
        browser.wait_for(lambda: browser.find_all(".error"))
        assert "Login refused" in browser.text(".error")
        browser.type("#token", sign(load_key(config.auth_key_path), Identity(0, 0), time.time()))
        browser.click("#login")
        browser.wait_for(lambda: browser.current_url == base + "/")  # a click starts the form's navigation
        [cookie] = [c for c in browser.cookies() if c["name"] == "pslurm_session"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert browser.script("return document.cookie") == ""  # HttpOnly: the page's scripts cannot read it
        assert "c000" in browser.text("table.nodes") and "c001" in browser.text("table.nodes")
        def measured() -> bool:  # the job's GPU at 100 % from its first heartbeat on; reload until then
            if "100%" in browser.text("table.nodes"):
                return True
            browser.get(base + "/")
            return False

        browser.wait_for(measured)
        assert f"{job} root" in browser.text("table.nodes")
        browser.screenshot(shots / "cluster.png")
        browser.get(base + "/queue")
        assert "train" in browser.text("table.jobs")
        browser.screenshot(shots / "queue.png")
        time.sleep(6)  # a few heartbeats' samples for the charts
        browser.get(f"{base}/job/{job}")
        assert len(browser.find_all("svg.chart")) == 2 and browser.find_all("svg.chart polyline")
        browser.wait_for(lambda: browser.attribute("#tail", "data-state") == "live"
                         and "step 3" in browser.text("#tail"))
        first = browser.text("#tail")
        browser.wait_for(lambda: browser.text("#tail") != first, timeout=15)  # live: it grows without a reload
        browser.screenshot(shots / "job.png")
        browser.get(base + "/usage?from=2020-01-01")
        assert "root" in browser.text("table.usage")
        browser.screenshot(shots / "usage.png")
        browser.click("form.who button")  # log out
        browser.wait_for(lambda: browser.current_url == base + "/login")
        browser.type("#token", ask_credential_as(NOBODY, NOBODY, config.auth_socket_path))
        browser.click("#login")
        browser.wait_for(lambda: browser.current_url == base + "/")
        browser.get(f"{base}/job/{job}")
        assert "train" in browser.text("table.record")  # the job shows, as psqueue shows it
        assert "not yours to see" in browser.text("#tail-refused") and not browser.find_all("#tail")
        status = browser.script("return fetch(arguments[0]).then(r => r.status)", f"{base}/api/job/{job}/tail")
        assert status == 403
        browser.screenshot(shots / "job-other-user.png")
    finally:
        browser.close()
        seeing.run("pscancel", job)
