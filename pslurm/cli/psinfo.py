"""psinfo: partitions and nodes (sinfo)."""

from __future__ import annotations

from pslurm.cli import argv as a
from pslurm.cli.common import connect_api, print_listing, reporting

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from pslurm.core.clusterinfo import NodeInfo, PartitionInfo
    from pslurm.core.config import PartitionConfig
    from pslurm.core.node import NodeStatus

    Part = PartitionConfig | PartitionInfo  # a client's object, or the API's JSON as it is
    Node = NodeStatus | NodeInfo

PROG = "psinfo"
PARTITION_FORMAT = "%9P %.5a %.10l %.6D %.6t %N"
NODE_FORMAT = "%10N %.6D %10P %.6t %.5c %.8m %G"
LONG_STATE = {"idle": "idle", "mix": "mixed", "alloc": "allocated", "drain": "drained", "drng": "draining",
              "down": "down", "unk": "unknown"}


def node_rows(parts: Sequence[Part], all_nodes: Sequence[Node],
              partitions: list[str] | None) -> list[tuple[Part, Node]]:
    """(partition, node) pairs, partitions in configuration order."""
    nodes = {n.name: n for n in all_nodes}
    return [(p, nodes[name]) for p in parts if not partitions or p.name in partitions
            for name in p.nodes if name in nodes]


def _fields() -> dict[str, tuple[str, Any]]:
    from pslurm.core.timefmt import format_duration

    def gres(n: Node) -> str:
        from pslurm.core.gres import format_gres  # here: only %G needs it (and dataclasses)

        return format_gres(n.gres) or "(null)"

    def limit(p: Part) -> str:
        return "infinite" if p.max_time is None else format_duration(p.max_time)

    def cpus_aiot(n: Node) -> str:
        other = n.cpus if n.display_state in ("down", "drain", "unk") else 0
        idle = n.cpus - n.alloc_cpus - other
        return f"{n.alloc_cpus}/{max(idle, 0)}/{other}/{n.cpus}"

    return {
        "P": ("PARTITION", lambda r: r[0].name + ("*" if r[0].default else "")),
        "R": ("PARTITION", lambda r: r[0].name),
        "a": ("AVAIL", lambda r: r[0].state.lower()),
        "l": ("TIMELIMIT", lambda r: limit(r[0])),
        "t": ("STATE", lambda r: r[1].display_state),
        "T": ("STATE", lambda r: LONG_STATE.get(r[1].display_state, r[1].display_state)),
        "c": ("CPUS", lambda r: str(r[1].cpus)),
        "C": ("CPUS(A/I/O/T)", lambda r: cpus_aiot(r[1])),
        "m": ("MEMORY", lambda r: str(r[1].real_memory)),
        "G": ("GRES", lambda r: gres(r[1])),
        "E": ("REASON", lambda r: r[1].reason or "none"),
        "N": ("NODELIST", None),
        "D": ("NODES", None),
    }


def render_rows(fmt: str, rows: list[tuple[Part, Node]], node_oriented: bool,
                header: bool) -> list[str]:
    """sinfo's grouping: rows equal in every field but NODELIST/NODES become one line."""
    from pslurm.cli.formats import parse_format, render
    from pslurm.core.hostlists import collect

    fields = _fields()
    columns, _ = parse_format(fmt)
    keys = [c.letter for c in columns if c.letter not in ("N", "D")]
    for letter in keys:
        if letter not in fields:
            raise ValueError(f"Invalid node format specification: %{letter}")
    groups: dict[tuple[str, ...], list[Any]] = {}
    for row in rows:
        key = tuple(fields[k][1](row) for k in keys)
        if node_oriented:
            key = (row[1].name, *key)
        groups.setdefault(key, []).append(row)
    grouped = [(key, members) for key, members in groups.items()]
    table = {letter: (head, get) for letter, (head, get) in fields.items() if get is not None}
    table["N"] = ("NODELIST", lambda g: collect(r[1].name for r in g[1]))
    table["D"] = ("NODES", lambda g: str(len(g[1])))
    for letter in keys:
        getter = fields[letter][1]
        table[letter] = (fields[letter][0], lambda g, getter=getter: getter(g[1][0]))
    return render(fmt, grouped, table, header, PROG)


OPTIONS = (
    a.Opt("Node", "N", a.NONE, dest="node_oriented", help="one line per node"),
    a.NOHEADER,
    a.Opt("format", "o", dest="fmt", help="output format (%P %N %G %t ...)"),
    a.Opt("partition", "p", help="partitions"),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Partition summary (nodes grouped by state), or one line per node with -N."""
    found, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage="psinfo [OPTIONS]",
                                        description=main.__doc__ or "")
    a.no_positionals(PROG, positional)
    v = a.values(found)
    fmt, partition, node_oriented = v.get("fmt"), v.get("partition"), bool(v.get("node_oriented"))
    api = connect_api(PROG)
    with reporting(PROG):
        reply = api.cluster()
    if v.get("as_json"):
        import json

        from pslurm.cli.jsonout import cluster_json
        from pslurm.client.http_transport import cluster_from_json

        print(json.dumps(cluster_json(cluster_from_json(reply)), indent=2))
        return
    from pslurm.core.clusterinfo import NodeInfo, PartitionInfo

    rows = node_rows([PartitionInfo(p) for p in reply["partitions"]], [NodeInfo(n) for n in reply["nodes"]],
                     partition.split(",") if isinstance(partition, str) else None)
    print_listing(PROG, lambda: render_rows(str(fmt or (NODE_FORMAT if node_oriented else PARTITION_FORMAT)), rows,
                                            node_oriented, not v.get("noheader")))
