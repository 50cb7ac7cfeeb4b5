"""Slurm's print_fields (src/common/print_fields.c): the tables of sacctmgr, sshare, sreport and sstat.

A field has a header and a width: positive right-justifies, negative left-justifies; each value is
followed by one blank, so lines end in one (as Slurm's do). A text longer than its width is cut, its
last character ``+``; a number is never cut. ``-p`` (parsable) ends every field with ``|``, ``-P``
(parsable2) puts ``|`` between them. ``FIELD%N`` in a format list sets the width to N.

Standard library only: the accounting commands import this on their path (and their getopt line's
handling, :func:`parse_command`).
"""

from __future__ import annotations

from pslurm.cli.printable import escaped

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from pslurm.cli.argv import Opt

PARSABLE, PARSABLE2 = "p", "P"


class Field:
    """One column: its header, its width, whether its values are numbers (never cut), its key."""

    __slots__ = ("header", "width", "number", "key")

    def __init__(self, header: str, width: int, number: bool = False, key: str = "") -> None:
        self.header, self.width, self.number, self.key = header, width, number, key or header.lower()

    def __repr__(self) -> str:
        return f"Field({self.header!r}, {self.width})"


def _cell(field: Field, value: str | None, mark: str | None) -> str:
    """One value padded to its field's width; cut with ``mark`` at its end (None: never cut)."""
    width = abs(field.width)
    text = value if value is not None else ""
    if mark is not None and len(text) > width:
        text = text[: width - len(mark)] + mark if width else ""
    return (text.rjust(width) if field.width > 0 else text.ljust(width)) + " "


def render(fields: Sequence[Field], rows: Iterable[Sequence[str | None]], header: bool = True,
           parsable: str = "") -> list[str]:
    """The lines of a table (``parsable``: "", PARSABLE or PARSABLE2)."""
    lines = []
    rows = ([None if v is None else escaped(v) for v in row] for row in rows)  # user text (cli/printable.py)
    if parsable:
        def joined(values: Sequence[str | None]) -> str:
            text = "|".join(v or "" for v in values)
            return text + "|" if parsable == PARSABLE else text

        if header:
            lines.append(joined([f.header for f in fields]))
        lines += [joined(row) for row in rows]
        return lines
    if header:
        lines.append("".join(_cell(f, f.header, "") for f in fields))  # a header is cut without a mark
        lines.append("".join("-" * abs(f.width) + " " for f in fields))
    for row in rows:
        lines.append("".join(_cell(f, v, None if f.number else "+") for f, v in zip(fields, row, strict=True)))
    return lines


def split_width(item: str) -> tuple[str, int | None]:
    """``Account%256`` -> ("Account", 256); no ``%``: its width is None. ValueError for a bad width."""
    name, pct, width = item.partition("%")
    if not pct:
        return name, None
    try:
        return name, int(width)
    except ValueError:
        raise ValueError(f"Invalid field width: {item}") from None


def format_double(value: float | None) -> str | None:
    """print_fields_double's ``%f``."""
    return None if value is None else f"{value:f}"


def parse_command(prog: str, argv: Sequence[str] | None, options: Sequence[Opt], usage: str, description: str,
                  words: bool = False) -> tuple[dict[str, object], list[str]]:
    """The accounting commands' getopt line: the options' values and the other words (refused unless
    ``words``); ``-V`` prints pslurm's version and exits, ``--help`` the help page."""
    from pslurm.cli import argv as a

    found, positional = a.parse_or_fail(prog, argv, options, stop_at_positional=False, usage=usage,
                                        description=description)
    values = a.values(found)
    if values.get("version"):
        from pslurm.cli.common import version_line

        print(version_line())
        raise SystemExit(0)
    if not words:
        a.no_positionals(prog, positional)
    return values, positional


def write_lines(lines: Iterable[str]) -> None:
    import sys

    sys.stdout.write("".join(line + "\n" for line in lines))


def tree_indents(entries: Iterable[tuple[str, str, bool]]) -> list[str]:
    """The indent of each (account, parent, is_user) in a tree listing, as slurmdb_tree_name_get gives
    it: one blank more than the parent's when the parent was listed before (a user's parent is its
    account), none otherwise. sacctmgr's ``tree`` and sshare's Account column."""
    spaces: dict[str, str] = {}
    out = []
    for account, parent, is_user in entries:
        indent = " " + spaces[parent] if parent in spaces else ""
        if not is_user:
            spaces[account] = indent
        out.append(indent)
    return out
