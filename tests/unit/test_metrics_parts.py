"""Observability's pieces on their own: the OpenMetrics writer, the GPU history's ring, Slurm's
metric families from synthetic nodes and tallies, sessions and the login's token check, the charts
and pages' escaping, and the store's tallies, pages and GPU hours on a real SQLite store."""

from __future__ import annotations

import re
import time

import pytest

from pslurm.auth.credential import AuthError, Identity, sign
from pslurm.auth.transport import Authenticator
from pslurm.controller.allocations import NodeUsage
from pslurm.controller.history import GpuHistory
from pslurm.controller.metrics import Histogram, Measurements, MetricWriter
from pslurm.controller.metricsets import jobs_metrics, nodes_metrics, pslurm_metrics, scheduler_metrics
from pslurm.controller.monitor import NOT_RESPONDING, NodeStatus
from pslurm.controller.rest.charts import Line, line_chart
from pslurm.controller.rest.pages import Page, Viewer, queue_page
from pslurm.controller.rest.session import Sessions, token_identity
from pslurm.controller.store import Allocation, Store
from pslurm.controller.store.stats import QUEUE, RECENT, JobTally, gpu_hours, job_page, job_tallies
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import GpuUsage, NodeRecord
from pslurm.core.states import JobState, NodeState

KEY = b"k" * 32


def test_the_writer_speaks_openmetrics_and_prometheus_text() -> None:
    hist = Histogram((0.1, 1.0))
    for value in (0.05, 0.5, 5.0):
        hist.observe(value)
    for openmetrics in (True, False):
        w = MetricWriter(openmetrics)
        w.gauge("g", "a gauge", [((("node", 'c"0\\'),), 1.5), ((), 2)])
        w.counter("c", "a counter", [((), 3)])
        w.histogram("h", "a histogram", [((("pass", "main"),), hist)])
        text = w.text()
        assert 'g{node="c\\"0\\\\"} 1.5\ng 2\n' in text
        assert ("# TYPE c counter" if openmetrics else "# TYPE c_total counter") in text and "\nc_total 3\n" in text
        assert 'h_bucket{pass="main",le="0.1"} 1\nh_bucket{pass="main",le="1"} 2\nh_bucket{pass="main",le="+Inf"} 3' \
            in text and 'h_count{pass="main"} 3' in text and 'h_sum{pass="main"} 5.55' in text
        assert text.endswith("# EOF\n") == openmetrics
    w = MetricWriter()
    w.gauge("once", "x", [])
    with pytest.raises(ValueError, match="written twice"):
        w.gauge("once", "x", [])


def test_the_gpu_history_is_a_bounded_ring_with_gaps() -> None:
    history = GpuHistory(resolution=2.0, window=20.0)
    assert history.slots == 10
    for t in (100.0, 102.0, 104.0):
        history.record("c000", {0: (4000, 50.0), 1: (0, 0.0)}, t)
    history.record("c000", {0: (8000, 100.0)}, 110.0)  # 106 and 108: no heartbeat
    found = history.series("c000", 0, 0, 200)
    assert [(s.time, s.util, s.memory_mb) for s in found] == [(100.0, 50, 4000), (102.0, 50, 4000),
                                                             (104.0, 50, 4000), (110.0, 100, 8000)]
    assert [s.time for s in history.series("c000", 0, 101, 105)] == [102.0, 104.0]
    size = history.bytes_held()
    for t in range(112, 2000, 2):  # far longer than the window: the oldest samples go, nothing grows
        history.record("c000", {0: (1, 1.0), 1: (0, 0.0)}, float(t))
    assert history.bytes_held() == size == 2 * 10 * 3
    assert [s.time for s in history.series("c000", 0, 0, 5000)] == [float(t) for t in range(1980, 2000, 2)]
    history.record("c000", {0: (2, 2.0)}, 1000.0)  # a clock step back: ignored
    assert history.series("c000", 0, 1998, 1998)[0].util == 1
    assert history.series("c999", 0, 0, 5000) == []


def status(name: str, state: NodeState = NodeState.UP, drain: bool = False, jobs: int = 0, cpus: int = 0,
           gpus_used: tuple[int, ...] = (), reason: str = "") -> NodeStatus:
    node = NodeRecord(name, "127.0.0.1", 1, 8, 16000, (GresRequest("gpu", None, 2),), state, drain, reason, 90.0)
    gpus = (GpuUsage(0, "gpu" if 0 in gpus_used else "", 1, 1, 1 if 0 in gpus_used else 0, 16000, 0, 5000, 87.0),
            GpuUsage(1, memory_mb=16000))
    return NodeStatus(node, NodeUsage(cpus, 1000 * jobs, list(gpus_used), jobs), "idle", gpus)


