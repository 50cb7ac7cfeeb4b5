"""A submit's request stored once: ``job_specs``, and each job's ``spec_id`` and ``spec_overrides``.

Before this revision every row of ``jobs`` held the whole request (script, environment) as JSON in
``jobs.spec``, so an array of 1001 tasks held its script 1001 times. Now the request is one
``job_specs`` row that the array's tasks share; what a later update changed on one job alone
(pscontrol update of one task's time limit, name, ...) is that job's ``spec_overrides``, a small
JSON object merged over the shared request when it is read.

The data moves here: each job that is not a later task of an array gives its request a
``job_specs`` row with its own job id as ``spec_id``; every task refers to its array's row; a task
whose stored request differed from its array's first task's (updated on its own) keeps the
difference as its overrides. ``jobs.spec`` is emptied, not dropped: on SQLite dropping a column
rebuilds the table and every table that refers to it.

Revision ID: 0012
Revises: 0011
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_specs",
        sa.Column("spec_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("spec", sa.Text, nullable=False),
    )
    op.add_column("jobs", sa.Column("spec_id", sa.Integer))
    op.add_column("jobs", sa.Column("spec_overrides", sa.Text, nullable=False, server_default=""))
    op.create_index("ix_jobs_spec_id", "jobs", ["spec_id"])
    op.execute("INSERT INTO job_specs (spec_id, spec) SELECT job_id, spec FROM jobs "
               "WHERE array_job_id IS NULL OR array_job_id = job_id")
    op.execute("UPDATE jobs SET spec_id = COALESCE(array_job_id, job_id)")
    conn = op.get_bind()
    differing = conn.execute(sa.text(  # compared in the database: only tasks updated on their own come back
        "SELECT t.job_id, t.spec, f.spec AS first FROM jobs t JOIN jobs f ON f.job_id = t.array_job_id "
        "WHERE t.job_id <> f.job_id AND t.spec <> f.spec")).all()
    for row in differing:
        own, first = json.loads(row.spec), json.loads(row.first)
        overrides = {k: v for k, v in own.items() if first.get(k) != v}
        conn.execute(sa.text("UPDATE jobs SET spec_overrides = :o WHERE job_id = :j"),
                     {"o": json.dumps(overrides), "j": row.job_id})
    op.execute("UPDATE jobs SET spec = ''")
    if conn.dialect.name == "postgresql":  # the ids were given, not drawn: the sequence starts after them
        op.execute("SELECT setval(pg_get_serial_sequence('job_specs', 'spec_id'), "
                   "COALESCE((SELECT MAX(spec_id) FROM job_specs), 0) + 1, false)")


def downgrade() -> None:
    op.execute("UPDATE jobs SET spec = (SELECT s.spec FROM job_specs s WHERE s.spec_id = jobs.spec_id) "
               "WHERE spec_id IS NOT NULL")
    # a job's overrides are lost on the way down (its columns keep the values that count)
    op.drop_index("ix_jobs_spec_id", "jobs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("spec_overrides")
        batch.drop_column("spec_id")
    op.drop_table("job_specs")
