"""The error of a job request that cannot be, in a module of its own: the commands raise and catch
it on paths that import none of the dataclasses of :mod:`pslurm.core.jobspec` (which re-exports it)."""

from __future__ import annotations


class SpecError(ValueError):
    """A job request that is malformed or can never run; the message is one line for the user."""


def shown(text: str, limit: int = 40) -> str:
    """What a user sent, as an error line shows it: cut to ``limit`` characters (a 5000-digit id is
    not echoed back whole)."""
    return text if len(text) <= limit else text[:limit] + "..."
