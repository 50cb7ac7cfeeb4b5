"""sinfo's fields: every ``-o`` letter and ``-O`` name of Slurm 22.05 (src/sinfo/opts.c, print.c), by one
table. A row is a (partition, node) pair; a printed line is a group of rows alike in every field shown,
so the fields that count or list nodes (NODES, NODELIST, CPUS(A/I/O/T), ...) are the group's.

Standard library only: psinfo imports this on its path.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from pslurm.core.clusterinfo import NodeInfo as Node

    Getter = Callable[[Any], str]

LONG_STATE = {"idle": "idle", "mix": "mixed", "alloc": "allocated", "drain": "drained", "drng": "draining",
              "down": "down", "unk": "unknown"}
COMPLETE_STATE = {"idle": "idle", "mix": "mixed", "alloc": "allocated", "drain": "idle+drain",
                  "drng": "mixed+drain", "down": "down", "unk": "unknown"}
# Slurm's node state numbers (slurm.h: UNKNOWN 0, DOWN 1, IDLE 2, ALLOCATED 3, MIXED 5) and the DRAIN flag:
# sinfo's default sort (``#P,-t``) puts the higher first
STATE_ORDER = {"unk": 0, "down": 1, "idle": 2, "alloc": 3, "mix": 5, "drng": 0x205, "drain": 0x202}

# the fields of a group (a line): they count or list its nodes
GROUP_LETTERS = ("N", "D", "A", "F", "C", "e", "O")

# sinfo -O names (case-insensitive) -> the -o letter whose field they print (``k``, GRES_USED, has no
# letter in sinfo; ``j``, GPU_MEM, is pslurm's own; ``x`` StateComplete, ``y`` Port, ``q`` AllocMem,
# ``Q`` Extra, ``K`` Comment have none)
NAMES = {
    "allocmem": "q", "allocnodes": "S", "available": "a", "cluster": "V", "comment": "K", "cores": "Y",
    "cpus": "c", "cpusload": "O", "cpusstate": "C", "defaulttime": "L", "disk": "d", "extra": "Q",
    "features": "f", "features_act": "b", "featuresact": "b", "freemem": "e", "gres": "G", "gresused": "k",
    "gpumem": "j", "groups": "g", "maxcpuspernode": "B", "memory": "m", "nodeaddr": "o", "nodeai": "A",
    "nodeaiot": "F", "nodehost": "n", "nodelist": "N", "nodes": "D", "oversubscribe": "h", "share": "h",
    "partition": "P", "partitionname": "R", "port": "y", "preemptmode": "M", "priorityjobfactor": "I",
    "prioritytier": "p", "reason": "E", "root": "r", "size": "s", "socketcorethread": "z", "sockets": "X",
    "statecompact": "t", "statecomplete": "x", "statelong": "T", "threads": "Z", "time": "l",
    "timestamp": "H", "user": "u", "userlong": "U", "version": "v", "weight": "w",
}
# -O All: every field, in sinfo 22.05's order, '|' between them
ALL = ("a", "b", "c", "d", "e", "f", "g", "h", "l", "m", "n", "o", "p", "r", "s", "t", "u", "v", "w", "z", "A",
       "B", "C", "D", "E", "F", "G", "H", "I", "L", "M", "N", "O", "P", "R", "S", "T", "U", "V", "X", "Y", "Z")


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


def cpu_counts(nodes: Sequence[Node]) -> str:
    """CPUS(A/I/O/T) of a group: allocated, idle, other (a drained or down node's), total."""
    alloc = idle = other = total = 0
    for n in nodes:
        total += n.cpus
        if n.display_state in ("down", "drain", "unk"):
            other += n.cpus - n.alloc_cpus
            alloc += n.alloc_cpus
        else:
            alloc += n.alloc_cpus
            idle += n.cpus - n.alloc_cpus
    return f"{alloc}/{idle}/{other}/{total}"


def node_fields() -> dict[str, tuple[str, Getter]]:
    """The fields of one row, a (partition, node) pair, by -o letter."""
    from pslurm.cli.gpushow import gpu_mem, gres_used
    from pslurm.core.timefmt import format_duration

    def gres(n: Node) -> str:
        from pslurm.core.gres import format_gres  # here: only %G needs it (and dataclasses)

        return format_gres(n.gres) or "(null)"

    def limit(seconds: int | None, none: str) -> str:
        return none if seconds is None else format_duration(seconds)

    def user(n: Node, long: bool) -> str:
        who = reason_user(n)
        if who == "Unknown" or not long:
            return who
        import pwd

        try:
            return f"{who}({pwd.getpwnam(who).pw_uid})"
        except KeyError:
            return who

    return {
        "a": ("AVAIL", lambda r: r[0].state.lower()),
        "b": ("ACTIVE_FEATURES", lambda r: ",".join(r[1].features) or "(null)"),
        "B": ("MAX_CPUS_PER_NODE", lambda r: "UNLIMITED"),
        "c": ("CPUS", lambda r: str(r[1].cpus)),
        "d": ("TMP_DISK", lambda r: "0"),
        "E": ("REASON", lambda r: r[1].reason or "none"),
        "f": ("AVAIL_FEATURES", lambda r: ",".join(r[1].features) or "(null)"),
        "g": ("GROUPS", lambda r: ",".join(r[0].allow_groups) or "all"),
        "G": ("GRES", lambda r: gres(r[1])),
        "h": ("OVERSUBSCRIBE", lambda r: "NO"),
        "H": ("TIMESTAMP", lambda r: reason_time(r[1])),
        "I": ("PRIO_JOB_FACTOR", lambda r: str(r[0].priority_job_factor)),
        "j": ("GPU_MEM", lambda r: gpu_mem(r[1].gpu_usage)),  # -O GpuMem, pslurm's own
        "k": ("GRES_USED", lambda r: gres_used(r[1].alloc_gpus, r[1].gpu_usage)),
        "K": ("COMMENT", lambda r: "(null)"),
        "l": ("TIMELIMIT", lambda r: limit(r[0].max_time, "infinite")),
        "L": ("DEFAULTTIME", lambda r: limit(r[0].default_time, "n/a")),
        "m": ("MEMORY", lambda r: str(r[1].real_memory)),
        "M": ("PREEMPT_MODE", lambda r: "OFF"),
        "n": ("HOSTNAMES", lambda r: r[1].name),
        "o": ("NODE_ADDR", lambda r: r[1].addr),
        "p": ("PRIO_TIER", lambda r: "1"),
        "P": ("PARTITION", lambda r: r[0].name + ("*" if r[0].default else "")),
        "q": ("ALLOCMEM", lambda r: str(r[1].alloc_mem)),
        "Q": ("EXTRA", lambda r: "(null)"),
        "r": ("ROOT", lambda r: "no"),
        "R": ("PARTITION", lambda r: r[0].name),
        "s": ("JOB_SIZE", lambda r: f"1-{r[0].max_nodes if r[0].max_nodes is not None else 'infinite'}"),
        "S": ("ALLOCNODES", lambda r: "all"),
        "t": ("STATE", lambda r: r[1].display_state),
        "T": ("STATE", lambda r: LONG_STATE.get(r[1].display_state, r[1].display_state)),
        "u": ("USER", lambda r: user(r[1], False)),
        "U": ("USER", lambda r: user(r[1], True)),
        "v": ("VERSION", lambda r: _version()),
        "V": ("CLUSTER", lambda r: "N/A"),
        "w": ("WEIGHT", lambda r: "1"),
        "x": ("STATECOMPLETE", lambda r: COMPLETE_STATE.get(r[1].display_state, r[1].display_state)),
        "X": ("SOCKETS", lambda r: "1"),
        "y": ("PORT", lambda r: str(r[1].port)),
        "Y": ("CORES", lambda r: str(r[1].cpus)),
        "z": ("S:C:T", lambda r: f"1:{r[1].cpus}:1"),
        "Z": ("THREADS", lambda r: "1"),
    }


def group_fields() -> dict[str, tuple[str, Getter]]:
    """The fields of a line (a group of rows), by -o letter."""
    from pslurm.core.hostlists import collect

    def members(g: Any) -> list[Node]:  # each node once (a node of two partitions, when no field tells them apart)
        return list({r[1].name: r[1] for r in g[1]}.values())

    return {
        "N": ("NODELIST", lambda g: collect(n.name for n in members(g))),
        "D": ("NODES", lambda g: str(len(members(g)))),
        "A": ("NODES(A/I)", lambda g: "{}/{}".format(*node_counts(members(g))[:2])),
        "F": ("NODES(A/I/O/T)", lambda g: "{}/{}/{}/{}".format(*node_counts(members(g)), len(members(g)))),
        "C": ("CPUS(A/I/O/T)", lambda g: cpu_counts(members(g))),
        "e": ("FREE_MEM", lambda g: "N/A"),
        "O": ("CPU_LOAD", lambda g: "N/A"),
    }


def _version() -> str:
    from pslurm.cli.common import version

    return version()


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


def sort_groups(groups: list[Any], spec: str, fields: dict[str, tuple[str, Getter]], part_order: dict[str, int]
                ) -> None:
    """Sort sinfo's lines as -S asks (sinfo's sort.c): its letters from the last to the first, each a
    stable sort; ``-`` before a letter: descending; ``#P``: the partitions' configured order. States sort
    by Slurm's numbers (drain above the rest), node lists by their first node, numbers as numbers."""
    def first(g: Any) -> Any:
        return g[1][0]

    for i in range(len(spec) - 1, -1, -1):
        letter = spec[i]
        if letter in ",#+-":
            continue
        before = spec[i - 1] if i else ""
        key: Callable[[Any], Any]
        if letter in "tT":
            key = lambda g: STATE_ORDER.get(first(g)[1].display_state, 0)  # noqa: E731
        elif letter == "P" and before == "#":
            key = lambda g: part_order.get(first(g)[0].name, 0)  # noqa: E731
        elif letter == "N":
            key = lambda g: min(_natural(r[1].name) for r in g[1])  # noqa: E731
        elif letter in fields:
            key = _by_value(fields[letter][1])
        else:
            continue
        groups.sort(key=key, reverse=before == "-")


def _by_value(get: Getter) -> Callable[[Any], Any]:
    return lambda g: _natural(get(g[1][0]))


def _natural(text: str) -> tuple[Any, ...]:
    """A value's sort key: a number as a number, a name by its text and then its number (c2 < c10)."""
    if text.isdigit():
        return (0, int(text), "")
    head = text.rstrip("0123456789")
    tail = text[len(head):]
    return (1, head, int(tail) if tail else -1)
