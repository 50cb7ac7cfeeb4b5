"""The association service: sacctmgr's model held in the store, cached for the job service and the scheduler.

Every submit asks which account and QOS a job charges, and every scheduling pass weighs fair share
over the association tree; both read :meth:`AssocService.current`, a snapshot kept in memory and
dropped at each change notice of the store (``AssocStore.subscribe``), so that an account added with
sacctmgr is charged by the next job, without a restart. pslurm.conf's ``AccountName=``/``UserName=``
lines are written into the store at start (:meth:`load_config`): for what they name, the file wins.
"""

from __future__ import annotations

import logging
import pwd
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

from pslurm.auth.credential import Identity
from pslurm.controller.acct_policy import AcctLimits, SubmitCounts, job_tres, submit_counts
from pslurm.controller.errors import PermissionDenied
from pslurm.controller.store.assoc import AssocStore
from pslurm.core.acctmgr import plan
from pslurm.core.assoc import ROOT, Account, Assoc, AssocChange, Associations, Qos, User, config_associations
from pslurm.core.config import ClusterConfig
from pslurm.core.errors import SpecError
from pslurm.core.jobspec import JobSpec

log = logging.getLogger("psctld")
ADMIN = "Administrator"
# ESLURM_ACCOUNTING_POLICY, as slurm_strerror words it
ACCOUNTING_POLICY = "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"


class AssocService:
    """The associations: a cached snapshot, pslurm.conf's lines, and sacctmgr's changes."""

    def __init__(self, store: AssocStore, cluster: str, operators: frozenset[int] = frozenset({0})) -> None:
        self.store, self.cluster, self.operators = store, cluster, operators
        self._lock = threading.Lock()  # one sacctmgr change at a time: each plans on the snapshot it writes over
        self._cached: Associations | None = None
        store.subscribe(self._changed)

    def _changed(self) -> None:
        self._cached = None

    def current(self) -> Associations:
        """The associations as stored now (read once per change)."""
        found = self._cached
        if found is None:
            found = self._cached = self.store.load()
        return found

    def load_config(self, config: ClusterConfig) -> None:
        """Write pslurm.conf's accounts, users and defaults into the store (and Slurm's ``root``
        account with its ``root`` user, as slurmdbd makes them). What the file states wins; what
        sacctmgr added beside it stays."""
        with self._lock:
            change = config_change(self.current(), config_associations(config), config.default_accounts)
            self.store.apply(change)
        if change:
            log.info("associations: pslurm.conf's accounts and users loaded into the store")

    def execute(self, caller: Identity, verb: str, entity: str, names: Sequence[str],
                where: Sequence[tuple[str, str]], values: Sequence[tuple[str, str]], commit: bool) -> list[str]:
        """A sacctmgr add/modify/delete: its lines; applied when ``commit`` (else what it would do).
        Operators and users with AdminLevel Operator or Administrator only (PermissionDenied).
        Raises :class:`pslurm.core.acctmgr.AcctMgrError` for a command sacctmgr refuses."""
        if not self.may_administer(caller):
            raise PermissionDenied("Access/permission denied: only an operator or a user with AdminLevel "
                                   "Operator or Administrator may change associations")
        with self._lock:
            change, lines = plan(self.current(), self.cluster, verb, entity, names, where, values)
            if commit:
                self.store.apply(change)
        return lines

    def may_administer(self, caller: Identity) -> bool:
        if caller.uid in self.operators:
            return True
        try:
            name = pwd.getpwuid(caller.uid).pw_name
        except KeyError:
            return False
        user = self.current().users.get(name)
        return user is not None and user.admin_level in ("Operator", ADMIN)


