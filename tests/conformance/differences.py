"""The cases whose answers differ from Slurm's, each with why.

DIFFERENT: on purpose, where pslurm's answer is the better one, or where two different systems cannot
answer the same (their versions, their help pages). NOT_YET: differences pslurm still has, listed so
that the suite says so in docs/conformance.md and a new one fails; a listed case that comes out
identical fails too, so that the list only shrinks. Keys are case ids, or fnmatch patterns of them.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

DIFFERENT: dict[str, str] = {
    "* -V": "the version: pslurm's own (`pslurm 0.1.0`), not Slurm's",
    "* --version": "the version: pslurm's own (`pslurm 0.1.0`), not Slurm's",
    "scontrol version": "the version: pslurm's own (`pslurm 0.1.0`), not Slurm's",
}

NOT_YET: dict[str, str] = {}


def reason_for(case_id: str, table: dict[str, str]) -> str:
    """The reason ``table`` gives for a case ("" when it lists none)."""
    if case_id in table:
        return table[case_id]
    for pattern, reason in table.items():
        if any(ch in pattern for ch in "*?[") and fnmatchcase(case_id, pattern):
            return reason
    return ""
