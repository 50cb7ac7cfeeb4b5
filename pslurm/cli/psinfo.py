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
NODE_FORMAT = "%10N %.6D %10P %.6t %.5c %.8m %G"
SUMMARIZE_FORMAT = "%9P %.5a %.10l %.16F %N"  # sinfo -s
REASONS_FORMAT = "%20E %9u %19H %N"  # sinfo -R
REASONS_STATES = "down,fail,drain"  # what sinfo -R lists unless -t says otherwise
LONG_STATE = {"idle": "idle", "mix": "mixed", "alloc": "allocated", "drain": "drained", "drng": "draining",
              "down": "down", "unk": "unknown"}


# sinfo's state names (22.05): the base states first, matched by prefix of the long or the short name
_BASE_STATES = (("unknown", "unk"), ("down", "down"), ("idle", "idle"), ("allocated", "alloc"), ("error", "err"),
                ("mixed", "mix"), ("future", "futr"))
_FLAG_STATES = (("planned", "plnd"), ("drain", "drain"), ("drained", "drained"), ("reserved", "resv"),
                ("draining", "drng"), ("completing", "comp"), ("no_respond", "no_respond"),
                ("powering_down", "powering_down"), ("powered_down", "powered_down"), ("power_down", "power_down"),
                ("powering_up", "powering_up"), ("fail", "fail"), ("maint", "maint"),
                ("reboot_requested", "reboot_requested"), ("reboot_issued", "reboot_issued"), ("cloud", "cloud"))
VALID_STATES = ",".join([long for long, _ in _BASE_STATES] + [
    "drain", "drained", "draining", "no_respond", "reserved", "planned", "cloud", "completing", "powering_down",
    "powered_down", "power_down", "powering_up", "fail", "maint", "reboot_requested", "reboot_issued"])


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


def node_counts(nodes: Sequence[Node]) -> tuple[int, int, int]:
    """(allocated, idle, other) as sinfo counts them: a node with jobs is allocated (draining too), a
    drained or down one other, an idle one idle."""
    alloc = idle = other = 0
    for n in nodes:
        if n.display_state in ("alloc", "mix", "drng"):
            alloc += 1
        elif n.display_state == "idle" and not n.drain:
            idle += 1
        else:
            other += 1
    return alloc, idle, other


def reason_user(n: Node) -> str:
    """%u: who set the reason, when the record says (slurmrestd's ``reason_set_by_user``); else sinfo's
    ``Unknown``."""
    data = getattr(n, "data", None)
    return (data.get("reason_set_by_user") if isinstance(data, dict) else None) or "Unknown"


def reason_time(n: Node) -> str:
    """%H: when the reason was set, when the record says (``reason_changed_at``); else ``Unknown``."""
    from pslurm.core.timefmt import format_timestamp

    data = getattr(n, "data", None)
    when = data.get("reason_changed_at") if isinstance(data, dict) else None
    if isinstance(when, dict):  # slurmrestd's {"set": .., "number": ..}
        when = when.get("number") if when.get("set") else None
    return format_timestamp(when if isinstance(when, (int, float)) else None)


# sinfo -O/--Format names (case-insensitive, as Slurm 22.05's src/sinfo/opts.c) -> the -o letter whose
# field they print; GresUsed has no -o letter in sinfo (k here), GpuMem is pslurm's own (j).
LONG_FIELDS = {
    "available": "a", "cpus": "c", "cpusstate": "C", "gres": "G", "gresused": "k", "gpumem": "j", "memory": "m",
    "nodeai": "A", "nodeaiot": "F", "nodelist": "N", "nodes": "D", "partition": "P", "partitionname": "R",
    "features": "f", "featuresact": "b",
    "reason": "E", "statecompact": "t", "statelong": "T", "time": "l", "timestamp": "H", "user": "u",
}


