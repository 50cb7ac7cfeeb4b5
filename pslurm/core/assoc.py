"""Associations: Slurm's accounting model (sacctmgr's accounts, users, associations and QOS), pure.

Slurm keeps these in slurmdbd; pslurm keeps them in the controller's store (``controller/store/assoc.py``)
and changes them with sacctmgr's words (``psacctmgr``). An *association* is an (account, user,
partition) row: an account's own association (``user`` empty) places it in the tree under its
``parent`` (``root`` at the top) with its shares and limits; a user's association lets that user
charge the account. ``Associations`` is one consistent snapshot of all of it, and answers what the
job service and the scheduler ask: which account a job charges, its QOS, the fair-share tree.

pslurm.conf's ``AccountName=``/``UserName=`` lines are loaded into the store at every start of psctld
(:func:`from_config`): for what they name the file wins; what sacctmgr added beside them stays.
``Users=ALL`` (pslurm's own) is a user association with the user ``*``: every user may charge it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from pslurm.core.errors import SpecError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pslurm.core.confmodel import ClusterConfig

ROOT = "root"
ALL_USERS = "*"  # pslurm.conf's Users=ALL: an association every user may charge
NORMAL_QOS = "normal"
ADMIN_LEVELS = ("None", "Operator", "Administrator")
# ESLURM_INVALID_ACCOUNT and ESLURM_INVALID_QOS, as slurm_strerror words them
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
INVALID_QOS = "Invalid qos specification"
MAX_SHARES = 2**31 - 1


@dataclass(frozen=True)
class Qos:
    """A quality of service (sacctmgr's ``qos``): its priority and the limits pslurm honours."""

    name: str
    description: str = ""
    priority: int = 0
    max_jobs_per_user: int | None = None  # MaxJobsPerUser: jobs running at once
    max_submit_jobs_per_user: int | None = None  # MaxSubmitJobsPerUser: jobs queued or running
    max_tres_per_user: str = ""  # MaxTRESPerUser: "cpu=8,gres/gpu=2"
    max_wall: int | None = None  # MaxWall (MaxWallDurationPerJob), seconds
    preempt: tuple[str, ...] = ()  # Preempt: the QOS it may preempt (kept and shown; pslurm does not preempt)
    grp_tres: str = ""  # GrpTRES: what the QOS's running jobs hold at once, all users together
    grp_jobs: int | None = None  # GrpJobs: its jobs running at once
    grp_submit_jobs: int | None = None  # GrpSubmitJobs: its jobs queued or running
    max_tres_per_job: str = ""  # MaxTRESPerJob
    max_tres_per_node: str = ""  # MaxTRESPerNode
    flags: tuple[str, ...] = ()  # Flags: DenyOnLimit (a job over a limit is refused at submit, not held)

    @property
    def deny_on_limit(self) -> bool:
        return any(f.lower() == "denyonlimit" for f in self.flags)


@dataclass(frozen=True)
class Account:
    name: str
    description: str = ""
    organization: str = ""


@dataclass(frozen=True)
class User:
    name: str
    default_account: str = ""
    admin_level: str = "None"  # None, Operator, Administrator (sacctmgr's AdminLevel)


@dataclass(frozen=True)
class Assoc:
    """One association: an account's own (``user`` "") or a user's in an account."""

    account: str
    user: str = ""
    partition: str = ""
    parent: str = ""  # an account's own association: its parent account ("" for root itself)
    fairshare: int = 1  # raw shares among its siblings
    max_jobs: int | None = None  # MaxJobs: running at once
    max_submit_jobs: int | None = None  # MaxSubmitJobs: queued or running
    max_wall: int | None = None  # MaxWall (MaxWallDurationPerJob), seconds
    grp_tres: str = ""  # GrpTRES: what the jobs of it and its sub-associations hold at once
    max_tres_per_job: str = ""  # MaxTRES (per job)
    qos: tuple[str, ...] = (NORMAL_QOS,)
    default_qos: str = ""
    id: int = 0  # the store's id (sacctmgr's ID column); 0 until stored
    grp_jobs: int | None = None  # GrpJobs: running at once, it and its sub-associations
    grp_submit_jobs: int | None = None  # GrpSubmitJobs: queued or running, it and its sub-associations
    max_tres_per_node: str = ""  # MaxTRESPerNode

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.account, self.user, self.partition)


