"""The associations' SQL (sacctmgr's accounts, users, associations and QOS; ``pslurm.core.assoc``).

Reads load the whole model at once (a cluster has tens to thousands of associations, read once per
change by the controller's cache); a write is one :class:`AssocChange` in one transaction, through
the store's group commit, and then a change notice to the subscribers (the cache), so that a change
holds for the next request without a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update

from pslurm.controller.store.schema import acct_accounts, acct_assocs, acct_qos, acct_users
from pslurm.controller.store.writer import GroupCommit
from pslurm.core.assoc import Account, Assoc, AssocChange, Associations, Qos, User


def _names(text: str) -> tuple[str, ...]:
    return tuple(n for n in text.split(",") if n)


class AssocStore:
    """The associations' tables; ``subscribe`` to hear of each committed change."""

    def __init__(self, engine: Engine, writer: GroupCommit) -> None:
        self.engine, self._writer = engine, writer
        self._listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def load(self) -> Associations:
        """The whole model, as stored now."""
        with self.engine.connect() as conn:
            qos = {r.name: Qos(r.name, r.description, r.priority, r.max_jobs_per_user, r.max_submit_jobs_per_user,
                               r.max_tres_per_user, r.max_wall, _names(r.preempt), r.grp_tres, r.grp_jobs,
                               r.grp_submit_jobs, r.max_tres_per_job, r.max_tres_per_node, _names(r.flags))
                   for r in conn.execute(select(acct_qos).order_by(acct_qos.c.id))}
            accounts = {r.name: Account(r.name, r.description, r.organization)
                        for r in conn.execute(select(acct_accounts).order_by(acct_accounts.c.name))}
            users = {r.name: User(r.name, r.default_account, r.admin_level)
                     for r in conn.execute(select(acct_users).order_by(acct_users.c.name))}
            assocs = tuple(Assoc(r.account, r.user_name, r.partition, r.parent, r.fairshare, r.max_jobs,
                                 r.max_submit_jobs, r.max_wall, r.grp_tres, r.max_tres_per_job, _names(r.qos),
                                 r.default_qos, r.id, r.grp_jobs, r.grp_submit_jobs, r.max_tres_per_node)
                           for r in conn.execute(select(acct_assocs).order_by(acct_assocs.c.id)))
        return Associations(accounts, users, assocs, qos)

    def apply(self, change: AssocChange) -> None:
        """Write ``change`` in one transaction, then tell the subscribers."""
        if not change:
            return
        self._writer.write(lambda conn: _apply(conn, change))
        for listener in self._listeners:
            listener()


def _apply(conn: Connection, change: AssocChange) -> None:
    if change.drop_assocs:
        for account, user, partition in change.drop_assocs:
            conn.execute(delete(acct_assocs).where(acct_assocs.c.account == account, acct_assocs.c.user_name == user,
                                                   acct_assocs.c.partition == partition))
    if change.drop_users:
        conn.execute(delete(acct_users).where(acct_users.c.name.in_(change.drop_users)))
    if change.drop_accounts:
        conn.execute(delete(acct_accounts).where(acct_accounts.c.name.in_(change.drop_accounts)))
    if change.drop_qos:
        conn.execute(delete(acct_qos).where(acct_qos.c.name.in_(change.drop_qos)))
    for q in change.put_qos:
        _put(conn, acct_qos, acct_qos.c.name == q.name, dict(
            name=q.name, description=q.description, priority=q.priority, max_jobs_per_user=q.max_jobs_per_user,
            max_submit_jobs_per_user=q.max_submit_jobs_per_user, max_tres_per_user=q.max_tres_per_user,
            max_wall=q.max_wall, preempt=",".join(q.preempt), grp_tres=q.grp_tres, grp_jobs=q.grp_jobs,
            grp_submit_jobs=q.grp_submit_jobs, max_tres_per_job=q.max_tres_per_job,
            max_tres_per_node=q.max_tres_per_node, flags=",".join(q.flags)))
    for a in change.put_accounts:
        _put(conn, acct_accounts, acct_accounts.c.name == a.name,
             dict(name=a.name, description=a.description, organization=a.organization))
    for u in change.put_users:
        _put(conn, acct_users, acct_users.c.name == u.name,
             dict(name=u.name, default_account=u.default_account, admin_level=u.admin_level))
    c = acct_assocs.c
    for s in change.put_assocs:
        _put(conn, acct_assocs, (c.account == s.account) & (c.user_name == s.user) & (c.partition == s.partition),
             dict(account=s.account, user_name=s.user, partition=s.partition, parent=s.parent,
                  fairshare=s.fairshare, max_jobs=s.max_jobs, max_submit_jobs=s.max_submit_jobs, max_wall=s.max_wall,
                  grp_tres=s.grp_tres, max_tres_per_job=s.max_tres_per_job, qos=",".join(s.qos),
                  default_qos=s.default_qos, grp_jobs=s.grp_jobs, grp_submit_jobs=s.grp_submit_jobs,
                  max_tres_per_node=s.max_tres_per_node))


def _put(conn: Connection, table: Any, key: Any, values: dict[str, Any]) -> None:
    """Update the row of ``key`` to ``values``, or insert it (a row keeps its id)."""
    if conn.execute(update(table).where(key).values(**values)).rowcount == 0:
        conn.execute(insert(table).values(**values))
