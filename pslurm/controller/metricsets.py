"""The metric families served under ``/metrics``: Slurm 25.11's (``MetricsType=metrics/openmetrics``:
``/metrics/jobs``, ``/metrics/nodes``, ``/metrics/partitions``, ``/metrics/scheduler``,
``/metrics/jobs-users-accts``, with Slurm's names and help texts) and pslurm's own
(``/metrics/pslurm``: each GPU, each node's heartbeat, the scheduler's passes, the requests served).

Pure functions of what they are given (tallies from the store, the node monitor's nodes, the
allocations, the controller's measurements) and ``now``. Slurm's families that stand for states or
flags pslurm has not (BootFail, Cloud, Future, power saving, ...) are written as 0, so that
dashboards made for Slurm find every name they ask for.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pslurm.controller.metrics import Labels, Measurements, MetricWriter, PassStats
from pslurm.controller.monitor import NOT_RESPONDING, NodeStatus
from pslurm.controller.store import Allocation
from pslurm.controller.store.stats import JobTally
from pslurm.core.config import PartitionConfig
from pslurm.core.states import JobState, NodeState

MB = 1024 * 1024
MICRO = 1_000_000  # sdiag's cycle times are microseconds

# Slurm's job families after "jobs_" (and "partition_jobs_", "user_jobs_", "account_jobs_"): the state
# each counts, or None for one pslurm never has. Help texts as slurmctld's.
JOB_STATES: tuple[tuple[str, JobState | None, str], ...] = (
    ("bootfail", None, "Number of jobs in BootFail state"),
    ("cancelled", JobState.CANCELLED, "Number of jobs in Cancelled state"),
    ("completed", JobState.COMPLETED, "Number of jobs in Completed state"),
    ("completing", JobState.COMPLETING, "Number of jobs in Completing state"),
    ("configuring", None, "Number of jobs in Configuring state"),
    ("deadline", JobState.DEADLINE, "Number of jobs in Deadline state"),
    ("expediting", None, "Number of jobs in Expediting state"),
    ("failed", JobState.FAILED, "Number of jobs in Failed state"),
    ("fed_requeued", None, "Number of jobs requeued in a federation"),
    ("node_failed", JobState.NODE_FAIL, "Number of jobs in Node Failed state"),
    ("outofmemory", JobState.OUT_OF_MEMORY, "Number of jobs in Out of Memory state"),
    ("pending", JobState.PENDING, "Number of jobs in Pending state"),
    ("powerup_node", None, "Number of jobs in PowerUp Node state"),
    ("preempted", None, "Number of jobs in Preempted state"),
    ("requeued", None, "Number of jobs in Requeued state"),
    ("resizing", None, "Number of jobs in Resizing state"),
    ("revoked", None, "Number of jobs in Revoked state"),
    ("running", JobState.RUNNING, "Number of jobs in Running state"),
    ("signaling", None, "Number of jobs being signaled"),
    ("stageout", None, "Number of jobs in StageOut state"),
    ("suspended", JobState.SUSPENDED, "Number of jobs in Suspended state"),
    ("timeout", JobState.TIMEOUT, "Number of jobs in Timeout state"),
)
# Slurm's node flags and states pslurm has not: written as 0 (nodes_ and partition_nodes_ families)
ABSENT_NODE_FLAGS = ("blocked", "cloud", "dyn_future", "dyn_normal", "external", "fail", "future", "invalid_reg",
                     "maint", "planned", "power_down", "power_up", "powered_down", "powering_up", "reboot_issued",
                     "reboot_req", "resv")


@dataclass
class JobCounts:
    """Slurm's jobs_stats_t for one group of jobs (all, a partition, a user, an account)."""

    by_state: dict[JobState, int]
    held: int = 0
    started: int = 0
    cpus: int = 0
    gpus: int = 0
    memory_mb: int = 0
    nodes: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    @property
    def finished(self) -> int:
        return sum(n for s, n in self.by_state.items() if s.is_final)


def count_jobs(tallies: Iterable[JobTally], allocations: Iterable[Allocation], key: Callable[[JobTally], str],
               alloc_key: Callable[[Allocation], str] | None) -> dict[str, JobCounts]:
    """The tallies and allocations summed per ``key`` (one group "" for all)."""
    out: dict[str, JobCounts] = defaultdict(lambda: JobCounts(defaultdict(int)))
    for t in tallies:
        counts = out[key(t)]
        counts.by_state[t.state] += t.jobs
        counts.held += t.jobs if t.held and t.state is JobState.PENDING else 0
        counts.started += t.started
    if alloc_key is not None:
        for a in allocations:
            counts = out[alloc_key(a)]
            counts.cpus += a.cpus
            counts.gpus += len(a.gpu_indices)
            counts.memory_mb += a.mem_mb
            counts.nodes += 1  # one Allocation per (job, node)
    return out


