"""scontrol suspend / resume: ``jobs.suspend_time``, the job's last suspend or resume (Slurm's
SuspendTime=; NULL: never), and ``jobs.suspended_seconds``, the time its run spent suspended before
its last resume (Slurm's tot_sus_time), by which its time limit's end moves later.

Jobs stored before this revision were never suspended (NULL, 0).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("suspend_time", sa.Float))
    op.add_column("jobs", sa.Column("suspended_seconds", sa.Float, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("suspended_seconds")
        batch.drop_column("suspend_time")
