"""Scheduling (issue #5): accounts, nice, priority, holds, requeue, arrays, dependencies, estimates.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_COLUMNS: list[sa.Column] = [  # type: ignore[type-arg]
    sa.Column("account", sa.String(64), nullable=False, server_default=""),
    sa.Column("nice", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("dependency", sa.String(1024), nullable=False, server_default=""),
    sa.Column("kill_on_invalid_dep", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("array_job_id", sa.Integer),
    sa.Column("array_task_id", sa.Integer),
    sa.Column("array_max_running", sa.Integer),
    sa.Column("hold", sa.String(8), nullable=False, server_default=""),
    sa.Column("requeue", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("requeue_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("restarts", sa.Integer, nullable=False, server_default=sa.text("0")),
    sa.Column("priority", sa.BigInteger, nullable=False, server_default=sa.text("0")),
    sa.Column("admin_priority", sa.BigInteger),
    sa.Column("start_estimate", sa.Float),
]


def upgrade() -> None:
    for column in _COLUMNS:
        op.add_column("jobs", column)
    op.create_index("ix_jobs_array_job_id", "jobs", ["array_job_id"])
    op.create_index("ix_jobs_end_time", "jobs", ["end_time"])


def downgrade() -> None:
    op.drop_index("ix_jobs_end_time", "jobs")
    op.drop_index("ix_jobs_array_job_id", "jobs")
    with op.batch_alter_table("jobs") as batch:
        for column in reversed(_COLUMNS):
            batch.drop_column(column.name)
