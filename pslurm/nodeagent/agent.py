"""The agent's behaviour: launch, signal, suspend and end the runs of jobs and their steps. It
composes the node's parts: the book of runs (``runtable.py``), where runs go
(``placement.py``: cgroups, CPUs), the node's GPUs (``nodegpus.py``: sharing, MPS, usage), the ends
the controller has yet to hear (``ends.py``), the heartbeats (``heartbeat.py``), all reaching the
controller through the ``link.ControllerLink`` port, and psrun's streams (``streams.py``). Its gRPC
face is ``servicer.py``."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord
from pslurm.core.steplaunch import StepLaunch
from pslurm.core.steps import BATCH_STEP, step_name
from pslurm.nodeagent.cgroups import CgroupError
from pslurm.nodeagent.ends import EndReporter
from pslurm.nodeagent.environment import job_environment
from pslurm.nodeagent.gpumon import GpuMeter, SliceOverrun
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.heartbeat import Heartbeats
from pslurm.nodeagent.launcher import Launcher, RunningJob
from pslurm.nodeagent.link import ControllerLink, RunKey
from pslurm.nodeagent.nodegpus import USAGE_INTERVAL, NodeGpus
from pslurm.nodeagent.placement import Placement
from pslurm.nodeagent.runs import RunRecords, kill_leftovers
from pslurm.nodeagent.runtable import KEEP_ENDED, RunTable, key_of
from pslurm.nodeagent.shares import SetupError, overrun_comment, overrun_note
from pslurm.nodeagent.stepd import describe
from pslurm.nodeagent.steps import JobStep, Steps
from pslurm.nodeagent.streams import LAUNCH_GRACE, START_WAIT, StepStreams

log = logging.getLogger("psd")


class StepRefused(Exception):
    """A step that cannot start here: its job's run is not (or no longer) running on this node."""