def test_slurms_node_families_count_states_and_flags() -> None:
    nodes = [status("c000"), status("c001", jobs=1, cpus=2, gpus_used=(0,)), status("c002", jobs=2, cpus=8),
             status("c003", drain=True), status("c004", drain=True, jobs=1, cpus=1),
             status("c005", NodeState.DOWN, reason=NOT_RESPONDING)]
    w = MetricWriter(False)
    nodes_metrics(w, nodes)
    text = w.text()

    def value(name: str) -> str:
        return re.search(rf"^{re.escape(name)} (\S+)$", text, re.M).group(1)  # type: ignore[union-attr]

    assert value("slurm_nodes") == "6" and value("slurm_nodes_idle") == "2" and value("slurm_nodes_mixed") == "2"
    assert value("slurm_nodes_alloc") == "1" and value("slurm_nodes_down") == "1" and value("slurm_nodes_drain") == "2"
    assert value("slurm_nodes_drained") == "1" and value("slurm_nodes_draining") == "1"
    assert value("slurm_nodes_noresp") == "1" and value("slurm_nodes_cloud") == "0"
    assert value('slurm_node_gpus_alloc{node="c001"}') == "1" and value('slurm_node_cpus_idle{node="c002"}') == "0"
    assert value('slurm_node_memory_bytes{node="c000"}') == str(16000 * 1024 * 1024)


def test_slurms_job_families_and_pslurms_gpu_families() -> None:
    tallies = [JobTally(JobState.PENDING, True, "ann", "lab", "gpu", 3, 0),
               JobTally(JobState.PENDING, False, "bo", "lab", "gpu", 2, 0),
               JobTally(JobState.RUNNING, False, "ann", "lab", "gpu", 1, 1),
               JobTally(JobState.COMPLETED, False, "bo", "", "gpu", 4, 4)]
    allocations = [Allocation(7, "c001", 2, 1000, (0,), "ann", "lab")]
    w = MetricWriter(False)
    jobs_metrics(w, tallies, allocations)
    text = w.text()
    for line in ("slurm_jobs 10", "slurm_jobs_pending 5", "slurm_jobs_hold 3", "slurm_jobs_running 1",
                 "slurm_jobs_finished 4", "slurm_jobs_started 5", "slurm_jobs_cpus_alloc 2", "slurm_jobs_gpus_alloc 1",
                 "slurm_jobs_bootfail 0", "slurm_jobs_nodes_alloc 1"):
        assert f"\n{line}\n" in text, line
    measured = Measurements(started=0.0)
    measured.scheduler_pass(False, 0.002, 1, 50.0)
    measured.scheduler_pass(True, 0.004, 2, 60.0)
    w = MetricWriter(False)
    scheduler_metrics(w, *measured.passes()[:2], pending=5, running=1, now=100.0)
    sched = w.text()
    assert "\nslurm_schedule_cycle_last 2000\n" in sched and "\nslurm_bf_cycle_last 4000\n" in sched  # microseconds
    assert "\nslurm_backfilled_jobs 2\n" in sched and "\nslurm_bf_when_last_cycle 60\n" in sched
    w = MetricWriter(True)
    pslurm_metrics(w, [status("c001", jobs=1, cpus=2, gpus_used=(0,))], allocations, measured, 5, 600, 100.0)
    own = w.text()
    assert 'pslurm_gpu_utilization_percent{node="c001",gpu="0",jobid="7",user="ann"} 87' in own
    assert 'pslurm_gpu_job_info{node="c001",gpu="0",jobid="7",user="ann",account="lab"} 1' in own
    assert 'pslurm_node_heartbeat_age_seconds{node="c001"} 10' in own
    assert 'pslurm_scheduler_passes_total{pass="backfill"} 1' in own


def test_sessions_are_bounded_and_expire_and_logins_are_single_use() -> None:
    now = [1000.0]
    sessions = Sessions(ttl=60, max_sessions=5, max_per_user=2, clock=lambda: now[0])
    ann = [sessions.open(Identity(1, 1)) for _ in range(3)]
    assert sessions.identity(ann[0]) is None and sessions.identity(ann[2]) == Identity(1, 1)  # two per user
    others = [sessions.open(Identity(i, i)) for i in range(10, 14)]
    assert len(sessions) == 5 and sessions.identity(others[-1]) == Identity(13, 13)
    now[0] += 61
    assert sessions.identity(others[-1]) is None
    auth = Authenticator(KEY)
    credential = sign(KEY, Identity(5, 6), time.time())
    assert token_identity(auth, credential) == Identity(5, 6)
    with pytest.raises(AuthError, match="already used"):
        token_identity(auth, credential)
    with pytest.raises(AuthError, match="tokens: not configured"):
        token_identity(auth, "eyJhbGciOiJIUzI1NiJ9.e30.x")
    assert token_identity(auth, "a.b.c", jwt=lambda token, now: Identity(9, 9)) == Identity(9, 9)
    with pytest.raises(AuthError, match="too long"):
        token_identity(auth, "x" * 9000)


