"""The agent's behaviour: register, heartbeat, launch and end jobs, report to the controller.
Its gRPC face (launches, signals, psrun's streams) is in ``servicer.py``."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

import grpc

from pslurm.auth.transport import Metadata
from pslurm.core.config import CgroupConfig, ClusterConfig, NodeConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.steplaunch import StepLaunch
from pslurm.core.steps import BATCH_STEP, StepResult, step_name
from pslurm.nodeagent.cgroupnode import NodeCgroups
from pslurm.nodeagent.cgroups import CgroupError, JobCgroup
from pslurm.nodeagent.controllers import controller_stub
from pslurm.nodeagent.cpus import affinity_for, pick_cpus
from pslurm.nodeagent.environment import job_environment, node_counts
from pslurm.nodeagent.gpumon import GpuMeter, JobGpuUsage, SliceOverrun, UsageTracker
from pslurm.nodeagent.gpus import GpuDevice
from pslurm.nodeagent.launcher import Launcher, RunningJob
from pslurm.nodeagent.runs import RunRecords, kill_leftovers
from pslurm.nodeagent.shares import GpuSharing, SetupError, memory_slice, overrun_comment, overrun_note
from pslurm.nodeagent.stepd import StepSupervisor, describe
from pslurm.nodeagent.steps import JobStep, Steps
from pslurm.proto import convert
from pslurm.proto import pslurm_pb2 as pb

log = logging.getLogger("psd")

KEEP_ENDED = 300.0  # seconds an ended job's record (and psrun output) is kept for late readers
# psrun's streams (StreamOutput, SendInput): how long one waits for its job, and what it may hold
LAUNCH_GRACE = 2.0  # seconds a stream waits for the launch of a job this agent has not heard of
START_WAIT = 30.0  # seconds it waits for a launched job to start
LAUNCH_WAITS = 16  # streams of users (not operators) that may wait for a launch at once, all users together
LAUNCH_WAITS_PER_USER = 4  # ... and of one user
FIRST_INPUT_WAIT = 10.0  # seconds SendInput may take to send the chunk that names its job
INPUT_LINGER = 5.0  # seconds an input stream may stay open after its job ended (psrun closes it sooner)
USAGE_INTERVAL = 1.0  # seconds between GPU usage samples of running jobs (and checks of their memory slices)
MAX_ENDS_PER_CALL = 1000  # ends in one JobsEnded call (after an outage many may wait)
EARLY_LIMITS = 256  # time limit changes kept for runs whose launch has not come yet

RunKey = tuple[int, int]  # (job_id, restarts): one run of a job; a requeued job runs again with restarts + 1


def _key(running: RunningJob) -> RunKey:
    return running.job.job_id, running.job.restarts


class JobNotHere(LookupError):
    """No psrun job of that id runs on this node (a stream's NOT_FOUND)."""


class StepRefused(Exception):
    """A step that cannot start here: its job's run is not (or no longer) running on this node."""


class Agent:
    """One node's agent.

    ``monitor`` is given when the inventory came from NVML: the agent then reports GPU health
    with every heartbeat and samples its jobs' GPU usage. Without it, GPUs with a gres.conf
    ``Memory=`` are simulated (:mod:`pslurm.nodeagent.simgpu`) and their meter is the monitor;
    with neither only GPU-seconds are known.
    """

    def __init__(self, config: ClusterConfig, node: NodeConfig, devices: list[GpuDevice],
                 cgroup_conf: CgroupConfig, drain_reason: str | None = None,
                 monitor: GpuMeter | None = None, credentials: Callable[[], Metadata] = lambda: ()) -> None:
        self.config = config
        self.node = node
        self.devices = devices
        self.drain_reason = drain_reason or ""
        spool = os.path.join(config.spool_dir, node.name)
        self.sharing = GpuSharing(devices, spool, monitor)  # MPS daemons, simulated GPUs
        self.monitor: GpuMeter | None = monitor if monitor is not None else self.sharing.simulated
        self.usage = UsageTracker(self.monitor)
        self.cgroup_conf = cgroup_conf
        # every job gets a cgroup when the agent can make one; cgroup.conf decides its limits
        self.cgroups = NodeCgroups.setup(cgroup_conf, config.cluster_name, node.name)
        self.isolation = "none: ConstrainDevices=no"  # reported at registration: pscontrol's DeviceIsolation
        if self.cgroups is not None:
            self.isolation = self.cgroups.isolation
        elif cgroup_conf.constrain_devices:
            self.isolation = ("none: CgroupPlugin=disabled" if cgroup_conf.plugin == "disabled" else
                              f"none: device cgroups need root (the agent runs as uid {os.geteuid()})"
                              if os.geteuid() != 0 else "none: no usable cgroup hierarchy")
        if cgroup_conf.constrain_devices and self.isolation.startswith("none"):
            log.warning("ConstrainDevices=yes but jobs will not be isolated: %s", self.isolation[len("none: "):])
        self._run_cpus: dict[RunKey, frozenset[int]] = {}  # ConstrainCores: the CPUs each run was given
        self.records = RunRecords(os.path.join(spool, "runs"))  # the runs started and not acknowledged ended
        self.launcher = Launcher(node.name, config.cluster_name, spool, config.kill_wait, self._ended,
                                 records=self.records)
        self.steps = Steps(node.name, config.kill_wait, self.launcher.reap_timeout, self.launcher.as_root,
                           self.launcher.spawn_lock, self._step_ended, records=self.records)
        # a run that begins to end ends its steps first: CANCELLED, reported before the run's end
        self.launcher.on_ending = lambda running: self.steps.job_ending(running, running.exited)
        self.launcher.on_begin = self._begun
        self.jobs: dict[int, RunningJob] = {}  # the newest run of each job (signals, psrun's streams)
        self._runs: dict[RunKey, RunningJob] = {}  # every run, until its end is reported and it is forgotten
        self._runs_of: dict[int, set[RunKey]] = {}  # job id -> its keys in _runs (a node keeps thousands of runs)
        self._whole = {name: n.cpus for name, n in config.nodes.items()}  # each node's CPUs (see _whole_cpus)
        # time limits changed for runs not launched here yet (the change overtook the launch), a few kept
        self._early_limits: dict[RunKey, int | None] = {}
        self._unreported: dict[RunKey, RunningJob] = {}  # ended runs the controller has not acknowledged
        self._reporting = False  # a thread is sending the unreported ends
        self._batch_ends = True  # JobsEnded; False once the controller says it has no such call
        self._lock = threading.Lock()
        self._launched = threading.Condition(self._lock)  # psrun may ask for output before the launch
        self._stop = threading.Event()
        self.heartbeat_interval = 2.0
        self.controller = controller_stub(config)  # the active one of the SlurmctldHost= lines
        self._credentials = credentials  # gRPC metadata with a fresh credential, for each call

    def recover(self) -> None:
        """Kill what runs a previous agent on this node left behind (its run records), then forget
        them: call before serving, so that the controller, finding this agent without those runs,
        may run their jobs again with nothing of the old run alive. Their MPS daemons and simulated
        GPU directories go too."""
        for record, _, _ in kill_leftovers(self.records, self.launcher.reap_timeout):
            self.launcher.remove_script(record.job_id)
        self.sharing.recover()
        if self.cgroups is None:
            return
        # job cgroups under this node's path that no live run owns: a previous agent's, even those
        # whose records were lost (their processes may have left the session the record names)
        with self._lock:
            live = {d for r in self._runs.values() if r.cgroup is not None and r.end is None for d in r.cgroup.dirs}
        for cgroup in self.cgroups.leftovers(keep=live):
            found = len(cgroup.pids())
            left = cgroup.kill_all(self.launcher.reap_timeout)
            if left:
                log.error("leftover cgroup %s: %d process(es) survived SIGKILL: %s", cgroup.path, len(left), left)
            elif not cgroup.remove(timeout=1.0):
                log.error("leftover cgroup %s could not be removed", cgroup.path)
            else:
                log.warning("removed leftover cgroup %s%s", cgroup.path,
                            f" and killed its {found} process(es)" if found else "")

    # -- controller side -------------------------------------------------------------------

    def register(self) -> None:
        """Register until the controller answers (it may start after us)."""
        delay = 0.05
        while not self._stop.is_set():
            try:
                reply = self.controller.RegisterNode(pb.RegisterRequest(
                    name=self.node.name, addr=self.node.addr, port=self.node.port, cpus=self.node.cpus,
                    real_memory=self.node.real_memory, gpus=[_gpu_pb(d) for d in self.devices],
                    runs=self.runs(), drain_reason=self.drain_reason,
                    isolation=self.isolation,
                ), timeout=5, metadata=self._credentials())
            except grpc.RpcError as exc:
                log.info("controller not reachable yet (%s), retrying",
                         exc.code() if isinstance(exc, grpc.Call) else exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)
                continue
            self.heartbeat_interval = reply.heartbeat_interval or 2.0
            self._kill(reply.kill)
            log.info("registered %s with %d GPUs", self.node.name, len(self.devices))
            return

    def heartbeat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_interval):
            self.beat()

    def beat(self) -> None:
        """One heartbeat: report ends, send health and running jobs, act on the reply."""
        self._report_ends()
        health = self.check_health()
        sent_at = time.time()  # before the runs are listed: a run launched after it may be missing
        try:
            reply = self.controller.Heartbeat(pb.HeartbeatRequest(
                name=self.node.name, runs=self.runs(), health_reason=health or "", gpu_use=self.gpu_use(),
                steps=[pb.StepRef(job_id=j, step_id=s) for j, s in self.steps.refs()], sent_at=sent_at), timeout=5,
                metadata=self._credentials())
        except grpc.RpcError:
            return
        if health and self.monitor is not None:
            self.monitor.forget_events()  # the controller has the drain: an operator's RESUME now holds
        if reply.reregister:
            self.register()
        self._kill(reply.kill)
        self._forget_old()
        self.steps.forget_old(KEEP_ENDED)

    def check_health(self) -> str | None:
        """The node's GPU health as a one-line drain reason, None when healthy or not watched."""
        if self.monitor is None:
            return None
        try:
            reason = self.monitor.health()
        except Exception as exc:  # NVML gone or failing: that is itself the node's problem
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            reason = f"GPU health check failed: {first}"
        if reason:
            log.warning("GPU health: %s", reason)
        return reason

    def gpu_use(self) -> list[pb.GpuUse]:
        """What each GPU of the node has in use now, from the monitor (none without one, or when
        it cannot be read: the health check reports that)."""
        if self.monitor is None:
            return []
        try:
            samples = self.monitor.sample([d.index for d in self.devices])
        except Exception as exc:
            log.debug("GPU use for the heartbeat: %s", exc)
            return []
        return [pb.GpuUse(index=i, memory_used_mb=mb, util=util) for i, (util, mb) in sorted(samples.items())]

    def usage_loop(self, interval: float = USAGE_INTERVAL) -> None:
        """Sample running jobs' GPUs every ``interval`` seconds until stopped (only started with a
        monitor), and end the jobs that use more than their slice of GPU memory."""
        while not self._stop.wait(interval):
            try:
                overruns = self.usage.sample_all()
            except Exception as exc:  # a failing sample must not end sampling; health reports NVML
                log.debug("GPU usage sample failed: %s", exc)
                continue
            for over in overruns:
                self._end_overrun(over)

    def _end_overrun(self, over: SliceOverrun) -> None:
        """End the job that used more than its GPU memory slice: OUT_OF_MEMORY, with the reason."""
        with self._lock:
            running = self.jobs.get(over.job_id)
        if running is None or running.end is not None:
            return
        if self.launcher.end_overrun(running, overrun_note(running.job, over, step_name(running.step_id)),
                                     overrun_comment(over)):
            log.warning("job %d: %s", over.job_id, overrun_comment(over))

    def runs(self) -> list[pb.JobRun]:
        """What this agent runs (or is about to start), or ran and has not had the end of
        acknowledged: every heartbeat says it."""
        with self._lock:  # an ended run is unsettled until its end is queued for the controller (_ended)
            return [pb.JobRun(job_id=k[0], restarts=k[1]) for k, r in sorted(self._runs.items())
                    if r.end is None or not r.settled.is_set() or k in self._unreported]

    def _ended(self, running: RunningJob) -> None:
        end = running.end
        assert end is not None
        try:  # its MPS daemon may quit, its simulated GPU's directory goes
            self.sharing.teardown(running.job, _key(running))
        except Exception:  # the end is reported all the same
            log.exception("job %d: GPU sharing teardown failed", running.job.job_id)
        try:
            running.usage = self.usage.end(running.job.job_id, len(running.job.gpu_indices),
                                           end.end_time - running.started)
        except Exception as exc:  # the end is reported without usage rather than not at all
            log.warning("job %d: no usage: %s", running.job.job_id, exc)
        self.steps.wait_run(running, self.launcher.reap_timeout)  # its steps' ends go first
        with self._launched:
            self._unreported[_key(running)] = running
            self._launched.notify_all()
        running.settled.set()  # a newer run of the job waiting for this one may start
        self._report_ends()

    def _report_ends(self) -> None:
        """Report every unreported end, one thread at a time: an end is sent at once, in one call
        with whatever else ended meanwhile (JobsEnded), and a job that ends while another thread
        reports is sent by that thread in its next call. Ends stay unreported (and are sent again
        on the next heartbeat) until a call that carried them is answered."""
        with self._lock:
            if self._reporting:
                return
            self._reporting = True
        released = False
        try:
            while True:
                steps = self.steps.pending_ends(MAX_ENDS_PER_CALL)  # before the ends of their jobs
                if steps and not self._send_step_ends(steps):
                    return
                with self._lock:
                    pending = list(self._unreported.values())[:MAX_ENDS_PER_CALL]
                    if not pending and not self.steps.unreported:
                        released = True
                        self._reporting = False  # under the lock: a later end finds no reporter and reports
                        return
                if pending and not self._send_ends(pending):
                    return  # the controller is unreachable: the heartbeat loop tries again
        finally:
            if not released:
                with self._lock:
                    self._reporting = False

    def _step_ended(self, step: JobStep) -> None:
        self._report_ends()

    def _send_step_ends(self, steps: list[JobStep]) -> bool:
        """Send these step ends in one call (StepsEnded); True once the controller has them. A
        controller without the call has no steps to end: the ends are dropped."""
        ends = [self._step_end_pb(step) for step in steps]
        try:
            self.controller.StepsEnded(pb.StepsEndedRequest(node=self.node.name, ends=ends), timeout=5,
                                       metadata=self._credentials())
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code is not grpc.StatusCode.UNIMPLEMENTED:
                log.warning("could not report the end of %s: %s; will retry",
                            ", ".join(f"step {e.job_id}.{e.step_id}" for e in ends), code or exc)
                return False
            log.warning("the controller has no StepsEnded: dropping the ends of %d step(s)", len(ends))
        self.steps.acknowledged([(e.job_id, e.step_id) for e in ends])
        return True

    def _step_end_pb(self, step: JobStep) -> pb.StepEnded:
        end = step.end
        assert end is not None
        return pb.StepEnded(job_id=step.job_id, step_id=step.step_id, node=self.node.name,
                            state=convert.job_state_to_pb(end.state), exit_code=end.exit_code,
                            exit_signal=end.exit_signal, end_time=end.end_time)

    def _send_ends(self, ended: list[RunningJob]) -> bool:
        """Send these ends in one call; True (and no longer unreported) once the controller has them."""
        ends = [self._end_pb(running) for running in ended]
        try:
            if self._batch_ends:
                self.controller.JobsEnded(pb.JobsEndedRequest(node=self.node.name, ends=ends), timeout=5,
                                          metadata=self._credentials())
            else:
                for end in ends:
                    self.controller.JobEnded(end, timeout=5, metadata=self._credentials())
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if self._batch_ends and code is grpc.StatusCode.UNIMPLEMENTED:  # a controller from before JobsEnded
                self._batch_ends = False
                return self._send_ends(ended)
            log.warning("could not report the end of %s: %s; will retry",
                        ", ".join(f"job {e.job_id} (run {e.restarts})" for e in ends), code or exc)
            return False
        with self._lock:
            for end in ends:
                self._unreported.pop((end.job_id, end.restarts), None)
        for end in ends:
            self.records.remove(end.job_id, end.restarts)  # acknowledged: a restarted agent has nothing to look for
        return True

    def _end_pb(self, running: RunningJob) -> pb.JobEndedRequest:
        end = running.end
        assert end is not None
        job_id, restarts = _key(running)
        return pb.JobEndedRequest(
            job_id=job_id, node=self.node.name, state=convert.job_state_to_pb(end.state), restarts=restarts,
            exit_code=end.exit_code, exit_signal=end.exit_signal, end_time=end.end_time,
            usage=_usage_pb(running.usage, running.max_rss_bytes, running.cpu_times),
            launch_failure=running.launch_failure,
            comment=running.overrun,
        )

    def _forget_old(self) -> None:
        """Forget reported runs: a job's newest run after KEEP_ENDED (psrun may still read it), an
        older run at once."""
        now = time.time()
        with self._lock:
            for key, running in list(self._runs.items()):
                if running.end is None or key in self._unreported:
                    continue
                newest = self.jobs.get(key[0]) is running
                if newest and now - running.end.end_time <= KEEP_ENDED:
                    continue
                del self._runs[key]
                self._forget_run_of(key)
                if newest:
                    del self.jobs[key[0]]

    def _kill(self, runs: Iterable[pb.JobRun]) -> None:
        """End the runs the controller has ended (that run only: a newer run of the job goes on)."""
        for run in runs:
            with self._lock:
                running = self._runs.get((run.job_id, run.restarts))
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
            with self._lock:
                newest = self.jobs.get(job.job_id)
                if newest is not None and newest.job.restarts >= job.restarts:
                    return
                if (job.job_id, job.restarts) in self._early_limits:
                    job.time_limit = self._early_limits.pop((job.job_id, job.restarts))
                if node_index > 0:
                    job = replace(job, spec=replace(job.spec, allocation=True))
                running = RunningJob(job, node_index=node_index)
                runs_of_job = self._runs_of.setdefault(job.job_id, set())
                older = [r for k in runs_of_job if not (r := self._runs[k]).settled.is_set()]
                self.jobs[job.job_id] = running
                self._runs[_key(running)] = running
                runs_of_job.add(_key(running))
        except Exception:
            log.exception("job %d: launch failed", job.job_id)
            return
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
            self.usage.begin(job.job_id, job.gpu_indices, memory_slice(job))
            try:
                cgroup, cpus = self._cgroup_for(job)
            except CgroupError as exc:  # no isolation promised is better than none given: fail the job
                self.launcher.fail(job, str(exc), running)
                return
            running.cgroup = cgroup  # removed when the run ends, however it ends
            try:  # undone by _ended, however the run ends
                gpu_setup = self.sharing.setup(job, _key(running), (job.spec.uid, job.spec.gid)
                                               if self.launcher.as_root else None)
            except SetupError as exc:
                self.launcher.fail(job, str(exc), running)
                return
            # behind a device cgroup CUDA enumerates only the job's GPUs, so its ordinals start at 0
            isolated = cgroup is not None and cgroup.devices
            visible = list(range(len(job.gpu_indices))) if isolated else list(job.gpu_indices)
            env = job_environment(job, self.node.name, self.config.cluster_name, visible, gpu_setup,
                                  running.node_index, self._whole_cpus())
            running.visible, running.gpu_setup = visible, gpu_setup  # its steps' environment
            self.launcher.start(job, env, cgroup, cpus, running)
        except Exception as exc:
            if running.end is None and not running.begun:
                log.exception("job %d: could not start", job.job_id)
                self.launcher.fail(job, describe(exc), running)
            else:
                log.exception("job %d: error after its start", job.job_id)
        finally:
            with self._launched:
                self._launched.notify_all()

    def _begun(self, running: RunningJob) -> None:
        """The run's leader runs (perhaps a while after its launch: see Launcher.start)."""
        if running.proc is not None:
            self.usage.set_session(running.job.job_id, running.proc.pid)  # start_new_session: pid == sid
        with self._launched:
            self._launched.notify_all()  # its streams and steps may wait for it

    def _whole_cpus(self) -> dict[str, int]:
        """Each node's configured CPUs: an --exclusive job's CPUs there."""
        return self._whole

    def _forget_run_of(self, key: RunKey) -> None:
        keys = self._runs_of.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._runs_of[key[0]]

    def _cgroup_for(self, job: JobRecord) -> tuple[JobCgroup | None, set[int] | None]:
        """The run's cgroup (None where the agent cannot make cgroups) and the CPUs to pin it to
        with sched_setaffinity (None: its cpuset does, or nothing to pin). ConstrainCores=yes: the
        job's ``cpus`` CPUs, those near its GPUs and unused by other runs first, as its cpuset
        (affinity where there is no cpuset); otherwise affinity to its GPUs' cores, if known."""
        near = affinity_for(self.devices, job.gpu_indices) if job.gpu_indices else None
        cpus: set[int] | None = near
        if self.cgroup_conf.constrain_cores:
            with self._lock:  # forget the CPUs of runs that ended
                self._run_cpus = {k: c for k, c in self._run_cpus.items()
                                  if (r := self._runs.get(k)) is not None and r.end is None}
                run = self._runs.get((job.job_id, job.restarts))
                _, per_node = node_counts(job, self._whole_cpus())  # this node's share (an exclusive job: all)
                here = per_node[min(run.node_index if run is not None else 0, len(per_node) - 1)]
                picked = pick_cpus(here, os.sched_getaffinity(0), near or (), self._run_cpus.values())
                self._run_cpus[(job.job_id, job.restarts)] = picked
            cpus = set(picked)
        if self.cgroups is None:
            return None, cpus
        by_index = {d.index: d for d in self.devices}
        minors = [m for i in job.gpu_indices
                  if (m := by_index[i].minor if i in by_index else None) is not None]
        cgroup = self.cgroups.create(job.job_id, minors, mem_mb=job.spec.mem_mb,
                                     cpus=cpus if self.cgroup_conf.constrain_cores else None)
        return cgroup, None if cgroup.cpus else cpus

    def run_of(self, job_id: int) -> RunningJob | None:
        """The job's run that is still going here, if any (sstat's, nodeagent/stepstats.py)."""
        with self._lock:
            return next((r for k, r in self._runs.items() if k[0] == job_id and r.end is None), None)

    def set_time_limit(self, job_id: int, restarts: int, time_limit: int | None) -> None:
        """pscontrol update TimeLimit=: the run's new limit (seconds from its start; None: none). A
        change that comes before the run's launch is kept for it (the controller sent the launch
        first, but the two may cross); a run that has ended is left alone."""
        key = (job_id, restarts)
        with self._lock:
            running = self._runs.get(key)
            if running is None:
                self._early_limits[key] = time_limit
                while len(self._early_limits) > EARLY_LIMITS:  # those of launches that never came
                    del self._early_limits[next(iter(self._early_limits))]
                return
        self.launcher.set_time_limit(running, time_limit)

    def suspend(self, job_id: int, restarts: int, resume: bool) -> None:
        """pscontrol suspend / resume of the run (job, restarts) here: its processes stopped or
        continued, its time limit paused meanwhile (Launcher.suspend); without a cgroup its steps'
        tasks, in sessions of their own, too. A run not here (ended, or its launch still to come) is
        left alone."""
        with self._lock:
            running = self._runs.get((job_id, restarts))
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
        with self._lock:
            newest = self.jobs.get(job_id)
            live = [r for k, r in self._runs.items() if k[0] == job_id and r.end is None]
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
        with self._launched:
            while True:
                running = self._runs.get(key)
                if running is not None and (running.begun or running.end is not None):
                    break
                left = begun + (wait if running is not None else min(wait, LAUNCH_GRACE)) - time.monotonic()
                if left <= 0:
                    break
                self._launched.wait(min(left, 0.2))
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
        with self._launched:
            self._launched.notify_all()  # a stream may wait for it

    def signal_step(self, job_id: int, step_id: int, signum: int) -> None:
        """SignalStep: 0 cancels the step (SIGTERM, KillWait, SIGKILL), else ``signum`` to its tasks;
        the batch step (scancel -b): ``signum`` to the batch shell's process group, not to the steps."""
        if step_id == BATCH_STEP:
            running = self.jobs.get(job_id)
            if running is not None and signum > 0:
                self.launcher.signal_batch(running, signum)
            return
        self.steps.signal(job_id, step_id, signum)

    # -- psrun's streams: one path for every step ---------------------------------------------

    def step(self, job_id: int, step_id: int, allowed: Callable[[JobSpec], bool],
             active: Callable[[], bool] = lambda: True, grace: float = LAUNCH_GRACE) -> StepSupervisor:
        """The step a stream of psrun names: the run's own (a psrun job's command, step 0) or a
        step psrun started in the job. Who may is checked first, as soon as the job is known here
        (PermissionError unless ``allowed``: the job's owner, or an operator), then the step is
        waited for: a job this agent has not heard of ``grace`` seconds only (a stream for a job that
        never comes holds a thread that long, not half a minute), a step of a job it runs until it
        has started (START_WAIT at most); both end early when the caller goes (``active``).
        JobNotHere when there is no such step."""
        begun = time.monotonic()
        step: StepSupervisor | None = None
        with self._launched:
            while True:
                running = self.jobs.get(job_id)
                if running is not None and not allowed(running.job.spec):
                    raise PermissionError(f"Access/permission denied: job {job_id} is not yours")
                step = self._find_step(running, job_id, step_id)
                if step is not None or not active():
                    break
                left = begun + (START_WAIT if running is not None and running.end is None else grace) - time.monotonic()
                if left <= 0:
                    break
                self._launched.wait(min(left, 0.2))
        if step is None:
            where = f"{job_id}.{step_name(step_id)} on node {self.node.name}"
            raise JobNotHere(f"Invalid job id specified: no step {where}")
        return step

    def _find_step(self, running: RunningJob | None, job_id: int, step_id: int) -> StepSupervisor | None:
        if running is not None and running.step_id == step_id:
            own = running.step
            return own if own is not None and (running.begun or running.end is not None) else None
        return self.steps.get(job_id, step_id)

    def output(self, job_id: int, step_id: int, may_read: Callable[[JobSpec], bool],
               active: Callable[[], bool] = lambda: True, grace: float = LAUNCH_GRACE,
               opened: Callable[[StepSupervisor], None] = lambda step: None,
               ) -> Iterator[tuple[bytes, bytes, StepResult | None]]:
        """psrun's stream of a step: its output as it comes (bounded chunks; see StepOutput), then
        its end; it stops within a second of the caller going (``active`` false). ``opened`` is told
        the step once found. JobNotHere, PermissionError, ``grace``: see :meth:`step`."""
        step = self.step(job_id, step_id, may_read, active, grace)
        opened(step)
        yield from step.follow(self._stop, active)

    def input(self, job_id: int, step_id: int, chunks: Iterator[bytes], may_write: Callable[[JobSpec], bool],
              opened: Callable[[StepSupervisor], None] = lambda step: None, grace: float = LAUNCH_GRACE) -> None:
        """psrun's stdin for the step's task 0 (its pty with ``--pty``): the chunks, then EOF."""
        step = self.step(job_id, step_id, may_write, lambda: True, grace)
        opened(step)
        step.write_input(chunks)

    def stop(self, grace: float = 10.0) -> None:
        """End the jobs this agent runs (pslurm down leaves nothing behind), report them, stop."""
        with self._lock:
            active = [r for r in self._runs.values() if r.end is None]
        for running in active:
            self.launcher.cancel(running)
        deadline = time.time() + grace
        while time.time() < deadline and any(r.end is None for r in active):
            time.sleep(0.05)
        self._report_ends()
        self._stop.set()
        if self.cgroups is not None:
            self.cgroups.remove_parents()
        if self.monitor is not None:
            self.monitor.close()


