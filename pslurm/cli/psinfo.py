"""psinfo: partitions and nodes (sinfo)."""

from __future__ import annotations

from pslurm.cli import argv as a
from pslurm.cli.common import connect, fail, print_listing, prog_name, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.core.clusterinfo import NodeInfo as Node
    from pslurm.core.clusterinfo import PartitionInfo as Part

PROG = prog_name("psinfo")
PARTITION_FORMAT = "%9P %.5a %.10l %.6D %.6t %N"
NODE_FORMAT = "%9N %.6D %.9P %6t"  # sinfo -N
SUMMARIZE_FORMAT = "%9P %.5a %.10l %.16F %N"  # sinfo -s
REASONS_FORMAT = "%20E %9u %19H %N"  # sinfo -R
REASONS_STATES = "down,fail,drain"  # what sinfo -R lists unless -t says otherwise


# sinfo's state names (22.05): the base states first, matched by prefix of the long or the short name
_BASE_STATES = (("unknown", "unk"), ("down", "down"), ("idle", "idle"), ("allocated", "alloc"), ("error", "err"),
                ("mixed", "mix"), ("future", "futr"))
_FLAG_STATES = (("planned", "plnd"), ("drain", "drain"), ("drained", "drained"), ("reserved", "resv"),
                ("draining", "drng"), ("completing", "comp"), ("no_respond", "no_respond"),
                ("powering_down", "powering_down"), ("powered_down", "powered_down"), ("power_down", "power_down"),
                ("powering_up", "powering_up"), ("fail", "fail"), ("maint", "maint"),
                ("reboot_requested", "reboot_requested"), ("reboot_issued", "reboot_issued"), ("cloud", "cloud"))
# sinfo 22.05's list in its error message, as it writes it (node_state_string of each state, then the flags)
VALID_STATES = ("unknown,down,idle,allocated,?,mixed,future,drain,drained,draining,no_respond,reserved,perfctrs,"
                "cloud,completing,powering_down,powered_down,power_down,powering_up,fail,maint,reboot,reboot^,unknown")


def state_id(word: str) -> str | None:
    """sinfo's reading of one ``-t`` word (a prefix of a state's long or short name, any case): the
    state's long name, or None."""
    low = word.lower()
    if not low:
        return None
    for long, short in _BASE_STATES:
        if long.startswith(low) or short.startswith(low):
            return long
    for long, short in _FLAG_STATES:
        if long.startswith(low) or short.startswith(low):
            return long
    return None


def parse_states(text: str) -> tuple[list[str], bool]:
    """``-t`` states: (long names, every-one-must-match); ``all`` is every state. ValueError naming the
    word sinfo rejects."""
    if text.lower() == "all":
        return ["all"], False
    states = []
    for word in text.replace("&", ",").split(","):
        if not word:
            continue
        found = state_id(word)
        if found is None:
            raise ValueError(word)
        states.append(found)
    return states, "&" in text


def node_in_state(node: Node, state: str) -> bool:
    """Whether a node is in one of sinfo's states. pslurm's nodes are idle, mixed, allocated, down or
    unknown, with drain beside them (a draining node is taken as mixed, as its JSON says)."""
    shown = node.display_state
    base = {"drain": "idle", "drng": "mixed", "mix": "mixed", "alloc": "allocated", "unk": "unknown"}.get(shown, shown)
    if state == "all":
        return True
    if state == "drain":
        return node.drain
    if state == "allocated":  # sinfo's ALLOCATED matches a node with any job (mixed too)
        return base in ("allocated", "mixed")
    if state == "drained":
        return node.drain and shown != "drng"
    if state == "draining":
        return shown == "drng"
    return base == state


def node_rows(parts: Sequence[Part], all_nodes: Sequence[Node], partitions: list[str] | None,
              states: tuple[list[str], bool] | None = None) -> list[tuple[Part, Node]]:
    """(partition, node) pairs, partitions in configuration order; with ``states``, the nodes in any
    of them (all of them with ``&``), as sinfo -t."""
    nodes = {n.name: n for n in all_nodes}
    if states is not None:
        wanted, every = states
        test = all if every else any
        nodes = {name: n for name, n in nodes.items() if test(node_in_state(n, s) for s in wanted)}
    return [(p, nodes[name]) for p in parts if not partitions or p.name in partitions
            for name in p.nodes if name in nodes]


from pslurm.cli.sinfo_fields import LONG_STATE, node_counts, reason_time, reason_user  # noqa: E402, F401


