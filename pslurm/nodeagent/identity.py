"""Who a job's processes are on this node: their supplementary groups come from the job's uid as this
node's user database names it, never from the user name a request carries.

Why: a root agent runs a job as the uid and gid its launch names, and a user name that came from a
client (or a controller host that did not know the uid) could name somebody else, whose groups
(``docker``, ``wheel``, another project's) the job would then get. A uid this node does not know gets
its primary gid alone.
"""

from __future__ import annotations

import os
import pwd


def supplementary_groups(uid: int, gid: int) -> list[int]:
    """The groups of ``uid``'s own name here (with ``gid``), or ``[gid]`` when this node has no such uid."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return [gid]
    try:
        return os.getgrouplist(name, gid)
    except (KeyError, OSError):
        return [gid]
