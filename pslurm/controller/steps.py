"""The step service: job steps (psrun inside an allocation: J.0, J.1, ...), created, signalled, ended.

A step is never queued. Creating one checks who asks (the job's owner or an operator), and the
store creates it RUNNING in one transaction only while its job is RUNNING and, unless it overlaps,
what it needs is free (lifecycle.place_step: ``Requested nodes are busy`` otherwise, and psrun
retries): a default step holds the whole allocation on its nodes, so no other non-overlapping step
may run; an ``--exact`` one holds only its CPUs (tasks x cpus-per-task on each node) and its GPUs
(--gres/--gpus-per-node per node, or --gpus-per-task x its tasks there), the lowest indices of the
job's that no other running step holds, recorded in its row. A step that asks GPUs gets only those
(Slurm: a step without a GPU request gets all of the job's). With --gpus-per-task or --gpu-bind each
task gets its own GPUs (StepLaunch.task_gpus, its CUDA_VISIBLE_DEVICES). Then each of the step's
nodes gets its tasks (``LaunchStep``, one
:class:`~pslurm.core.steps.StepLaunch` per node, built from the job's record: its node, run,
GPUs, user, and the request). A step ends when its agent reports it (``StepsEnded``), when its job
ends (in the job's own transaction), or when the node monitor finds its agent no longer runs it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pslurm.controller.agents import AgentRefused, AgentUnreachable
from pslurm.controller.errors import NotFound, PermissionDenied
from pslurm.controller.limits import MAX_TASKS_PER_NODE
from pslurm.controller.ports import Agents
from pslurm.controller.store import NewStep, StepEnd, StepRecord, Store
from pslurm.core import lifecycle
from pslurm.core.gpubind import parse_gpu_bind, task_gpus
from pslurm.core.gres import parse_gres
from pslurm.core.hostlists import collect, expand
from pslurm.core.jobspec import JobRecord, SpecError
from pslurm.core.layout import compress_counts, node_layout
from pslurm.core.states import InvalidTransition, JobState
from pslurm.core.steplaunch import StepLaunch
from pslurm.core.steps import INTERACTIVE_STEP

log = logging.getLogger("psctld")

INVALID_JOB_ID = "Invalid job id specified"  # ESLURM_INVALID_JOB_ID (srun's and scancel's words)
ACCESS_DENIED = "Access/permission denied"  # ESLURM_ACCESS_DENIED
TOO_MANY_CPUS = "More processors requested than permitted"  # ESLURM_BAD_TASK_COUNT's neighbour, srun's words
NODE_CONFIG = "Requested node configuration is not available"  # ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE
BAD_GRES = "Invalid generic resource (gres) specification"  # ESLURM_INVALID_GRES
MAX_ARGV = 4096  # arguments of a step's command
MAX_TASKS = 100_000
BAD_TASK_COUNT = "Task count specification invalid"  # ESLURM_BAD_TASK_COUNT


@dataclass(frozen=True)
class StepRequest:
    """psrun's request for a step (the API's ``POST /pslurm/v1/job/{id}/steps`` body)."""

    argv: tuple[str, ...]
    environment: Mapping[str, str] = field(default_factory=dict)
    workdir: str = ""  # "" the job's
    ntasks: int | None = None  # None: the job's task count (srun inherits SLURM_NTASKS)
    ntasks_per_node: int | None = None
    cpus_per_task: int = 1
    gres: tuple[str, ...] | None = None
    gpus_per_task: int | None = None
    overlap: bool = False  # --overlap: shares the allocation's CPUs with other steps (still no more tasks than them)
    overcommit: bool = False  # -O/--overcommit: more tasks than CPUs (at most MaxTasksPerNode a node)
    exact: bool = False  # --exact: the step holds only its CPUs and GPUs (else the whole allocation on its nodes)
    gpu_bind: str = ""  # --gpu-bind: none, closest, single:N, map_gpu:..., mask_gpu:..., per_task:N ("" the default)
    label: bool = False
    pty: bool = False
    name: str = ""  # "" the command's basename, as srun names a step


def step_request_from_json(body: Mapping[str, Any]) -> StepRequest:
    """The request in a step's JSON body; SpecError (one line) for a malformed one."""
    argv = body.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv) or len(argv) > MAX_ARGV:
        raise SpecError("No command given: argv is a non-empty list of strings")
    env = body.get("environment") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise SpecError("Invalid environment: an object of strings")
    gres = body.get("gres")
    gpu_bind = body.get("gpu_bind") or ""
    if not isinstance(gpu_bind, str) or gpu_bind and parse_gpu_bind(gpu_bind) is None:
        raise SpecError(f"Invalid --gpu-bind argument: {gpu_bind}")
    if gres is not None and (not isinstance(gres, list) or not all(isinstance(g, str) for g in gres)):
        raise SpecError(BAD_GRES)
    for text in (*argv, *env, *env.values(), str(body.get("workdir") or ""), str(body.get("name") or "")):
        if "\0" in text:
            raise SpecError("Invalid request: a NUL byte in a string")

    def count(key: str, default: int | None, low: int = 1) -> int | None:
        value = body.get(key)
        if value is None or value == 0 and default is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_TASKS:
            raise SpecError(f"Invalid {key}: {value!r}")
        return value

    return StepRequest(
        argv=tuple(argv), environment=dict(env), workdir=str(body.get("workdir") or ""),
        ntasks=count("ntasks", None), ntasks_per_node=count("ntasks_per_node", None),
        cpus_per_task=count("cpus_per_task", 1) or 1, gres=tuple(gres) if gres else None,
        gpus_per_task=count("gpus_per_task", None), overlap=bool(body.get("overlap")),
        overcommit=bool(body.get("overcommit")), exact=bool(body.get("exact")),
        gpu_bind=gpu_bind,
        label=bool(body.get("label")), pty=bool(body.get("pty")), name=str(body.get("name") or "")[:256])


