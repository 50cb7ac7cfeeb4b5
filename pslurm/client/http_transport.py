"""The client's wire in domain objects: :class:`pslurm.client.api.Api`'s JSON turned into them.

:class:`pslurm.client.Client` loads this module on its first request. Requests, credentials,
connections and errors are the :class:`~pslurm.client.api.Api`'s; this module only converts,
both ways, with :mod:`pslurm.core.restjson` (the one place the API's shapes are known).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pslurm.client.api import Api, InputCall
from pslurm.client.errors import InvalidRequest
from pslurm.client.models import ClusterStatus, JobPriority, OutputChunk, PriorityWeights, WillRun
from pslurm.core import restjson
from pslurm.core.config import ClusterConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import NodeStatus
from pslurm.core.states import JobState


class HttpTransport:
    """Requests to the controller's API, in domain objects."""

    def __init__(self, config: ClusterConfig, timeout: float) -> None:
        self.config = config
        self.api = Api(config, timeout)
        self.target = self.api.target

    def close(self) -> None:
        self.api.close()

    def submit(self, spec: JobSpec) -> int:
        return self.api.submit(restjson.spec_to_json(spec))

    def will_run(self, spec: JobSpec) -> WillRun:
        reply = self.api.will_run(restjson.spec_to_json(spec))
        return WillRun(int(reply["job_id"]), float(reply["start_time"]), str(reply["node_list"]),
                       int(reply["proc_cnt"]), str(reply["part_name"]))

    def jobs(self, job_ids: list[int], users: list[str], states: list[JobState], include_finished: bool,
             since: float | None, light: bool, collapse_arrays: bool) -> list[JobRecord]:
        # a light listing asks for the brief one: the same records, each shared request sent once
        found = self.api.jobs(job_ids, users, [s.value for s in states], include_finished, since, light,
                              collapse_arrays, brief=light)
        specs: dict[int, JobSpec] = {}  # an array's tasks share one converted spec
        return [restjson.job_from_json(j, specs) for j in found]

    def wait(self, job_id: int) -> Iterator[JobRecord]:
        for data in self.api.wait(job_id):
            yield restjson.job_from_json(data)

    def cancel(self, job_ids: list[int], signal: int, job_specs: list[str]) -> list[str]:
        return self.api.cancel(job_ids, signal, job_specs)

    def update_job(self, job: str, action: str, priority: int | None, nice: int | None,
                   changes: dict[str, Any] | None = None) -> list[str]:
        return self.api.update_job(job, action, priority, nice, changes)

    def priorities(self, job_ids: list[int], users: list[str]) -> tuple[list[JobPriority], PriorityWeights]:
        reply = self.api.priorities(job_ids, users)
        return [JobPriority(**row) for row in reply["jobs"]], PriorityWeights(**reply["weights"])

    def cluster(self) -> ClusterStatus:
        return cluster_from_json(self.api.cluster())

    def update_node(self, name: str, state: str, reason: str) -> NodeStatus:
        return restjson.node_from_json(self.api.update_node(name, state, reason))

    # -- a running job's output and input (relayed by the controller from its node's agent) ----

    def output(self, job: JobRecord, step_id: int) -> Iterator[OutputChunk]:
        if not job.node:
            raise InvalidRequest(f"Job {job.display_id} is not running on any node")
        for data in self.api.output(job.job_id, step_id):
            stdout, stderr, end = restjson.output_chunk_from_json(data)
            if end is None:
                yield OutputChunk(stdout=stdout, stderr=stderr)
            else:
                yield OutputChunk(stdout=stdout, stderr=stderr, done=True, state=end.state, exit_code=end.exit_code,
                                  exit_signal=end.exit_signal, tasks=end.tasks)

    def send_input(self, job: JobRecord, chunks: Iterable[bytes], step_id: int) -> InputCall:
        if not job.node:
            raise InvalidRequest(f"Job {job.display_id} is not running on any node")
        return self.api.send_input(job.job_id, chunks, step_id)


def cluster_from_json(reply: dict[str, Any]) -> ClusterStatus:
    """The ClusterStatus of a ``/pslurm/v1/cluster`` reply."""
    return ClusterStatus(name=reply["cluster_name"],
                         partitions=tuple(restjson.partition_from_json(p) for p in reply["partitions"]),
                         nodes=tuple(restjson.node_from_json(n) for n in reply["nodes"]))
