"""The association and QOS limits Slurm enforces beside those stored since 0011: an association's
``GrpJobs``, ``GrpSubmitJobs`` and ``MaxTRESPerNode``; a QOS's ``GrpTRES``, ``GrpJobs``,
``GrpSubmitJobs``, ``MaxTRESPerJob``, ``MaxTRESPerNode`` and ``Flags`` (DenyOnLimit). None set in rows
stored before this revision.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("acct_assocs") as batch:
        batch.add_column(sa.Column("grp_jobs", sa.Integer))
        batch.add_column(sa.Column("grp_submit_jobs", sa.Integer))
        batch.add_column(sa.Column("max_tres_per_node", sa.String(256), nullable=False, server_default=""))
    with op.batch_alter_table("acct_qos") as batch:
        batch.add_column(sa.Column("grp_tres", sa.String(256), nullable=False, server_default=""))
        batch.add_column(sa.Column("grp_jobs", sa.Integer))
        batch.add_column(sa.Column("grp_submit_jobs", sa.Integer))
        batch.add_column(sa.Column("max_tres_per_job", sa.String(256), nullable=False, server_default=""))
        batch.add_column(sa.Column("max_tres_per_node", sa.String(256), nullable=False, server_default=""))
        batch.add_column(sa.Column("flags", sa.String(256), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("acct_qos") as batch:
        for name in ("flags", "max_tres_per_node", "max_tres_per_job", "grp_submit_jobs", "grp_jobs", "grp_tres"):
            batch.drop_column(name)
    with op.batch_alter_table("acct_assocs") as batch:
        for name in ("max_tres_per_node", "grp_submit_jobs", "grp_jobs"):
            batch.drop_column(name)
