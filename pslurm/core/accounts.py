"""Accounts: who may charge which account, each user's default, and each account's shares.

Slurm keeps these in slurmdbd, set with sacctmgr (``sacctmgr add account lab1 Fairshare=2``,
``sacctmgr add user ana Account=lab1 DefaultAccount=lab1``); pslurm keeps them in its store too, and
reads pslurm.conf lines of its own with sacctmgr's words:

    AccountName=lab1 Users=ana,bo Fairshare=2 Description="vision lab"
    AccountName=lab2 Users=bo,cy
    AccountName=general Users=ALL
    UserName=bo DefaultAccount=lab2

psctld loads these lines into its store at every start (``pslurm.core.assoc``, where the rules
live: a user's default account, which account a job charges); sacctmgr (``psacctmgr``) changes the
store beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pslurm.core.assoc import INVALID_ACCOUNT, MAX_SHARES
from pslurm.core.clientconf import config_error
from pslurm.core.confmodel import AccountConfig, ClusterConfig

__all__ = ["INVALID_ACCOUNT", "check_accounts", "parse_account_line", "parse_user_line", "render_accounts"]


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
