"""Alembic environment: the Store passes its connection in ``config.attributes``."""

from alembic import context
from sqlalchemy import create_engine

from pslurm.controller.store.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # run from the alembic command line: alembic -x url=sqlite:///... upgrade head
    url = context.get_x_argument(as_dictionary=True)["url"]
    with create_engine(url).begin() as conn:
        context.configure(connection=conn, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()