def _job_families(w: MetricWriter, prefix: str, groups: dict[str, JobCounts], label: str | None) -> None:
    """Slurm's job families named ``prefix``jobs_*, one sample per group (labelled ``label``)."""
    def samples(value: Callable[[JobCounts], float]) -> list[tuple[Labels, float]]:
        return [(((label, name),) if label else (), value(c)) for name, c in sorted(groups.items())]

    w.gauge(f"{prefix}jobs", "Total number of jobs", samples(lambda c: c.total))
    for name, state, help_text in JOB_STATES:
        w.gauge(f"{prefix}jobs_{name}", help_text,
                samples(lambda c, s=state: c.by_state.get(s, 0) if s is not None else 0))  # type: ignore[misc]
    w.gauge(f"{prefix}jobs_finished", "Number of finished jobs", samples(lambda c: c.finished))
    w.gauge(f"{prefix}jobs_started", "Number of started jobs", samples(lambda c: c.started))
    w.gauge(f"{prefix}jobs_hold", "Number of jobs in Hold state", samples(lambda c: c.held))
    w.gauge(f"{prefix}jobs_cpus_alloc", "Total number of Cpus allocated by jobs", samples(lambda c: c.cpus))
    w.gauge(f"{prefix}jobs_gpus_alloc", "Total number of GPUs allocated by jobs", samples(lambda c: c.gpus))
    w.gauge(f"{prefix}jobs_memory_alloc", "Total memory bytes allocated by jobs",
            samples(lambda c: c.memory_mb * MB))
    w.gauge(f"{prefix}jobs_nodes_alloc", "Total number of nodes allocated by jobs", samples(lambda c: c.nodes))


def jobs_metrics(w: MetricWriter, tallies: Sequence[JobTally], allocations: Sequence[Allocation]) -> None:
    """``/metrics/jobs``: the jobs the controller holds, by state, and what they hold."""
    groups = count_jobs(tallies, allocations, lambda t: "", lambda a: "")
    _job_families(w, "slurm_", {"": groups[""]}, None)


def users_accounts_metrics(w: MetricWriter, tallies: Sequence[JobTally], allocations: Sequence[Allocation]) -> None:
    """``/metrics/jobs-users-accts``: the same per user (``username``) and per account (``account``)."""
    _job_families(w, "slurm_user_", count_jobs(tallies, allocations, lambda t: t.user, lambda a: a.user), "username")
    _job_families(w, "slurm_account_", count_jobs(tallies, allocations, lambda t: t.account, lambda a: a.account),
                  "account")


@dataclass
class NodeCounts:
    """Slurm's node tallies for a set of nodes (the cluster, or a partition's)."""

    nodes: int = 0
    alloc: int = 0
    idle: int = 0
    mixed: int = 0
    down: int = 0
    unknown: int = 0
    drain: int = 0
    drained: int = 0
    draining: int = 0
    no_resp: int = 0
    cpus: int = 0
    cpus_alloc: int = 0
    gpus: int = 0
    memory_mb: int = 0
    memory_alloc_mb: int = 0

    def add(self, s: NodeStatus) -> None:
        node, used = s.node, s.used
        self.nodes += 1
        base = _base_state(s)
        setattr(self, base, getattr(self, base) + 1)
        if node.drain:
            self.drain += 1
            self.draining += 1 if used.jobs else 0
            self.drained += 0 if used.jobs else 1
        self.no_resp += 1 if node.state is NodeState.DOWN and node.reason == NOT_RESPONDING else 0
        self.cpus += node.cpus
        self.cpus_alloc += used.cpus
        self.gpus += _gpus(s)
        self.memory_mb += node.real_memory
        self.memory_alloc_mb += used.mem_mb


def _gpus(s: NodeStatus) -> int:
    return len(s.node.gpus) or sum(g.count for g in s.node.gres if g.name == "gpu")


