"""sacctmgr's add, modify and delete, pure: a command and a snapshot in, the change and sacctmgr's lines out.

``plan(snapshot, cluster, verb, entity, names, where, values)`` returns the :class:`AssocChange` the
command makes and the lines sacctmgr 22.05 prints for it (``Adding Account(s)``, ``Modified user
associations...``, ``Nothing deleted``...); the controller applies the change in one transaction.
A command it refuses raises :class:`AcctMgrError`, whose lines sacctmgr prints on stderr.

Keys are sacctmgr's, matched as sacctmgr matches them (case-insensitive, shortened to a unique
enough prefix: ``Desc``, ``Fairshare``, ``DefaultAccount``, ``MaxJobs``...). Account and user names
are lower case, as sacctmgr keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from pslurm.core.assoc import (
    ADMIN_LEVELS,
    ALL_USERS,
    MAX_SHARES,
    NORMAL_QOS,
    ROOT,
    Account,
    Assoc,
    AssocChange,
    Associations,
    Qos,
    User,
    parse_tres,
)
from pslurm.core.errors import SpecError
from pslurm.core.timefmt import format_slurm_duration, parse_time_limit


class AcctMgrError(SpecError):
    """A command sacctmgr refuses: its lines (each printed on stderr as it is)."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


# sacctmgr's keys: (canonical, [(spelling, shortest prefix)]): sacctmgr takes a key shortened down to
# the prefix length, first match in this order
KEYS: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = (
    ("account", (("Accounts", 3), ("Acct", 4))),
    ("adminlevel", (("AdminLevel", 2),)),
    ("cluster", (("Clusters", 1),)),
    ("defaultaccount", (("DefaultAccount", 8),)),
    ("defaultqos", (("DefaultQOS", 8),)),
    ("description", (("Description", 1),)),
    ("fairshare", (("FairShare", 1), ("Shares", 1))),
    ("flags", (("Flags", 2),)),
    ("grptres", (("GrpTRES", 7),)),
    ("grpjobs", (("GrpJobs", 4),)),
    ("grpsubmitjobs", (("GrpSubmitJobs", 4),)),
    ("grpwall", (("GrpWall", 4),)),
    ("maxjobsperuser", (("MaxJobsPerUser", 11), ("MaxJobsPU", 9))),
    ("maxjobs", (("MaxJobs", 4),)),
    ("maxsubmitjobsperuser", (("MaxSubmitJobsPerUser", 10), ("MaxSubmitJobsPU", 10), ("MaxSubmitPU", 11))),
    ("maxsubmitjobs", (("MaxSubmitJobs", 4),)),
    ("maxtresperuser", (("MaxTRESPerUser", 11), ("MaxTRESPU", 9))),
    ("maxtrespernode", (("MaxTRESPerNode", 11), ("MaxTRESPN", 9))),
    ("maxtres", (("MaxTRESPerJob", 7), ("MaxTRES", 7))),
    ("maxwall", (("MaxWallDurationPerJob", 4),)),
    ("names", (("Names", 1), ("Users", 1))),
    ("organization", (("Organization", 1),)),
    ("parent", (("Parent", 1),)),
    ("partition", (("Partitions", 3),)),
    ("preempt", (("Preempt", 7),)),
    ("priority", (("Priority", 3),)),
    ("qos", (("QosLevel", 1), ("QOS", 1))),
)
ASSOC_KEYS = frozenset({"fairshare", "grptres", "grpjobs", "grpsubmitjobs", "maxtrespernode", "maxjobs",
 "maxsubmitjobs", "maxtres", "maxwall", "qos", "defaultqos",
                        "parent"})


def canonical_key(word: str) -> str | None:
    """The canonical name of a sacctmgr key as typed (``Fair`` -> ``fairshare``); None if unknown."""
    low = word.lower()
    for canonical, spellings in KEYS:  # a whole name first: MaxSubmitJobs is not MaxSubmitJobsPerUser cut short
        if any(spelling.lower() == low for spelling, _ in spellings):
            return canonical
    for canonical, spellings in KEYS:
        for spelling, shortest in spellings:
            if shortest <= len(low) <= len(spelling) and spelling.lower().startswith(low):
                return canonical
    return None


