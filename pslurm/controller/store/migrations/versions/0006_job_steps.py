"""Job steps (psrun inside an allocation: J.0, J.1, ...) and psalloc's relinquish.

``job_steps``: one row per step, keyed by (job_id, step_id); its state is a JobState value, written
only by the step operations of pslurm.core.lifecycle. ``jobs.relinquish_code``: the exit code an
allocation's owner gave when relinquishing it (psalloc's end); NULL while not relinquished.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_steps",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.job_id"), primary_key=True),
        sa.Column("step_id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, server_default=""),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("nodes", sa.String(1024), nullable=False, server_default=""),
        sa.Column("ntasks", sa.Integer, nullable=False, server_default="1"),
        sa.Column("cpus", sa.Integer, nullable=False, server_default="1"),
        sa.Column("gres", sa.String(256), nullable=False, server_default=""),
        sa.Column("overlap", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("argv", sa.Text, nullable=False, server_default="[]"),
        sa.Column("workdir", sa.String(4096), nullable=False, server_default=""),
        sa.Column("start_time", sa.Float, nullable=False),
        sa.Column("end_time", sa.Float),
        sa.Column("exit_code", sa.Integer, nullable=False, server_default="0"),
        sa.Column("exit_signal", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_index("ix_job_steps_state", "job_steps", ["state"])
    op.add_column("jobs", sa.Column("relinquish_code", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("relinquish_code")
    op.drop_index("ix_job_steps_state", "job_steps")
    op.drop_table("job_steps")
