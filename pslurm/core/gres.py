"""Generic resources (GRES): requests such as ``gpu:a100:2`` and node inventories."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class GresRequest:
    """``count`` units of resource ``name`` (``gpu``), optionally of one ``type`` (``a100``).

    Used both for what a job asks per node and for what a node has.
    """

    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return f"{self.name}:{self.type}:{self.count}" if self.type else f"{self.name}:{self.count}"


class GresError(ValueError):
    """A malformed GRES specification; the message is the one line the user sees."""


# A name or type: Slurm's word characters; not led by '-' (so ``gpu:-1`` is no type) and, for a
# type, not all digits (``gpu:2`` is a count). MIG-like types such as ``3g.20gb`` are fine.
_WORD = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")
_COUNT = re.compile(r"[0-9]+")


def _word(text: str) -> bool:
    return bool(_WORD.fullmatch(text)) and not text.isdigit()


def _merge(items: Iterable[GresRequest]) -> tuple[GresRequest, ...]:
    """Sum counts of repeated (name, type) pairs, keep first-seen order, drop zero counts."""
    totals: dict[tuple[str, str | None], int] = {}
    for it in items:
        totals[(it.name, it.type)] = totals.get((it.name, it.type), 0) + it.count
    return tuple(GresRequest(n, t, c) for (n, t), c in totals.items() if c > 0)


def _parse_item(item: str, *, count_required: bool) -> GresRequest | None:
    """``name[:type][:count]``; None when malformed."""
    item = item.removeprefix("gres/")  # TRES-style spelling, e.g. gres/gpu:2
    parts = item.split(":")
    if not _word(parts[0]) or len(parts) > 3:
        return None
    name, type_, count = parts[0], None, 1
    if len(parts) == 3:
        if not _word(parts[1]) or not _COUNT.fullmatch(parts[2]):
            return None
        type_, count = parts[1], int(parts[2])
    elif len(parts) == 2:
        if _COUNT.fullmatch(parts[1]):
            count = int(parts[1])
        elif _word(parts[1]) and not count_required:
            type_ = parts[1]  # gpu:a100 means one a100, as in Slurm
        else:
            return None
    elif count_required:
        return None
    return GresRequest(name, type_, count)


def parse_gres(text: str) -> tuple[GresRequest, ...]:
    """Parse a ``--gres`` value: comma-separated ``name[:type][:count]`` items (``gpu``, ``gpu:2``,
    ``gpu:a100:2``, ``gres/gpu:2``). A missing count is 1; count 0 asks for none and yields no
    item; repeated (name, type) items are summed. ``none`` is the empty request.

    Raises GresError on anything malformed.
    """
    if text.strip().lower() == "none":
        return ()
    items = [_parse_item(i.strip(), count_required=False) for i in text.split(",")]
    if any(i is None for i in items):
        raise GresError(f"Invalid generic resource (gres) specification: {text}")
    return _merge(i for i in items if i is not None)


def parse_gpus(text: str) -> tuple[GresRequest, ...]:
    """Parse a ``--gpus``/``--gpus-per-node`` value: comma-separated ``[type:]count`` (``2``,
    ``a100:2``), each as ``GresRequest('gpu', type, count)``. Raises GresError when malformed.
    """
    items: list[GresRequest] = []
    for raw in text.split(","):
        parts = raw.strip().split(":")
        if len(parts) == 1 and _COUNT.fullmatch(parts[0]):
            items.append(GresRequest("gpu", None, int(parts[0])))
        elif len(parts) == 2 and _word(parts[0]) and _COUNT.fullmatch(parts[1]):
            items.append(GresRequest("gpu", parts[0], int(parts[1])))
        else:
            raise GresError(f"Invalid GPU specification: {text}")
    return _merge(items)


def parse_node_gres(text: str) -> tuple[GresRequest, ...]:
    """Parse a node's ``Gres=`` in slurm.conf (``gpu:2``, ``gpu:a100:2,gpu:v100:1``): the count is
    required. Empty or ``(null)`` is no GRES. Raises GresError when malformed.
    """
    if text.strip() in ("", "(null)"):
        return ()
    items = [_parse_item(i.strip(), count_required=True) for i in text.split(",")]
    if any(i is None for i in items):
        raise GresError(f"Invalid generic resource (gres) specification: {text}")
    return _merge(i for i in items if i is not None)


def format_gres(reqs: Iterable[GresRequest]) -> str:
    """Format requests as Slurm prints them (``gpu:2``, ``gpu:a100:2,gpu:1``); ``''`` for none."""
    return ",".join(str(r) for r in reqs)


def total_gpus(reqs: Iterable[GresRequest], type_: str | None = None) -> int:
    """How many GPUs ``reqs`` hold in all, or of one ``type_`` when given."""
    return sum(r.count for r in reqs if r.name == "gpu" and (type_ is None or r.type == type_))