def _base_state(s: NodeStatus) -> str:
    """Slurm's base state of a node (its flags, as DRAIN, apart): down, unknown, idle, mixed or alloc."""
    if s.node.state is NodeState.DOWN:
        return "down"
    if s.node.state is NodeState.UNKNOWN:
        return "unknown"
    if not s.used.jobs:
        return "idle"
    gpus = _gpus(s)
    full = (gpus > 0 and len(set(s.used.gpus)) >= gpus) or s.used.cpus >= s.node.cpus
    return "alloc" if full else "mixed"


def nodes_metrics(w: MetricWriter, statuses: Sequence[NodeStatus]) -> None:
    """``/metrics/nodes``: each node's CPUs, GPUs and memory, and the nodes by state."""
    def per_node(value: Callable[[NodeStatus], float]) -> list[tuple[Labels, float]]:
        return [((("node", s.node.name),), value(s)) for s in statuses]

    w.gauge("slurm_node_cpus", "Total number of cpus in the node", per_node(lambda s: s.node.cpus))
    w.gauge("slurm_node_cpus_alloc", "Allocated cpus in the node", per_node(lambda s: s.used.cpus))
    w.gauge("slurm_node_cpus_effective", "CPUs allocatable to jobs not reserved for system usage",
            per_node(lambda s: s.node.cpus))
    w.gauge("slurm_node_cpus_idle", "Idle cpus in the node", per_node(lambda s: max(0, s.node.cpus - s.used.cpus)))
    w.gauge("slurm_node_gpus", "Total number of GPUs in the node", per_node(_gpus))
    w.gauge("slurm_node_gpus_alloc", "Number of GPUs currently allocated by jobs on the node",
            per_node(lambda s: len(set(s.used.gpus))))
    w.gauge("slurm_node_memory_alloc_bytes", "Bytes allocated to jobs in the node",
            per_node(lambda s: s.used.mem_mb * MB))
    w.gauge("slurm_node_memory_effective_bytes", "Memory allocatable to jobs not reserved for system usage",
            per_node(lambda s: s.node.real_memory * MB))
    w.gauge("slurm_node_memory_bytes", "Total memory in bytes of the node", per_node(lambda s: s.node.real_memory * MB))
    counts = NodeCounts()
    for s in statuses:
        counts.add(s)
    for name, value, help_text in (
            ("nodes", counts.nodes, "Total number of nodes"),
            ("nodes_alloc", counts.alloc, "Number of nodes in Allocated state"),
            ("nodes_completing", 0, "Number of nodes with Completing flag"),
            ("nodes_down", counts.down, "Number of nodes in Down state"),
            ("nodes_drain", counts.drain, "Number of nodes with Drain flag"),
            ("nodes_drained", counts.drained, "Number of drained nodes"),
            ("nodes_draining", counts.draining, "Number of nodes in draining condition (Drain state with active "
                                                "jobs)"),
            ("nodes_idle", counts.idle, "Number of nodes in Idle state"),
            ("nodes_mixed", counts.mixed, "Number of nodes in Mixed state"),
            ("nodes_noresp", counts.no_resp, "Number of nodes with Not Responding flag"),
            ("nodes_unknown", counts.unknown, "Number of nodes in Unknown state"),
            *((f"nodes_{flag}", 0, f"Number of nodes with {flag} (pslurm has none)") for flag in ABSENT_NODE_FLAGS)):
        w.gauge(f"slurm_{name}", help_text, [((), value)])


