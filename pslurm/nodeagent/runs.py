"""A run's processes, in /proc and on disk.

Each job runs in a session of its own and, when the agent can make one (as root), in a cgroup of
its own. The cgroup is the reliable account: a process that leaves the job's session and process
group (``setsid``) is still in it, and ``cgroup.kill`` ends all of them at once. Without one, the
job's processes are those whose process group or session is the leader's pid (the pgid). Linux does not
hand a pid out again while any process still uses it as a process group or session id, so while
one of them lives the number stands for that run alone; the leader's start time (``/proc/<pid>/stat``
field 22) tells a later, unrelated session that reuses the number once they are all gone.

The agent keeps a record of every run it started (``<spool>/runs/<job>.<restarts>.json``) until
the controller has acknowledged the run's end, so that an agent that restarts can kill what a
previous agent left running before it registers (the controller then requeues or fails those jobs
knowing that nothing of their old run is still alive).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass

from pslurm.nodeagent.cgroups import JobCgroup

log = logging.getLogger("psd")

POLL_MAX = 0.2  # seconds between looks at processes that are slow to die


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    state: str  # R, S, D, Z, ...
    pgrp: int
    session: int
    start_ticks: int  # clock ticks after boot the process was forked: field 22 of /proc/<pid>/stat


def parse_stat(pid: int, text: str) -> ProcInfo | None:
    """One /proc/<pid>/stat line (the command name may hold spaces and parentheses)."""
    try:
        fields = text[text.rindex(")") + 2:].split()
        return ProcInfo(pid, fields[0], int(fields[2]), int(fields[3]), int(fields[19]))
    except (ValueError, IndexError):
        return None


def proc_info(pid: int, proc: str = "/proc") -> ProcInfo | None:
    """Process ``pid`` now, None when there is none."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            return parse_stat(pid, f.read())
    except (OSError, ValueError):
        return None


def processes(proc: str = "/proc") -> Iterator[ProcInfo]:
    """Every process on the machine (one read of each /proc/<pid>/stat)."""
    try:
        names = os.listdir(proc)
    except OSError:
        return
    for name in names:
        if name.isdigit() and (info := proc_info(int(name), proc)) is not None:
            yield info


def start_ticks(pid: int) -> int | None:
    info = proc_info(pid)
    return None if info is None else info.start_ticks