def test_charts_and_pages_escape_what_users_wrote() -> None:
    svg = line_chart("<b>", [Line("c000 gpu0", [(0.0, 50.0), (10.0, 100.0)]), Line("<x>", [(5.0, 1.0)])],
                     0.0, 10.0, 100, "%")
    assert svg.startswith("<svg") and "&lt;b&gt;" in svg and "&lt;x&gt;" in svg and "<polyline" in svg
    assert "<circle" in svg  # a single sample is a dot
    assert "no samples" in line_chart("t", [Line("a", [])], 0.0, 10.0, 100, "%")
    spec = JobSpec("<img src=x onerror=alert(1)>", "ann", 1, 1, "/tmp")
    job = JobRecord(3, spec, JobState.PENDING, partition="gpu")
    page = queue_page(Viewer('/p"x/dashboard', "<ann>", 1, False), [job], Page(1, 1, 1), "active", "", 0.0)
    assert "<img" not in page and "&lt;img src=x" in page and "&lt;ann&gt;" in page and "/p&quot;x/dashboard" in page


@pytest.fixture
def store(db_url: str) -> Store:
    """A real store, SQLite and PostgreSQL (the tallies' and GPU hours' SQL must hold on both)."""
    found = Store(db_url)
    found.migrate()
    return found


def test_tallies_pages_and_gpu_hours_from_the_store(store: Store) -> None:
    def submit(user: str, name: str, now: float, account: str = "lab", hold: bool = False) -> int:
        spec = JobSpec(name, user, 1, 1, "/tmp", gres=(GresRequest("gpu", None, 2),), account=account, hold=hold)
        return store.submit(spec, "gpu", None, now)

    ran = submit("ann", "ran", 0.0)
    store.start_jobs([(ran, "c000", (0, 1))], 1000.0)
    store.finish(ran, "c000", 0, JobState.COMPLETED, 0, 0, 1000.0 + 7200)  # 2 h on 2 GPUs
    running = submit("bo", "running", 0.0, account="ml")
    store.start_jobs([(running, "c001", (1,))], 5000.0)
    pending = [submit("cy", f"p{i}", 10.0 + i, hold=i == 0) for i in range(120)]
    store.set_pending_fields(pending[5:6], admin_priority=999)

    tallies = {(t.state, t.held, t.user): t.jobs for t in job_tallies(store, ended_since=8200.0)}
    assert tallies == {(JobState.COMPLETED, False, "ann"): 1, (JobState.RUNNING, False, "bo"): 1,
                       (JobState.PENDING, True, "cy"): 1, (JobState.PENDING, False, "cy"): 119}
    assert all(t.state is not JobState.COMPLETED for t in job_tallies(store, ended_since=8200.0 + 1))

    first, total = job_page(store, (JobState.PENDING, JobState.RUNNING), offset=0, limit=50, order=QUEUE)
    assert total == 121 and len(first) == 50
    assert first[0].job_id == running and first[1].job_id == pending[5]  # running first, then by priority
    last, _ = job_page(store, (JobState.PENDING, JobState.RUNNING), offset=100, limit=50, order=QUEUE)
    assert len(last) == 21
    newest, total = job_page(store, (), ["ann", "bo"], limit=5, order=RECENT)
    assert total == 2 and [j.job_id for j in newest] == [running, ran] and newest[1].spec.name == "ran"

    hours = {(h.user, h.account): h for h in gpu_hours(store, start=0.0, end=9000.0, now=6000.0)}
    assert hours[("ann", "lab")].gpu_seconds == pytest.approx(2 * 7200) and hours[("ann", "lab")].jobs == 1
    assert hours[("bo", "ml")].gpu_seconds == pytest.approx(1000.0)  # running: up to now
    clipped = {(h.user, h.account): h for h in gpu_hours(store, start=4600.0, end=5600.0, now=6000.0)}
    assert clipped[("ann", "lab")].gpu_seconds == pytest.approx(2 * 1000) and clipped[("bo", "ml")].gpu_seconds \
        == pytest.approx(600)
    assert ("cy", "lab") not in hours  # never ran


def test_which_job_holds_which_gpu_is_there_for_gpus_without_a_meter() -> None:
    """A plain cluster (gres gpu:2, no --gpu-memory): the agents report no figures, yet each GPU has its
    line, and the one a job holds names the job (issue 30)."""
    node = NodeRecord("c000", "127.0.0.1", 1, 8, 16000, (GresRequest("gpu", None, 2),), NodeState.UP, False, "", 90.0)
    plain = NodeStatus(node, NodeUsage(1, 0, [1], 1), "mix", ())
    w = MetricWriter(True)
    pslurm_metrics(w, [plain], [Allocation(9, "c000", 1, 0, (1,), "ann", "lab")], Measurements(started=0.0), 0, 0,
                   100.0)
    text = w.text()
    assert 'pslurm_gpu_jobs{node="c000",gpu="0"} 0' in text and 'pslurm_gpu_jobs{node="c000",gpu="1"} 1' in text
    assert 'pslurm_gpu_job_info{node="c000",gpu="1",jobid="9",user="ann",account="lab"} 1' in text
    assert "pslurm_gpu_utilization_percent{" not in text and "pslurm_gpu_memory_bytes{" not in text  # nothing measured
