"""Slurm's ``-o/--format`` strings: ``%.18i %.9P %8j %R`` -> columns of fields."""

from __future__ import annotations

from pslurm.cli.printable import escaped

TYPE_CHECKING = False  # typing and dataclasses cost a command ~10 ms; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ%")


class Column:
    """One field of a format: its letter, width (None: as wide as the value), justification and
    the literal text before it."""

    __slots__ = ("letter", "width", "right", "prefix")

    def __init__(self, letter: str, width: int | None, right: bool, prefix: str) -> None:
        self.letter, self.width, self.right, self.prefix = letter, width, right, prefix

    def __repr__(self) -> str:
        return f"Column({self.letter!r}, {self.width!r}, {self.right!r}, {self.prefix!r})"


def _spec(fmt: str, at: int) -> tuple[int, bool, str, str] | None:
    """The field spec starting at ``fmt[at]`` (a ``%``), as Slurm reads one: ``%[.][WIDTH]LETTER`` or
    ``%[.][WIDTH]{name}`` (no '-' flag: ``%-5t`` is printed as text): its end, whether it is right-justified,
    its width's digits and its letter or name; None when none starts there. (By hand, not with :mod:`re`:
    that import is milliseconds of every listing command's start.)"""
    end, n = at + 1, len(fmt)
    right = end < n and fmt[end] == "."
    end += right
    digits_at = end
    while end < n and fmt[end].isdecimal():
        end += 1
    digits = fmt[digits_at:end]
    if end < n and fmt[end] in _LETTERS:
        return end + 1, right, digits, fmt[end]
    if end < n and fmt[end] == "{":
        close = fmt.find("}", end + 1)
        name = fmt[end + 1:close] if close > 0 else ""
        if name and all(c.isalnum() or c == "_" for c in name):
            return close + 1, right, digits, name
    return None


def parse_format(fmt: str) -> tuple[list[Column], str]:
    """Columns and the trailing literal text. ``%.N`` right-justifies, ``%N`` left-justifies; a
    value longer than N is cut, as squeue does."""
    columns, pos, literal = [], 0, ""
    at = fmt.find("%")
    while at >= 0:
        spec = _spec(fmt, at)
        if spec is None:
            at = fmt.find("%", at + 1)
            continue
        end, right, digits, letter = spec
        if letter == "%":  # %%: squeue and sinfo print nothing for it
            literal += fmt[pos:at]
        else:
            columns.append(Column(letter, int(digits) if digits else None, right, literal + fmt[pos:at]))
            literal = ""
        pos = end
        at = fmt.find("%", end)
    return columns, literal + fmt[pos:]


def has_minus_flag(fmt: str) -> bool:
    """Whether a field of ``fmt`` has a '-' flag (``%-5t``, ``%.-5t``): squeue has none, and says so."""
    at = fmt.find("%")
    while at >= 0:
        end = at + 1 + (fmt[at + 1:at + 2] == ".")
        while end < len(fmt) and fmt[end].isdecimal():
            end += 1
        if fmt[end:end + 1] == "-":
            return True
        at = fmt.find("%", at + 1)
    return False


def render(fmt: str, rows: Sequence[Any], fields: Mapping[str, tuple[str, Callable[[Any], str]]],
           header: bool, prog: str, whole: Callable[[str, str, bool], bool] | None = None) -> list[str]:
    """Lines for ``rows`` under ``fmt``; ``fields`` maps a letter to (header, getter). A value longer
    than its width is cut but where ``whole(letter, value, is_header)`` says it is printed whole
    (squeue's times and node lists)."""
    columns, tail = parse_format(fmt)
    for col in columns:
        if col.letter not in fields:
            raise ValueError(f"Invalid job format specification: %{col.letter}")

    def line(values: list[str], is_header: bool = False) -> str:
        out = []
        for col, value in zip(columns, values, strict=True):
            if col.width is not None:
                if whole is None or not whole(col.letter, value, is_header):
                    value = value[: col.width]
                value = value.rjust(col.width) if col.right else value.ljust(col.width)
            out.append(col.prefix + value)
        return ("".join(out) + tail).rstrip()

    lines = [line([fields[c.letter][0] for c in columns], True)] if header else []
    lines.extend(line([escaped(fields[c.letter][1](row)) for c in columns]) for row in rows)
    return lines


LONG_WIDTH = 20  # squeue and sinfo -O: a field without ":size" is 20 characters, left-justified


def long_format(spec: str, names: Mapping[str, str], what: str) -> str:
    """An -O list (``JobID,Name:30,State:.10 ,TimeLeft``) as the -o format it prints the same as, by
    ``names`` (lower-case field name -> the -o letter whose field it prints): ``type[:[.][size][suffix]]``;
    no size: 20 wide, left-justified; ``.``: right-justified; size 0: as wide as the value; the suffix
    is printed after the field; no separator between fields, as in squeue and sinfo. Raises ValueError
    naming a field not in ``names`` (``what``: job or node, for Slurm's message)."""
    out = []
    for token in (t for t in spec.split(",") if t):
        name, colon, rest = token.partition(":")
        letter = names.get(name.lower())
        if letter is None:
            raise ValueError(f"Invalid {what} format specification: {name}")
        right, width, suffix = False, LONG_WIDTH, ""
        if colon:
            right = rest.startswith(".")
            digits = rest[1:] if right else rest
            size = len(digits) - len(digits.lstrip("0123456789"))
            width, suffix = int(digits[:size] or 0), digits[size:]
        out.append(f"%{'.' if right else ''}{width or ''}{letter}{suffix.replace('%', '%%')}")
    return "".join(out)
