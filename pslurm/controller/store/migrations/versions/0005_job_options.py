"""sbatch's --begin, --deadline, --comment and --qos as columns of the job: the scheduler reads the
times on every pass, and a listing (psqueue %k %q, psacct Comment QOS) shows the others without
decoding the stored request. (--signal is the agents' alone: it stays in the request's JSON.)

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COLUMNS: list[sa.Column] = [  # type: ignore[type-arg]
    sa.Column("begin_time", sa.Float),  # not before this time; NULL: as soon as it may
    sa.Column("deadline", sa.Float),  # ended DEADLINE once it can no longer end before it; NULL: none
    sa.Column("comment", sa.String(1024), nullable=False, server_default=""),
    sa.Column("qos", sa.String(64), nullable=False, server_default=""),
]


def upgrade() -> None:
    for column in _COLUMNS:
        op.add_column("jobs", column)


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for column in reversed(_COLUMNS):
            batch.drop_column(column.name)