def _keys(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    out = {}
    for key, value in pairs:
        found = canonical_key(key)
        if found is None:
            raise AcctMgrError(f" Unknown option: {key}={value}", " Use keyword 'where' to modify condition")
        out[found] = value
    return out


def _names(text: str) -> list[str]:
    return [n.strip().lower() for n in text.split(",") if n.strip()]


def _count(key: str, value: str) -> int | None:
    """A limit: a number, or -1 / empty for none."""
    if value in ("-1", ""):
        return None
    if not value.isdigit():
        raise AcctMgrError(f" Bad {key} value: {value}")
    return int(value)


def _wall(value: str) -> int | None:
    if value in ("-1", ""):
        return None
    try:
        limit = parse_time_limit(value)
    except ValueError:
        raise AcctMgrError(f" Bad MaxWall time format: {value}") from None
    return limit


def _tres(value: str) -> str:
    """A TRES limit as given (checked); :func:`merged` applies it to what was set."""
    try:
        parse_tres(value)
    except ValueError as exc:
        raise AcctMgrError(f" {exc}") from None
    return value


TRES_FIELDS = ("grp_tres", "max_tres_per_job", "max_tres_per_node", "max_tres_per_user")


def merge_tres(old: str, new: str) -> str:
    """A TRES limit set over ``old`` as sacctmgr sets it: each TRES of ``new`` replaces the same one of
    ``old``, ``=-1`` clears it, the others stay (``GrpTRES=cpu=-1`` leaves ``mem=2G``)."""
    items = {k.strip().lower(): v for k, _, v in (i.partition("=") for i in old.split(",") if i.strip())}
    for item in filter(None, (i.strip() for i in new.split(","))):
        name, _, value = item.partition("=")
        items[name.strip().lower()] = value.strip()
    return ",".join(f"{k}={v}" for k, v in items.items() if v != "-1")


def merged(obj: Assoc | Qos | None, fields: Mapping[str, object]) -> dict[str, object]:
    """``fields`` to set on ``obj`` (None: a new one), its TRES limits merged with what ``obj`` has."""
    return {k: merge_tres(getattr(obj, k) if obj is not None else "", str(v)) if k in TRES_FIELDS else v
            for k, v in fields.items()}


def _shares(value: str) -> int:
    if not value.isdigit() or not 0 <= int(value) <= MAX_SHARES:
        raise AcctMgrError(f" Bad Fairshare value: {value}")
    return int(value)


_ASSOC_COUNTS = {"maxjobs": "max_jobs", "maxsubmitjobs": "max_submit_jobs", "grpjobs": "grp_jobs",
                 "grpsubmitjobs": "grp_submit_jobs"}
_QOS_COUNTS = {"maxjobsperuser": "max_jobs_per_user", "maxsubmitjobsperuser": "max_submit_jobs_per_user",
               "grpjobs": "grp_jobs", "grpsubmitjobs": "grp_submit_jobs"}
_QOS_TRES = {"maxtresperuser": "max_tres_per_user", "grptres": "grp_tres", "maxtres": "max_tres_per_job",
             "maxtrespernode": "max_tres_per_node"}
# sacctmgr's QOS flags (slurmdb_qos_flags_str), as it spells them
QOS_FLAGS = ("DenyOnLimit", "EnforceUsageThreshold", "NoDecay", "NoReserve", "OverPartQOS", "PartitionMaxNodes",
             "PartitionMinNodes", "PartitionTimeLimit", "RequiresReservation", "UsageFactorSafe")


def _flags(value: str, have: tuple[str, ...]) -> tuple[str, ...]:
    """``Flags=A,B`` (``+=``/``-=`` add or remove; ``-1`` clears) as sacctmgr's names."""
    op, text = (value[0], value[1:].lstrip("=")) if value[:1] in ("+", "-") and value != "-1" else ("=", value)
    if text in ("-1", ""):
        return ()
    names = []
    for word in filter(None, (w.strip() for w in text.split(","))):
        found = next((f for f in QOS_FLAGS if f.lower() == word.lower()), None)
        if found is None:
            raise AcctMgrError(f" Unknown QOS flag: {word}")
        names.append(found)
    if op == "+":
        return tuple(dict.fromkeys((*have, *names)))
    if op == "-":
        return tuple(f for f in have if f not in names)
    return tuple(dict.fromkeys(names))


def assoc_values(values: Mapping[str, str], known_qos: Mapping[str, Qos]) -> dict[str, object]:
    """The association fields ``values`` sets (Assoc's names)."""
    out: dict[str, object] = {}
    for key, value in values.items():
        if key == "fairshare":
            out["fairshare"] = _shares(value)
        elif key in _ASSOC_COUNTS:
            out[_ASSOC_COUNTS[key]] = _count(key, value)
        elif key == "maxwall":
            out["max_wall"] = _wall(value)
        elif key == "grptres":
            out["grp_tres"] = _tres(value)
        elif key in ("maxtres", "maxtrespernode"):
            out["max_tres_per_job" if key == "maxtres" else "max_tres_per_node"] = _tres(value)
        elif key in ("qos", "defaultqos"):
            names = _names(value.lstrip("+-="))
            unknown = [n for n in names if n not in known_qos]
            if unknown:
                raise AcctMgrError(f" Invalid qos specification: {unknown[0]}")
            if key == "defaultqos":
                out["default_qos"] = names[0] if names else ""
            else:
                out["qos"] = tuple(names)
    return out


def _limit_lines(fields: Mapping[str, object]) -> list[str]:
    """sacctmgr_print_assoc_limits' lines for what is set."""
    out = []
    for name, label in (("fairshare", "Fairshare    "), ("grp_jobs", "GrpJobs      "),
                        ("grp_submit_jobs", "GrpSubmitJobs"), ("grp_tres", "GrpTRES      "),
                        ("max_jobs", "MaxJobs      "),
                        ("max_submit_jobs", "MaxSubmitJobs"), ("max_tres_per_job", "MaxTRES      "),
                        ("max_tres_per_node", "MaxTRESPerNode"),
                        ("max_wall", "MaxWall      "), ("qos", "QOS          "), ("default_qos", "DefQOS       "),
                        ("parent", "Parent       ")):
        if name not in fields:
            continue
        value = fields[name]
        if value is None or value == "":
            text = "NONE"
        elif name == "max_wall":
            text = format_slurm_duration(int(value))  # type: ignore[call-overload]
        elif name == "qos":
            text = ",".join(value) or "''"  # type: ignore[arg-type]
        else:
            text = str(value)
        out.append(f"  {label} = {text}" if len(label) <= 13 else f"  {label}= {text}")  # MaxTRESPerNode=
    return out


def _assoc_line(cluster: str, a: Assoc, account_width: int = 20) -> str:
    """slurmdbd's line for a changed association (``C = c A = acct of parent`` for an account's own;
    a deleted one's account is 10 wide)."""
    if not a.user:
        return f"  C = {cluster:<10} A = {a.account} of {a.parent or ROOT}"
    line = f"  C = {cluster:<10} A = {a.account:<{account_width}} U = {a.user:<9}"
    return f"{line} P = {a.partition}" if a.partition else line


def plan(snap: Associations, cluster: str, verb: str, entity: str, names: Sequence[str],
         where: Sequence[tuple[str, str]], values: Sequence[tuple[str, str]]) -> tuple[AssocChange, list[str]]:
    """The change one sacctmgr command makes and the lines it prints (see the module's docstring)."""
    entity = _entity(entity)
    cond = _keys(where)
    sets = _keys(values)
    if verb == "add":  # sacctmgr add takes the keys anywhere: where and set are one
        sets = {**cond, **sets}
        cond = {}
    wanted = [n.lower() for n in names] + _names(cond.pop("names", ""))
    handler = _HANDLERS.get((verb, entity))
    if handler is None:
        raise AcctMgrError(f" pslurm's sacctmgr cannot {verb} {entity}: only list and show it")
    return handler(snap, cluster, wanted, cond, sets)


ENTITIES = {"account": ("account", "acct"), "user": ("user",), "association": ("association", "assoc"),
            "qos": ("qos",), "cluster": ("cluster",)}


def _entity(word: str) -> str:
    low = word.lower()
    for name, spellings in ENTITIES.items():
        if any(s.startswith(low) or low.startswith(s) for s in spellings) and len(low) >= 2:
            return name
    raise AcctMgrError(f" No valid entity in command: {word}")


def _need_names(wanted: list[str], what: str) -> None:
    if not wanted:
        raise AcctMgrError(f" Need name of {what} to add.")


# -- accounts -------------------------------------------------------------------------------------

def _add_account(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                 sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    _need_names(wanted, "account")
    limits = assoc_values(sets, snap.qos)
    parent = (sets.get("parent") or ROOT).lower()
    if snap.account_assoc(parent) is None and parent != ROOT:
        raise AcctMgrError(f" Parent account '{parent}' doesn't exist on cluster {cluster}",
                           "        Contact your admin to add this account.")
    new_accounts, new_assocs = [], []
    for name in wanted:
        if name not in snap.accounts:
            new_accounts.append(Account(name, sets.get("description", name),
                                        sets.get("organization", name if parent == ROOT else parent)))
        if snap.account_assoc(name) is None:
            new_assocs.append(Assoc(name, parent=parent, **{k: v for k, v in merged(None, limits).items()
                                                            if k != "parent"}))  # type: ignore[arg-type]
    if not new_accounts and not new_assocs:
        return AssocChange(), [" Nothing new added."]
    lines = []
    if new_accounts:
        lines += [" Adding Account(s)", *(f"  {a.name}" for a in new_accounts), " Settings",
                  f"  Description     = {sets.get('description', 'Account Name')}",
                  f"  Organization    = {sets.get('organization', 'Parent/Account Name')}"]
    lines += [" Associations", *(f"  A = {a.account:<10.10} C = {cluster:<10.10}" for a in new_assocs)]
    if limits or "parent" in sets:  # sacctmgr: the limits set, then the parent, under Settings
        lines += [" Settings", *_limit_lines({**limits, "parent": parent})]
    return AssocChange(put_accounts=tuple(new_accounts), put_assocs=tuple(new_assocs)), lines


def _select_accounts(snap: Associations, wanted: list[str], cond: dict[str, str]) -> list[str]:
    names = wanted or list(snap.accounts)
    if "parent" in cond:
        parents = _names(cond["parent"])
        names = [n for n in names if snap.parent_of(n) in parents]
    for key in ("description", "organization"):
        if key in cond:
            allowed = cond[key].split(",")
            names = [n for n in names if n in snap.accounts and getattr(snap.accounts[n], key) in allowed]
    return [n for n in names if n in snap.accounts]


def _modify_account(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                    sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    found = _select_accounts(snap, wanted, cond)
    accounts = [replace(snap.accounts[n], **{k: sets[k] for k in ("description", "organization") if k in sets})
                for n in found if "description" in sets or "organization" in sets]
    limits = assoc_values(sets, snap.qos)
    assocs = []
    if "parent" in sets:
        parent = sets["parent"].lower()
        if snap.account_assoc(parent) is None:
            raise AcctMgrError(f" Parent account '{parent}' doesn't exist on cluster {cluster}")
        if any(n in snap.lineage(parent) for n in found):
            raise AcctMgrError(" Error with request: Can't set a child account as the parent of its parent")
        limits["parent"] = parent
    if limits:
        assocs = [replace(a, **merged(a, limits)) for a in snap.assocs  # type: ignore[arg-type]
                  if a.account in found and not a.user and not a.partition]
    lines = []
    if accounts:
        lines += [" Modified accounts...", *(f"  {a.name}" for a in accounts)]
    if assocs:
        lines += [" Modified account associations...", *(_assoc_line(cluster, a) for a in assocs)]
    if not lines:
        return AssocChange(), [" Nothing modified"]
    return AssocChange(put_accounts=tuple(accounts), put_assocs=tuple(assocs)), lines


def _delete_account(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                    sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    if not wanted and not cond:
        raise AcctMgrError(" No conditions given to remove, not executing.")
    found = [n for n in _select_accounts(snap, wanted, cond) if n != ROOT]
    if not found:
        return AssocChange(), [" Nothing deleted"]
    gone = {d for n in found for d in _descendants(snap, n)}
    users = sorted(u.name for u in snap.users.values() if u.default_account in gone
                   and any(a not in gone for a in snap.user_accounts(u.name) if a))
    if users:
        raise AcctMgrError(" Error with request: User(s) have this as their default account:",
                           *(f"  {u}" for u in users),
                           " Please either remove the user's association or change their default account.")
    drop_assocs = tuple(a.key for a in snap.assocs if a.account in gone)
    lines = [" Deleting accounts...", *(f"  {n}" for n in sorted(gone))]
    return AssocChange(drop_accounts=tuple(sorted(gone)), drop_assocs=drop_assocs), lines


def _descendants(snap: Associations, account: str) -> list[str]:
    out, todo = [], [account]
    while todo:
        name = todo.pop()
        if name not in out:
            out.append(name)
            todo += snap.children(name)
    return out


# -- users -----------------------------------------------------------------------------------------

def _add_user(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
              sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    _need_names(wanted, "user")
    accounts = _names(sets.get("account", ""))
    default = sets.get("defaultaccount", "").lower()
    if default and default not in accounts:
        accounts.insert(0, default)
    partitions = [p for p in (sets.get("partition") or "").split(",") if p] or [""]
    missing = [a for a in accounts if snap.account_assoc(a) is None]
    if missing:
        raise AcctMgrError(f" This account '{missing[0]}' has not been added to cluster {cluster}.")
    level = _admin_level(sets.get("adminlevel", ""))
    limits = assoc_values({k: v for k, v in sets.items() if k in ASSOC_KEYS and k != "parent"}, snap.qos)
    new_users, new_assocs = [], []
    for name in wanted:
        if name not in snap.users:
            if not accounts:
                raise AcctMgrError(f" Need a default account for these users to add. (user {name})")
            new_users.append(User(name, default or accounts[0], level or "None"))
        have = {a.key for a in snap.assocs}
        for account in accounts:
            for part in partitions:
                if (account, name, part) not in have:
                    new_assocs.append(Assoc(account, name, part, **merged(None, limits)))  # type: ignore[arg-type]
    if not new_users and not new_assocs:
        return AssocChange(), [" Nothing new added."]
    lines = []
    if new_users:
        lines += [" Adding User(s)", *(f"  {u.name}" for u in new_users)]
        if default or level:  # sacctmgr says only what was given
            lines.append(" Settings =")
            lines += [f"  Default Account = {default}"] if default else []
            lines += [f"  Admin Level     = {level}"] if level else []
    if new_assocs:
        lines += [" Associations =",
                  *(f"  U = {a.user:<9.9} A = {a.account:<10.10} C = {cluster:<10.10}" for a in new_assocs),
                  " Non Default Settings", *_limit_lines(limits)]
    return AssocChange(put_users=tuple(new_users), put_assocs=tuple(new_assocs)), lines


def _admin_level(text: str) -> str:
    if not text:
        return ""
    for level in ADMIN_LEVELS:
        if level.lower().startswith(text.lower()):
            return level
    raise AcctMgrError(f" Unknown AdminLevel: {text} (None, Operator, Administrator)")


def _select_user_assocs(snap: Associations, wanted: list[str], cond: dict[str, str]) -> list[Assoc]:
    accounts = _names(cond.get("account", ""))
    partitions = [p for p in cond.get("partition", "").split(",") if p]
    return [a for a in snap.assocs if a.user and a.user != ALL_USERS and (not wanted or a.user in wanted)
            and (not accounts or a.account in accounts) and (not partitions or a.partition in partitions)]


def _modify_user(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                 sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    users_found = [snap.users[n] for n in (wanted or list(snap.users)) if n in snap.users]
    users = []
    if "defaultaccount" in sets:
        account = sets["defaultaccount"].lower()
        without = [u for u in users_found if account not in snap.user_accounts(u.name)]
        if without:
            raise AcctMgrError(f" Can't modify because these users aren't associated with new default account "
                               f"'{account}'...", *(f"  U = {u.name} C = {cluster}" for u in without))
        users = [replace(u, default_account=account) for u in users_found]
    if "adminlevel" in sets:
        level = _admin_level(sets["adminlevel"])
        users = [replace(u, admin_level=level) for u in (users or users_found)]
    limits = assoc_values({k: v for k, v in sets.items() if k in ASSOC_KEYS}, snap.qos)
    assocs = [replace(a, **merged(a, limits))  # type: ignore[arg-type]
              for a in _select_user_assocs(snap, wanted, cond)] if limits else []
    lines = []
    if users:
        lines += [" Modified users...", *(f"  {u.name}" for u in users)]
    if assocs:
        lines += [" Modified user associations...", *(_assoc_line(cluster, a) for a in assocs)]
    if not lines:
        return AssocChange(), [" Nothing modified"]
    return AssocChange(put_users=tuple(users), put_assocs=tuple(assocs)), lines


def _delete_user(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                 sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    if not wanted and not cond:
        raise AcctMgrError(" No conditions given to remove, not executing.")
    if "account" in cond or "partition" in cond:  # some of their associations
        assocs = _select_user_assocs(snap, wanted, cond)
        if not assocs:
            return AssocChange(), [" Nothing deleted"]
        gone = {a.key for a in assocs}
        users = []
        for name in sorted({a.user for a in assocs}):
            left = [a.account for a in snap.assocs if a.user == name and a.key not in gone]
            user = snap.users.get(name)
            if user is not None and left and user.default_account not in left:
                users.append(replace(user, default_account=left[0]))
        lines = [" Deleting user associations...", *(_assoc_line(cluster, a, 10) for a in assocs)]
        return AssocChange(put_users=tuple(users), drop_assocs=tuple(gone)), lines
    found = [n for n in wanted if n in snap.users or any(a.user == n for a in snap.assocs)]
    if not found:
        return AssocChange(), [" Nothing deleted"]
    drop = tuple(a.key for a in snap.assocs if a.user in found)
    return AssocChange(drop_users=tuple(found), drop_assocs=drop), [" Deleting users...", *(f"  {n}" for n in found)]


# -- QOS ---------------------------------------------------------------------------------------------

def _qos_fields(sets: Mapping[str, str], known: Mapping[str, Qos], flags: tuple[str, ...] = ()) -> dict[str, object]:
    """The QOS fields ``sets`` sets (Qos's names); ``flags``: the QOS's flags before (for ``Flags+=``)."""
    out: dict[str, object] = {}
    for key, value in sets.items():
        if key == "description":
            out["description"] = value
        elif key == "priority":
            if not value.lstrip("-").isdigit():
                raise AcctMgrError(f" Bad Priority value: {value}")
            out["priority"] = max(0, int(value))
        elif key in _QOS_COUNTS:
            out[_QOS_COUNTS[key]] = _count(key, value)
        elif key in _QOS_TRES:
            out[_QOS_TRES[key]] = _tres(value)
        elif key == "flags":
            out["flags"] = _flags(value, flags)
        elif key == "maxwall":
            out["max_wall"] = _wall(value)
        elif key == "preempt":
            names = _names(value.lstrip("+-="))
            unknown = [n for n in names if n not in known]
            if unknown:
                raise AcctMgrError(f" Invalid qos specification: {unknown[0]}")
            out["preempt"] = tuple(names)
        elif key != "names":
            raise AcctMgrError(f" Unknown option: {key}={value}", " Use keyword 'where' to modify condition")
    return out


def _qos_lines(fields: Mapping[str, object]) -> list[str]:
    out = []
    for name, label in (("flags", "Flags"), ("grp_jobs", "GrpJobs"), ("grp_submit_jobs", "GrpSubmitJobs"),
                        ("grp_tres", "GrpTRES"), ("max_jobs_per_user", "MaxJobsPerUser"),
                        ("max_submit_jobs_per_user", "MaxSubmitJobsPerUser"), ("max_tres_per_job", "MaxTRESPerJob"),
                        ("max_tres_per_node", "MaxTRESPerNode"), ("max_tres_per_user", "MaxTRESPerUser"),
                        ("max_wall", "MaxWall"), ("preempt", "Preempt"), ("priority", "Priority")):
        if name in fields:
            value = fields[name]
            if name == "max_wall" and value is not None:
                value = format_slurm_duration(int(value))  # type: ignore[call-overload]
            elif name in ("preempt", "flags"):
                value = ",".join(value) or "''"  # type: ignore[arg-type]
            out.append(f"  {label:<24} = {'NONE' if value in (None, '') else value}")
    return out


def _add_qos(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
             sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    _need_names(wanted, "QOS")
    fields = _qos_fields(sets, snap.qos)
    new = [Qos(n, **{"description": n, **merged(None, fields)})  # type: ignore[arg-type]
           for n in wanted if n not in snap.qos]
    if not new:
        return AssocChange(), [" Nothing new added."]
    lines = [" Adding QOS(s)", *(f"  {q.name}" for q in new), " Settings",
             f"  Description    = {sets.get('description', new[0].name)}", *_qos_lines(fields)]
    return AssocChange(put_qos=tuple(new)), lines


def _modify_qos(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    found = [replace(snap.qos[n], **merged(snap.qos[n], _qos_fields(sets, snap.qos, snap.qos[n].flags)))  # type: ignore[arg-type]
             for n in (wanted or list(snap.qos)) if n in snap.qos]
    fields = _qos_fields(sets, snap.qos)
    if not found or not fields:
        return AssocChange(), [" Nothing modified"]
    return AssocChange(put_qos=tuple(found)), [" Modified qos...", *(f"  {q.name}" for q in found)]


def _delete_qos(snap: Associations, cluster: str, wanted: list[str], cond: dict[str, str],
                sets: dict[str, str]) -> tuple[AssocChange, list[str]]:
    if not wanted:
        raise AcctMgrError(" No conditions given to remove, not executing.")
    found = [n for n in wanted if n in snap.qos]
    if NORMAL_QOS in found:
        raise AcctMgrError(" Error with request: the QOS normal is every association's default: it cannot be removed")
    if not found:
        return AssocChange(), [" Nothing deleted"]
    gone = set(found)
    assocs = tuple(replace(a, qos=tuple(q for q in a.qos if q not in gone),
                           default_qos="" if a.default_qos in gone else a.default_qos)
                   for a in snap.assocs if gone & set(a.qos) or a.default_qos in gone)
    others = tuple(replace(q, preempt=tuple(p for p in q.preempt if p not in gone))
                   for q in snap.qos.values() if q.name not in gone and gone & set(q.preempt))
    return (AssocChange(drop_qos=tuple(found), put_assocs=assocs, put_qos=others),
            [" Deleting QOS(s)...", *(f"  {n}" for n in found)])


_HANDLERS = {
    ("add", "account"): _add_account, ("modify", "account"): _modify_account, ("delete", "account"): _delete_account,
    ("add", "user"): _add_user, ("modify", "user"): _modify_user, ("delete", "user"): _delete_user,
    ("add", "qos"): _add_qos, ("modify", "qos"): _modify_qos, ("delete", "qos"): _delete_qos,
}