def _fields() -> dict[str, tuple[str, Any]]:
    from pslurm.cli.gpushow import gpu_mem, gres_used
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
        "k": ("GRES_USED", lambda r: gres_used(r[1].alloc_gpus, r[1].gpu_usage)),  # sinfo -O GresUsed
        "j": ("GPU_MEM", lambda r: gpu_mem(r[1].gpu_usage)),  # -O GpuMem, pslurm's own
        "E": ("REASON", lambda r: r[1].reason or "none"),
        "f": ("AVAIL_FEATURES", lambda r: ",".join(r[1].features) or "(null)"),
        "b": ("ACTIVE_FEATURES", lambda r: ",".join(r[1].features) or "(null)"),
        "u": ("USER", lambda r: reason_user(r[1])),
        "H": ("TIMESTAMP", lambda r: reason_time(r[1])),
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
    group_level = ("N", "D", "A", "F")
    keys = [c.letter for c in columns if c.letter not in group_level]
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

    def members(g: Any) -> list[Any]:  # each node once (a node of two partitions, when no field tells them apart)
        return list({r[1].name: r[1] for r in g[1]}.values())

    def counts(g: Any) -> tuple[int, int, int]:
        return node_counts(members(g))

    table["N"] = ("NODELIST", lambda g: collect(n.name for n in members(g)))
    table["D"] = ("NODES", lambda g: str(len(members(g))))
    table["A"] = ("NODES(A/I)", lambda g: "{}/{}".format(*counts(g)[:2]))
    table["F"] = ("NODES(A/I/O/T)", lambda g: "{}/{}/{}/{}".format(*counts(g), len(members(g))))
    for letter in keys:
        getter = fields[letter][1]
        table[letter] = (fields[letter][0], lambda g, getter=getter: getter(g[1][0]))
    return render(fmt, grouped, table, header, PROG)


OPTIONS = (
    a.Opt("Node", "N", a.NONE, dest="node_oriented", help="one line per node"),
    a.NOHEADER,
    a.Opt("format", "o", dest="fmt", help="output format (%P %N %G %t ...)"),
    a.Opt("Format", "O", dest="long_fmt", help="output fields by name (NodeList,Gres,GresUsed,GpuMem:40 ...)"),
    a.Opt("partition", "p", help="partitions"),
    a.Opt("list-reasons", "R", a.NONE, dest="list_reasons", help="why nodes are down or drained"),
    a.Opt("summarize", "s", a.NONE, help="one line per partition, node counts as allocated/idle/other/total"),
    a.Opt("states", "t", help="only nodes in these states (idle, alloc, mix, drain, drng, down, ...)"),
    a.JSON, a.HELP,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Partition summary (nodes grouped by state), one line per node with -N, per partition with -s,
    per reason with -R."""
    found, positional = a.parse_or_fail(PROG, argv, OPTIONS, stop_at_positional=False, usage="psinfo [OPTIONS]",
                                        description=main.__doc__ or "")
    a.no_positionals(PROG, positional)
    v = a.values(found)
    as_json = a.json_format(PROG, v)  # None, "slurm" or "pslurm"
    fmt, partition, node_oriented = v.get("fmt"), v.get("partition"), bool(v.get("node_oriented"))
    reasons, state_text = bool(v.get("list_reasons")), v.get("states")
    states = None
    if isinstance(state_text, str) or reasons:
        try:
            states = parse_states(state_text if isinstance(state_text, str) else REASONS_STATES)
        except ValueError as exc:
            import sys

            print(f'{PROG}: error: Bad state string: "{exc}"', file=sys.stderr)
            print(f"{PROG}: error: valid states: {VALID_STATES}", file=sys.stderr)
            raise SystemExit(1) from None
    long_fmt = v.get("long_fmt")
    if isinstance(long_fmt, str):
        from pslurm.cli.formats import long_format

        if fmt:
            fail(PROG, "-O (--Format) is incompatible with -o (--format)")
        try:
            fmt = long_format(long_fmt, LONG_FIELDS, "node")
        except ValueError as exc:
            fail(PROG, str(exc))
    if not fmt:
        fmt = (SUMMARIZE_FORMAT if v.get("summarize") else NODE_FORMAT if node_oriented
               else REASONS_FORMAT if reasons else PARTITION_FORMAT)
        node_oriented = node_oriented and not v.get("summarize")
    with reporting(PROG):
        cluster = connect(PROG).cluster()
    if as_json == "pslurm":
        import json

        from pslurm.cli.jsonout import cluster_json

        print(json.dumps(cluster_json(cluster), indent=2))
        return
    rows = node_rows(cluster.partitions, cluster.nodes, partition.split(",") if isinstance(partition, str) else None,
                     states)
    if as_json:  # Slurm 22.05's sinfo --json: every node, or those -p and -t select (as 23.02's sinfo --json)
        from pslurm.cli import slurmjson

        selected = (list({node.name: node for _, node in rows}.values()) if partition or states is not None
                    else list(cluster.nodes))
        print(slurmjson.dumps(slurmjson.nodes_reply(selected)))
        return
    print_listing(PROG, lambda: render_rows(str(fmt), rows, node_oriented, not v.get("noheader")))
