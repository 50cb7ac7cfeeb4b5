"""pslurm's client library: the one way programs (the commands included) talk to a cluster.

    from pslurm.client import Client, ClientError

    with Client() as client:                  # the cluster the commands would use
        for job in client.jobs(users=["ana"]):
            print(job.display_id, job.state, job.reason)

Requests return domain objects (:class:`~pslurm.core.jobspec.JobRecord`,
:class:`~pslurm.core.node.NodeStatus`, ...) and fail with a :class:`ClientError` whose message is
one line for the user. The wire is the controller's HTTP/JSON API (docs/api.md), spoken with the
standard library alone (:mod:`pslurm.client.api`, which returns the JSON itself); the wire is loaded
on the first request. See docs/client.md.

Importing this package is cheap: the errors are loaded with it, every other name on first use
(:class:`Client` and the domain types import dataclasses and ``typing``, which a command that reads
the API's JSON with :mod:`pslurm.client.api` does without).
"""

from __future__ import annotations

from pslurm.client.errors import (
    AuthenticationFailed,
    ClientError,
    ConfigurationError,
    ControllerUnreachable,
    InvalidRequest,
    NodeUnreachable,
    NotFound,
    PermissionDenied,
    StepBusy,
    Unreachable,
)

TYPE_CHECKING = False  # mypy takes this name as typing's own
if TYPE_CHECKING:
    from pslurm.client.client import Client
    from pslurm.client.models import ClusterStatus, InputStream, JobPriority, OutputChunk, PriorityWeights, WillRun
    from pslurm.core.config import PartitionConfig
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.node import NodeStatus
    from pslurm.core.states import JobReason, JobState, NodeState

# The names loaded on first use, and their modules.
_LAZY = {
    "Client": "pslurm.client.client", "ClusterStatus": "pslurm.client.models", "InputStream": "pslurm.client.models",
    "JobPriority": "pslurm.client.models", "OutputChunk": "pslurm.client.models",
    "PriorityWeights": "pslurm.client.models", "WillRun": "pslurm.client.models",
    "PartitionConfig": "pslurm.core.config",
    "JobRecord": "pslurm.core.jobspec", "JobSpec": "pslurm.core.jobspec", "NodeStatus": "pslurm.core.node",
    "JobReason": "pslurm.core.states", "JobState": "pslurm.core.states", "NodeState": "pslurm.core.states",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pslurm.client' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value


__all__ = [
    "AuthenticationFailed", "Client", "ClientError", "ClusterStatus", "ConfigurationError", "ControllerUnreachable",
    "InputStream", "InvalidRequest", "JobPriority", "JobReason", "JobRecord", "JobSpec", "JobState", "NodeState",
    "NodeStatus", "NodeUnreachable", "NotFound", "OutputChunk", "PartitionConfig", "PermissionDenied",
    "PriorityWeights", "StepBusy", "Unreachable", "WillRun",
]
