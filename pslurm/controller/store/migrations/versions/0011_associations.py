"""Associations (issue 20): sacctmgr's QOS, accounts, users and associations in the store, so that
they change without a restart. And a job's CPU time (``jobs.total_cpu_seconds``, its cgroup's, read by its
agent when it ends: seff's CPU Utilized). pslurm.conf's AccountName=/UserName= lines are loaded into them at
every start of psctld; the QOS ``normal`` is made here, as slurmdbd makes it.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("total_cpu_seconds", sa.Float))  # sacct's TotalCPU, seff's CPU Utilized
    qos = op.create_table(
        "acct_qos",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(64), nullable=False, unique=True),
        sa.Column("description", sa.String(256), nullable=False, server_default=""),
        sa.Column("priority", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("max_jobs_per_user", sa.Integer),
        sa.Column("max_submit_jobs_per_user", sa.Integer),
        sa.Column("max_tres_per_user", sa.String(256), nullable=False, server_default=""),
        sa.Column("max_wall", sa.Integer),
        sa.Column("preempt", sa.String(1024), nullable=False, server_default=""),
    )
    op.bulk_insert(qos, [{"name": "normal", "description": "Normal QOS default", "priority": 0,
                          "max_tres_per_user": "", "preempt": ""}])
    op.create_table(
        "acct_accounts",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("description", sa.String(256), nullable=False, server_default=""),
        sa.Column("organization", sa.String(256), nullable=False, server_default=""),
    )
    op.create_table(
        "acct_users",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("default_account", sa.String(64), nullable=False, server_default=""),
        sa.Column("admin_level", sa.String(16), nullable=False, server_default="None"),
    )
    op.create_table(
        "acct_assocs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("account", sa.String(64), nullable=False, index=True),
        sa.Column("user_name", sa.String(64), nullable=False, server_default=""),
        sa.Column("partition", sa.String(64), nullable=False, server_default=""),
        sa.Column("parent", sa.String(64), nullable=False, server_default=""),
        sa.Column("fairshare", sa.Integer, nullable=False, server_default="1"),
        sa.Column("max_jobs", sa.Integer),
        sa.Column("max_submit_jobs", sa.Integer),
        sa.Column("max_wall", sa.Integer),
        sa.Column("grp_tres", sa.String(256), nullable=False, server_default=""),
        sa.Column("max_tres_per_job", sa.String(256), nullable=False, server_default=""),
        sa.Column("qos", sa.String(1024), nullable=False, server_default="normal"),
        sa.Column("default_qos", sa.String(64), nullable=False, server_default=""),
        sa.UniqueConstraint("account", "user_name", "partition", name="uq_acct_assocs_key"),
    )


def downgrade() -> None:
    for table in ("acct_assocs", "acct_users", "acct_accounts", "acct_qos"):
        op.drop_table(table)
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("total_cpu_seconds")
