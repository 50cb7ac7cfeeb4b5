"""What one agent heartbeat costs the controller, in process, as the cluster grows.

    python bench/heartbeat_bench.py [--nodes 100,300,1000] [--jobs-per-node 4] [--rounds 3] [--db URL]

A real store (SQLite with WAL in a temporary directory, or ``--db``) holds N nodes of 8 GPUs, each
UP and running ``--jobs-per-node`` jobs; the node monitor takes heartbeats from every node as the
servicer hands them over (each node's runs, no steps, its GPUs' measured use), one after another on
one thread, in rounds: one to start (each node's first heartbeat reconciles in full), then
``--rounds`` with nothing changed between heartbeats (a cluster at rest) and ``--rounds`` with a job
changed before each heartbeat (a store notice: a cluster under load). Prints the CPU time of one
heartbeat (median of the rounds' means), what N nodes cost the controller's CPU at the heartbeat
interval of a pslurm up cluster (SlurmdTimeout=10: every 2.5 s) and at Slurm's default timeout
(SlurmdTimeout=300: every 30 s), and the node monitor's SlurmdTimeout check (once a second, with the
flush of the heartbeats heard to the store). gRPC's own cost per call is not in these figures.
Figures, not asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pslurm.controller.monitor import NodeMonitor, Run  # noqa: E402
from pslurm.controller.store import Store  # noqa: E402
from pslurm.core.config import parse_slurm_conf  # noqa: E402
from pslurm.core.jobspec import JobSpec  # noqa: E402
from pslurm.core.node import GpuInfo  # noqa: E402
from pslurm.core.states import NodeState  # noqa: E402


def cluster(nodes: int, jobs_per_node: int, url: str) -> tuple[NodeMonitor, Store, dict[str, list[Run]]]:
    conf = parse_slurm_conf(f"ClusterName=hb\nSlurmctldHost=localhost\nNodeName=c[0000-{nodes - 1:04d}] CPUs=64 "
                            f"RealMemory=512000 Gres=gpu:8\nPartitionName=p Nodes=ALL Default=YES\n")
    store = Store(url)
    store.migrate()
    monitor = NodeMonitor(conf, store, lambda: None, time.time)
    now = time.time()
    gpus = [GpuInfo(index=i, name="gpu") for i in range(8)]
    spec = JobSpec(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n")
    runs: dict[str, list[Run]] = {}
    for name in conf.nodes:
        monitor.register(name, "127.0.0.1", 1, gpus, [], "", "none")
        ids = [store.submit(spec, "p", None, now) for _ in range(jobs_per_node)]
        store.start_jobs([(job_id, name, (k,)) for k, job_id in enumerate(ids)], now)
        runs[name] = [Run(job_id, 0) for job_id in ids]
    assert all(n.state is NodeState.UP for n in store.get_nodes())
    return monitor, store, runs


def heartbeat_round(monitor: NodeMonitor, store: Store, runs: dict[str, list[Run]], held: int,
                    change: bool) -> float:
    """Every node beats once; the mean CPU seconds of one heartbeat. ``change``: a job changes (a
    held job's nice, a store notice) before each heartbeat, as under load."""
    measured = {i: (1000, 50.0) for i in range(8)}
    cpu = 0.0
    for name, node_runs in runs.items():
        if change:
            store.set_pending_fields([held], nice=0)
        c0 = time.process_time()
        again, kill = monitor.heartbeat(name, node_runs, "", measured, [])
        cpu += time.process_time() - c0
        assert not again and not kill
    return cpu / len(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="100,300,1000")
    parser.add_argument("--jobs-per-node", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default=None, help="a database URL (default: SQLite in a temporary directory)")
    args = parser.parse_args()
    print("| nodes | heartbeat, nothing changed (CPU) | heartbeat after a job change | at rest, 2.5 s intervals | "
          "changing, 2.5 s | changing, 30 s | SlurmdTimeout check |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (int(x) for x in args.nodes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            monitor, store, runs = cluster(n, args.jobs_per_node, args.db or f"sqlite:///{tmp}/hb.db")
            spec = JobSpec(name="j", user="root", uid=0, gid=0, workdir="/tmp", script="#!/bin/sh\ntrue\n", hold=True)
            held = store.submit(spec, "p", None, time.time())
            heartbeat_round(monitor, store, runs, held, False)  # the first heartbeat of each node reconciles in full
            quiet = statistics.median(heartbeat_round(monitor, store, runs, held, False) for _ in range(args.rounds))
            busy = statistics.median(heartbeat_round(monitor, store, runs, held, True) for _ in range(args.rounds))
            checks = []
            for _ in range(args.rounds):
                c0 = time.process_time()
                monitor.flush_heard()
                monitor.check_heartbeats()
                checks.append(time.process_time() - c0)
            print(f"| {n} | {quiet * 1e3:.3f} ms | {busy * 1e3:.2f} ms | {100 * quiet * n / 2.5:.1f} % of a core | "
                  f"{100 * busy * n / 2.5:.1f} % | {100 * busy * n / 30:.1f} % | "
                  f"{statistics.median(checks) * 1e3:.1f} ms |")
            store.close()


if __name__ == "__main__":
    main()
