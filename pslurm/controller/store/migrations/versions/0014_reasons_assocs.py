"""Who set a node's reason and when (``nodes.reason_uid``, ``nodes.reason_time``: slurmctld's reason_uid
and reason_time, sinfo -R's USER and TIMESTAMP), and the association a job was charged to
(``jobs.assoc_id``: squeue -O AssocID, sacct -o AssocID).

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("nodes", sa.Column("reason_uid", sa.Integer))  # NULL: no reason, or set before 0014
    op.add_column("nodes", sa.Column("reason_time", sa.Float))
    op.add_column("jobs", sa.Column("assoc_id", sa.Integer))  # NULL: charged to no association (Slurm's 0)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("assoc_id")
    with op.batch_alter_table("nodes") as batch:
        batch.drop_column("reason_time")
        batch.drop_column("reason_uid")
