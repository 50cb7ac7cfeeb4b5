"""Slurm's ``PrivateData`` (pslurm.conf): what an ordinary user may not see of other users.

As Slurm 22.05 (slurm.conf(5)), for users who are not operators:

- ``jobs``: other users' jobs and steps are left out of every listing (psqueue, psacct, the REST
  API's jobs, the dashboard's queue, psprio) and a single one is ``Access/permission denied``
  (pscontrol show job, its steps, its wait);
- ``usage``: other users' usage is left out (psreport, psshare, the dashboard's usage page);
- ``users``: other users are left out of the association listings (psacctmgr show user/assoc);
- ``accounts``: accounts the user is not in are left out (psacctmgr show account, the accounts tree).

Slurm also takes ``cloud, events, nodes, partitions, reservations``: accepted, and without effect
(pslurm shows nodes and partitions to everyone; it has no reservations or events). Metrics: Slurm
disables them with any PrivateData; pslurm serves them to operators only when ``jobs``, ``usage``
or ``users`` is set (a job's and a user's series say what those hide). A job's environment, script
and submit line are its owner's and the operators' whatever PrivateData says (rest/access.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from pslurm.core.clientconf import ConfigError

FLAGS = frozenset({"accounts", "cloud", "events", "jobs", "nodes", "partitions", "reservations", "usage", "users"})
HIDE_METRICS = frozenset({"jobs", "usage", "users"})  # any of these: metrics to operators only
DENIED = "Access/permission denied"  # ESLURM_ACCESS_DENIED
T = TypeVar("T")


def private_data(extra: Mapping[str, str]) -> frozenset[str]:
    """The flags of ``PrivateData=a,b`` (pslurm.conf's ``extra``, any case); ConfigError names one
    Slurm does not have."""
    text = next((v for k, v in extra.items() if k.lower() == "privatedata"), "")
    flags = frozenset(w.strip().lower() for w in text.split(",") if w.strip())
    unknown = sorted(flags - FLAGS)
    if unknown:
        raise ConfigError(f"PrivateData={text[:60]}: {unknown[0]} is not one of {', '.join(sorted(FLAGS))}")
    return flags


@dataclass(frozen=True)
class Viewer:
    """Who looks (uid and user name), whether they are an operator, and what PrivateData hides."""

    uid: int
    user: str
    operator: bool
    flags: frozenset[str]

    def hides(self, flag: str) -> bool:
        """Whether PrivateData's ``flag`` hides other users' things from this viewer."""
        return flag in self.flags and not self.operator

    def sees_job(self, owner_uid: int) -> bool:
        return not self.hides("jobs") or owner_uid == self.uid

    def own(self, flag: str, items: Iterable[T], user_of: Callable[[T], str]) -> list[T]:
        """``items`` this viewer may see under ``flag``: theirs alone when it hides, else all."""
        return [i for i in items if user_of(i) == self.user] if self.hides(flag) else list(items)

    def accounts(self, names: Collection[str], member_of: Collection[str]) -> list[str]:
        """The account names this viewer may see (``member_of``: the accounts they are in)."""
        return [n for n in names if n in member_of] if self.hides("accounts") else list(names)

    def metrics(self) -> bool:
        return self.operator or not (self.flags & HIDE_METRICS)