def partitions_metrics(w: MetricWriter, partitions: Sequence[PartitionConfig], statuses: Sequence[NodeStatus],
                       tallies: Sequence[JobTally]) -> None:
    """``/metrics/partitions``: per partition, its jobs by state and its nodes by state and size."""
    by_name = {s.node.name: s for s in statuses}
    nodes: dict[str, NodeCounts] = {}
    for part in partitions:
        counts = nodes[part.name] = NodeCounts()
        for name in part.nodes:
            if name in by_name:
                counts.add(by_name[name])
    names = [p.name for p in partitions]
    jobs = count_jobs(tallies, (), lambda t: t.partition, None)
    w.gauge("slurm_partitions", "Total number of partitions", [((), len(names))])
    _job_families(w, "slurm_partition_", {n: jobs[n] for n in names}, "partition")

    def per_part(value: Callable[[NodeCounts], float]) -> list[tuple[Labels, float]]:
        return [((("partition", n),), value(nodes[n])) for n in names]

    for name, value, help_text in (
            ("nodes", lambda c: c.nodes, "Partition total nodes"),
            ("cpus", lambda c: c.cpus, "Partition total cpus"),
            ("gpus", lambda c: c.gpus, "Partition total gpus"),
            ("nodes_alloc", lambda c: c.alloc, "Nodes allocated"),
            ("nodes_idle", lambda c: c.idle, "Nodes in Idle state"),
            ("nodes_mixed", lambda c: c.mixed, "Nodes in Mixed state"),
            ("nodes_down", lambda c: c.down, "Nodes in Down state"),
            ("nodes_drain", lambda c: c.drain, "Nodes in Drain state"),
            ("nodes_drained", lambda c: c.drained, "Nodes in Drained state"),
            ("nodes_draining", lambda c: c.draining, "Number of nodes in draining condition (Drain state with "
                                                     "active jobs)"),
            ("nodes_no_resp", lambda c: c.no_resp, "Nodes in Not Responding state"),
            ("nodes_unknown", lambda c: c.unknown, "Nodes in Unknown state"),
            ("nodes_cpus_alloc", lambda c: c.cpus_alloc, "Number of allocated cpus"),
            ("nodes_cpus_idle", lambda c: max(0, c.cpus - c.cpus_alloc), "Number of idle CPUs on all nodes"),
            ("nodes_cpus_efctv", lambda c: c.cpus, "Number of effective CPUs on all nodes, excludes CoreSpec"),
            ("nodes_mem_alloc", lambda c: c.memory_alloc_mb * MB, "Amount of allocated memory of all nodes"),
            ("nodes_mem_avail", lambda c: c.memory_mb * MB, "Amount of available memory of all nodes"),
            ("nodes_mem_tot", lambda c: c.memory_mb * MB, "Total amount of memory of all nodes")):
        w.gauge(f"slurm_partition_{name}", help_text, per_part(value))


def scheduler_metrics(w: MetricWriter, main: PassStats, backfill: PassStats, pending: int, running: int,
                      now: float) -> None:
    """``/metrics/scheduler``: sdiag's figures of the main and backfill passes (times in microseconds)."""
    def micro(seconds: float) -> int:
        return int(seconds * MICRO)

    for name, value, help_text in (
            ("schedule_cycle_cnt", main.cycles, "Scheduling cycle count"),
            ("schedule_cycle_last", micro(main.last), "Last scheduling cycle time"),
            ("schedule_cycle_max", micro(main.longest), "Max scheduling cycle time"),
            ("schedule_cycle_tot", micro(main.total), "Sum of scheduling cycle times"),
            ("sched_mean_cycle", micro(main.total / main.cycles) if main.cycles else 0, "Mean scheduling cycle time"),
            ("schedule_queue_len", pending, "Jobs pending queue length"),
            ("bf_cycle_cnt", backfill.cycles, "Backfill cycle count"),
            ("bf_cycle_last", micro(backfill.last), "Last backfill cycle time"),
            ("bf_cycle_max", micro(backfill.longest), "Max backfill cycle time"),
            ("bf_cycle_tot", micro(backfill.total), "Sum of backfill cycle times"),
            ("bf_mean_cycle", micro(backfill.total / backfill.cycles) if backfill.cycles else 0,
             "Mean backfill cycle time"),
            ("bf_when_last_cycle", int(backfill.last_at), "Timestamp of last backfill cycle"),
            ("bf_queue_len", pending, "Backfill queue length"),
            ("backfilled_jobs", backfill.started_jobs, "Total backfilled jobs since reset"),
            ("sdiag_jobs_pending", pending, "Jobs pending at timestamp"),
            ("sdiag_jobs_running", running, "Jobs running at timestamp"),
            ("sdiag_jobs_started", main.started_jobs + backfill.started_jobs, "Jobs started since reset"),
            ("server_thread_cnt", threading.active_count(), "Active slurmctld threads count"),
            ("sched_stats_timestamp", int(now), "Statistics snapshot timestamp")):
        w.gauge(f"slurm_{name}", help_text, [((), value)])


def _joined(values: Iterable[object]) -> str:
    return ",".join(str(v) for v in sorted(set(values), key=str))