@dataclass(frozen=True)
class Associations:
    """A snapshot of the whole accounting model."""

    accounts: Mapping[str, Account] = field(default_factory=dict)
    users: Mapping[str, User] = field(default_factory=dict)
    assocs: tuple[Assoc, ...] = ()  # in the store's order (ids)
    qos: Mapping[str, Qos] = field(default_factory=lambda: {NORMAL_QOS: Qos(NORMAL_QOS, "Normal QOS default")})

    @property
    def enforced(self) -> bool:
        """Whether jobs must charge an account they are associated with: as soon as any account but
        ``root`` exists (Slurm's AccountingStorageEnforce=associations). None: any ``-A`` is taken."""
        return any(name != ROOT for name in self.accounts)

    def user_assocs(self, user: str) -> list[Assoc]:
        """The user's own associations, then the ``Users=ALL`` ones, in store order."""
        own = [a for a in self.assocs if a.user == user]
        named = {a.account for a in own}
        return own + [a for a in self.assocs if a.user == ALL_USERS and a.account not in named]

    def user_accounts(self, user: str) -> list[str]:
        """The accounts ``user`` may charge (each once)."""
        return list(dict.fromkeys(a.account for a in self.user_assocs(user)))

    def default_account(self, user: str) -> str | None:
        """The user's DefaultAccount, else their first account, else the first ``Users=ALL`` one; None
        when they may charge none ("" when associations are not enforced)."""
        return self._first_account(user) if self.enforced else ""

    def job_assoc(self, user: str, asked: str, partition: str = "") -> Assoc | None:
        """The association a job of ``user`` asking account ``asked`` ("" the default) in ``partition``
        runs under: a partition's own association before the account's general one. SpecError (Slurm's
        words) when the user has none there; where associations are not enforced, None instead (the job
        runs charged to none, as slurmctld's without AccountingStorageEnforce: root's jobs still charge
        slurmdbd's root association, and say Account=root)."""
        enforced = self.enforced
        account = asked.lower() if asked else self.default_account(user) if enforced else self._first_account(user)
        found = [a for a in self.user_assocs(user) if a.account == account and a.partition in ("", partition)]
        if found:
            return max(found, key=lambda a: a.partition != "")
        if enforced:
            raise SpecError(INVALID_ACCOUNT)
        return None

    def _first_account(self, user: str) -> str | None:
        """The user's DefaultAccount, else their first account, regardless of enforcement."""
        found = self.users.get(user)
        mine = self.user_accounts(user)
        if found is not None and found.default_account in mine:
            return found.default_account
        return mine[0] if mine else None

    def job_account(self, user: str, asked: str, partition: str = "") -> str:
        """The account a job charges: its ``-A`` (lower case, as sacctmgr keeps names) or the user's
        default; ``asked`` as it is when associations are not enforced. SpecError when the user may not."""
        found = self.job_assoc(user, asked, partition)
        return asked if found is None else found.account

    def job_qos(self, assoc: Assoc | None, asked: str, allowed_only: bool = True) -> Qos:
        """The QOS a job runs in: its ``--qos``, else its association's DefaultQOS, else ``normal``;
        SpecError (``Invalid qos specification``) for one that does not exist or (``allowed_only``,
        Slurm's AccountingStorageEnforce=qos) the association does not allow."""
        name = (asked or (self.default_qos(assoc) if assoc else "") or NORMAL_QOS).lower()
        found = self.qos.get(name)
        if found is None or (allowed_only and assoc is not None and asked and name not in self.allowed_qos(assoc)):
            raise SpecError(INVALID_QOS)
        return found

    def default_qos(self, assoc: Assoc) -> str:
        """The association's DefaultQOS, else the nearest one above it (slurmdbd's inheritance); "" none."""
        seen: set[int] = set()
        at: Assoc | None = assoc
        while at is not None and id(at) not in seen:
            if at.default_qos:
                return at.default_qos
            seen.add(id(at))
            at = self.parent_assoc(at)
        return ""

    def allowed_qos(self, assoc: Assoc) -> tuple[str, ...]:
        """The QOS an association allows (a user's association with none set: its account's)."""
        if assoc.qos:
            return assoc.qos
        own = self.account_assoc(assoc.account)
        return own.qos if own is not None and own.qos else (NORMAL_QOS,)

    def account_assoc(self, account: str) -> Assoc | None:
        return next((a for a in self.assocs if a.account == account and not a.user and not a.partition), None)

    def parent_of(self, account: str) -> str:
        own = self.account_assoc(account)
        return own.parent if own is not None and own.parent else ("" if account == ROOT else ROOT)

    def children(self, account: str) -> list[str]:
        """The accounts directly under ``account``, in store order."""
        return [a.account for a in self.assocs if not a.user and not a.partition and a.account != ROOT
                and (a.parent or ROOT) == account]

    def parent_assoc(self, assoc: Assoc) -> Assoc | None:
        """The association above ``assoc`` in the tree: a user's is its account's own, an account's its
        parent's (None at root)."""
        if assoc.user or assoc.partition:
            return self.account_assoc(assoc.account)
        return None if assoc.account == ROOT else self.account_assoc(assoc.parent or ROOT)

    def lineage(self, account: str) -> list[str]:
        """``account`` and its parents up to root (a loop in the data ends the walk)."""
        out: list[str] = []
        while account and account not in out:
            out.append(account)
            account = self.parent_of(account)
        return out


