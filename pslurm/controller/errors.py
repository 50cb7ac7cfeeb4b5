"""What the controller's parts refuse with: the messages are one line for the user."""

from __future__ import annotations


class NotFound(LookupError):
    """An unknown job or node."""


class PermissionDenied(Exception):
    """The caller may not do this (Slurm's "Access/permission denied")."""