def config_change(stored: Associations, wanted: Associations, stated: Collection[str] = ()) -> AssocChange:
    """What makes ``stored`` hold ``wanted`` (pslurm.conf's model) and the root account: accounts and
    their descriptions, account associations with their shares, users' associations, new users, and
    the default accounts ``stated`` (UserName= lines). Nothing is removed, and what the file does not
    state (limits, QOS, organisation, a default sacctmgr changed) is kept."""
    accounts = [] if ROOT in stored.accounts else [Account(ROOT, "default root account", ROOT)]
    assocs: list[Assoc] = [] if stored.account_assoc(ROOT) is not None else [Assoc(ROOT)]
    if not any(a.account == ROOT and a.user == ROOT for a in stored.assocs):
        assocs.append(Assoc(ROOT, ROOT))
    for name, account in wanted.accounts.items():
        have = stored.accounts.get(name)
        if have is None or have.description != account.description:
            accounts.append(account if have is None else replace(have, description=account.description))
    by_key = {a.key: a for a in stored.assocs}
    for a in wanted.assocs:
        had = by_key.get(a.key)
        if had is None:
            assocs.append(replace(a, id=0))
        elif not a.user and (had.fairshare, had.parent) != (a.fairshare, a.parent):
            assocs.append(replace(had, fairshare=a.fairshare, parent=a.parent))
    users = []
    for name, user in {ROOT: User(ROOT, ROOT, ADMIN), **wanted.users}.items():
        have_user = stored.users.get(name)
        if name == ROOT:
            user = replace(user, admin_level=ADMIN)  # root stays an administrator
        if have_user is None or name in stated and have_user.default_account != user.default_account:
            users.append(user if have_user is None else replace(have_user, default_account=user.default_account))
    return AssocChange(put_accounts=tuple(accounts), put_users=tuple(users), put_assocs=tuple(assocs))


def charge(snap: Associations, spec: JobSpec, allowed_only: bool = True) -> tuple[JobSpec, Assoc | None, Qos]:
    """A job as it charges its association: its account (``-A``, else the user's default) and its
    QOS (``--qos``, else the association's default, else ``normal``). The spec comes back with its
    account filled in and its QOS left empty, for admission, which knows no QOS table; the caller
    puts ``Qos.name`` back. SpecError (Slurm's words) for an account or QOS the user may not have
    (``allowed_only``: a QOS the association does not allow too, AccountingStorageEnforce=qos)."""
    assoc = snap.job_assoc(spec.user, spec.account, spec.partition or "")
    qos = snap.job_qos(assoc, spec.qos, allowed_only)
    return replace(spec, account=spec.account if assoc is None else assoc.account, qos=""), assoc, qos


def assoc_limits(limits: AcctLimits, assoc: Assoc | None, qos: Qos, time_limit: int | None,
                 asked_limit: int | None) -> int | None:
    """The time limit a job is stored with under its QOS's and association's MaxWall (the QOS's wins,
    an association's is inherited from the accounts above it): a job that asked none gets it where it
    is shorter than the partition's; one that asked more is taken, and the scheduler holds it
    (``AssocMaxWallDurationPerJobLimit``), unless its QOS has DenyOnLimit (:func:`submit_refusal`)."""
    wall = limits.wall(assoc.id if assoc is not None else 0, qos.name)
    if wall is not None and asked_limit is None and (time_limit is None or time_limit > wall):
        return wall
    return time_limit


def submit_refusal(limits: AcctLimits, assoc: Assoc | None, qos: Qos, spec: JobSpec,
                   active: Callable[[], list[tuple[int, str, str, int]]], count: int = 1) -> None:
    """SpecError with Slurm's ESLURM_ACCOUNTING_POLICY words and the limit's reason where Slurm's
    acct_policy_validate refuses ``count`` more jobs like ``spec`` (a MaxSubmit or GrpSubmit limit;
    with DenyOnLimit, a limit the job alone passes). ``active()``: the queue's (association id, QOS,
    user, jobs) counts, asked only where a submit limit is set."""
    if not limits.active:
        return
    counts = submit_counts(limits, active()) if limits.counts_submits else SubmitCounts()
    nodes = spec.num_nodes
    tres = job_tres(spec.cpus, spec.mem_mb * nodes, nodes, spec.gpus() * nodes)
    reason = limits.submit_refusal(assoc.id if assoc is not None else 0, qos.name, spec.user, tres,
                                   spec.time_limit, counts, count)
    if reason is not None:
        raise SpecError(f"{ACCOUNTING_POLICY}: {reason}")
