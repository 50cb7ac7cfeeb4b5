"""Jobs, their events, and nodes.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("user_name", sa.String(64), nullable=False, index=True),
        sa.Column("uid", sa.Integer, nullable=False),
        sa.Column("partition", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("submit_time", sa.Float, nullable=False),
        sa.Column("start_time", sa.Float),
        sa.Column("end_time", sa.Float),
        sa.Column("time_limit", sa.Integer),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("mem_mb", sa.Integer, nullable=False),
        sa.Column("gres", sa.String(256), nullable=False),
        sa.Column("node", sa.String(64)),
        sa.Column("gpu_indices", sa.String(256), nullable=False),
        sa.Column("exit_code", sa.Integer, nullable=False),
        sa.Column("exit_signal", sa.Integer, nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("gpu_seconds", sa.Float),
        sa.Column("peak_gpu_memory_mb", sa.Integer),
        sa.Column("mean_gpu_util", sa.Float),
        sa.Column("spec", sa.Text, nullable=False),
    )
    op.create_table(
        "job_events",
        sa.Column("event_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.job_id"), nullable=False, index=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("from_state", sa.String(16)),
        sa.Column("to_state", sa.String(16), nullable=False),
        sa.Column("detail", sa.String(256), nullable=False),
    )
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("addr", sa.String(256), nullable=False),
        sa.Column("port", sa.Integer, nullable=False),
        sa.Column("cpus", sa.Integer, nullable=False),
        sa.Column("real_memory", sa.Integer, nullable=False),
        sa.Column("gres", sa.String(256), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("drain", sa.Boolean, nullable=False),
        sa.Column("reason", sa.String(256), nullable=False),
        sa.Column("last_heartbeat", sa.Float, nullable=False),
        sa.Column("gpus", sa.Text, nullable=False),
        sa.Column("isolation", sa.String(256), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_events")
    op.drop_table("jobs")
    op.drop_table("nodes")