def step_to_json(step: StepRecord) -> dict[str, Any]:
    """A step as the API shows it (``GET .../steps``, ``pslurm.steps`` of a listing's job)."""
    return {"job_id": step.job_id, "step_id": step.step_id, "name": step.name, "state": step.state.value,
            "nodes": step.nodes, "ntasks": step.ntasks, "cpus": step.cpus, "overlap": step.overlap,
            "start_time": step.start_time, "end_time": step.end_time, "exit_code": step.exit_code,
            "exit_signal": step.exit_signal, "argv": list(step.argv), "workdir": step.workdir}


def task_layout(nodes: int, ntasks: int, per_node: int | None) -> list[int]:
    """Tasks per node in block order (srun's default distribution): as even as they go, the first
    nodes taking one more; with ``per_node`` at most that many on each. SpecError when they do not fit."""
    if ntasks < nodes:
        raise SpecError(NODE_CONFIG)  # every node of the step runs a task
    if per_node is not None:
        if ntasks > per_node * nodes:
            raise SpecError(NODE_CONFIG)
        counts = []
        left = ntasks
        for i in range(nodes):
            take = min(per_node, left - (nodes - i - 1))
            counts.append(take)
            left -= take
        return counts
    base, extra = divmod(ntasks, nodes)
    return [base + (1 if i < extra else 0) for i in range(nodes)]


