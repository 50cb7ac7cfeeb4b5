"""The controller lease: one row naming the active controller, its fencing token and when its lease
ends on the database's clock (several SlurmctldHost= lines: one psctld active, the others standing by).

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    lease = op.create_table(
        "controller_lease",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("holder", sa.String(255), nullable=False, server_default=""),
        sa.Column("expires", sa.Float, nullable=False, server_default="0"),
        sa.Column("handover", sa.String(255), nullable=False, server_default=""),
    )
    op.bulk_insert(lease, [{"id": 1, "token": 0, "holder": "", "expires": 0.0, "handover": ""}])


def downgrade() -> None:
    op.drop_table("controller_lease")