def render_rows(fmt: str, rows: list[tuple[Part, Node]], node_oriented: bool, header: bool,
                fields: dict[str, tuple[str, Any]] | None = None, exact: bool = False, sort: str = "") -> list[str]:
    """sinfo's lines: rows alike in every field shown (but those that count or list nodes) grouped into
    one (``exact``: also alike in CPUs and memory, as -e), in sinfo's order (``sort``: -S's keys, else
    the partitions' order and the state, higher first)."""
    from pslurm.cli.formats import parse_format, render
    from pslurm.cli.sinfo_fields import GROUP_LETTERS, group_fields, node_fields, sort_groups

    table = {**node_fields(), **(fields or {})}
    columns, _ = parse_format(fmt)
    keys = [c.letter for c in columns if c.letter not in GROUP_LETTERS]
    for letter in keys:
        if letter not in table:
            raise ValueError(f"Invalid node format specification: %{letter}")
    if exact:
        keys += [k for k in ("c", "m") if k not in keys]
    groups: dict[tuple[str, ...], list[Any]] = {}
    for row in rows:
        key = tuple(table[k][1](row) for k in keys)
        if node_oriented:
            key = (row[1].name, *key)
        groups.setdefault(key, []).append(row)
    order = {p.name: i for i, p in enumerate(dict.fromkeys(r[0] for r in rows))}
    grouped = list(groups.items())
    sort_groups(grouped, sort or ("N" if node_oriented else "#P,-t"), table, order)
    def first(get: Any) -> Any:  # a line's value of a field alike in its rows: its first row's
        return lambda g: get(g[1][0])

    lines_of = {**{k: (h, first(get)) for k, (h, get) in table.items()}, **group_fields()}
    return render(fmt, grouped, lines_of, header, PROG)


_O = a.Opt
OPTIONS = (
    _O("Node", "N", a.NONE, dest="node_oriented", help="one line per node"),
    a.NOHEADER,
    _O("format", "o", dest="fmt", help="output format (%P %N %G %t ...)"),
    _O("Format", "O", dest="long_fmt", help="output fields by name (NodeList,Gres,GresUsed,GpuMem:40 ...)"),
    _O("partition", "p", help="partitions"),
    _O("nodes", "n", help="only these nodes (a hostlist)"),
    _O("list-reasons", "R", a.NONE, dest="list_reasons", help="why nodes are down or drained"),
    _O("summarize", "s", a.NONE, help="one line per partition, node counts as allocated/idle/other/total"),
    _O("states", "t", help="only nodes in these states (idle, alloc, mix, drain, drng, down, ...)"),
    _O("long", "l", a.NONE, help="more fields"),
    _O("exact", "e", a.NONE, help="group only nodes alike in CPUs and memory too"),
    _O("responding", "r", a.NONE, help="only responding nodes"),
    _O("dead", "d", a.NONE, help="only non-responding nodes"),
    _O("all", "a", a.NONE, help="every partition (pslurm hides none)"),
    _O("hide", arg=a.NONE), _O("local", arg=a.NONE), _O("federation", arg=a.NONE),
    _O("noconvert", arg=a.NONE, help="memory in MB, unconverted (pslurm's is)"),
    _O("sort", "S", help="sort keys: -o letters, '-' descending"),
    _O("reservation", "T", a.NONE, help="the reservations (pslurm has none)"),
    _O("iterate", "i", help="print again every N seconds"),
    _O(("clusters", "cluster"), "M", dest="clusters", help="this cluster's name, or all"),
    _O("verbose", "v", a.NONE), _O("version", "V", a.NONE), _O("usage", arg=a.NONE),
    a.JSON, _O("yaml", arg=a.NONE), a.HELP,
)
LONG_FORMAT = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"  # sinfo -l
NODE_LONG_FORMAT = "%9N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"  # sinfo -N -l
USAGE_TEXT = ("Usage: sinfo [-abdelNRrsTv] [-i seconds] [-t states] [-p partition] [-n nodes]\n"
              "             [-S fields] [-o format] [-O Format] [--federation] [--local]")


def main(argv: Sequence[str] | None = None) -> None:
    """Partition summary (nodes grouped by state), one line per node with -N, per partition with -s,
    per reason with -R."""
    found, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage="psinfo [OPTIONS]",
                                        description=main.__doc__ or "")
    a.no_positionals(PROG, positional)
    v = a.values(found)
    from pslurm.cli.common import answer_usage_version

    answer_usage_version(v, USAGE_TEXT.replace("sinfo", PROG, 1))
    if v.get("reservation"):
        print("No reservations in the system")
        return
    if v.get("iterate") is not None:
        from pslurm.cli.common import iterate

        iterate(PROG, v["iterate"], lambda: listing(v))
    listing(v)


