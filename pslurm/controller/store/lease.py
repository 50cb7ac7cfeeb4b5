"""The controller lease: which psctld is active, timed on the database's clock, and the fencing
token that every write of the active one carries.

Several psctld (several ``SlurmctldHost=`` lines) share one PostgreSQL. One row of
``controller_lease`` names the active controller (``holder``), the moment its lease runs out
(``expires``, the database's clock: the hosts' clocks never enter it) and a ``token`` that grows by
one at every change of holder. The active controller renews the lease often; a backup takes it over
once it has run out (or at once when the holder released it, or handed it over for ``pscontrol
takeover``). Fencing: every write transaction of the active controller first reads the row
``FOR SHARE`` and goes on only while it still holds the token it acquired (:meth:`Lease.check`,
the group commit's fence). A takeover's ``UPDATE`` of that row waits for the write transactions
under way and makes every later one fail, so a controller that lost its lease, however late it
learns it, can never commit again. No consensus of our own: PostgreSQL's row locks decide.

A controller cut off from the database in the middle of a write leaves its transaction open on the
server, holding that row's lock: each write transaction therefore sets PostgreSQL's
``idle_in_transaction_session_timeout`` to a lease's period, after which the server ends it, and a
takeover waits for the lock a fraction of a period at a time (``lock_timeout``), trying again later.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, Float, and_, func, literal_column, or_, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql.elements import ColumnElement

from pslurm.controller.store.schema import controller_lease
from pslurm.controller.store.writer import Fenced

_ROW = controller_lease.c.id == 1


class LeaseLost(Exception):
    """This controller no longer holds the lease (another took it, or it released it)."""


@dataclass(frozen=True)
class LeaseState:
    """The lease as the database has it now."""

    holder: str  # the active controller's name; "" when none holds it
    token: int
    remaining: float  # seconds until it runs out, on the database's clock (negative: it has)
    handover: str  # a backup that asked for control (pscontrol takeover); "" none


def db_now(engine: Engine) -> ColumnElement[float]:
    """The database's clock in seconds since the epoch, as an SQL expression."""
    if engine.dialect.name == "postgresql":
        return literal_column("EXTRACT(EPOCH FROM clock_timestamp())", Float)
    return literal_column("((julianday('now') - 2440587.5) * 86400.0)", Float)  # SQLite: tests


class Lease:
    """Controller ``name``'s side of the lease: ``period`` seconds each time it is acquired or
    renewed. ``grace``: seconds a run-out lease waits for this controller beyond its end (a later
    backup waits for the earlier ones, as Slurm's backups take over in order)."""

    def __init__(self, engine: Engine, name: str, period: float, grace: float = 0.0) -> None:
        self.engine, self.name, self.period, self.grace = engine, name, period, grace
        self.token: int | None = None  # the token this controller holds; None while it holds none

    def try_acquire(self) -> bool:
        """Take the lease if it is free: released (and not handed to another), run out (for
        ``grace`` more seconds), or handed over to this controller and released or run out. A
        lease handed to another that never took it is free one more period later."""
        now, c = db_now(self.engine), controller_lease.c
        mine = c.handover.in_(("", self.name))
        free = or_(and_(mine, or_(c.holder == "", c.expires < now - self.grace)),
                   c.expires < now - self.period - self.grace)
        try:
            with self.engine.begin() as conn:
                if conn.dialect.name == "postgresql":  # the row is locked by a write under way: try again later
                    conn.execute(text(f"SET LOCAL lock_timeout = {int(self.period * 200)}"))
                taken = conn.execute(update(controller_lease).where(_ROW, free).values(
                    token=c.token + 1, holder=self.name, expires=now + self.period, handover="")).rowcount
                if not taken:
                    return False
                self.token = int(conn.execute(select(c.token).where(_ROW)).scalar_one())
        except OperationalError as exc:
            if type(exc.orig).__name__ == "LockNotAvailable":
                return False
            raise
        return True

    def renew(self) -> str:
        """Extend the lease by a period from now; the name of a backup that asked for control ("" none).
        LeaseLost when this controller holds it no longer; the database's errors as they come."""
        c = controller_lease.c
        with self.engine.begin() as conn:
            held = conn.execute(update(controller_lease).where(_ROW, *self._held()).values(
                expires=db_now(self.engine) + self.period)).rowcount
            if not held:
                raise LeaseLost(f"{self.name} no longer holds the controller lease")
            return str(conn.execute(select(c.handover).where(_ROW)).scalar_one())

    def release(self) -> None:
        """Give the lease up now (a handover asked for stays asked): a backup takes it at once."""
        if self.token is None:
            return
        with self.engine.begin() as conn:
            conn.execute(update(controller_lease).where(_ROW, *self._held()).values(
                holder="", expires=db_now(self.engine)))
        self.token = None

    def ask_handover(self) -> None:
        """Ask the active controller to hand the lease to this one (pscontrol takeover)."""
        with self.engine.begin() as conn:
            conn.execute(update(controller_lease).where(_ROW).values(handover=self.name))

    def state(self) -> LeaseState:
        c = controller_lease.c
        with self.engine.connect() as conn:
            row = conn.execute(select(c.holder, c.token, c.expires - db_now(self.engine), c.handover)
                               .where(_ROW)).one()
        return LeaseState(str(row[0]), int(row[1]), float(row[2]), str(row[3]))

    def check(self, conn: Connection) -> None:
        """The fence, first in every write transaction: lock the lease row (shared: writes do not
        wait on each other, a takeover waits on them) and raise Fenced unless this controller
        still holds it."""
        c = controller_lease.c
        query = select(c.token, c.holder).where(_ROW).with_for_update(read=True)
        if conn.dialect.name == "postgresql":
            # a transaction left open by a controller cut off from the database would hold this lock
            # for good (the server sees no error): the server ends it once idle for a lease's period
            query = query.add_columns(func.set_config("idle_in_transaction_session_timeout",
                                                      str(int(self.period * 1000)), True))
        row = conn.execute(query).one_or_none()
        if self.token is None or row is None or (int(row[0]), str(row[1])) != (self.token, self.name):
            raise Fenced(f"psctld {self.name} is no longer the active controller: ask again")

    def _held(self) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
        c = controller_lease.c
        return c.token == (self.token if self.token is not None else -1), c.holder == self.name
