"""A job's --constraint (node features) and --exclusive, for the scheduler's queue: ``jobs.req_features``
and ``jobs.exclusive``.

Jobs stored before this revision have none ("", false).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("req_features", sa.String(1024), nullable=False, server_default=""))
    op.add_column("jobs", sa.Column("exclusive", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("req_features")
        batch.drop_column("exclusive")
