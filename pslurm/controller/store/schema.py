"""The tables. Alembic's migrations create them; this module describes them for queries."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(256), nullable=False),
    Column("user_name", String(64), nullable=False, index=True),
    Column("uid", Integer, nullable=False),
    Column("partition", String(64), nullable=False),
    Column("state", String(16), nullable=False, index=True),
    Column("reason", String(64), nullable=False, default="None"),
    Column("submit_time", Float, nullable=False),
    Column("start_time", Float),
    Column("end_time", Float, index=True),
    Column("time_limit", Integer),  # seconds in force; NULL is unlimited
    Column("cpus", Integer, nullable=False),
    Column("mem_mb", Integer, nullable=False),
    Column("gres", String(256), nullable=False),  # what was asked, per node, e.g. gpu:a100:2
    Column("node", String(64)),
    Column("gpu_indices", String(256), nullable=False, default=""),  # "0,1": the node's own indices
    Column("exit_code", Integer, nullable=False, default=0),
    Column("exit_signal", Integer, nullable=False, default=0),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("gpu_seconds", Float),
    Column("peak_gpu_memory_mb", Integer),
    Column("mean_gpu_util", Float),
    Column("max_rss_kb", BigInteger),  # the job's memory cgroup's peak, KiB (0010); NULL: not measured
    Column("total_cpu_seconds", Float),  # its cgroup's CPU time, user and system (0011); NULL: not measured
    Column("user_cpu_seconds", Float),  # of which in user mode (0018); NULL: not measured
    Column("system_cpu_seconds", Float),  # and in system mode (0018)
    Column("assoc_id", Integer),  # the association it was charged to (0014); NULL: none (Slurm's 0)
    # the request: ``job_specs`` row ``spec_id`` (an array's tasks share one), with the fields changed on this
    # job alone since (pscontrol update) in ``spec_overrides``, a JSON object ("" none) (migration 0012).
    # ``spec`` held the whole request per row before 0012; it is "" since (dropping a column on SQLite rebuilds
    # the table and every table that refers to it)
    Column("spec", Text, nullable=False),
    Column("spec_id", Integer, index=True),
    Column("spec_overrides", Text, nullable=False, default=""),
    # scheduling (migration 0002)
    Column("account", String(64), nullable=False, default=""),
    Column("nice", Integer, nullable=False, default=0),
    Column("dependency", String(1024), nullable=False, default=""),
    Column("kill_on_invalid_dep", Boolean, nullable=False, default=False),
    Column("array_job_id", Integer, index=True),  # the array's id: its first task's job_id
    Column("array_task_id", Integer),
    Column("array_max_running", Integer),  # the %N throttle
    Column("hold", String(8), nullable=False, default=""),  # "", "user", "admin"
    Column("requeue", Boolean, nullable=False, default=False),  # may be requeued (NODE_FAIL, pscontrol requeue)
    Column("requeue_requested", Boolean, nullable=False, default=False),  # back to PENDING when its end is seen
    Column("restarts", Integer, nullable=False, default=0),
    Column("priority", BigInteger, nullable=False, default=0),  # computed by the last pass
    Column("admin_priority", BigInteger),  # pscontrol update Priority=: fixed by an operator
    Column("start_estimate", Float),  # backfill's expected start for a pending job
    # requested and excluded nodes, hostlist expressions (migration 0003)
    Column("req_nodes", String(1024), nullable=False, default=""),
    Column("exc_nodes", String(1024), nullable=False, default=""),
    Column("req_features", String(1024), nullable=False, default=""),  # --constraint, node features (0009)
    Column("exclusive", Boolean, nullable=False, default=False),  # --exclusive: whole nodes (0009)
    Column("eligible_time", Float),  # when the pending job became eligible (not held, dependencies met)
    Column("system_comment", String(1024), nullable=False, default=""),  # why the system ended it (0004)
    # sbatch's --begin, --deadline, --comment, --qos (migration 0005)
    Column("begin_time", Float),  # not before this time; NULL: as soon as it may
    Column("deadline", Float),  # ended DEADLINE once it can no longer end before it; NULL: none
    Column("comment", String(1024), nullable=False, default=""),
    Column("qos", String(64), nullable=False, default=""),  # "normal" (the only QOS), or "" in older rows
    # psalloc's end (migration 0006): the exit code its owner relinquished it with; NULL: not relinquished
    Column("relinquish_code", Integer),
    # multi-node jobs (migration 0007): the allocation's hostlist (NodeList); ``node`` is its first node
    Column("nodes", String(1024), nullable=False, default=""),
    Column("num_nodes", Integer, nullable=False, default=1),  # -N: the nodes it asks
    Column("node_cpus", String(1024), nullable=False, default=""),  # each node's CPUs, "8,4" ("" one node)
    # scontrol suspend / resume (migration 0015): the last suspend or resume (NULL: never), and the run's time
    # spent suspended before its last resume (its time limit's end moves later by it)
    Column("suspend_time", Float),
    Column("suspended_seconds", Float, nullable=False, default=0.0, server_default="0"),
    # the reason in words where slurmctld gives one (its state_desc, "job requeued in held state"; "" none) and
    # the last reason the job waited for but None, Priority and Resources (accounting's state_reason_prev,
    # sacct's Reason) (migration 0016)
    Column("state_desc", String(256), nullable=False, default="", server_default=""),
    Column("reason_prev", String(64), nullable=False, default="None", server_default="None"),
)

# What a submit asked (migration 0012): the whole JobSpec as JSON, stored once per submit, so that the tasks
# of an array (up to MaxArraySize rows) refer to one copy of their script and environment.
job_specs = Table(
    "job_specs",
    metadata,
    Column("spec_id", Integer, primary_key=True, autoincrement=True),
    Column("spec", Text, nullable=False),
)

# The nodes of each job's allocation (migration 0007), written by ``start`` (one row for a single-node
# job too): idx 0 is ``jobs.node``, the batch host. What active jobs hold per node is read here.
job_nodes = Table(
    "job_nodes",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.job_id"), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("node", String(64), nullable=False, index=True),
    Column("cpus", Integer, nullable=False),
    Column("mem_mb", Integer, nullable=False),
    Column("gpu_indices", String(256), nullable=False, default=""),  # "0,1": that node's own indices
)

# Job steps (migration 0006): psrun inside an allocation, J.0, J.1, ... Their state is a JobState
# value, written only by the lifecycle's step operations (create_step, end_step).
job_steps = Table(
    "job_steps",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.job_id"), primary_key=True),
    Column("step_id", Integer, primary_key=True),
    Column("name", String(256), nullable=False, default=""),
    Column("state", String(16), nullable=False, index=True),
    Column("nodes", String(1024), nullable=False, default=""),  # a hostlist expression
    Column("ntasks", Integer, nullable=False, default=1),
    Column("cpus", Integer, nullable=False, default=1),  # the step's CPUs in all
    Column("gres", String(256), nullable=False, default=""),  # what it asked per node ("" all of the job's)
    Column("overlap", Boolean, nullable=False, default=False),  # --overlap: shares the allocation with others
    Column("argv", Text, nullable=False, default="[]"),  # JSON list
    Column("workdir", String(4096), nullable=False, default=""),
    Column("start_time", Float, nullable=False),
    Column("end_time", Float),
    Column("exit_code", Integer, nullable=False, default=0),
    Column("exit_signal", Integer, nullable=False, default=0),
    # a step on several nodes (migration 0007): the nodes that reported its end so far ("c000,c001"), and
    # the worst end among them (its exit code and signal so far are exit_code/exit_signal); it ends with the last
    Column("reported", String(1024), nullable=False, default=""),
    Column("ended_state", String(16), nullable=False, default=""),
    # what a step holds (migration 0008): --exact (only these; else the whole allocation on its nodes),
    # its CPUs on each of its nodes ("2,2"), its GPU indices on each ("0,1;2": nodes by ";")
    Column("exact", Boolean, nullable=False, default=False),
    Column("node_cpus", String(1024), nullable=False, default=""),
    Column("node_gpus", String(1024), nullable=False, default=""),
)

job_events = Table(
    "job_events",
    metadata,
    Column("event_id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, ForeignKey("jobs.job_id"), nullable=False, index=True),
    Column("time", Float, nullable=False),
    Column("from_state", String(16)),  # NULL for the submit
    Column("to_state", String(16), nullable=False),
    Column("detail", String(256), nullable=False, default=""),
    Column("op", String(32), nullable=False, default=""),  # the lifecycle operation that wrote it (0004)
)

nodes = Table(
    "nodes",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("addr", String(256), nullable=False),
    Column("port", Integer, nullable=False),
    Column("cpus", Integer, nullable=False),
    Column("real_memory", Integer, nullable=False),
    Column("gres", String(256), nullable=False, default=""),
    Column("state", String(16), nullable=False),
    Column("drain", Boolean, nullable=False, default=False),
    Column("reason", String(256), nullable=False, default=""),
    Column("reason_uid", Integer),  # who set the reason (0014; slurmctld's reason_uid: root for the system)
    Column("reason_time", Float),  # when
    Column("last_heartbeat", Float, nullable=False, default=0.0),
    Column("gpus", Text, nullable=False, default="[]"),  # JSON list of GpuInfo the agent reported
    Column("isolation", String(256), nullable=False, default=""),
)

# Associations (migration 0011): sacctmgr's accounts, users, associations and QOS (core/assoc.py), written
# only by store/assoc.py
acct_qos = Table(
    "acct_qos",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), nullable=False, unique=True),
    Column("description", String(256), nullable=False, default=""),
    Column("priority", BigInteger, nullable=False, default=0),
    Column("max_jobs_per_user", Integer),  # NULL: no limit
    Column("max_submit_jobs_per_user", Integer),
    Column("max_tres_per_user", String(256), nullable=False, default=""),
    Column("max_wall", Integer),  # seconds
    Column("preempt", String(1024), nullable=False, default=""),  # QOS names, comma-separated
    # 0017: the other limits Slurm enforces, and Flags (DenyOnLimit)
    Column("grp_tres", String(256), nullable=False, default=""),
    Column("grp_jobs", Integer),
    Column("grp_submit_jobs", Integer),
    Column("max_tres_per_job", String(256), nullable=False, default=""),
    Column("max_tres_per_node", String(256), nullable=False, default=""),
    Column("flags", String(256), nullable=False, default=""),  # comma-separated
)

acct_accounts = Table(
    "acct_accounts",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("description", String(256), nullable=False, default=""),
    Column("organization", String(256), nullable=False, default=""),
)

acct_users = Table(
    "acct_users",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("default_account", String(64), nullable=False, default=""),
    Column("admin_level", String(16), nullable=False, default="None"),
)

acct_assocs = Table(
    "acct_assocs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("account", String(64), nullable=False, index=True),
    Column("user_name", String(64), nullable=False, default=""),  # "": the account's own association
    Column("partition", String(64), nullable=False, default=""),
    Column("parent", String(64), nullable=False, default=""),
    Column("fairshare", Integer, nullable=False, default=1),
    Column("max_jobs", Integer),
    Column("max_submit_jobs", Integer),
    Column("max_wall", Integer),  # seconds
    Column("grp_tres", String(256), nullable=False, default=""),
    Column("max_tres_per_job", String(256), nullable=False, default=""),
    Column("qos", String(1024), nullable=False, default="normal"),  # QOS names, comma-separated
    Column("default_qos", String(64), nullable=False, default=""),
    Column("grp_jobs", Integer),  # 0017
    Column("grp_submit_jobs", Integer),
    Column("max_tres_per_node", String(256), nullable=False, default=""),
    UniqueConstraint("account", "user_name", "partition", name="uq_acct_assocs_key"),
)

# One row (id 1): which controller is active, and the fencing token its every write carries (0013).
controller_lease = Table(
    "controller_lease",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("token", BigInteger, nullable=False),  # one more at every change of holder
    Column("holder", String(255), nullable=False, default=""),  # the active controller's name; "" none
    Column("expires", Float, nullable=False, default=0.0),  # the database's clock, seconds since the epoch
    Column("handover", String(255), nullable=False, default=""),  # a backup that asked for control (takeover)
)
