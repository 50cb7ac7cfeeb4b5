"""Slurm hostlist expressions (``c[000-003]``): thin wrappers over python-hostlist.

The common forms (``c[000-003,7],gpu1`` to expand; names of one prefix and one width to collect)
are done here with the standard library, and everything else is handed to python-hostlist: every
command reads the cluster's configuration (``NodeName=c[000-003]``), and importing python-hostlist
costs each of them start time. The fast paths give python-hostlist's own answers
(tests/unit/test_hostlists_fast.py compares them)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

_RANGES_MAX = 100_000  # larger expansions go to python-hostlist, which refuses them in its words


def _ranges(text: str) -> list[str] | None:
    """The numbers of ``000-003,7`` as written (padded to the width of each range's start), or None
    when the text is not that simple form."""
    out: list[str] = []
    for item in text.split(","):
        low, dash, high = item.partition("-")
        if not low.isdigit() or not low.isascii() or (dash and not (high.isdigit() and high.isascii())):
            return None
        if not dash:
            out.append(low)
            continue
        start, stop = int(low), int(high)
        if stop < start or stop - start > _RANGES_MAX or len(out) > _RANGES_MAX:
            return None
        out.extend(f"{i:0{len(low)}d}" for i in range(start, stop + 1))
    return out


def _expand_simple(expr: str) -> list[str] | None:
    """``expand`` for items with at most one bracket group of plain ranges; None for anything else."""
    names: list[str] = []
    depth, start = 0, 0
    items = []
    for i, char in enumerate(expr + ","):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
        if depth not in (0, 1):
            return None
    if depth:
        return None
    for item in items:
        if not item:
            continue
        head, bracket, rest = item.partition("[")
        if not bracket:
            if "]" in item:
                return None
            names.append(item)
            continue
        inner, close, tail = rest.partition("]")
        numbers = _ranges(inner) if close and "[" not in tail and "]" not in tail else None
        if numbers is None:
            return None
        names.extend(head + number + tail for number in numbers)
    return list(dict.fromkeys(names))  # python-hostlist drops repeats, keeping the first


def _collect_simple(names: list[str]) -> str | None:
    """``collect`` for names that are one prefix and numbers of one width (``c000``..); else None."""
    first = names[0]
    digits = len(first) - len(first.rstrip("0123456789"))
    prefix = first[: len(first) - digits]
    if not digits or not prefix:
        return None
    numbers = set()
    for name in names:
        number = name[len(prefix):]
        if not name.startswith(prefix) or len(number) != digits or not (number.isdigit() and number.isascii()):
            return None
        numbers.add(int(number))
    if len(numbers) == 1:
        return first
    ordered = sorted(numbers)
    runs: list[tuple[int, int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return f"{prefix}[{','.join(_run(low, high, digits) for low, high in runs)}]"


def _run(low: int, high: int, digits: int) -> str:
    return f"{low:0{digits}d}" if low == high else f"{low:0{digits}d}-{high:0{digits}d}"


def expand(expr: str) -> list[str]:
    """Expand a hostlist expression such as ``c[000-003],gpu1`` into names, in order.

    Raises ValueError with a one-line message when the expression is malformed.
    """
    simple = _expand_simple(expr.strip())
    if simple is not None:
        return simple
    import hostlist

    try:
        return list(hostlist.expand_hostlist(expr.strip()))
    except hostlist.BadHostlist as exc:
        raise ValueError(f"Invalid hostlist: {expr}: {exc}") from None


def collect(names: Iterable[str]) -> str:
    """Compress node names into one hostlist expression (``['c000', 'c001']`` -> ``c[000-001]``).

    Returns ``''`` for no names.
    """
    names = list(names)
    if not names:
        return ""
    simple = _collect_simple(names)
    if simple is not None:
        return simple
    import hostlist

    return str(hostlist.collect_hostlist(names))


def int_ranges(values: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``0-3,8``: numbers as Slurm writes a bitmap (gres.conf's Cores=, gres_detail's IDX:)."""
    parts: list[str] = []
    run: list[int] = []
    for v in sorted(set(values)):
        if run and v == run[-1] + 1:
            run.append(v)
            continue
        if run:
            parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [v]
    if run:
        parts.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(parts)
