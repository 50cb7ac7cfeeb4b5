"""A job's CPU time in user and in system mode (sacct's UserCPU and SystemCPU): ``jobs.user_cpu_seconds``
and ``jobs.system_cpu_seconds``, the parts of ``total_cpu_seconds`` its agent read from the job's cgroup
(cpu.stat's user_usec and system_usec, v1 cpuacct.usage_user and cpuacct.usage_sys) when it ended.

Jobs stored before this revision have them NULL (not measured: sacct prints 00:00:00).

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("user_cpu_seconds", sa.Float))
    op.add_column("jobs", sa.Column("system_cpu_seconds", sa.Float))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("system_cpu_seconds")
        batch.drop_column("user_cpu_seconds")
