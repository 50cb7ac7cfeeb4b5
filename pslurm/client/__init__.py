"""pslurm's client library: the one way programs (the commands included) talk to a cluster.

    from pslurm.client import Client, ClientError

    with Client() as client:                  # the cluster the commands would use
        for job in client.jobs(users=["ana"]):
            print(job.display_id, job.state, job.reason)

Requests return typed views of the replies (:class:`~pslurm.core.jobinfo.JobInfo` for a job, with
the attributes of the controller's JobRecord, read on access; :class:`~pslurm.core.clusterinfo.NodeInfo`,
...) and fail with a :class:`ClientError` whose message is one line for the user. The wire is the
controller's HTTP/JSON API (docs/api.md), spoken with the standard library alone
(:mod:`pslurm.client.api`, which returns the JSON itself). See docs/client.md.

Importing this package is cheap: the errors are loaded with it, every other name on first use
(:class:`Client` and the views import neither dataclasses nor ``typing``: every command uses them).
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
    from pslurm.client.models import InputStream, JobPriority, OutputChunk, PriorityWeights, WillRun
    from pslurm.core.clusterinfo import ClusterInfo, NodeInfo, PartitionInfo
    from pslurm.core.jobinfo import JobDesc, JobInfo
    from pslurm.core.jobspec import JobSpec
    from pslurm.core.states import JobReason, JobState, NodeState

# The names loaded on first use, and their modules.
_LAZY = {
    "Client": "pslurm.client.client", "InputStream": "pslurm.client.models",
    "JobPriority": "pslurm.client.models", "OutputChunk": "pslurm.client.models",
    "PriorityWeights": "pslurm.client.models", "WillRun": "pslurm.client.models",
    "ClusterInfo": "pslurm.core.clusterinfo", "NodeInfo": "pslurm.core.clusterinfo",
    "PartitionInfo": "pslurm.core.clusterinfo", "JobDesc": "pslurm.core.jobinfo", "JobInfo": "pslurm.core.jobinfo",
    "JobSpec": "pslurm.core.jobspec",
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
    "AuthenticationFailed", "Client", "ClientError", "ClusterInfo", "ConfigurationError", "ControllerUnreachable",
    "InputStream", "InvalidRequest", "JobDesc", "JobInfo", "JobPriority", "JobReason", "JobSpec", "JobState",
    "NodeInfo", "NodeState", "NodeUnreachable", "NotFound", "OutputChunk", "PartitionInfo", "PermissionDenied",
    "PriorityWeights", "StepBusy", "Unreachable", "WillRun",
]