class StepService:
    """Users' and agents' requests about steps, over the store and the agents."""

    def __init__(self, store: Store, agents: Agents, clock: Callable[[], float] = time.time,
                 operators: frozenset[int] = frozenset({0}), max_tasks_per_node: int = MAX_TASKS_PER_NODE) -> None:
        self.store = store
        self.agents = agents
        self.clock = clock
        self.operators = operators
        self.max_tasks_per_node = max_tasks_per_node  # each task is processes, pipes and threads in a root agent

    def _job(self, job_id: int, requester_uid: int) -> JobRecord:
        job = self.store.get_job(job_id)
        if job is None:
            raise NotFound(INVALID_JOB_ID)
        if requester_uid not in self.operators and requester_uid != job.spec.uid:
            raise PermissionDenied(ACCESS_DENIED)
        return job

    def create(self, job_id: int, requester_uid: int, request: StepRequest) -> StepRecord:
        """Create the job's next step and launch its tasks on its nodes. NotFound, PermissionDenied,
        SpecError (a request the allocation can never hold), InvalidTransition (the job not running,
        lifecycle.JOB_ENDED; its launch refused), lifecycle.StepBusy (wait and ask again)."""
        job = self._job(job_id, requester_uid)
        if job.state is not JobState.RUNNING or not job.node:
            raise InvalidTransition(lifecycle.JOB_ENDED)
        all_nodes = list(job.all_nodes)
        layout = node_layout(job.spec)
        ntasks = request.ntasks or (request.ntasks_per_node * len(all_nodes) if request.ntasks_per_node
                                    else sum(n.tasks for n in layout) if len(all_nodes) > 1 else job.spec.ntasks)
        nodes = all_nodes[:ntasks]  # fewer tasks than nodes: the first nodes (srun takes as many nodes as tasks)
        counts = task_layout(len(nodes), ntasks, request.ntasks_per_node)
        job_cpus = sum(n.cpus for n in layout[:len(nodes)]) if len(all_nodes) > 1 else job.spec.cpus
        if ntasks * request.cpus_per_task > job_cpus and not request.overcommit:
            raise SpecError(TOO_MANY_CPUS)  # as srun: --overlap shares CPUs, only -O runs more tasks than them
        if max(counts) > self.max_tasks_per_node:
            raise SpecError(f"{BAD_TASK_COUNT}: at most {self.max_tasks_per_node} tasks a node (MaxTasksPerNode)")
        node_gpus = [list(job.node_gpus[i]) if i < len(job.node_gpus) else list(job.gpu_indices)
                     for i in range(len(nodes))]
        per_node = self._check_gpus(request, max(counts), min(len(g) for g in node_gpus))
        alloc_cpus = ([n.cpus for n in layout[:len(nodes)]] if len(all_nodes) > 1 and len(layout) >= len(nodes)
                      else [job.spec.cpus] * len(nodes))
        wanted = tuple(request.gpus_per_task * here if request.gpus_per_task else per_node for here in counts)
        name = request.name or os.path.basename(request.argv[0]) or request.argv[0]
        new = NewStep(name=name, nodes=collect(nodes), ntasks=ntasks, cpus=ntasks * request.cpus_per_task,
                      gres=",".join(request.gres or ()), overlap=request.overlap, argv=request.argv,
                      workdir=request.workdir or job.spec.workdir, exact=request.exact,
                      node_cpus=tuple(here * request.cpus_per_task for here in counts), gpus_wanted=wanted,
                      alloc_cpus=tuple(alloc_cpus), alloc_gpus=tuple(tuple(g) for g in node_gpus),
                      first_id=INTERACTIVE_STEP + 1 if job.spec.interactive else 0)
        step = self.store.create_step(job.job_id, job.restarts, new, self.clock())
        held = step.node_gpus or tuple(tuple(g) for g in node_gpus)
        offset = 0
        for index, (node, here, gpus) in enumerate(zip(nodes, counts, held, strict=True)):
            per_task = task_gpus(gpus, here, request.gpus_per_task, request.gpu_bind) or []
            launch = StepLaunch(
                job_id=job.job_id, restarts=job.restarts, step_id=step.step_id, name=name, argv=tuple(request.argv),
                environment=dict(request.environment), workdir=new.workdir, uid=job.spec.uid, gid=job.spec.gid,
                user=job.spec.user, ntasks=here, task_offset=offset, total_tasks=ntasks, node_index=index,
                step_nodelist=new.nodes, tasks_per_node=compress_counts(counts),
                cpus_per_task=request.cpus_per_task, gpu_indices=tuple(gpus), label=request.label, pty=request.pty,
                task_gpus=tuple(tuple(t) for t in per_task), no_gpus=not gpus and bool(node_gpus[index]))
            offset += here
            self._launch(step, node, launch)
        return step

    @staticmethod
    def _check_gpus(request: StepRequest, ntasks: int, job_gpus: int) -> int | None:
        """A step's GPUs come from its job's: it may not ask more than the job holds. Returns the
        GPUs it asks per node with --gres/--gpus-per-node (None: none asked, all of the job's)."""
        wanted = 0
        asked: int | None = None
        try:
            for text in request.gres or ():
                if not parse_gres(text) and (text.lower() == "none" or text.lower().startswith("gpu")):
                    asked = asked or 0  # --gres=none, gpu:0: no GPUs
            for g in parse_gres(",".join(request.gres or ())) if request.gres else ():
                if g.name == "gpu":
                    wanted = max(wanted, g.count)
                    asked = wanted
        except (SpecError, ValueError):
            raise SpecError(BAD_GRES) from None
        if request.gpus_per_task:
            wanted = max(wanted, request.gpus_per_task * ntasks)
        if wanted > job_gpus:
            raise SpecError(BAD_GRES)
        return asked

    def _launch(self, step: StepRecord, node: str, launch: StepLaunch) -> None:
        """Send one node its tasks; a launch that fails ends the step (FAILED, or NODE_FAIL for an
        agent that does not answer) and the others of its nodes are told to cancel it."""
        record = self.store.get_node(node)
        try:
            if record is None:
                raise AgentUnreachable(f"{node}: unknown node")
            self.agents.launch_step(record.target, launch)
            return
        except (AgentUnreachable, AgentRefused) as exc:
            why = str(exc)
            lost = isinstance(exc, AgentUnreachable)
        ref = f"{step.job_id}.{step.step_id}"
        log.warning("step %s: its launch on %s failed: %s", ref, node, why)
        self.store.end_steps([StepEnd(step.job_id, step.step_id, node, JobState.NODE_FAIL if lost else JobState.FAILED,
                                      1, 0, self.clock())])
        for other in expand(step.nodes):
            if other != node:
                self._signal_node(step, other, 0)
        raise InvalidTransition(f"Unable to launch step {ref} on {node}: {why}")

    def steps(self, job_id: int) -> list[StepRecord]:
        """A job's steps in order; NotFound for an unknown job (anybody may list them, as squeue -s)."""
        if self.store.get_job(job_id, light=True) is None:
            raise NotFound(f"{INVALID_JOB_ID}: {job_id}")
        return self.store.steps([job_id]).get(job_id, [])

    def step(self, job_id: int, step_id: int) -> StepRecord:
        found = self.store.get_step(job_id, step_id)
        if found is None:
            raise NotFound(INVALID_JOB_ID)
        return found

    def cancel(self, job_id: int, step_id: int, requester_uid: int, signal: int = 0) -> None:
        """pscancel J.S (``signal`` 0: cancel, SIGTERM then SIGKILL after KillWait; else that signal)
        to the step's tasks on each of its nodes. The step ends when its agents report it. NotFound,
        PermissionDenied, InvalidTransition (lifecycle.JOB_ENDED) with scancel's words."""
        job = self._job(job_id, requester_uid)
        step = self.step(job.job_id, step_id)
        if step.state is not JobState.RUNNING:
            raise InvalidTransition(lifecycle.JOB_ENDED)
        for node in expand(step.nodes):
            self._signal_node(step, node, signal)

    def _signal_node(self, step: StepRecord, node: str, signal: int) -> None:
        record = self.store.get_node(node)
        if record is None:
            return
        try:
            self.agents.signal_step(record.target, step.job_id, step.step_id, signal)
        except (AgentUnreachable, AgentRefused) as exc:  # the node monitor ends it if the agent lost it
            log.warning("cannot signal step %d.%d on %s: %s", step.job_id, step.step_id, node, exc)

    def steps_ended(self, node: str, ends: Sequence[StepEnd]) -> None:
        """An agent's batch of step ends (StepsEnded), in one transaction. A repeated report, or one of
        a step already ended (with its job), is logged and ignored; StoreError when the store could
        not record them (the agent sends them again)."""
        for end, outcome in zip(ends, self.store.end_steps(ends), strict=True):
            if isinstance(outcome, InvalidTransition):
                log.info("step %d.%d: end reported by %s, ignored: %s", end.job_id, end.step_id, node, outcome)