def pslurm_metrics(w: MetricWriter, statuses: Sequence[NodeStatus], allocations: Sequence[Allocation],
                   measured: Measurements, pending: int, history_bytes: int, now: float) -> None:
    """``/metrics/pslurm``: each GPU (utilisation, memory used, promised and total, the jobs and users
    holding it), each node's state word and heartbeat age, the scheduler's passes, the requests served.
    Which jobs hold a GPU (``pslurm_gpu_jobs``, ``pslurm_gpu_job_info``) is there for every GPU, also
    one without a meter (a plain cluster's); the measured families only for GPUs with figures."""
    # "jobid", not "job": Prometheus keeps "job" for the scrape job's name (a target's "job" becomes "exported_job")
    holders: dict[tuple[str, int], list[Allocation]] = defaultdict(list)
    held_on: dict[str, set[int]] = defaultdict(set)
    for a in allocations:
        for index in set(a.gpu_indices):
            holders[(a.node, index)].append(a)
            held_on[a.node].add(index)
    gpu_rows = []  # (labels of the GPU, labels with its jobs and users, usage) of the GPUs with a meter's figures
    gpu_jobs: list[tuple[Labels, float]] = []  # every GPU, metered or not: how many jobs hold it
    for s in statuses:
        reported = {g.index: g for g in s.gpus}
        for index in sorted(set(reported) | set(range(_gpus(s))) | held_on.get(s.node.name, set())):
            held = holders.get((s.node.name, index), [])
            base: Labels = (("node", s.node.name), ("gpu", str(index)))
            gpu_jobs.append((base, len(held)))
            if (g := reported.get(index)) is not None:
                gpu_rows.append((base, (*base, ("jobid", _joined(a.job_id for a in held)),
                                        ("user", _joined(a.user for a in held))), g))
    w.gauge("pslurm_gpu_utilization_percent", "GPU utilisation its node's agent measured at its last heartbeat, "
            "with the jobs and users holding the GPU",
            [(full, g.util) for _, full, g in gpu_rows if g.util is not None])
    w.gauge("pslurm_gpu_memory_used_bytes", "GPU memory in use at the last heartbeat",
            [(full, g.memory_used_mb * MB) for _, full, g in gpu_rows if g.memory_used_mb is not None])
    w.gauge("pslurm_gpu_memory_bytes", "GPU memory in all", [(base, g.memory_mb * MB) for base, _, g in gpu_rows])
    w.gauge("pslurm_gpu_memory_promised_bytes", "GPU memory promised to jobs (their slices; all of it when held whole)",
            [(base, g.memory_alloc_mb * MB) for base, _, g in gpu_rows])
    w.gauge("pslurm_gpu_jobs", "Jobs holding the GPU (every GPU of every node, with a meter or without)", gpu_jobs)
    w.gauge("pslurm_gpu_job_info", "1 for each job holding a GPU: its job, user and account",
            [((*base, ("jobid", str(a.job_id)), ("user", a.user), ("account", a.account)), 1)
             for (node, index), held in sorted(holders.items())
             for base in [(("node", node), ("gpu", str(index)))] for a in held])
    w.gauge("pslurm_node_state", "1 for the node's state as sinfo shows it (idle, mix, alloc, drain, drng, down)",
            [((("node", s.node.name), ("state", s.word)), 1) for s in statuses])
    w.gauge("pslurm_node_heartbeat_age_seconds", "Seconds since the node's agent was last heard from",
            [((("node", s.node.name),), round(now - s.node.last_heartbeat, 3)) for s in statuses
             if s.node.last_heartbeat])
    main, backfill, heartbeats = measured.passes()
    w.counter("pslurm_heartbeats", "Heartbeats received from the nodes' agents", [((), heartbeats)])
    w.gauge("pslurm_scheduler_queue_depth", "Pending jobs", [((), pending)])
    w.counter("pslurm_scheduler_passes", "Scheduler passes run",
              [((("pass", "main"),), main.cycles), ((("pass", "backfill"),), backfill.cycles)])
    w.histogram("pslurm_scheduler_pass_duration_seconds", "Scheduler pass times",
                [((("pass", "main"),), main.histogram), ((("pass", "backfill"),), backfill.histogram)])
    for kind, stats, help_kind in (("http", measured.http, "HTTP requests of the user API and dashboard"),
                                   ("grpc", measured.grpc, "gRPC calls of the nodes' agents")):
        counts, latency = stats.snapshot()
        w.counter(f"pslurm_{kind}_requests", f"{help_kind}, by outcome", sorted(counts.items()))
        w.histogram(f"pslurm_{kind}_request_duration_seconds", f"{help_kind}: time to answer",
                    sorted(latency.items(), key=lambda item: item[0]))
    w.gauge("pslurm_gpu_history_bytes", "Memory the GPU history holds", [((), history_bytes)])
    w.gauge("pslurm_uptime_seconds", "Seconds since psctld started", [((), round(now - measured.started, 3))])
