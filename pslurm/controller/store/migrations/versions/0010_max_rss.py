"""A job's MaxRSS (sacct's, its batch step's): ``jobs.max_rss_kb``, the peak of the job's memory cgroup
(ConstrainRAMSpace=yes) as its agent read it when the job ended.

Jobs stored before this revision have none (NULL: not measured).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("max_rss_kb", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("max_rss_kb")
