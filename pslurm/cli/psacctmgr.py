"""psacctmgr: sacctmgr's list/show and add/modify/delete of accounts, users, associations, QOS and clusters.

``list`` reads the whole model once (``GET /pslurm/v1/assoc``) and prints it here with sacctmgr's
fields (cli/acctmgr_fields.py), defaults, order, ``where`` conditions, ``format=``, ``withassoc``
(``-s``), ``-n``, ``-p`` and ``-P``. ``add``, ``modify`` and ``delete`` send the words to the
controller, which plans the change (core/acctmgr.py) and answers sacctmgr's lines; without ``-i``
they are printed first and the change is committed only after ``y`` to sacctmgr's question.
"""

from __future__ import annotations

import sys

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, fail, prog_name
from pslurm.cli.printfields import (
    PARSABLE,
    PARSABLE2,
    Field,
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

    Row = dict[str, str]

PROG = prog_name("psacctmgr")
RPC_VERSION = "9728"  # SLURM_22_05_PROTOCOL_VERSION: what sacctmgr's RPC column shows for a 22.05 cluster
OPTIONS = (
    a.Opt("help", "h", a.NONE, help=""),
    a.Opt("usage", arg=a.NONE, dest="help", help=""),
    a.Opt("immediate", "i", a.NONE, help="commit changes without asking"),
    a.Opt("noheader", "n", a.NONE, help="no header lines"),
    a.Opt("oneliner", "o", a.NONE, help="one line per record (sacctmgr's; the lines are one already)"),
    a.Opt("parsable", "p", a.NONE, help="'|' after every field"),
    a.Opt("parsable2", "P", a.NONE, help="'|' between fields"),
    a.Opt("quiet", "Q", a.NONE, help="no messages but errors"),
    a.Opt("readonly", "r", a.NONE, help="refuse any change"),
    a.Opt("associations", "s", a.NONE, help="list with each record's associations (withassoc)"),
    a.Opt("verbose", "v", a.NONE, help="no effect"),
    a.Opt("version", "V", a.NONE, help="print pslurm's version and exit"),
)
# sacctmgr's default format lists (src/sacctmgr/*_functions.c)
DEFAULTS = {
    "account": "Acc,Des,O", "user": "U,DefaultA,Ad",
    "account+assoc": "Cl,ParentN,U,Share,Priority,GrpJ,GrpN,GrpCPUs,GrpMEM,GrpS,GrpWall,GrpCPUMins,MaxJ,MaxN,"
                     "MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS",
    "user+assoc": "Cl,Acc,Part,Share,Priority,MaxJ,MaxN,MaxCPUs,MaxS,MaxW,MaxCPUMins,QOS,DefaultQOS",
    "association": "Cluster,Account,User,Part,Share,Priority,GrpJ,GrpTRES,GrpS,GrpWall,GrpTRESMins,MaxJ,MaxTRES,"
                   "MaxTRESPerN,MaxS,MaxW,MaxTRESMins,QOS,DefaultQOS,GrpTRESRunMins",
    "qos": "Name,Prio,GraceT,Preempt,PreemptE,PreemptM,Flags%40,UsageThres,UsageFactor,GrpTRES,GrpTRESMins,"
           "GrpTRESRunMins,GrpJ,GrpS,GrpW,MaxTRES,MaxTRESPerN,MaxTRESMins,MaxW,MaxTRESPerUser,MaxJobsPerUser,"
           "MaxSubmitJobsPerUser,MaxTRESPerAcct,MaxJobsPerAcct,MaxSubmitJobsPerAcct,MinTRES",
    "cluster": "Cl,Controlh,Controlp,RPC,Fa,GrpJ,GrpTRES,GrpS,MaxJ,MaxTRES,MaxS,MaxW,QOS,DefaultQOS",
}
COMMANDS = (("add", 3), ("create", 3), ("list", 3), ("show", 3), ("modify", 1), ("update", 1), ("delete", 3),
            ("remove", 3))
VERBS = {"add": "add", "create": "add", "list": "list", "show": "list", "modify": "modify", "update": "modify",
         "delete": "delete", "remove": "delete"}
ENTITIES = ((("Accounts", 2), ("Acct", 4)), (("Associations", 2),), (("Clusters", 2),), (("QOS", 1),),
            (("Users", 1),))
ENTITY_NAMES = ("account", "association", "cluster", "qos", "user")


def _matches(word: str, spellings: Sequence[tuple[str, int]]) -> bool:
    """sacctmgr's xstrncasecmp(name, word, MAX(len(word), N)): a prefix at least N long."""
    low = word.lower()
    return any(n <= len(low) <= len(name) and name.lower().startswith(low) for name, n in spellings)


def lookup_field(item: str) -> Field:
    """A format item (``Account%256``, ``DefaultA``) as sacctmgr reads it; ValueError: ``Unknown field``."""
    from pslurm.cli.acctmgr_fields import FIELDS

    name, width = split_width(item)
    for spellings, header, default, number in FIELDS:
        if _matches(name, spellings):
            return Field(header, width or default, number)
    raise ValueError(f"Unknown field '{name}'")


class Words:
    """A command's words after the entity: names, conditions (``where``), values (``set``), the format."""

    def __init__(self, words: Sequence[str]) -> None:
        self.names: list[str] = []
        self.where: list[tuple[str, str]] = []
        self.set: list[tuple[str, str]] = []
        self.format: list[str] = []
        self.with_assoc = self.tree = False
        into = self.where
        for word in words:
            key, eq, value = word.partition("=")
            low = key.lower()
            if not eq and _matches(word, (("where", 5),)):
                into = self.where
            elif not eq and _matches(word, (("set", 3),)):
                into = self.set
            elif not eq and _matches(word, (("WithAssocs", 5),)):
                self.with_assoc = True
            elif not eq and _matches(word, (("Tree", 4),)):
                self.tree = True
            elif not eq and low in ("withcoord", "withdeleted", "withrawqoslevel", "withsubaccounts",
                                    "wolimits", "wopinfo", "wopl", "onlydefaults"):
                continue
            elif eq and _matches(key, (("Format", 1),)):
                self.format += [f for f in value.split(",") if f]
            elif eq:
                into.append((key.rstrip("+-"), value))
            else:
                self.names += [n for n in word.split(",") if n]


# -- the rows ---------------------------------------------------------------------------------------------

def _n(value: Any) -> str:
    return "" if value is None else str(value)


def _wall(seconds: Any) -> str:
    if seconds is None:
        return ""
    from pslurm.core.timefmt import format_slurm_duration

    return format_slurm_duration(int(seconds))


class Model:
    """The reply of ``GET /pslurm/v1/assoc``, indexed."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.cluster = data.get("cluster") or {}
        self.name = str(self.cluster.get("name") or "")
        self.qos = {q["name"]: q for q in data.get("qos") or ()}
        self.accounts = {x["name"]: x for x in data.get("accounts") or ()}
        self.users = {u["name"]: u for u in data.get("users") or ()}
        self.assocs: list[dict[str, Any]] = list(data.get("associations") or ())
        self.by_id = {x["id"]: x for x in self.assocs}
        self.own = {x["account"]: x for x in self.assocs if not x["user"] and not x["partition"]}

    def tree(self) -> list[dict[str, Any]]:
        """Every association in sacctmgr's order: an account, its users, then its sub-accounts."""
        out: list[dict[str, Any]] = []

        def walk(account: str) -> None:
            if account in self.own:
                out.append(self.own[account])
            out.extend(x for x in self.assocs if x["account"] == account and (x["user"] or x["partition"]))
            for child in sorted(x["account"] for x in self.own.values()
                                if x["account"] != account and (x["parent"] or "root") == account
                                and x["account"] != "root"):
                walk(child)

        walk("root")
        seen = {id(x) for x in out}
        return out + [x for x in self.assocs if id(x) not in seen]

    def parent_id(self, x: dict[str, Any]) -> str:
        parent = self.own.get(x["account"] if x["user"] else x["parent"])
        return "" if parent is None or parent is x else str(parent["id"])

    def up(self, x: dict[str, Any]) -> dict[str, Any] | None:
        """The association above ``x`` (a user's: its account's own; an account's: its parent's)."""
        if x["user"] or x["partition"]:
            return self.own.get(x["account"])
        return None if x["account"] == "root" else self.own.get(x["parent"] or "root")

    def inherited(self, x: dict[str, Any], key: str) -> Any:
        """``x``'s Max limit or the nearest one above it (slurmdbd lists an association with its parents'
        Max limits where it sets none; a TRES limit per TRES)."""
        value, seen, at = x.get(key), {id(x)}, self.up(x)
        tres = key.startswith("max_tres")
        while at is not None and id(at) not in seen and (tres or value in (None, "")):
            if tres:
                have = {i.partition("=")[0] for i in (value or "").split(",") if i}
                extra = [i for i in (at.get(key) or "").split(",") if i and i.partition("=")[0] not in have]
                value = ",".join([*filter(None, (value or "").split(",")), *extra])
            else:
                value = at.get(key)
            seen.add(id(at))
            at = self.up(at)
        return value

    def assoc_row(self, x: dict[str, Any]) -> Row:
        qos = x["qos"] or (self.own.get(x["account"]) or {}).get("qos") or ["normal"]
        get = self.inherited
        return {"Cluster": self.name, "Account": x["account"], "User": x["user"], "Partition": x["partition"],
                "Share": str(x["fairshare"]), "GrpTRES": x["grp_tres"], "MaxJobs": _n(get(x, "max_jobs")),
                "MaxSubmit": _n(get(x, "max_submit_jobs")), "MaxWall": _wall(get(x, "max_wall")),
                "MaxTRES": get(x, "max_tres_per_job"), "QOS": ",".join(sorted(qos)),
                "Def QOS": get(x, "default_qos") or "", "GrpJobs": _n(x.get("grp_jobs")),
                "GrpSubmit": _n(x.get("grp_submit_jobs")),
                "MaxTRESPerNode": get(x, "max_tres_per_node") or "",
                "ParentName": "" if x["user"] else x["parent"], "ParentID": self.parent_id(x), "ID": str(x["id"])}

    def qos_row(self, index: int, q: dict[str, Any]) -> Row:
        return {"Name": q["name"], "Descr": q["description"], "ID": str(index), "Priority": str(q["priority"]),
                "GraceTime": "00:00:00", "Preempt": ",".join(q["preempt"]), "PreemptMode": "cluster",
                "UsageFactor": "1.000000", "MaxWall": _wall(q["max_wall"]), "MaxTRESPU": q["max_tres_per_user"],
                "MaxJobsPU": _n(q["max_jobs_per_user"]), "MaxSubmitPU": _n(q["max_submit_jobs_per_user"]),
                "Flags": ",".join(q.get("flags") or ()), "GrpTRES": q.get("grp_tres", ""),
                "GrpJobs": _n(q.get("grp_jobs")), "GrpSubmit": _n(q.get("grp_submit_jobs")),
                "MaxTRES": q.get("max_tres_per_job", ""), "MaxTRESPerNode": q.get("max_tres_per_node", "")}

    def cluster_row(self) -> Row:
        return {"Cluster": self.name, "ControlHost": str(self.cluster.get("control_host") or ""),
                "ControlPort": _n(self.cluster.get("control_port")), "RPC": RPC_VERSION, "Share": "1",
                "QOS": "normal"}


def _conditions(where: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    from pslurm.core.acctmgr import canonical_key

    out: dict[str, list[str]] = {}
    for key, value in where:
        found = canonical_key(key)
        if found is None:
            raise ValueError(f" Unknown condition: {key}={value}\n Use keyword 'set' to modify value")
        out.setdefault(found, []).extend(v.lower() if found != "partition" else v for v in value.split(",") if v)
    return out


def list_rows(model: Model, entity: str, words: Words) -> tuple[str, list[Row]]:
    """The default format and the rows of ``list ENTITY``."""
    cond = _conditions(words.where)
    names = [n.lower() for n in words.names] + cond.pop("names", [])
    with_assoc = words.with_assoc or entity == "association"

    def assoc_ok(x: dict[str, Any]) -> bool:
        return ((not cond.get("account") or x["account"] in cond["account"])
                and (not cond.get("partition") or x["partition"] in cond["partition"])
                and (not cond.get("parent") or x["parent"] in cond["parent"])
                and (not cond.get("cluster") or model.name.lower() in cond["cluster"]))

    if entity == "association":
        found = [x for x in model.tree() if assoc_ok(x) and (not names or x["user"] in names)]
        rows: list[Row] = [model.assoc_row(x) for x in found]
        if words.tree:
            indents = tree_indents((x["account"], x["account"] if x["user"] else x["parent"], bool(x["user"]))
                                   for x in found)
            for row, indent in zip(rows, indents, strict=True):
                row["Account"] = indent + row["Account"]
        return DEFAULTS["association"], rows
    if entity == "account":
        wanted, parents = names + cond.pop("account", []), cond.pop("parent", [])
        found = [x for name, x in sorted(model.accounts.items()) if (not wanted or name in wanted)
                 and (not parents or (model.own.get(name) or {}).get("parent") in parents)]
        accounts = [{"Account": x["name"], "Descr": x["description"], "Org": x["organization"]} for x in found]
        if not with_assoc:
            return DEFAULTS["account"], accounts
        rows = [{**model.assoc_row(x), **row} for row in accounts for x in model.tree()
                if x["account"] == row["Account"] and assoc_ok(x)]
        return f"{DEFAULTS['account']},{DEFAULTS['account+assoc']}", rows
    if entity == "user":
        found = [u for name, u in sorted(model.users.items()) if not names or name in names]
        rows = []
        for u in found:
            base = {"User": u["name"], "Def Acct": u["default_account"], "Admin": u["admin_level"]}
            mine = [x for x in model.tree() if x["user"] == u["name"] and assoc_ok(x)]
            if not with_assoc:  # sacctmgr: only the default association, for its fields
                mine = [x for x in mine if x["account"] == u["default_account"]][:1]
                if not mine and cond.get("account"):
                    continue
            rows += [{**model.assoc_row(x), **base} for x in mine] or [base]
        return f"{DEFAULTS['user']},{DEFAULTS['user+assoc']}" if with_assoc else DEFAULTS["user"], rows
    if entity == "qos":
        return DEFAULTS["qos"], [model.qos_row(i, q) for i, q in enumerate(model.qos.values(), 1)
                                 if not names or q["name"] in names]
    return DEFAULTS["cluster"], [model.cluster_row()] if not names or model.name.lower() in names else []


def entity_of(word: str) -> str:
    for name, spellings in zip(ENTITY_NAMES, ENTITIES, strict=True):
        if _matches(word, spellings):
            return name
    raise ValueError(f"No valid entity in list command\nInput line must include Account, Association, Cluster, "
                     f"QOS or User (not {word})")


def do_list(entity: str, words: Words, header: bool, parsable: str) -> None:
    api = connect_api(PROG)
    from pslurm.cli.common import reporting

    with reporting(PROG):
        model = Model(api.request("GET", "/pslurm/v1/assoc"))
    default, rows = list_rows(model, entity, words)
    fields = [lookup_field(item) for item in (words.format or default.split(","))]
    if words.tree:
        for f in fields:
            if f.header == "Account" and f.width == 10:
                f.width = -20
    write_lines(render(fields, ([row.get(f.header, "") for f in fields] for row in rows), header, parsable))


def do_change(verb: str, entity: str, words: Words, immediate: bool, quiet: bool) -> None:
    from pslurm.client.errors import ClientError

    api = connect_api(PROG)
    body = {"verb": verb, "entity": entity, "names": words.names, "where": [list(p) for p in words.where],
            "set": [list(p) for p in words.set], "commit": immediate}
    try:
        lines = api.request("POST", "/pslurm/v1/assoc", body)["lines"]
    except ClientError as exc:
        text = str(exc)
        print(text if text.startswith(" ") else f"{PROG}: error: {text}", file=sys.stderr)
        raise SystemExit(1) from None
    if not quiet:
        print("\n".join(lines))
    if any(line.startswith(" Nothing") for line in lines):
        raise SystemExit(1)  # sacctmgr's status when nothing was added, modified or deleted
    if immediate:
        return
    if _ask("Would you like to commit changes?"):
        api.request("POST", "/pslurm/v1/assoc", {**body, "commit": True})
    else:
        print(" Changes Discarded")


def _ask(question: str, seconds: float = 30.0) -> bool:
    """sacctmgr's commit_check: the question, then ``(N/y): `` until y, n or Enter (30 s)."""
    import select

    print(f"{question} (You have 30 seconds to decide)")
    while True:
        sys.stdout.write("(N/y): ")
        sys.stdout.flush()
        ready, _, _ = select.select([sys.stdin], [], [], seconds)
        if not ready:
            print("timeout")
            return False
        answer = sys.stdin.readline()
        print()
        if not answer or answer[0] in "nN\n":
            return False
        if answer[0] in "yY":
            return True
        print("Y or N please")


def main(argv: Sequence[str] | None = None) -> None:
    """Show and change accounts, users, associations, QOS (sacctmgr)."""
    v, words = parse_command(PROG, argv, OPTIONS, "psacctmgr [OPTIONS] COMMAND ENTITY [NAMES] [where ...] "
                             "[set ...]", main.__doc__ or "", words=True)
    if not words:
        fail(PROG, "no command given (list, show, add, modify, delete)")
    command = next((VERBS[name] for name, n in COMMANDS if _matches(words[0], ((name, n),))), None)
    if command is None:
        fail(PROG, f"invalid keyword: {words[0]}")
    try:
        entity = entity_of(words[1]) if len(words) > 1 else entity_of("")
        rest = Words(words[2:])
        if v.get("associations"):
            rest.with_assoc = True
        if command == "list":
            parsable = PARSABLE2 if v.get("parsable2") else PARSABLE if v.get("parsable") else ""
            do_list(entity, rest, not v.get("noheader"), parsable)
            return
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from None
    if v.get("readonly"):
        fail(PROG, "Can't run this command in readonly mode.")
    do_change(command, entity, rest, bool(v.get("immediate")), bool(v.get("quiet")))


if __name__ == "__main__":
    main()
