"""Node features (slurm.conf ``Features=``) and a job's ``--constraint``.

pslurm takes sbatch's plain forms: one feature (``a100``), AND (``a100&ib``), OR (``a100|h100``), with
``&`` binding tighter than ``|`` (``a&b|c``: a and b, or c). A node satisfies the constraint when its
features satisfy one alternative. Slurm's matching OR (``[a|b]``), counts (``a*2``) and parentheses
are refused (``Invalid feature specification``) rather than taken as something else.
"""

from __future__ import annotations

import re

from pslurm.core.errors import SpecError

INVALID = "Invalid feature specification"
_FEATURE = re.compile(r"[A-Za-z0-9_.:+\-]+")

Constraint = tuple[frozenset[str], ...]  # the alternatives (OR) of feature sets (AND); () = no constraint


def parse_constraint(text: str) -> Constraint:
    """The alternatives of a ``--constraint``; SpecError(INVALID) when it is not one pslurm takes."""
    if not text:
        return ()
    alternatives = []
    for alternative in text.split("|"):
        names = alternative.split("&")
        if not all(_FEATURE.fullmatch(name) for name in names):
            raise SpecError(f"{INVALID}: {text!r} (pslurm takes FEATURE, A&B and A|B)")
        alternatives.append(frozenset(names))
    return tuple(alternatives)


def satisfies(constraint: Constraint, features: frozenset[str] | tuple[str, ...]) -> bool:
    """Whether a node with ``features`` satisfies the constraint (always, for no constraint)."""
    return not constraint or any(alternative.issubset(features) for alternative in constraint)


def parse_features(text: str) -> tuple[str, ...]:
    """A node's ``Features=a100,ib``; ValueError naming a malformed one."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    for name in names:
        if not _FEATURE.fullmatch(name):
            raise ValueError(f"Features={text}: {name!r} is not a feature name")
    return names
