"""The client: every request a user, a command or a script makes of a pslurm cluster.

Standard library only, and little of it: every command submits and reads through this, and its
cold start is measured (tests/acceptance/test_cli_imports.py). A job comes back as a
:class:`~pslurm.core.jobinfo.JobInfo`, a lazy typed view over the reply; nodes and partitions as
:mod:`pslurm.core.clusterinfo`'s views.
"""

from __future__ import annotations

from pslurm.client.api import DEFAULT_TIMEOUT, Api
from pslurm.client.errors import InvalidRequest

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    import os
    from collections.abc import Iterable, Iterator
    from typing import Any

    from pslurm.client.api import InputCall, WireConfig
    from pslurm.client.models import InputStream, JobPriority, OutputChunk, PriorityWeights, WillRun
    from pslurm.core.clusterinfo import ClusterInfo, NodeInfo, PartitionInfo
    from pslurm.core.config import ClusterConfig
    from pslurm.core.jobinfo import JobDesc, JobInfo
    from pslurm.core.jobspec import JobSpec
    from pslurm.core.states import JobState


class Client:
    """A connection to one cluster's controller, as the user running this process.

    ``config`` is the cluster's configuration: a :class:`~pslurm.core.config.ClusterConfig`, the path
    of its pslurm.conf, or None to find it as the commands do (``$PSLURM_CONF``, else
    ``/etc/pslurm/pslurm.conf``, else the per-user cluster of ``pslurm up``); of a file only the
    client's keys are read (:func:`pslurm.core.clientconf.read_client_conf`). A configuration that
    is missing or unreadable raises :class:`~pslurm.client.ConfigurationError`. ``timeout`` bounds
    each request (not the streams: :meth:`wait`, :meth:`output`).

    Nothing is sent before the first request. Every request carries a credential for this process's
    uid and gid (signed here when the cluster key is readable, else from the controller's credential
    socket). Jobs come back as :class:`~pslurm.core.jobinfo.JobInfo` views (the attributes of the
    controller's JobRecord, read from the reply on access), nodes and partitions as
    :class:`~pslurm.core.clusterinfo.NodeInfo` and :class:`~pslurm.core.clusterinfo.PartitionInfo`;
    a failure raises :class:`~pslurm.client.ClientError` (a subclass of it) with a one-line message.
    :attr:`api` is the raw layer beneath (the replies' JSON, the streams).

    A client may be used from several threads; :meth:`close` (or ``with Client() as client:``)
    releases its connections.
    """

    def __init__(self, config: ClusterConfig | str | os.PathLike[str] | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        if config is not None and hasattr(config, "controller_target"):  # a ClusterConfig (or a ClientConf)
            self.api = Api(config, timeout)  # type: ignore[arg-type]
        else:
            self.api = Api.load(config, timeout)  # type: ignore[arg-type]
        self.timeout = timeout

    @property
    def config(self) -> WireConfig:
        """The configuration this client reads: the ClusterConfig it was given, else the client's keys of
        the file (``cluster_name``, ``controller_addr``, ``rest_port``, ...)."""
        return self.api.config

    def close(self) -> None:
        """Close the connections (a later request opens them again)."""
        self.api.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, job: JobSpec | JobDesc) -> int:
        """Submit a job (``psbatch``; ``psrun`` with ``interactive``): a JobSpec, or the JobDesc the
        commands build (:func:`pslurm.core.restjson.job_desc`). Returns its id (an array's first task
        id); the controller has stored it PENDING when this returns."""
        return self.api.submit(_request_json(job))

    def will_run(self, job: JobSpec | JobDesc) -> WillRun:
        """When and where ``job`` would start if submitted now (``psbatch --test-only``), as the
        scheduler's backfill pass plans it behind the jobs already pending; nothing is stored. Raises
        InvalidRequest with the refusal submit would give, or with why it would not start."""
        from pslurm.client.models import WillRun

        reply = self.api.will_run(_request_json(job))
        return WillRun(int(reply["job_id"]), float(reply["start_time"]), str(reply["node_list"]),
                       int(reply["proc_cnt"]), str(reply["part_name"]))

    def jobs(self, job_ids: Iterable[int] = (), users: Iterable[str] = (), states: Iterable[JobState | str] = (),
             include_finished: bool = False, since: float | None = None, light: bool = False,
             collapse_arrays: bool = False, steps: bool = False) -> list[JobInfo]:
        """Jobs, in job id order. Filters combine: ``job_ids`` (an array's id: its tasks), ``users``
        (names), ``states`` (:class:`JobState`, or names and short codes: ``PD``, ``RUNNING``).
        Finished jobs are left out unless ``include_finished``, or asked for by id or state;
        ``since``: only jobs that ended at or after this time (seconds since the epoch) or have not
        ended. ``light`` leaves out each job's environment and script; ``collapse_arrays`` returns one
        record for the pending tasks of an array that share a reason (squeue's view: its
        ``collapsed_tasks`` names them, e.g. ``0-999``); ``steps``: each job's steps as ``steps``."""
        from pslurm.core.jobinfo import JobInfo

        found = self.api.jobs(_ints(job_ids), list(users), _states(states), include_finished, since, light,
                              collapse_arrays, brief=True, steps=steps)  # brief: each shared request sent once
        return [JobInfo(data) for data in found]

    def job(self, job_id: int) -> JobInfo | None:
        """The job with this id (finished or not), or None."""
        job_id = int(job_id)
        return next((j for j in self.jobs([job_id], include_finished=True) if j.job_id == job_id), None)

    def wait(self, job_id: int) -> Iterator[JobInfo]:
        """The job now, then again each time its state, node or reason changes, until it ends.

        The stream may also end before the job does (a busy controller answers with the job as it
        is now, and no more): ask again, shortly, until the job's state is final. Leaving the loop
        early ends the request. :class:`NotFound` for an unknown id."""
        from pslurm.core.jobinfo import JobInfo

        for data in self.api.wait(int(job_id)):
            yield JobInfo(data)

    def cancel(self, job_ids: Iterable[int] = (), signal: int = 0, job_specs: Iterable[str] = (),
               scope: str = "") -> list[str]:
        """Cancel jobs (SIGTERM, then SIGKILL after KillWait), or send them ``signal``: to a batch
        job's steps (``scope`` ""), its batch shell (``batch``) or both (``full``), as scancel's
        default, -b and --full. ``job_specs`` names array tasks: ``14`` (every task), ``14_3``,
        ``14_[5-9]``. Returns one error line per job that could not be (``Kill job error on job id
        14: Invalid job id specified``); the others are done."""
        return self.api.cancel(_ints(job_ids), int(signal), [str(s) for s in job_specs], scope)

    def cancel_step(self, job_id: int, step_id: int, signal: int = 0) -> None:
        """Cancel step J.S (``signal`` 0) or send its tasks a signal. NotFound, PermissionDenied,
        InvalidRequest (``Job/step already completing or completed``)."""
        self.api.cancel_step(int(job_id), int(step_id), int(signal))

    def update_job(self, job: int | str, action: str = "", priority: int | None = None,
                   nice: int | None = None, *, time_limit: str | int | None = None, partition: str | None = None,
                   name: str | None = None, account: str | None = None, comment: str | None = None,
                   num_tasks: int | None = None, min_memory_node: int | None = None,
                   changes: dict[str, Any] | None = None) -> list[str]:
        """``action``: ``hold``, ``uhold``, ``release``, ``requeue`` or "" (none); ``priority`` (operators
        only), ``nice`` (negative: operators only). ``job``: ``14``, ``14_3`` or ``14_[5-9]``.
        scontrol update's other keys: ``time_limit`` (``"30"``, ``"1:00:00"``, ``"UNLIMITED"``, ``"+30"``,
        ``"-5"`` as scontrol takes them, or seconds; a user may only lower a running job's), and, for
        pending jobs, ``partition``, ``account``, ``num_tasks``, ``min_memory_node`` (MB); ``name``,
        ``comment``; ``changes``: any of :mod:`pslurm.core.jobupdate`'s fields by name (what
        ``pscontrol update`` parsed). Returns one error line per job the change could not be made to,
        in scontrol's words (``Job is no longer pending execution for job 14``); a job's changes are
        made all or none."""
        given = {k: v for k, v in (("time_limit", time_limit), ("partition", partition), ("name", name),
                                   ("account", account), ("comment", comment), ("num_tasks", num_tasks),
                                   ("min_memory_node", min_memory_node)) if v is not None}
        return self.api.update_job(str(job), action, priority, nice, {**(changes or {}), **given})

    def hold(self, job: int | str) -> list[str]:
        """Hold a pending job (an operator's hold, JobHeldAdmin, when the caller is one; else the user's)."""
        return self.update_job(job, action="hold")

    def suspend(self, job: int | str) -> list[str]:
        """scontrol suspend (operators only): a running job's processes stopped on every node, the job
        SUSPENDED with its allocation kept and its time limit paused. Error lines as update_job's."""
        return self.api.suspend_job(str(job))

    def resume(self, job: int | str) -> list[str]:
        """scontrol resume (operators only): a suspended job's processes continued, RUNNING again, its
        time limit's end later by the time it was suspended. Error lines as update_job's."""
        return self.api.suspend_job(str(job), resume=True)

    def release(self, job: int | str) -> list[str]:
        """Release a held job."""
        return self.update_job(job, action="release")

    def requeue(self, job: int | str) -> list[str]:
        """Requeue a running job (it ends, then pends again with the same id) or a finished batch job."""
        return self.update_job(job, action="requeue")

    def priorities(self, job_ids: Iterable[int] = (), users: Iterable[str] = ()
                   ) -> tuple[list[JobPriority], PriorityWeights]:
        """Each pending job's priority and factors (sprio), and the configured weights."""
        from pslurm.client.models import JobPriority, PriorityWeights

        reply = self.api.priorities(_ints(job_ids), list(users))
        return [JobPriority(**row) for row in reply["jobs"]], PriorityWeights(**reply["weights"])

    # -- the cluster -------------------------------------------------------------------------

    def cluster(self) -> ClusterInfo:
        """The cluster's name, partitions and nodes, in one request."""
        from pslurm.core.clusterinfo import ClusterInfo

        return ClusterInfo(self.api.cluster())

    def nodes(self) -> list[NodeInfo]:
        """Every node with its state, allocation and the word sinfo shows for it."""
        return list(self.cluster().nodes)

    def node(self, name: str) -> NodeInfo | None:
        """The named node, or None."""
        return self.cluster().node(name)

    def partitions(self) -> list[PartitionInfo]:
        """The partitions, in configuration order (``default``: the cluster's default partition)."""
        return list(self.cluster().partitions)

    def update_node(self, name: str, state: str, reason: str = "") -> NodeInfo:
        """Set a node's state (operators only): ``DRAIN`` (needs a reason), ``RESUME`` or ``DOWN``.
        Returns the node as it is now."""
        from pslurm.core.clusterinfo import NodeInfo

        return NodeInfo(self.api.update_node(name, state, reason))

    # -- a running job's input and output (its node's agent) ---------------------------------

    def output(self, job: JobInfo, step_id: int = 0) -> Iterator[OutputChunk]:
        """A running step's output (``step_id`` 0: a psrun job's command), from its nodes' agents
        (relayed by the controller), as it comes; the last chunk has ``done`` set, how the step ended
        and each task's end. Leaving the loop early ends the request. :class:`NodeUnreachable` when a
        node does not answer (it may have gone: the controller says how the job ended)."""
        from pslurm.client.models import OutputChunk
        from pslurm.core.restjson import output_chunk_from_json

        _running(job)
        for data in self.api.output(job.job_id, step_id):
            stdout, stderr, end = output_chunk_from_json(data)
            if end is None:
                yield OutputChunk(stdout=stdout, stderr=stderr)
            else:
                yield OutputChunk(stdout=stdout, stderr=stderr, done=True, state=end.state, exit_code=end.exit_code,
                                  exit_signal=end.exit_signal, tasks=end.tasks)

    def send_input(self, job: JobInfo, chunks: Iterable[bytes], step_id: int = 0) -> InputStream:
        """Send ``chunks`` to a running step's stdin (its task 0's; ``step_id`` 0: a psrun job's
        command), in the background, as the iterator yields them; its end is the EOF (an empty
        iterator: an empty stdin). Returns a handle: ``close(timeout)`` once the iterator has ended."""
        _running(job)
        call: InputCall = self.api.send_input(job.job_id, chunks, step_id)
        return call


def _request_json(job: JobSpec | JobDesc) -> dict[str, Any]:
    """The ``job_desc_msg`` of a request: a JobDesc's own JSON, or a JobSpec's."""
    data = getattr(job, "data", None)
    if isinstance(data, dict):
        return data
    from pslurm.core.restjson import spec_to_json

    return spec_to_json(job)  # type: ignore[arg-type]


def _running(job: JobInfo) -> None:
    if not job.node:
        raise InvalidRequest(f"Job {job.display_id} is not running on any node")


def _ints(values: Iterable[int]) -> list[int]:
    items = list(values)
    try:
        return [int(v) for v in items]
    except (TypeError, ValueError):
        raise InvalidRequest(f"Invalid job id specified: {','.join(map(str, items))}") from None


def _states(values: Iterable[JobState | str]) -> list[str]:
    """State names (``PENDING``) of JobStates, names and short codes."""
    from pslurm.core.states import JobState

    try:
        return [(v if isinstance(v, JobState) else JobState.parse(v)).value for v in values]
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None