def boot_id() -> str:
    """This boot's id: a record from before a reboot names processes that are long gone."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class Group:
    """A run's processes: its session/process group ``pgid``, started no earlier than ``since``
    (the leader's start ticks; None: unknown), and every process in its cgroup where it has one."""

    pgid: int
    since: int | None = None
    cgroup: JobCgroup | None = None


def members(groups: Iterable[Group]) -> dict[int, list[int]]:
    """The live processes of each group, by pgid (one scan of /proc for all of them). Zombies are
    not counted: they hold nothing any more, and their reaping is their parent's business."""
    wanted = {g.pgid: g for g in groups}
    found: dict[int, list[int]] = {pgid: [] for pgid in wanted}
    me = os.getpid()
    for p in processes():
        if p.state in "ZXx" or p.pid == me:
            continue
        for pgid in {p.pgrp, p.session} & wanted.keys():
            since = wanted[pgid].since
            if since is None or p.start_ticks >= since:  # older ones came before the run: not its own
                found[pgid].append(p.pid)
                break
    for pgid, g in wanted.items():
        if g.cgroup is not None:
            live = [pid for pid in g.cgroup.pids() if (info := proc_info(pid)) is not None and info.state not in "ZXx"]
            found[pgid] = sorted(set(found[pgid]) | set(live))
    return found


def surely_gone(group: Group) -> bool:
    """Nothing of the group is left, known without a scan of /proc: it has a cgroup, which every
    process of its session stays in (only root may move a process out), and neither that cgroup
    nor its process group has a live member. A job's end is the common case: a scan of /proc per
    end was the largest cost of an agent running short jobs."""
    if group.cgroup is None or group.cgroup.pids():
        return False
    try:
        os.killpg(group.pgid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False  # a member (perhaps a zombie not reaped yet): look closer


def kill_groups(groups: Iterable[Group], timeout: float) -> dict[int, list[int]]:
    """SIGKILL every process of the groups, again and again, until none is left or ``timeout``
    seconds have passed; the processes still there then, by pgid (none: all gone). A group with a
    cgroup is killed through it (``JobCgroup.kill``: no fork escapes), its session and process
    group as well. The common case, nothing left, costs one scan of /proc, or none for a group
    whose cgroup and process group are empty (see :func:`surely_gone`)."""
    pending = [g for g in groups if not surely_gone(g)]
    if not pending:
        return {}
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        left = {pgid: pids for pgid, pids in members(pending).items() if pids}
        if not left or time.monotonic() >= deadline:
            return left
        pending = [g for g in pending if g.pgid in left]
        for g in pending:
            if g.cgroup is not None:
                g.cgroup.kill()
        for pgid, pids in left.items():
            kill_pgid(pgid, signal.SIGKILL)
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, POLL_MAX)


def kill_pgid(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class RunRecord:
    """What a restarted agent needs to find a run's processes again."""

    job_id: int
    restarts: int
    pgid: int
    start_ticks: int | None  # the leader's (None: it was gone before it could be read)
    boot_id: str = ""
    cgroup: str = ""  # the run's cgroup directory ("" when it has none): v2's, else the v1 freezer's
    started: float = 0.0
    step: str = ""  # a step's task ("<step id>.<rank>": its own session, in the job's cgroup); "" the run's leader

    def group(self) -> Group:
        return Group(self.pgid, self.start_ticks, JobCgroup(self.cgroup) if self.cgroup else None)


class RunRecords:
    """The records of the runs an agent started and has not had the end of acknowledged."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def path(self, job_id: int, restarts: int, step: str = "") -> str:
        return os.path.join(self.directory, f"{job_id}.{restarts}{'.' + step if step else ''}.json")

    def save(self, record: RunRecord) -> None:
        """Write the record atomically: an agent that dies meanwhile leaves no half-written file.
        (No fsync: a machine that crashes takes the run's processes with it.)"""
        os.makedirs(self.directory, exist_ok=True)
        path = self.path(record.job_id, record.restarts, record.step)
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(asdict(record), f)
        os.replace(tmp, path)

    def remove(self, job_id: int, restarts: int, step: str = "") -> None:
        try:
            os.remove(self.path(job_id, restarts, step))
        except FileNotFoundError:
            pass
        except OSError as exc:  # left behind: a restarted agent finds nothing of the run and forgets it
            log.warning("could not remove the record of job %d (run %d): %s", job_id, restarts, exc)

    def load(self) -> list[RunRecord]:
        """Every record there; a file that cannot be read as one is logged and deleted."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return []
        records = []
        for name in names:
            path = os.path.join(self.directory, name)
            if not name.endswith(".json"):  # a temporary file a crash left half written
                _remove(path)
                continue
            try:
                with open(path) as f:
                    data = json.load(f)
                ticks = data.get("start_ticks")
                records.append(RunRecord(
                    job_id=int(data["job_id"]), restarts=int(data["restarts"]), pgid=int(data["pgid"]),
                    start_ticks=None if ticks is None else int(ticks), boot_id=str(data.get("boot_id", "")),
                    cgroup=str(data.get("cgroup", "")), started=float(data.get("started", 0.0)),
                    step=str(data.get("step", ""))))
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("ignoring unreadable run record %s: %s", path, exc)
                _remove(path)
                continue
            if records[-1].pgid <= 1:
                log.warning("ignoring run record %s: no process group", path)
                records.pop()
                _remove(path)
        return records


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def kill_leftovers(records: RunRecords, timeout: float) -> list[tuple[RunRecord, int, list[int]]]:
    """Kill what the runs recorded by a previous agent left behind, then forget the records.

    A record from before a reboot, or whose process group number now belongs to a process started
    after its leader (reused once the run was gone), names nothing of the run: it is only forgotten.
    Returns, for each record, how many processes were found and those that survived ``timeout``.
    """
    loaded = records.load()
    boot = boot_id()
    targets = []
    for rec in loaded:
        leader = proc_info(rec.pgid)
        if rec.boot_id and boot and rec.boot_id != boot:
            continue
        if leader is not None and rec.start_ticks is not None and leader.start_ticks != rec.start_ticks:
            continue  # the number was reused: the run's own processes are all gone
        targets.append(rec)
    groups = [rec.group() for rec in targets]
    found = members(groups)
    left = kill_groups(groups, timeout) if any(found.values()) else {}
    result = []
    for rec in loaded:
        count = len(found.get(rec.pgid, [])) if rec in targets else 0
        survivors = left.get(rec.pgid, []) if rec in targets else []
        if survivors:
            log.error("job %d (run %d): %d process(es) of the previous agent's run survived SIGKILL: %s",
                      rec.job_id, rec.restarts, len(survivors), survivors)
        elif count:
            log.warning("job %d (run %d): killed %d process(es) the previous agent left running",
                        rec.job_id, rec.restarts, count)
        else:
            log.info("job %d (run %d): nothing of the previous agent's run is left", rec.job_id, rec.restarts)
        if rec.cgroup and rec in targets:
            JobCgroup(rec.cgroup).remove(timeout=0.5)
        records.remove(rec.job_id, rec.restarts, rec.step)
        result.append((rec, count, survivors))
    return result
