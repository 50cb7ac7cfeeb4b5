"""Fill a store and read it back, through whichever ``pslurm`` the interpreter imports.

Run by tests/integration/test_upgrade_store.py twice: as a script with PYTHONPATH at a previous
release's tree (``python upgrade_store.py fill URL`` creates the store with that release's
migrations, fills it through that release's store API and prints what that release reads back, as
JSON), then imported by the test with the current code, whose :func:`dump` reads the upgraded
store. This file uses only the store API every release since wave 3 has: a later release that
changes a call this file makes keeps the old call here, or branches on what it finds.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from typing import Any

NOW = 1_700_000_000.0


def fill(url: str) -> None:
    """Create the store at ``url`` and put in it a job in every state, steps, accounts and associations."""
    from pslurm.controller.store import NewStep, StepEnd, Store
    from pslurm.core.assoc import Account, Assoc, AssocChange, User
    from pslurm.core.gres import GresRequest
    from pslurm.core.jobspec import JobSpec
    from pslurm.core.node import NodeRecord
    from pslurm.core.states import JobState, NodeState

    store = Store(url)
    store.migrate()
    store.ensure_nodes([NodeRecord(f"c00{i}", "127.0.0.1", 6818 + i, 8, 16000, (GresRequest("gpu", "a100", 4),))
                        for i in range(2)])
    for name in ("c000", "c001"):
        store.set_node_state(name, NodeState.UP, NOW)
    store.assoc.apply(AssocChange(
        put_accounts=(Account("physics", "physics dept", "uni"), Account("bio")),
        put_users=(User("alice", "physics"), User("bob", "bio", "Operator")),
        put_assocs=(Assoc("physics", parent="root", fairshare=3, max_jobs=10),
                    Assoc("bio", parent="root", max_submit_jobs=5, max_wall=3600),
                    Assoc("physics", "alice", fairshare=2, grp_tres="gres/gpu=8"),
                    Assoc("bio", "bob", partition="gpu", max_tres_per_job="cpu=4"))))

    def spec(name: str, user: str = "alice", **extra: Any) -> JobSpec:
        return JobSpec(name=name, user=user, uid=1000, gid=1000, workdir="/tmp", script=f"#!/bin/sh\necho {name}\n",
                       environment={"NAME": name}, gres=(GresRequest("gpu", "a100", 1),), **extra)

    def submit(name: str, user: str = "alice", **extra: Any) -> int:
        return store.submit(spec(name, user, **extra), "gpu", 600, NOW)

    def started(name: str, node: str = "c000", user: str = "alice") -> int:
        job = submit(name, user)
        assert store.start_jobs([(job, node, (job % 4,))], NOW + 1) == [job]
        return job

    submit("pending", comment="waits")
    held = submit("held", "bob")
    store.hold(held, NOW + 1, by_operator=True)
    running = started("running")
    step = store.create_step(running, 0, NewStep("train", "c000", 2, 2, "", False, ("python", "train.py"), "/w"),
                             NOW + 2)
    store.end_steps([StepEnd(running, step.step_id, "c000", JobState.COMPLETED, 0, 0, NOW + 3)])
    store.create_step(running, 0, NewStep("eval", "c000", 1, 1, "", False, ("python", "eval.py"), "/w"), NOW + 4)
    completed = started("completed", "c001")
    store.finish(completed, "c001", 0, JobState.COMPLETED, 0, 0, NOW + 5, {"gpu_seconds": 4.0, "max_rss_kb": 2048})
    failed = started("failed", user="bob")
    store.finish(failed, "c000", 0, JobState.FAILED, 3, 0, NOW + 5)
    cancelled = submit("cancelled")
    store.cancel(cancelled, NOW + 2)
    store.submit(spec("array", array="0-3%2"), "gpu", 600, NOW, array_ids=range(4), throttle=2)
    submit("after", dependency=f"afterok:{completed}")
    submit("afterfail", dependency=f"afterok:{failed}", kill_on_invalid_dep=True)
    import pslurm

    print(json.dumps({"pslurm": pslurm.__file__, **dump(store)}))


def dump(store: Any) -> dict[str, Any]:
    """Every job (with its steps), node and association in the store, as plain JSON values keyed by id."""
    jobs = store.jobs_with_ids(range(1, store.next_job_id()))
    steps = store.steps([j.job_id for j in jobs])
    assocs = store.assoc.load()
    return {
        "jobs": {str(j.job_id): _plain(j) for j in jobs},
        "steps": {f"{s.job_id}.{s.step_id}": _plain(s) for ss in steps.values() for s in ss},
        "nodes": {n.name: _plain(n) for n in store.get_nodes()},
        "accounts": {a: _plain(v) for a, v in assocs.accounts.items()},
        "users": {u: _plain(v) for u, v in assocs.users.items()},
        "assocs": {f"{a.account}/{a.user}/{a.partition}": _plain(a) for a in assocs.assocs},
        "qos": {q: _plain(v) for q, v in assocs.qos.items()},
    }


def _plain(value: Any) -> Any:
    """A dataclass, enum, tuple or mapping as the JSON value it reads back as."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    return value


if __name__ == "__main__":
    if sys.argv[1:2] == ["fill"]:
        fill(sys.argv[2])
    else:
        sys.exit("usage: upgrade_store.py fill URL")
