"""Requested and excluded nodes (-w/--nodelist, -x/--exclude), as hostlist expressions; and when a
pending job became eligible to start (not held, dependencies met), which its age counts from.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_COLUMNS: list[sa.Column] = [  # type: ignore[type-arg]
    sa.Column("req_nodes", sa.String(1024), nullable=False, server_default=""),
    sa.Column("exc_nodes", sa.String(1024), nullable=False, server_default=""),
    sa.Column("eligible_time", sa.Float),
]


def upgrade() -> None:
    for column in _COLUMNS:
        op.add_column("jobs", column)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in reversed(_COLUMNS):
            batch.drop_column(column.name)
