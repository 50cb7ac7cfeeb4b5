"""pslurm accounts: the accounts of pslurm.conf and the fair-share tree, as sshare shows it (read only).

Slurm keeps accounts in slurmdbd (``sacctmgr show assoc``) and shows fair share with ``sshare``;
pslurm keeps them in pslurm.conf (``AccountName=`` and ``UserName=`` lines) and shows both here.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from pslurm.cli.common import connect_api, reporting

PROG = "pslurm accounts"
# sshare's columns and widths (Slurm 22.05's default format)
COLUMNS = (("Account", 20), ("User", 10), ("RawShares", 10), ("NormShares", 11), ("RawUsage", 11),
           ("EffectvUsage", 13), ("FairShare", 10))


def accounts(
    as_json: Annotated[bool, typer.Option("--json", help="the controller's reply as JSON")] = False,
    users: Annotated[bool, typer.Option("--users", "-u", help="the accounts and each user's default account, "
                                                            "not the fair-share tree")] = False,
) -> None:
    """The accounts (pslurm.conf's AccountName= lines), their users and shares, and each account's and
    user's fair-share usage and factor (sshare)."""
    api = connect_api(PROG)
    with reporting(PROG):
        reply = api.accounts()
    if as_json:
        print(json.dumps({k: reply[k] for k in ("accounts", "default_accounts", "shares")}, indent=2))
    elif users:
        print(accounts_text(reply), end="")
    else:
        print(sshare_text(reply["shares"]), end="")


def accounts_text(reply: dict[str, Any]) -> str:
    """One line per account (``Account Users Fairshare Description``), then each user's default."""
    if not reply["accounts"]:
        return "no accounts configured: any -A is taken, and jobs without one charge none\n"
    lines = [f"{'Account':<20} {'Fairshare':>9} Users", f"{'-' * 20} {'-' * 9} {'-' * 20}"]
    for a in reply["accounts"]:
        text = f"{a['name']:<20} {a['fairshare']:>9} {','.join(a['users']) or '(none)'}"
        lines.append(text + (f"  # {a['description']}" if a["description"] else ""))
    for user, account in sorted(reply["default_accounts"].items()):
        lines.append(f"UserName={user} DefaultAccount={account}")
    return "\n".join(lines) + "\n"


def sshare_text(rows: list[dict[str, Any]]) -> str:
    """sshare's table: the root, each account (one space in), its users (two spaces in)."""
    head = " ".join(f"{name:>{width}}" for name, width in COLUMNS)
    lines = [head, " ".join("-" * width for _, width in COLUMNS)]
    total = sum(r["raw_usage"] for r in rows if not r["user"])
    lines.append(_row("root", "", "", 1.0, total, 1.0, None))
    for r in rows:
        indent = "  " if r["user"] else " "
        lines.append(_row(indent + r["account"], r["user"], str(r["raw_shares"]), r["norm_shares"], r["raw_usage"],
                          r["effective_usage"], r["fairshare"]))
    return "\n".join(lines) + "\n"


def _row(account: str, user: str, shares: str, norm: float, usage: float, effective: float,
         fairshare: float | None) -> str:
    values = (account[:20], user[:10], shares, f"{norm:.6f}", str(int(round(usage))), f"{effective:.6f}",
              "" if fairshare is None else f"{fairshare:.6f}")
    cells = zip(values, COLUMNS, strict=True)
    return " ".join(f"{v:<{w}}" if i < 2 else f"{v:>{w}}" for i, (v, (_, w)) in enumerate(cells))
