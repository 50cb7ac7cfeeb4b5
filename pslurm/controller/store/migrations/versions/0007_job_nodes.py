"""Multi-node jobs: the allocation's nodes.

``job_nodes``: one row per node of a job's allocation, keyed by (job_id, idx) (idx 0 is the first
node, the batch host, ``jobs.node``), with that node's share (CPUs, memory) and its own GPU indices;
``start`` writes them for every job, a single-node job's one row too. ``jobs.nodes``: the hostlist of
the allocation (Slurm's NodeList); ``jobs.num_nodes`` the nodes asked (-N), ``jobs.node_cpus`` each
node's CPUs of a multi-node job ("8,4", core/layout.py; "" for one node: ``jobs.cpus``). Jobs started
before this revision get their one row and hostlist here. ``job_steps.reported``/``ended_state``: the
nodes of a multi-node step that reported its end so far (comma-separated), and the worst of their ends.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_nodes",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.job_id"), primary_key=True),
        sa.Column("idx", sa.Integer, primary_key=True),
        sa.Column("node", sa.String(64), nullable=False),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("mem_mb", sa.Integer, nullable=False),
        sa.Column("gpu_indices", sa.String(256), nullable=False, server_default=""),
    )
    op.create_index("ix_job_nodes_node", "job_nodes", ["node"])
    op.add_column("jobs", sa.Column("nodes", sa.String(1024), nullable=False, server_default=""))
    op.add_column("jobs", sa.Column("num_nodes", sa.Integer, nullable=False, server_default="1"))
    op.add_column("jobs", sa.Column("node_cpus", sa.String(1024), nullable=False, server_default=""))
    # a step over several nodes ends when every node reported: the nodes heard so far, and their worst end
    op.add_column("job_steps", sa.Column("reported", sa.String(1024), nullable=False, server_default=""))
    op.add_column("job_steps", sa.Column("ended_state", sa.String(16), nullable=False, server_default=""))
    op.execute("INSERT INTO job_nodes (job_id, idx, node, cpus, mem_mb, gpu_indices) "
               "SELECT job_id, 0, node, cpus, mem_mb, gpu_indices FROM jobs WHERE node IS NOT NULL")
    op.execute("UPDATE jobs SET nodes = node WHERE node IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("job_steps") as batch:
        batch.drop_column("reported")
        batch.drop_column("ended_state")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("nodes")
        batch.drop_column("num_nodes")
        batch.drop_column("node_cpus")
    op.drop_index("ix_job_nodes_node", "job_nodes")
    op.drop_table("job_nodes")
