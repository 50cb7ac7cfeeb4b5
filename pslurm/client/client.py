"""The client: every request a user, a command or a script makes of a pslurm cluster."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from pslurm.client.errors import ConfigurationError, InvalidRequest
from pslurm.core.states import JobState

if TYPE_CHECKING:
    from pslurm.client.http_transport import HttpTransport
    from pslurm.client.models import ClusterStatus, InputStream, JobPriority, OutputChunk, PriorityWeights, WillRun
    from pslurm.core.config import ClusterConfig, PartitionConfig
    from pslurm.core.jobspec import JobRecord, JobSpec
    from pslurm.core.node import NodeStatus

DEFAULT_TIMEOUT = 30.0  # seconds a request may take before the controller counts as unreachable (as api's)


class Client:
    """A connection to one cluster's controller, as the user running this process.

    ``config`` is the cluster's configuration: a :class:`~pslurm.core.config.ClusterConfig`, the path
    of its pslurm.conf, or None to find it as the commands do (``$PSLURM_CONF``, else
    ``/etc/pslurm/pslurm.conf``, else the per-user cluster of ``pslurm up``); a configuration that
    is missing or unreadable raises :class:`~pslurm.client.ConfigurationError`. ``timeout`` bounds
    each request (not the streams: :meth:`wait`, :meth:`output`).

    Nothing is sent before the first request. Every request carries a credential for this process's
    uid and gid (signed here when the cluster key is readable, else from the controller's credential
    socket). Every method returns domain objects (``JobRecord``, ``NodeStatus``, ...) and raises
    :class:`~pslurm.client.ClientError` (a subclass of it) with a one-line message on failure.

    A client may be used from several threads; :meth:`close` (or ``with Client() as client:``)
    releases its connections.
    """

    def __init__(self, config: ClusterConfig | str | os.PathLike[str] | None = None, *,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.config = _load_config(config)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._transport: HttpTransport | None = None

    @property
    def _wire(self) -> HttpTransport:
        transport = self._transport
        if transport is None:
            from pslurm.client.http_transport import HttpTransport  # on first use: a failing command starts fast

            with self._lock:
                if self._transport is None:
                    self._transport = HttpTransport(self.config, self.timeout)
                transport = self._transport
        return transport

    def close(self) -> None:
        """Close the connections, ending any stream still open (a later request opens them again)."""
        with self._lock:
            transport, self._transport = self._transport, None
        if transport is not None:
            transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- jobs ------------------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> int:
        """Submit a job (``psbatch``; ``psrun`` with ``spec.interactive``); returns its id (an
        array's first task id). The controller has stored it PENDING when this returns."""
        return self._wire.submit(spec)

    def will_run(self, spec: JobSpec) -> WillRun:
        """When and where ``spec`` would start if submitted now (``psbatch --test-only``), as the
        scheduler's backfill pass plans it behind the jobs already pending; nothing is stored. Raises
        InvalidRequest with the refusal submit would give, or with why it would not start."""
        return self._wire.will_run(spec)

    def jobs(self, job_ids: Iterable[int] = (), users: Iterable[str] = (), states: Iterable[JobState | str] = (),
             include_finished: bool = False, since: float | None = None, light: bool = False,
             collapse_arrays: bool = False) -> list[JobRecord]:
        """Jobs, in job id order. Filters combine: ``job_ids`` (an array's id: its tasks), ``users``
        (names), ``states`` (:class:`JobState`, or names and short codes: ``PD``, ``RUNNING``).
        Finished jobs are left out unless ``include_finished``, or asked for by id or state;
        ``since``: only jobs that ended at or after this time (seconds since the epoch) or have not
        ended. ``light`` leaves out each job's environment and script; ``collapse_arrays`` returns
        one record for the pending tasks of an array that share a reason (squeue's view: its
        ``collapsed_tasks`` names them, e.g. ``0-999``)."""
        return self._wire.jobs(_ints(job_ids), list(users), _states(states), include_finished, since, light,
                               collapse_arrays)

    def job(self, job_id: int) -> JobRecord | None:
        """The job with this id (finished or not), or None."""
        job_id = int(job_id)
        found = self._wire.jobs([job_id], [], [], True, None, False, False)
        return next((j for j in found if j.job_id == job_id), None)

    def wait(self, job_id: int) -> Iterator[JobRecord]:
        """The job now, then again each time its state, node or reason changes, until it ends.

        The stream may also end before the job does (a busy controller answers with the job as it
        is now, and no more): ask again, shortly, until the job's state is final. Leaving the loop
        early ends the request. :class:`NotFound` for an unknown id."""
        return self._wire.wait(int(job_id))

    def cancel(self, job_ids: Iterable[int] = (), signal: int = 0, job_specs: Iterable[str] = ()) -> list[str]:
        """Cancel jobs (SIGTERM, then SIGKILL after KillWait), or send them ``signal``. ``job_specs``
        names array tasks: ``14`` (every task), ``14_3``, ``14_[5-9]``. Returns one error line per
        job that could not be (``Kill job error on job id 14: Invalid job id specified``); the others
        are done."""
        return self._wire.cancel(_ints(job_ids), int(signal), [str(s) for s in job_specs])

    def update_job(self, job: int | str, action: str = "", priority: int | None = None,
                   nice: int | None = None, *, time_limit: str | int | None = None, partition: str | None = None,
                   name: str | None = None, account: str | None = None, comment: str | None = None,
                   num_tasks: int | None = None, min_memory_node: int | None = None) -> list[str]:
        """``action``: ``hold``, ``uhold``, ``release``, ``requeue`` or "" (none); ``priority`` (operators
        only), ``nice`` (negative: operators only). ``job``: ``14``, ``14_3`` or ``14_[5-9]``.
        scontrol update's other keys: ``time_limit`` (``"30"``, ``"1:00:00"``, ``"UNLIMITED"``, ``"+30"``,
        ``"-5"`` as scontrol takes them, or seconds; a user may only lower a running job's), and, for
        pending jobs, ``partition``, ``account``, ``num_tasks``, ``min_memory_node`` (MB); ``name``,
        ``comment``. Returns one error line per job the change could not be made to, in scontrol's
        words (``Job is no longer pending execution for job 14``); a job's changes are made all or none."""
        changes = {k: v for k, v in (("time_limit", time_limit), ("partition", partition), ("name", name),
                                     ("account", account), ("comment", comment), ("num_tasks", num_tasks),
                                     ("min_memory_node", min_memory_node)) if v is not None}
        return self._wire.update_job(str(job), action, priority, nice, changes)

    def hold(self, job: int | str) -> list[str]:
        """Hold a pending job (an operator's hold, JobHeldAdmin, when the caller is one; else the user's)."""
        return self.update_job(job, action="hold")

    def release(self, job: int | str) -> list[str]:
        """Release a held job."""
        return self.update_job(job, action="release")

    def requeue(self, job: int | str) -> list[str]:
        """Requeue a running job (it ends, then pends again with the same id) or a finished batch job."""
        return self.update_job(job, action="requeue")

    def priorities(self, job_ids: Iterable[int] = (), users: Iterable[str] = ()
                   ) -> tuple[list[JobPriority], PriorityWeights]:
        """Each pending job's priority and factors (sprio), and the configured weights."""
        return self._wire.priorities(_ints(job_ids), list(users))

    # -- the cluster -------------------------------------------------------------------------

    def cluster(self) -> ClusterStatus:
        """The cluster's name, partitions and nodes, in one request."""
        return self._wire.cluster()

    def nodes(self) -> list[NodeStatus]:
        """Every node with its state, allocation and the word sinfo shows for it."""
        return list(self.cluster().nodes)

    def node(self, name: str) -> NodeStatus | None:
        """The named node, or None."""
        return self.cluster().node(name)

    def partitions(self) -> list[PartitionConfig]:
        """The partitions, in configuration order (``default``: the cluster's default partition)."""
        return list(self.cluster().partitions)

    def update_node(self, name: str, state: str, reason: str = "") -> NodeStatus:
        """Set a node's state (operators only): ``DRAIN`` (needs a reason), ``RESUME`` or ``DOWN``.
        Returns the node as it is now."""
        return self._wire.update_node(name, state, reason)

    # -- a running job's input and output (its node's agent) ---------------------------------

    def output(self, job: JobRecord, step_id: int = 0) -> Iterator[OutputChunk]:
        """A running step's output (``step_id`` 0: a psrun job's command), from its nodes' agents
        (relayed by the controller), as it comes; the last chunk has ``done`` set, how the step ended
        and each task's end. Leaving the loop early ends the request. :class:`NodeUnreachable` when a
        node does not answer (it may have gone: the controller says how the job ended)."""
        return self._wire.output(job, step_id)

    def send_input(self, job: JobRecord, chunks: Iterable[bytes], step_id: int = 0) -> InputStream:
        """Send ``chunks`` to a running step's stdin (its task 0's; ``step_id`` 0: a psrun job's
        command), in the background, as the iterator yields them; its end is the EOF (an empty
        iterator: an empty stdin). Returns a handle: ``close(timeout)`` once the iterator has ended."""
        return self._wire.send_input(job, chunks, step_id)


def _load_config(config: Any) -> ClusterConfig:
    from pslurm.client.api import config_path
    from pslurm.core.config import ClusterConfig, ConfigError, load_cluster_config

    if isinstance(config, ClusterConfig):
        return config
    path = config_path(config)
    try:
        return load_cluster_config(path)
    except ConfigError as exc:
        raise ConfigurationError(str(exc)) from None


def _ints(values: Iterable[int]) -> list[int]:
    items = list(values)
    try:
        return [int(v) for v in items]
    except (TypeError, ValueError):
        raise InvalidRequest(f"Invalid job id specified: {','.join(map(str, items))}") from None


def _states(values: Iterable[JobState | str]) -> list[JobState]:
    try:
        return [v if isinstance(v, JobState) else JobState.parse(v) for v in values]
    except ValueError as exc:
        raise InvalidRequest(str(exc)) from None
