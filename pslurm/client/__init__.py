"""pslurm's client library: the one way programs (the commands included) talk to a cluster.

    from pslurm.client import Client, ClientError

    with Client() as client:                  # the cluster the commands would use
        for job in client.jobs(users=["ana"]):
            print(job.display_id, job.state, job.reason)

Requests return domain objects (:class:`~pslurm.core.jobspec.JobRecord`,
:class:`~pslurm.core.node.NodeStatus`, ...) and fail with a :class:`ClientError` whose message is
one line for the user. The wire is the controller's HTTP/JSON API (docs/api.md), spoken with the
standard library alone; importing this package is cheap, and the wire is loaded on the first
request. See docs/client.md.
"""

from pslurm.client.client import Client
from pslurm.client.errors import (
    AuthenticationFailed,
    ClientError,
    ConfigurationError,
    ControllerUnreachable,
    InvalidRequest,
    NodeUnreachable,
    NotFound,
    PermissionDenied,
    Unreachable,
)
from pslurm.client.models import ClusterStatus, InputStream, JobPriority, OutputChunk, PriorityWeights
from pslurm.core.config import PartitionConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import NodeStatus
from pslurm.core.states import JobReason, JobState, NodeState

__all__ = [
    "AuthenticationFailed", "Client", "ClientError", "ClusterStatus", "ConfigurationError", "ControllerUnreachable",
    "InputStream", "InvalidRequest", "JobPriority", "JobReason", "JobRecord", "JobSpec", "JobState", "NodeState",
    "NodeStatus", "NodeUnreachable", "NotFound", "OutputChunk", "PartitionConfig", "PermissionDenied",
    "PriorityWeights", "Unreachable",
]
