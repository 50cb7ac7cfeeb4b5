"""The lifecycle's operations: each event row names the operation that wrote it, and a job keeps
why the system ended or requeued it (a launch failure, a lost node), Slurm's SystemComment.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("system_comment", sa.String(1024), nullable=False, server_default=""))
    op.add_column("job_events", sa.Column("op", sa.String(32), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("job_events") as batch:
        batch.drop_column("op")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("system_comment")
