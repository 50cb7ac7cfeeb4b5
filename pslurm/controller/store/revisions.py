"""The store's schema revisions: psctld migrates a store in place when it starts, and refuses a store
that a newer release has migrated past what this release knows (docs/operations.md, Upgrading)."""

from __future__ import annotations

import pathlib

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from pslurm.controller.store.writer import StoreError


class StoreTooNew(StoreError):
    """The store is at a revision this release's migrations do not have: a newer psctld migrated it.
    Running on it could write rows that release's code reads wrongly, so psctld does not start."""


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(pathlib.Path(__file__).parent / "migrations"))
    return cfg


def known_heads() -> tuple[str, ...]:
    """The newest revisions this release's migrations reach (one, unless two branches were merged badly)."""
    return tuple(ScriptDirectory.from_config(_config()).get_heads())


def upgrade(conn: Connection) -> None:
    """Bring the schema on ``conn`` to this release's newest revision (idempotent), inside the caller's
    transaction. Raises StoreTooNew, changing nothing, when the store is at a revision this release's
    script directory does not hold."""
    cfg = _config()
    script = ScriptDirectory.from_config(cfg)
    known = {rev.revision for rev in script.walk_revisions()}
    for current in MigrationContext.configure(conn).get_current_heads():
        if current not in known:
            heads = ", ".join(script.get_heads())
            raise StoreTooNew(f"the store is at revision {current}, newer than this psctld knows ({heads}): "
                              "upgrade psctld")
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
