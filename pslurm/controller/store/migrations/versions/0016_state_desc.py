"""A job's reason in words and the reason it waited for before: ``jobs.state_desc``, slurmctld's
state_desc where it gives one ("job requeued in held state"; "" none), which squeue's %r and scontrol's
Reason= show for the reason's name; and ``jobs.reason_prev``, the last reason the job waited for other
than None, Priority and Resources (the accounting database's state_reason_prev: sacct's Reason and
--reason).

Jobs stored before this revision have no description and kept no earlier reason ("", "None").

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("state_desc", sa.String(256), nullable=False, server_default=""))
    op.add_column("jobs", sa.Column("reason_prev", sa.String(64), nullable=False, server_default="None"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("reason_prev")
        batch.drop_column("state_desc")
