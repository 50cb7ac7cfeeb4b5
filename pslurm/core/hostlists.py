"""Slurm hostlist expressions (``c[000-003]``): thin wrappers over python-hostlist."""

from __future__ import annotations

from collections.abc import Iterable

import hostlist


def expand(expr: str) -> list[str]:
    """Expand a hostlist expression such as ``c[000-003],gpu1`` into names, in order.

    Raises ValueError with a one-line message when the expression is malformed.
    """
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
    return str(hostlist.collect_hostlist(names))
