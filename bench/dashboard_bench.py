"""What the dashboard's pages and the metrics endpoints cost at 1000 nodes and 100,000 jobs.

    python bench/dashboard_bench.py [--nodes 1000] [--jobs 100000] [--repeat 5]

Fills a SQLite store (bulk inserts: 8 GPUs a node, every GPU held by a running job of 2 GPUs,
10,000 pending jobs, the rest ended over the last 30 days), starts psctld on it (no agents: the
nodes are UP from the fill, SlurmdTimeout a day), logs in to the dashboard and times each page and
endpoint over HTTP: median wall time and reply size. Also the GPU history's memory for 8 GPUs a
node at a 30 s heartbeat over 24 h, and the cost of recording one heartbeat. Figures are printed,
never asserted (docs/benchmarks.md keeps them).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

from sqlalchemy import insert, update

from pslurm.auth.credential import Identity, load_key, sign
from pslurm.cluster.local import free_ports
from pslurm.controller.history import GpuHistory
from pslurm.controller.store import Store
from pslurm.controller.store.schema import job_nodes, jobs, nodes
from pslurm.core.config import load_cluster_config
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobSpec, spec_to_dict
from pslurm.core.node import GpuInfo, NodeRecord

GPUS = 8
PENDING = 10_000


def write_conf(root: Path, n_nodes: int) -> Path:
    ctld, rest = free_ports(2)
    conf = root / "pslurm.conf"
    conf.write_text(f"""ClusterName=bench
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
RestPort={rest}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmdTimeout=86400
SchedulerParameters=bf_interval=30
NodeName=n[0000-{n_nodes - 1:04d}] NodeAddr=127.0.0.1 Port=1 CPUs=64 RealMemory=512000 Gres=gpu:{GPUS}
PartitionName=gpu Nodes=ALL Default=YES
""")
    return conf


def fill(conf: Path, n_jobs: int) -> int:
    """The store; returns a running job's id."""
    config = load_cluster_config(str(conf))
    os.makedirs(config.state_dir, mode=0o700, exist_ok=True)
    store = Store(f"sqlite:///{config.state_dir}/pslurm.db")
    store.migrate()
    now = time.time()
    store.ensure_nodes([NodeRecord(n.name, n.addr, n.port, n.cpus, n.real_memory, n.gres)
                        for n in config.nodes.values()])
    gpus = json.dumps([vars(GpuInfo(i, memory_mb=81920)) for i in range(GPUS)])
    names = list(config.nodes)
    spec = JobSpec("train", "u0", 1000, 1000, "/home/u0", script="#!/bin/sh\npython train.py\n",
                   gres=(GresRequest("gpu", None, 2),), cpus_per_task=8, mem_mb=64000)
    spec_json = json.dumps(spec_to_dict(spec))
    running = len(names) * GPUS // 2
    rows, allocs = [], []
    for i in range(n_jobs):
        user = f"u{i % 50}"
        row = dict(job_id=i + 1, name=f"train-{i % 300}", user_name=user, uid=1000 + i % 50, partition="gpu",
                   reason="None", submit_time=now - 30 * 86400 * (1 - i / n_jobs), cpus=8, mem_mb=64000,
                   gres="gpu:2", gpu_indices="", spec=spec_json, account=f"lab{i % 5}", nice=0, dependency="",
                   kill_on_invalid_dep=False, hold="", requeue=False, requeue_requested=False, restarts=0,
                   priority=0, req_nodes="", exc_nodes="", req_features="", exclusive=False, system_comment="",
                   comment="", qos="normal", nodes="", num_nodes=1, node_cpus="", exit_code=0, exit_signal=0,
                   cancel_requested=False, start_time=None, end_time=None, node=None)
        if i < n_jobs - running - PENDING:  # ended, over the last 30 days
            start = row["submit_time"] + 60
            node = names[i % len(names)]
            row.update(state="COMPLETED", start_time=start, end_time=min(now - 1, start + 3600), node=node, nodes=node,
                       gpu_indices="0,1")
        elif i < n_jobs - PENDING:  # running: every GPU of every node held
            k = i - (n_jobs - running - PENDING)
            node, gpu = names[k * 2 // GPUS], (k * 2) % GPUS
            row.update(state="RUNNING", start_time=now - 600, node=node, nodes=node, gpu_indices=f"{gpu},{gpu + 1}")
            allocs.append(dict(job_id=i + 1, idx=0, node=node, cpus=8, mem_mb=64000, gpu_indices=f"{gpu},{gpu + 1}"))
        else:
            row.update(state="PENDING", reason="Resources", priority=n_jobs - i)
        rows.append(row)
    with store.engine.begin() as conn:
        for part in range(0, len(rows), 5000):
            conn.execute(insert(jobs), rows[part:part + 5000])
        conn.execute(insert(job_nodes), allocs)
        conn.execute(update(nodes).values(state="UP", last_heartbeat=now, gpus=gpus))
    store.close()
    return n_jobs - PENDING - 1


def request(port: int, path: str, headers: dict[str, str], method: str = "GET", body: str | None = None
            ) -> tuple[int, bytes, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        return reply.status, reply.read(), dict(reply.getheaders())
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pslurm-dash-bench-"))
    conf = write_conf(root, args.nodes)
    t0 = time.perf_counter()
    job = fill(conf, args.jobs)
    print(f"fill: {args.nodes} nodes x {GPUS} GPUs, {args.jobs} jobs in {time.perf_counter() - t0:.1f} s")
    config = load_cluster_config(str(conf))
    log = open(root / "psctld.log", "wb")  # noqa: SIM115 - open while psctld runs
    ctld = subprocess.Popen([sys.executable, "-m", "pslurm.controller.app", "-f", str(conf)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        port = config.rest_port
        key_path = config.auth_key_path
        deadline = time.time() + 120
        while True:
            try:
                cred = sign(load_key(key_path), Identity(os.getuid(), os.getgid()), time.time())
                if request(port, "/metrics", {"X-Pslurm-Cred": cred})[0] == 200:
                    break
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.time() > deadline or ctld.poll() is not None:
                raise SystemExit(f"psctld did not come up: see {root / 'psctld.log'}")
            time.sleep(0.5)
        cred = sign(load_key(key_path), Identity(os.getuid(), os.getgid()), time.time())
        _, _, headers = request(port, "/dashboard/login", {"Content-Type": "application/x-www-form-urlencoded"},
                                "POST", urllib.parse.urlencode({"token": cred}))
        cookie = {"Cookie": headers["Set-Cookie"].split(";")[0]}
        pages = ["/dashboard/", "/dashboard/?page=20", "/dashboard/queue", "/dashboard/queue?state=pending&page=200",
                 "/dashboard/queue?state=finished&page=1000", f"/dashboard/job/{job}", "/dashboard/usage",
                 "/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/jobs-users-accts",
                 "/metrics/scheduler", "/metrics/pslurm", "/slurm/v0.0.40/nodes"]
        print(f"{'path':44} {'median ms':>10} {'min ms':>8} {'KiB':>8}")
        for path in pages:
            times, size = [], 0
            for _ in range(args.repeat):
                headers = dict(cookie)
                if not path.startswith("/dashboard"):
                    headers = {"X-Pslurm-Cred": sign(load_key(key_path), Identity(os.getuid(), os.getgid()),
                                                     time.time())}
                began = time.perf_counter()
                status, body, _ = request(port, path, headers)
                times.append(time.perf_counter() - began)
                assert status == 200, (path, status, body[:200])
                size = len(body)
            print(f"{path:44} {statistics.median(times) * 1000:10.1f} {min(times) * 1000:8.1f} {size / 1024:8.1f}")
    finally:
        ctld.terminate()
        ctld.wait(timeout=60)
        log.close()
    history = GpuHistory(30.0)
    measured = {i: (40000, 87.0) for i in range(GPUS)}
    for n in range(args.nodes):  # the first heartbeat makes each GPU's ring
        history.record(f"n{n:04d}", measured, 1_000_000.0)
    began = time.perf_counter()
    for n in range(args.nodes):  # the next, 30 s later: what every heartbeat costs from then on
        history.record(f"n{n:04d}", measured, 1_000_030.0)
    per_beat = (time.perf_counter() - began) / args.nodes
    print(f"GPU history: {history.gpus()} GPUs x {history.slots} slots (24 h at 30 s): "
          f"{history.bytes_held() / 2**20:.1f} MiB of samples; recording one heartbeat of {GPUS} GPUs: "
          f"{per_beat * 1e6:.1f} us")


if __name__ == "__main__":
    main()
