"""Accounts: who may charge which account, each user's default, and each account's shares.

Slurm keeps these in slurmdbd, set with sacctmgr (``sacctmgr add account lab1 Fairshare=2``,
``sacctmgr add user ana Account=lab1 DefaultAccount=lab1``); pslurm keeps them in pslurm.conf, in
lines of its own with sacctmgr's words:

    AccountName=lab1 Users=ana,bo Fairshare=2 Description="vision lab"
    AccountName=lab2 Users=bo,cy
    AccountName=general Users=ALL
    UserName=bo DefaultAccount=lab2

A user's default account is the one their ``UserName=`` line names, else the first account that
lists them, else the first ``Users=ALL`` account. With no ``AccountName=`` line at all, accounts are
not checked: any ``-A`` text is taken and the default is empty (pslurm before accounts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pslurm.core.clientconf import config_error
from pslurm.core.confmodel import AccountConfig, ClusterConfig
from pslurm.core.errors import SpecError

# ESLURM_INVALID_ACCOUNT, as slurm_strerror words it: sbatch -A naming an account the user has no
# association with, and scontrol update Account= likewise
INVALID_ACCOUNT = "Invalid account or account/partition combination specified"
MAX_SHARES = 2**31 - 1


_err = config_error


def parse_account_line(path: str, lineno: int, kv: Mapping[str, str]) -> AccountConfig:
    """One ``AccountName=NAME [Users=u1,u2|ALL] [Fairshare=N] [Description=TEXT]`` line (``kv``:
    lower-case keys). Raises ConfigError(``path:line: what``)."""
    name = kv["accountname"].strip().lower()
    if not name or any(c in name for c in ",:= \t") or name == "default":
        raise _err(path, lineno, f"AccountName={kv['accountname']}: expected a name (no blanks, commas or colons)")
    unknown = set(kv) - {"accountname", "users", "fairshare", "description"}
    if unknown:
        raise _err(path, lineno, f"AccountName={name}: unknown key {sorted(unknown)[0]} "
                                 "(AccountName= takes Users=, Fairshare=, Description=)")
    users = tuple(dict.fromkeys(u for u in kv.get("users", "").split(",") if u))
    all_users = any(u.upper() == "ALL" for u in users)
    shares = kv.get("fairshare", "1")
    if not shares.isdigit() or not 1 <= int(shares) <= MAX_SHARES:
        raise _err(path, lineno, f"AccountName={name}: Fairshare={shares}: expected a whole number from 1 "
                                 f"to {MAX_SHARES}")
    return AccountConfig(name=name, users=() if all_users else users, all_users=all_users, fairshare=int(shares),
                         description=kv.get("description", ""))


def parse_user_line(path: str, lineno: int, kv: Mapping[str, str]) -> tuple[str, str]:
    """One ``UserName=NAME DefaultAccount=ACCOUNT`` line: (user, account). Raises ConfigError."""
    user = kv["username"]
    unknown = set(kv) - {"username", "defaultaccount"}
    if not user or unknown or "defaultaccount" not in kv:
        raise _err(path, lineno, f"UserName={user}: expected UserName=NAME DefaultAccount=ACCOUNT")
    return user, kv["defaultaccount"].lower()


def check_accounts(path: str, accounts: Mapping[str, AccountConfig],
                   defaults: Iterable[tuple[int, str, str]]) -> dict[str, str]:
    """The ``UserName=`` lines' defaults, each checked against the accounts: ``(line, user, account)``
    in, ``{user: account}`` out. Raises ConfigError for a default the user may not charge."""
    out: dict[str, str] = {}
    for lineno, user, account in defaults:
        found = accounts.get(account)
        if found is None:
            raise _err(path, lineno, f"UserName={user}: DefaultAccount={account}: no AccountName={account} line")
        if not found.admits(user):
            raise _err(path, lineno, f"UserName={user}: DefaultAccount={account}: {user} is not one of its Users=")
        if user in out:
            raise _err(path, lineno, f"UserName={user} is given twice")
        out[user] = account
    return out


def render_accounts(cfg: ClusterConfig) -> list[str]:
    """The ``AccountName=`` and ``UserName=`` lines of ``cfg`` (pslurm.conf syntax)."""
    import shlex

    lines = []
    for acct in cfg.accounts.values():
        line = f"AccountName={shlex.quote(acct.name)}"
        users = "ALL" if acct.all_users else ",".join(acct.users)
        if users:
            line += f" Users={shlex.quote(users)}"
        if acct.fairshare != 1:
            line += f" Fairshare={acct.fairshare}"
        if acct.description:
            line += f" Description={shlex.quote(acct.description)}"
        lines.append(line)
    lines += [f"UserName={shlex.quote(user)} DefaultAccount={shlex.quote(account)}"
              for user, account in cfg.default_accounts.items()]
    return lines


def user_accounts(cfg: ClusterConfig, user: str) -> list[str]:
    """The accounts ``user`` may charge: those that list them, then the ``Users=ALL`` ones (file order)."""
    listed = [a.name for a in cfg.accounts.values() if user in a.users]
    return listed + [a.name for a in cfg.accounts.values() if a.all_users and a.name not in listed]


def default_account(cfg: ClusterConfig, user: str) -> str | None:
    """``user``'s default account; None when they may charge none ("" when accounts are not configured)."""
    if not cfg.accounts:
        return ""
    if user in cfg.default_accounts:
        return cfg.default_accounts[user]
    found = user_accounts(cfg, user)
    return found[0] if found else None


def job_account(cfg: ClusterConfig, user: str, asked: str) -> str:
    """The account a job of ``user`` that asked ``asked`` (``-A``; "" for none) charges: the user's
    default when none is asked, the asked one (sacctmgr's lower-case name) when the user may charge
    it. SpecError (Slurm's ``Invalid account or account/partition combination specified``) when the
    user may charge no such account. With no accounts configured, ``asked`` as it is."""
    if not cfg.accounts:
        return asked
    if not asked:
        found = default_account(cfg, user)
        if found is None:
            raise SpecError(INVALID_ACCOUNT)
        return found
    account = cfg.accounts.get(asked.lower())
    if account is None or not account.admits(user):
        raise SpecError(INVALID_ACCOUNT)
    return account.name


def account_shares(cfg: ClusterConfig) -> dict[str, int]:
    """Each configured account's raw shares (``Fairshare=``), for the fair-share factor."""
    return {a.name: a.fairshare for a in cfg.accounts.values()}


def account_members(cfg: ClusterConfig) -> dict[str, tuple[str, ...]]:
    """Each configured account's listed users (``Users=ALL`` lists none): the siblings a user's
    share of the account is split among, with the users seen charging it."""
    return {a.name: a.users for a in cfg.accounts.values()}