def _usage_pb(usage: JobGpuUsage | None, max_rss_bytes: int | None = None,
              cpu_times: tuple[float, float, float] | None = None) -> pb.JobUsage | None:
    """A run's usage for its end: the GPU measures (jobs with GPUs), its MaxRSS (jobs with a memory
    cgroup) and its CPU time (jobs with a cgroup); None when there is none of them."""
    if usage is None and max_rss_bytes is None and cpu_times is None:
        return None
    msg = pb.JobUsage()
    if usage is not None:
        msg.gpu_count, msg.gpu_seconds = usage.gpu_count, usage.gpu_seconds
        if usage.peak_gpu_memory_mb is not None:
            msg.peak_gpu_memory_mb = usage.peak_gpu_memory_mb
        if usage.mean_gpu_util is not None:
            msg.mean_gpu_util = usage.mean_gpu_util
    if max_rss_bytes is not None:
        msg.max_rss_kb = max_rss_bytes // 1024
    if cpu_times is not None:  # in all, user, system
        msg.total_cpu_usec, msg.user_cpu_usec, msg.system_cpu_usec = (int(t * 1e6) for t in cpu_times)
    return msg


def _gpu_pb(d: GpuDevice) -> pb.GpuInfo:
    return pb.GpuInfo(index=d.index, name=d.name, type=d.type or "", file=d.file or "",
                      minor=-1 if d.minor is None else d.minor, uuid=d.uuid or "", memory_mb=d.memory_mb or 0,
                      cores=list(d.cores or ()), shards=d.shards, mps=d.mps)