def listing(v: dict[str, object]) -> None:  # noqa: C901 - sinfo's options, in its order
    import sys
    import time

    from pslurm.cli.common import check_clusters

    as_json = a.json_format(PROG, v) or ("slurm" if v.get("yaml") else None)
    fmt, partition, node_oriented = v.get("fmt"), v.get("partition"), bool(v.get("node_oriented"))
    reasons, state_text = bool(v.get("list_reasons")), v.get("states")
    states = None
    if isinstance(state_text, str) or reasons:
        try:
            states = parse_states(state_text if isinstance(state_text, str) else REASONS_STATES)
        except ValueError as exc:
            print(f'{PROG}: error: Bad state string: "{exc}"', file=sys.stderr)
            print(f"{PROG}: error: valid states: {VALID_STATES}", file=sys.stderr)
            raise SystemExit(1) from None
    extra: dict[str, tuple[str, Any]] = {}
    long_fmt = v.get("long_fmt")
    if isinstance(long_fmt, str):
        if fmt:
            fail(PROG, "-O (--Format) is incompatible with -o (--format)")
        fmt, extra = long_format(long_fmt)
    if not fmt:
        fmt = (SUMMARIZE_FORMAT if v.get("summarize") else (NODE_LONG_FORMAT if v.get("long") else NODE_FORMAT)
               if node_oriented else REASONS_FORMAT if reasons else LONG_FORMAT if v.get("long") else PARTITION_FORMAT)
        node_oriented = node_oriented and not v.get("summarize")
    with reporting(PROG):
        cluster = connect(PROG).cluster()
    if check_clusters(PROG, v.get("clusters"), cluster.name):
        print(f"CLUSTER: {cluster.name}")
    if as_json == "pslurm":
        import json

        from pslurm.cli.jsonout import cluster_json

        print(json.dumps(cluster_json(cluster), indent=2))
        return
    nodes = list(cluster.nodes)
    if isinstance(v.get("nodes"), str):
        from pslurm.core.hostlists import expand

        try:
            wanted = set(expand(str(v["nodes"])))
        except ValueError:
            fail(PROG, f"Invalid node name specified: {v['nodes']}")
        nodes = [n for n in nodes if n.name in wanted]
    if v.get("dead"):
        nodes = [n for n in nodes if n.display_state in ("down", "unk")]
    if v.get("responding"):
        nodes = [n for n in nodes if n.display_state not in ("down", "unk")]
    parts = partition.split(",") if isinstance(partition, str) else None
    rows = node_rows(cluster.partitions, nodes, parts, states)
    if as_json:  # Slurm 22.05's sinfo --json: every node, or those -p and -t select (as 23.02's sinfo --json)
        from pslurm.cli import slurmjson

        selected = (list({node.name: node for _, node in rows}.values()) if partition or states is not None
                    else list(cluster.nodes))
        print(slurmjson.dumps(slurmjson.nodes_reply(selected)))
        return
    header = not v.get("noheader")
    if v.get("long") and header:
        print(time.strftime("%a %b %d %H:%M:%S %Y"))
    if not rows and not node_oriented and not reasons:
        print_listing(PROG, lambda: _empty(str(fmt), cluster.partitions, parts, header))
        return
    sort = str(v.get("sort") or "")
    lines = lambda: render_rows(str(fmt), rows, node_oriented, header, extra, bool(v.get("exact")),  # noqa: E731
                                sort)
    print_listing(PROG, lines)


def long_format(spec: str) -> tuple[str, dict[str, tuple[str, Any]]]:
    """An -O list as an -o format and the fields it names (NAMES: -O name -> -o letter; ``All``: every
    field, '|' between them); a name sinfo does not know is Slurm's error."""
    from pslurm.cli.formats import long_format as by_names
    from pslurm.cli.sinfo_fields import ALL, NAMES

    if spec.lower() == "all":
        return "|".join(f"%{letter}" for letter in ALL), {}
    try:
        return by_names(spec, NAMES, "node"), {}
    except ValueError as exc:
        fail(PROG, str(exc))


def _empty(fmt: str, parts: Sequence[Part], wanted: list[str] | None, header: bool) -> list[str]:
    """sinfo's line of a partition none of whose nodes is listed: its own fields, 0 nodes, state n/a."""
    from pslurm.cli.formats import render
    from pslurm.cli.sinfo_fields import node_fields

    def of_partition(letter: str, get: Any) -> Any:  # a partition's own field; a node's is blank
        return (lambda p: get((p, None))) if letter in "PRalgsIhLSpV" else (lambda p: "")

    fields: dict[str, tuple[str, Any]] = {k: (h, of_partition(k, get)) for k, (h, get) in node_fields().items()}
    for letter, head, value in (("D", "NODES", "0"), ("t", "STATE", "n/a"), ("T", "STATE", "n/a"),
                                ("N", "NODELIST", ""), ("A", "NODES(A/I)", "0/0"), ("F", "NODES(A/I/O/T)", "0/0/0/0"),
                                ("C", "CPUS(A/I/O/T)", "0/0/0/0")):
        fields[letter] = (head, lambda p, value=value: value)
    shown = [p for p in parts if not wanted or p.name in wanted]
    return render(fmt, shown, fields, header, PROG)