class Agent:
    """One node's agent (see the module's docstring). ``link`` is its way to the controller;
    ``monitor`` its GPUs' (see ``NodeGpus``)."""

    def __init__(self, config: ClusterConfig, node: NodeConfig, devices: list[GpuDevice],
                 cgroup_conf: CgroupConfig, link: ControllerLink, drain_reason: str | None = None,
                 monitor: GpuMeter | None = None) -> None:
        self.config = config
        self.node = node
        spool = os.path.join(config.spool_dir, node.name)
        self.gpus = NodeGpus(devices, spool, monitor)
        self.table = RunTable()
        self.jobs = self.table.newest  # the newest run of each job (signals, psrun's streams, tail)
        self.placement = Placement(config, node, devices, cgroup_conf, self.table)
        self.records = RunRecords(os.path.join(spool, "runs"))  # the runs started and not acknowledged ended
        self.launcher = Launcher(node.name, config.cluster_name, spool, config.kill_wait, self._ended,
                                 records=self.records)
        self.steps = Steps(node.name, config.kill_wait, self.launcher.reap_timeout, self.launcher.as_root,
                           self.launcher.spawn_lock, self._step_ended, records=self.records)
        # a run that begins to end ends its steps first: CANCELLED, reported before the run's end
        self.launcher.on_ending = lambda running: self.steps.job_ending(running, running.exited)
        self.launcher.on_begin = self._begun
        self.ends = EndReporter(node.name, link, self.steps, self.records, self.table.lock)
        self._stop = threading.Event()
        self.streams = StepStreams(node.name, self.table, self.steps, self._stop)  # psrun's
        self.heartbeats = Heartbeats(link, node, self.gpus, self.steps, self.ends, self.runs, self.kill,
                                     self._forget_old, self._stop, drain_reason or "", self.placement.isolation)

    def recover(self) -> None:
        """Kill what runs a previous agent on this node left behind (its run records), then forget
        them: call before serving, so that the controller, finding this agent without those runs,
        may run their jobs again with nothing of the old run alive. Their MPS daemons, simulated
        GPU directories and job cgroups go too."""
        for record, _, _ in kill_leftovers(self.records, self.launcher.reap_timeout):
            self.launcher.remove_script(record.job_id)
        self.gpus.recover()
        self.placement.remove_leftovers(self.launcher.reap_timeout)

    def usage_loop(self, interval: float = USAGE_INTERVAL) -> None:
        """Sample running jobs' GPUs every ``interval`` seconds until stopped (only started with a
        monitor); end those that use more than their slice of GPU memory."""
        self.gpus.usage_loop(self._stop, self._end_overrun, interval)

    def _end_overrun(self, over: SliceOverrun) -> None:
        """End the job that used more than its GPU memory slice: OUT_OF_MEMORY, with the reason."""
        with self.table.lock:
            running = self.table.newest.get(over.job_id)
        if running is None or running.end is not None:
            return
        if self.launcher.end_overrun(running, overrun_note(running.job, over, step_name(running.step_id)),
                                     overrun_comment(over)):
            log.warning("job %d: %s", over.job_id, overrun_comment(over))

    def runs(self) -> list[RunKey]:
        """What this agent runs (or is about to start), or ran and has not had the end of
        acknowledged: every heartbeat says it."""
        return self.table.listed(self.ends.unreported)

    def _forget_old(self) -> None:
        self.table.forget_old(self.ends.unreported)
        self.steps.forget_old(KEEP_ENDED)

    def _ended(self, running: RunningJob) -> None:
        end = running.end
        assert end is not None
        # its MPS daemon may quit, its simulated GPU's directory goes
        running.usage = self.gpus.end(running.job, key_of(running), end.end_time - running.started)
        self.steps.wait_run(running, self.launcher.reap_timeout)  # its steps' ends go first
        with self.table.changed:
            self.ends.add(running)
            self.table.changed.notify_all()
        running.settled.set()  # a newer run of the job waiting for this one may start
        self.ends.report()

    def _step_ended(self, step: JobStep) -> None:
        self.ends.report()

    def kill(self, runs: Sequence[RunKey]) -> None:
        """End the runs the controller has ended (that run only: a newer run of the job goes on)."""
        for key in runs:
            running = self.table.get(key)
            if running is not None:
                self.launcher.cancel(running)

    # -- jobs ------------------------------------------------------------------------------

    def launch(self, job: JobRecord, node_index: int = 0) -> None:
        """Start a run of a job; never raises: a run that cannot start ends FAILED with the reason.

        ``node_index``: this node's position in the job's allocation (``job.nodes``). The first node
        runs the job (its script, psrun's command, or holds psalloc's allocation); any other holds
        the allocation as an allocation job does, so that the job's steps run there, and never runs
        the script: its run ends when the controller cancels it.

        A repeated launch of the same run (or of an older one) is a no-op: the controller may retry.
        A newer run of a job (requeued: the same id, more restarts) whose older run is still alive
        cancels the older run and starts, in a thread of its own, once that has ended.
        """
        try:
            booked = self.table.add(job, node_index)
        except Exception:
            log.exception("job %d: launch failed", job.job_id)
            return
        if booked is None:
            return
        running, older = booked
        job = running.job
        if not older:
            self._start(running)
            return
        log.info("job %d: run %d waits for the end of run(s) %s", job.job_id, job.restarts,
                 ", ".join(str(r.job.restarts) for r in older))
        for earlier in older:
            self.launcher.cancel(earlier)
        threading.Thread(target=self._start_after, args=(running, older), daemon=True,
                         name=f"job{job.job_id}.{job.restarts}").start()

    def _start_after(self, running: RunningJob, older: list[RunningJob]) -> None:
        for earlier in older:
            while not earlier.settled.wait(60.0):
                log.warning("job %d: run %d still waits for run %d to end", running.job.job_id,
                            running.job.restarts, earlier.job.restarts)
        self._start(running)

    def _start(self, running: RunningJob) -> None:
        """Start the run (placeholder) ``running``: any failure ends it FAILED with the reason."""
        job = running.job
        try:
            if running.cancelled:  # killed, or the job cancelled, before it could start
                self.launcher.never_started(running)
                return
            self.gpus.follow(job)
            try:
                cgroup, cpus = self.placement.cgroup_for(job)
            except CgroupError as exc:  # no isolation promised is better than none given: fail the job
                self.launcher.fail(job, str(exc), running)
                return
            running.cgroup = cgroup  # removed when the run ends, however it ends
            try:  # undone by _ended, however the run ends
                gpu_setup = self.gpus.setup(job, key_of(running), (job.spec.uid, job.spec.gid)
                                            if self.launcher.as_root else None)
            except SetupError as exc:
                self.launcher.fail(job, str(exc), running)
                return
            # behind a device cgroup CUDA enumerates only the job's GPUs, so its ordinals start at 0
            isolated = cgroup is not None and cgroup.devices
            visible = list(range(len(job.gpu_indices))) if isolated else list(job.gpu_indices)
            env = job_environment(job, self.node.name, self.config.cluster_name, visible, gpu_setup,
                                  running.node_index, self.placement.whole_cpus)
            running.visible, running.gpu_setup = visible, gpu_setup  # its steps' environment
            self.launcher.start(job, env, cgroup, cpus, running)
        except Exception as exc:
            if running.end is None and not running.begun:
                log.exception("job %d: could not start", job.job_id)
                self.launcher.fail(job, describe(exc), running)
            else:
                log.exception("job %d: error after its start", job.job_id)
        finally:
            self.table.notify()

    def _begun(self, running: RunningJob) -> None:
        """The run's leader runs (perhaps a while after its launch: see Launcher.start)."""
        if running.proc is not None:
            self.gpus.session(running.job.job_id, running.proc.pid)  # start_new_session: pid == sid
        self.table.notify()  # its streams and steps may wait for it

    def run_of(self, job_id: int) -> RunningJob | None:
        """The job's run that is still going here, if any (sstat's, nodeagent/stepstats.py)."""
        return next(iter(self.table.live(job_id)), None)

    def set_time_limit(self, job_id: int, restarts: int, time_limit: int | None) -> None:
        """pscontrol update TimeLimit=: the run's new limit (seconds from its start; None: none). A
        change that comes before the run's launch is kept for it (the controller sent the launch
        first, but the two may cross); a run that has ended is left alone."""
        running = self.table.limit_for_later((job_id, restarts), time_limit)
        if running is not None:
            self.launcher.set_time_limit(running, time_limit)

    def suspend(self, job_id: int, restarts: int, resume: bool) -> None:
        """pscontrol suspend / resume of the run (job, restarts) here: its processes stopped or
        continued, its time limit paused meanwhile (Launcher.suspend); without a cgroup its steps'
        tasks, in sessions of their own, too. A run not here (ended, or its launch still to come) is
        left alone."""
        running = self.table.get((job_id, restarts))
        if running is None:
            return
        self.launcher.suspend(running, resume)
        if running.cgroup is None:
            for step in self.steps.of_run(running):
                step.signal(signal.SIGCONT if resume else signal.SIGSTOP)

    def signal(self, job_id: int, signum: int) -> None:
        """pscancel: signal the job's run; 0 cancels it (and any older run still ending). A
        negative signal relinquishes an allocation (psalloc's end, see SignalRequest): its run ends
        COMPLETED, or FAILED with exit code ``-signum - 1`` when that is not 0."""
        with self.table.lock:
            newest = self.table.newest.get(job_id)
        live = self.table.live(job_id)
        if newest is None:
            return
        if signum < 0:
            self.launcher.relinquish(newest, min(-signum - 1, 255))
        elif signum == 0:
            for running in live:
                self.launcher.cancel(running)
        else:
            self.launcher.signal(newest, signum)
            if newest.cgroup is None:  # its steps' tasks are in sessions of their own
                for step in self.steps.of_run(newest):
                    self.steps.signal(step.job_id, step.step_id, signum)

    # -- steps -------------------------------------------------------------------------------

    def launch_step(self, launch: StepLaunch, wait: float = START_WAIT) -> None:
        """Start a step's tasks on this node in its job's run (job_id, restarts); StepRefused when
        the agent does not run that run or it has ended. A run launched but still starting is
        waited for (``wait`` seconds at most), one not heard of LAUNCH_GRACE seconds."""
        key = (launch.job_id, launch.restarts)
        begun = time.monotonic()
        with self.table.changed:
            while True:
                running = self.table.get(key)
                if running is not None and (running.begun or running.end is not None):
                    break
                left = begun + (wait if running is not None else min(wait, LAUNCH_GRACE)) - time.monotonic()
                if left <= 0:
                    break
                self.table.changed.wait(min(left, 0.2))
        where = f"job {launch.job_id} (run {launch.restarts})"
        if running is None:
            raise StepRefused(f"{where} does not run on node {self.node.name}")
        if running.end is not None or running.cancelled or running.exited or not running.begun:
            raise StepRefused(f"{where} is not running on node {self.node.name}: "
                              "Job/step already completing or completed")
        job = running.job
        base = replace(job, spec=replace(job.spec, environment=dict(launch.environment)))
        job_env = job_environment(base, self.node.name, self.config.cluster_name,
                                  running.visible or list(job.gpu_indices), running.gpu_setup, running.node_index)
        self.steps.launch(running, launch, job_env)
        self.table.notify()  # a stream may wait for it

    def signal_step(self, job_id: int, step_id: int, signum: int) -> None:
        """SignalStep: 0 cancels the step (SIGTERM, KillWait, SIGKILL), else ``signum`` to its tasks;
        the batch step (scancel -b): ``signum`` to the batch shell's process group, not to the steps."""
        if step_id == BATCH_STEP:
            running = self.jobs.get(job_id)
            if running is not None and signum > 0:
                self.launcher.signal_batch(running, signum)
            return
        self.steps.signal(job_id, step_id, signum)

    def stop(self, grace: float = 10.0) -> None:
        """End the jobs this agent runs (pslurm down leaves nothing behind), report them, stop."""
        active = self.table.live()
        for running in active:
            self.launcher.cancel(running)
        deadline = time.time() + grace
        while time.time() < deadline and any(r.end is None for r in active):
            time.sleep(0.05)
        self.ends.report()
        self._stop.set()
        self.placement.close()
        self.gpus.close()

