"""psinfo's -s, -R, -t and %A/%F, rendered from the API's JSON views (no cluster)."""

from __future__ import annotations

import pytest

from pslurm.cli import psinfo
from pslurm.core.clusterinfo import NodeInfo, PartitionInfo


def node(name: str, shown: str, drain: bool = False, reason: str = "", **data: object) -> NodeInfo:
    state = {"down": "DOWN", "unk": "UNKNOWN"}.get(shown, "UP")
    return NodeInfo({"name": name, "cpus": 8, "reason": reason, **data,
                     "pslurm": {"display_state": shown, "drain": drain, "state": state}})


PART = PartitionInfo({"name": "gpu", "pslurm": {"nodes": ["c000", "c001", "c002", "c003"], "default": True}})
NODES = [node("c000", "mix"), node("c001", "idle"), node("c002", "drain", drain=True, reason="bad gpu"),
         node("c003", "down", reason="Not responding")]


def render(fmt: str, states: str | None = None, header: bool = True) -> list[str]:
    parsed = psinfo.parse_states(states) if states else None
    return psinfo.render_rows(fmt, psinfo.node_rows([PART], NODES, None, parsed), False, header)


def test_summarize_counts_allocated_idle_other_total() -> None:
    lines = render(psinfo.SUMMARIZE_FORMAT)
    assert lines[0].split() == ["PARTITION", "AVAIL", "TIMELIMIT", "NODES(A/I/O/T)", "NODELIST"]
    assert lines[1].split() == ["gpu*", "up", "infinite", "1/1/2/4", "c[000-003]"]
    assert len(lines) == 2


def test_percent_a_is_allocated_slash_idle() -> None:
    assert render("%A", header=False) == ["1/1"]
    assert render("%A", header=True)[0].strip() == "NODES(A/I)"


def test_list_reasons_lists_down_and_drained_nodes_with_unknown_user_and_time() -> None:
    lines = render(psinfo.REASONS_FORMAT, psinfo.REASONS_STATES)
    assert lines[0].split() == ["REASON", "USER", "TIMESTAMP", "NODELIST"]
    assert sorted(lines[1:]) == [
        f"{'Not responding':<20} {'Unknown':<9} {'Unknown':<19} c003",
        f"{'bad gpu':<20} {'Unknown':<9} {'Unknown':<19} c002",
    ]


def test_reason_user_and_time_come_from_the_record_when_it_has_them() -> None:
    n = node("c009", "down", reason="x", reason_set_by_user="root", reason_changed_at={"set": True, "number": 0})
    assert psinfo.reason_user(n) == "root"
    assert psinfo.reason_time(n) == "Unknown"


def test_nodes_whose_reasons_were_set_by_someone_at_some_time_are_a_line_of_their_own() -> None:
    drained = node("c002", "drain", drain=True, reason="bad gpu", reason_set_by_user="root",
                   reason_changed_at=1700000000)
    rows = psinfo.node_rows([PART], [*NODES[:2], drained, NODES[3]], None, None)
    when = psinfo.reason_time(drained)
    assert when[:4].isdigit() and when[10] == "T"
    assert psinfo.render_rows("%P %H %u %U", rows, False, False) == [
        f"gpu* {when} root root(0)", "gpu* Unknown Unknown Unknown"]


@pytest.mark.parametrize(("text", "names"), [
    ("idle", ["c001", "c002"]),  # sinfo: a drained idle node is idle too
    ("IDLE", ["c001", "c002"]),
    ("i", ["c001", "c002"]),
    ("mix", ["c000"]),
    ("alloc", ["c000"]),  # Slurm 22.05: ALLOCATED matches a mixed node too
    ("drain", ["c002"]),
    ("drained", ["c002"]),
    ("drng", []),
    ("down", ["c003"]),
    ("idle,down", ["c001", "c002", "c003"]),
    ("all", ["c000", "c001", "c002", "c003"]),
    ("maint", []),
])
def test_states_filter_as_sinfo(text: str, names: list[str]) -> None:
    rows = psinfo.node_rows([PART], NODES, None, psinfo.parse_states(text))
    assert [n.name for _, n in rows] == names


def test_state_words_are_prefixes_of_long_or_short_names() -> None:
    assert psinfo.state_id("d") == "down"
    assert psinfo.state_id("dr") == "drain"
    assert psinfo.state_id("DRNG") == "draining"
    assert psinfo.state_id("alloc") == "allocated"
    assert psinfo.state_id("bogus") is None
    with pytest.raises(ValueError, match="bogus"):
        psinfo.parse_states("idle,bogus")


def test_a_node_in_two_partitions_is_listed_once_when_no_field_shows_the_partition() -> None:
    other = PartitionInfo({"name": "all", "pslurm": {"nodes": ["c003"]}})
    rows = psinfo.node_rows([PART, other], NODES, None, psinfo.parse_states("down"))
    assert psinfo.render_rows("%N %D", rows, False, False) == ["c003 1"]


@pytest.mark.parametrize(("spec", "order"), [
    ("", ["drain", "mix", "idle", "down"]),  # sinfo's default, #P,-t: higher state numbers first
    ("t", ["down", "idle", "mix", "drain"]),  # Slurm's numbers: DOWN 1, IDLE 2, MIXED 5, the DRAIN flag above
    ("-N", ["down", "drain", "idle", "mix"]),  # by node list, descending: c003, c002, c001, c000
    ("N", ["mix", "idle", "drain", "down"]),
])
def test_sort_as_sinfo_S(spec: str, order: list[str]) -> None:
    rows = psinfo.node_rows([PART], NODES, None)
    lines = psinfo.render_rows("%t", rows, False, False, sort=spec)
    assert [line.strip() for line in lines] == order
