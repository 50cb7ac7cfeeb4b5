"""What a step holds of its job's allocation (psrun --exact, --gpus-per-task).

``job_steps.exact``: the step holds only its own CPUs and GPUs (else the whole allocation on its
nodes, as before); ``job_steps.node_cpus``: its CPUs on each of its nodes ("2,2"), ``node_gpus``
its GPU indices on each ("0,1;2", nodes separated by ";"). Steps created before this revision hold
the whole allocation.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_steps", sa.Column("exact", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("job_steps", sa.Column("node_cpus", sa.String(1024), nullable=False, server_default=""))
    op.add_column("job_steps", sa.Column("node_gpus", sa.String(1024), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("job_steps") as batch:
        batch.drop_column("exact")
        batch.drop_column("node_cpus")
        batch.drop_column("node_gpus")