@dataclass(frozen=True)
class AssocChange:
    """What one sacctmgr command changes, as whole rows: the store deletes the ``drop_*`` keys, then
    writes the ``put_*`` rows over those of the same key (an association keeps its id), in one
    transaction."""

    put_qos: tuple[Qos, ...] = ()
    put_accounts: tuple[Account, ...] = ()
    put_users: tuple[User, ...] = ()
    put_assocs: tuple[Assoc, ...] = ()
    drop_qos: tuple[str, ...] = ()
    drop_accounts: tuple[str, ...] = ()
    drop_users: tuple[str, ...] = ()
    drop_assocs: tuple[tuple[str, str, str], ...] = ()

    def __bool__(self) -> bool:
        return any((self.put_qos, self.put_accounts, self.put_users, self.put_assocs, self.drop_qos,
                    self.drop_accounts, self.drop_users, self.drop_assocs))


def from_config(accounts: Iterable[tuple[str, tuple[str, ...], bool, int, str]],
                defaults: Mapping[str, str]) -> tuple[list[Account], list[User], list[Assoc]]:
    """pslurm.conf's lines as the store's rows: ``accounts`` as (name, users, all_users, fairshare,
    description), ``defaults`` {user: DefaultAccount}. Accounts sit under root; every user named gets
    a user record (its default: the UserName= line's, else the first account listing it)."""
    out_accounts, assocs, users = [], [], dict[str, User]()
    for name, members, all_users, fairshare, description in accounts:
        out_accounts.append(Account(name, description, name))  # sacctmgr: the organisation is the name
        assocs.append(Assoc(name, parent=ROOT, fairshare=fairshare))
        for user in ((ALL_USERS,) if all_users else members):
            assocs.append(Assoc(name, user))
            if user != ALL_USERS:
                users.setdefault(user, User(user, defaults.get(user, name)))
    for user, account in defaults.items():
        users[user] = replace(users.get(user, User(user)), default_account=account)
    return out_accounts, list(users.values()), assocs


def config_associations(cfg: ClusterConfig) -> Associations:
    """The associations pslurm.conf's lines alone make (what psctld loads into its store at start, and
    the model of a job service that has no store of associations)."""
    accounts, users, assocs = from_config(
        ((a.name, a.users, a.all_users, a.fairshare, a.description) for a in cfg.accounts.values()),
        cfg.default_accounts)
    numbered = tuple(replace(a, id=i) for i, a in enumerate(assocs, 1))
    return Associations({a.name: a for a in accounts}, {u.name: u for u in users}, numbered)


def parse_tres(text: str) -> dict[str, int]:
    """``cpu=8,gres/gpu=2,mem=4G,node=1`` -> {name: count} (mem in MB). ValueError for a bad item."""
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, eq, value = item.partition("=")
        name = name.strip().lower()
        if not eq or not name:
            raise ValueError(f"Invalid TRES specification: {item}")
        if value in ("-1", ""):
            continue
        unit = value[-1:].upper() if name == "mem" and value[-1:].isalpha() else "M"
        number = value[:-1] if value[-1:].isalpha() and name == "mem" else value
        if not number.isdigit() or unit not in _MB:
            raise ValueError(f"Invalid TRES specification: {item}")
        out[name] = -(-int(number) * _MB[unit] // 1024)  # MB, rounded up
    return out


_MB = {"K": 1, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}  # a unit in KiB, for parse_tres
