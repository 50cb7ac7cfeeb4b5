"""psshare: the fair-share tree, each association's shares, usage and factor (sshare).

The rows come from the scheduler's own computation (``GET /pslurm/v1/shares``: Slurm's classic fair
share, PriorityFlags=NO_FAIR_TREE, over the association tree), in sshare 22.05's fields and order:
the root, then each account and its users, indented one blank a level.
"""

from __future__ import annotations

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, prog_name, reporting, user_identity
from pslurm.cli.printfields import (
    PARSABLE,
    PARSABLE2,
    Field,
    format_double,
    parse_command,
    render,
    split_width,
    tree_indents,
    write_lines,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PROG = prog_name("psshare")
# sshare 22.05's fields (src/sshare/process.c), in its order: a name matches the first it is a prefix of
FIELDS = (("Account", -20, False), ("Cluster", 10, False), ("EffectvUsage", 13, True), ("FairShare", 10, True),
          ("GrpTRESMins", 30, False), ("GrpTRESRaw", 30, False), ("ID", 6, True), ("LevelFS", 10, True),
          ("NormShares", 11, True), ("NormUsage", 11, True), ("Partition", 12, False), ("RawShares", 10, True),
          ("RawUsage", 11, True), ("TRESRunMins", 30, False), ("User", 10, False))
SHORT = "A,User,RawShares,NormShares,RawUsage,Eff,Fairshare"
LONG = "A,User,RawShares,NormShares,RawUsage,NormUsage,Eff,Fairshare,GrpTRESMins,TRESRunMins"
OPTIONS = (
    a.Opt("accounts", "A", help="only these accounts (comma-separated)"),
    a.Opt("all", "a", a.NONE, help="every user (default: your own and every account)"),
    a.Opt("helpformat", "e", a.NONE, help="list the fields --format takes"),
    a.Opt("noheader", "n", a.NONE, help="no header lines"),
    a.Opt((), "h", a.NONE, dest="noheader", help=""),  # sshare's -h is --noheader (--help has no letter)
    a.Opt("long", "l", a.NONE, help="NormUsage, GrpTRESMins and TRESRunMins too"),
    a.Opt("partition", "m", a.NONE, help="a Partition column (pslurm's associations have none)"),
    a.Opt(("clusters", "cluster"), "M", help="clusters to ask (pslurm: this one)"),
    a.Opt("format", "o", dest="fmt", help="fields: Account,User%12,FairShare,..."),
    a.Opt("parsable", "p", a.NONE, help="'|' after every field"),
    a.Opt("parsable2", "P", a.NONE, help="'|' between fields"),
    a.Opt("users", "u", help="these users (comma-separated; -1: all)"),
    a.Opt("Users", "U", a.NONE, dest="users_only", help="only users' rows"),
    a.Opt("verbose", "v", a.NONE, help="no effect"),
    a.Opt("version", "V", a.NONE, help="print pslurm's version and exit"),
    a.Opt("quiet", "q", a.NONE, help=""),  # in sshare's getopt string, with no case of its own
    a.Opt("help", arg=a.NONE, help=""),
    a.Opt("usage", arg=a.NONE, dest="help", help=""),
)


def fields_of(spec: str) -> list[Field]:
    """A format list as sshare reads it; ValueError naming a field it does not know."""
    out = []
    for item in filter(None, spec.split(",")):
        name, width = split_width(item)
        found = next((f for f in FIELDS if f[0].lower().startswith(name.lower())), None)
        if found is None:
            raise ValueError(f'Invalid field requested: "{name.lower()}"')
        out.append(Field(found[0], width or found[1], found[2]))
    return out


def rows(shares: Sequence[dict[str, Any]], cluster: str, users: Sequence[str] | None, accounts: Sequence[str],
         users_only: bool) -> list[dict[str, str | None]]:
    """sshare's rows: the root's, then each association (``users`` None: every user's; an account's own
    row is always there, as slurmctld sends it), values as print_fields prints them."""
    total = sum(r["raw_usage"] for r in shares if r["depth"] == 1)
    root = {"account": "root", "user": "", "raw_shares": None, "norm_shares": 0.0, "raw_usage": total,
            "effective_usage": 1.0 if total else 0.0, "depth": 0, "assoc_id": 1, "fairshare": None}
    shown = [r for r in [root, *shares]
             if not (users is not None and r["user"] and r["user"] not in users)
             and not (accounts and r["account"] not in accounts) and not (users_only and not r["user"])]
    indents = tree_indents((r["account"], r["account"] if r["user"] else r.get("parent") or
                            ("root" if r["depth"] else ""), bool(r["user"])) for r in shown)
    out: list[dict[str, str | None]] = []
    for r, indent in zip(shown, indents, strict=True):
        s, ue = r["norm_shares"], r["effective_usage"]
        factor = r["fairshare"] if r["fairshare"] is not None else (2.0 ** (-ue / s) if s else 0.0)
        out.append({
            "Account": indent + r["account"], "User": r["user"] or None, "Cluster": cluster,
            "RawShares": None if r["raw_shares"] is None else str(r["raw_shares"]),
            "NormShares": format_double(s), "RawUsage": str(int(r["raw_usage"])),
            "NormUsage": format_double(r["raw_usage"] / total if total else 0.0),
            "EffectvUsage": format_double(ue), "FairShare": format_double(factor),
            "LevelFS": None, "ID": str(r["assoc_id"]), "Partition": None, "GrpTRESMins": None,
            "GrpTRESRaw": None, "TRESRunMins": None})
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """The fair-share tree: each account's and user's shares, usage and fair-share factor (sshare)."""
    v, _ = parse_command(PROG, argv, OPTIONS, "psshare [OPTIONS]", main.__doc__ or "")
    if v.get("helpformat"):
        print(" ".join(f[0] for f in FIELDS))
        return
    spec = str(v.get("fmt") or (LONG if v.get("long") else SHORT))
    if v.get("partition") and not v.get("fmt"):
        spec = spec.replace("User,", "User,P,", 1)
    try:
        fields = fields_of(spec)
    except ValueError as exc:
        fail(PROG, str(exc))
    wanted = [u for u in str(v.get("users") or "").split(",") if u]
    users: list[str] | None = None if v.get("all") or wanted == ["-1"] else wanted or [user_identity()[0]]
    accounts = [x.lower() for x in str(v.get("accounts") or "").split(",") if x]
    api = connect_api(PROG)
    with reporting(PROG):
        shares = api.request("GET", "/pslurm/v1/shares")["shares"]
    table = rows(shares, api.config.cluster_name, users, accounts, bool(v.get("users_only")))
    parsable = PARSABLE2 if v.get("parsable2") else PARSABLE if v.get("parsable") else ""
    lines = render(fields, ([r[f.header] for f in fields] for r in table), not v.get("noheader"), parsable)
    write_lines(lines)


if __name__ == "__main__":
    main()
