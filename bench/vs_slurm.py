"""pslurm against a real Slurm 22.05 on the same machine, in one run, with the ratio of each figure.

    python bench/vs_slurm.py [--quick] [--out FILE] [--tune lowlat|default|htc] [--acct dbd|none]
                             [--no-setup] [--runs N] [--keep]

What it starts
    Real Slurm with ``../shared/anchors/slurm/setup.sh`` (4 virtual nodes c[000-003] x 2 fake GPUs,
    8 CPUs each; idempotent: it restarts the daemons only when the knobs change the config). The
    knobs default to ``ACCT=dbd`` (slurmdbd + MariaDB: sacct works, and Slurm keeps a durable
    accounting record of every job as pslurm does in its store) and ``TUNE=lowlat`` (event-driven
    scheduling with no deferral or rate limit: Slurm's best submit-to-start and throughput on a
    small cluster, so pslurm is compared with Slurm at its best, not with its 60 s defaults). If the
    Slurm packages are missing they are apt-installed first. Beside it, a private pslurm cluster of the
    same shape (``pslurm up -N 4 -G 2 --cpus 8`` in a temporary state dir, ``pslurm down`` at the end).
    Slurm's commands are run by absolute path from /usr/bin, pslurm's from the venv's bin; the script
    checks that no port of one is a port of the other. Slurm is left running as found (nothing is
    drained or resumed); jobs the bench submitted and that are still queued on an error are cancelled.

What it measures
    1. Cold commands (a new process each run, wall from just before the start to the reaping, CPU
       from the kernel's accounting of the reaped child): Slurm's command, pslurm's, and a bare
       ``python -c pass`` of the interpreter that runs the ps* commands (the floor), in turn
       S P F S P F ... after one warm-up of each; the ratios pslurm/Slurm and pslurm/floor are taken
       run by run and their median reported. Commands: ``sbatch -o /dev/null --wrap true``,
       ``squeue``, ``scancel ID`` (of a held job submitted for that run, untimed), ``sacct -j ID``
       (a finished job; only with ACCT=dbd), ``scontrol show job ID`` (a held job), ``srun true``.
    2. Throughput, end to end: from just before the first submit to the last job's end as the
       scheduler records it (pslurm records sub-second times; Slurm whole seconds, so its end is taken
       as the middle of [End, End+1 s) clipped to when the bench first saw the queue empty, and the
       uncertainty is printed). Measures: N trivial jobs from a bash loop of ``sbatch``/``psbatch``;
       N one-GPU jobs the same way; N trivial jobs as fast as each can take them (Slurm: the bash
       loop of sbatch, its fastest client here; pslurm: one process submitting through
       ``pslurm.client``, connected before the clock starts; the CLI loop if that API fails); an array
       of N tasks from one ``--array=0-(N-1) --wrap true`` (end to end, and to the last task's start:
       "scheduled").
       While jobs run the bench waits in ``sleep``; it polls the queue only once the submits are done,
       and spaces the polls by at least 3x the poll's own cost (>= 0.1 s), so polling takes at most a
       quarter of one core.
    3. Batch submit-to-start: M jobs, alternating between the two, each ``--wrap 'date +%s.%N > F'``
       on an idle cluster; the figure is the time in F minus the moment the submit command started
       (what a user waits), and, a second row, minus the moment it returned (pslurm's can be negative:
       the job runs before psbatch has exited).

    ``--throughput-only`` measures part 2 alone; ``--accept-drained`` (with ``--no-setup``) measures a
    Slurm whose nodes are not all up (another bench's drain) as it is, with as many pslurm nodes as
    Slurm has up, and says so in the notes.

    Children run with PYTHONDONTWRITEBYTECODE unset, so the ps* commands use cached bytecode as a
    user's would. Counts: full (default) 20 runs a command, 300-job loop, 100 one-GPU jobs, 1000 jobs,
    1000-task array, 20 latency jobs; ``--quick`` 5 / 30 / 10 / 100 / 100 / 5 (to check the script,
    not to quote). The output is one markdown report (goals of issue 12 and whether each is met, then
    the min/median/max details); ``--out FILE`` writes the same report to FILE.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SETUP = REPO.parent / "shared" / "anchors" / "slurm" / "setup.sh"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
SLURM_BIN = Path("/usr/bin")
SLURM_PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
ACTIVE_SLURM_STATES = "PD,R,CG,CF,S"


class BenchError(Exception):
    pass


def log(msg: str) -> None:
    print(f"[vs_slurm {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def venv_bin() -> Path:
    here = Path(sys.executable).parent
    if (here / "psbatch").exists():
        return here
    if (REPO / ".venv" / "bin" / "psbatch").exists():
        return REPO / ".venv" / "bin"
    found = shutil.which("psbatch")
    if found:
        return Path(found).parent
    raise BenchError("no psbatch found: run from the project's venv (. .venv/bin/activate)")


def run(argv: list[str], env: dict[str, str], cwd: str, timeout: float = 120,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"{' '.join(argv)[:200]} did not return in {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)[:200]} exited {proc.returncode}: "
                         f"{(proc.stderr or proc.stdout).strip()[-400:]}")
    return proc


# --------------------------------------------------------------------------- the two clusters

@dataclass
class Rec:
    """One job as the scheduler recorded it (epoch seconds; ``res``: the times' resolution)."""
    job_id: str
    state: str
    submit: float | None
    start: float | None
    end: float | None
    res: float


@dataclass
class Side:
    name: str
    env: dict[str, str]
    cwd: str
    cmds: dict[str, str]
    submitted: set[str] = field(default_factory=set)

    def cmd(self, name: str) -> str:
        return self.cmds[name]

    def submit(self, *args: str) -> str:
        out = run([self.cmd("sbatch"), "--parsable", *args], self.env, self.cwd).stdout.strip()
        job_id = out.split(";")[0].strip()
        if not job_id.isdigit():
            raise BenchError(f"{self.name}: unexpected submit output {out!r}")
        self.submitted.add(job_id)
        return job_id

    def active(self, ids: set[str] | None) -> int:
        """How many of ``ids`` (all jobs if None) are still queued or running (each line of the listing
        counts, so a pending array counts once and each running task once)."""
        return self.poll(ids)[0]

    def poll(self, ids: set[str] | None) -> tuple[int, int]:
        """(lines of ``ids`` in the queue, those of them not COMPLETING: pending or running)."""
        entries = [(i, st) for i, st in self.listing() if ids is None or i in ids]
        return len(entries), sum(1 for _, st in entries if not st.upper().startswith("COMPLETING"))

    def ids(self) -> set[str]:
        return {i for i, _ in self.listing()}

    def listing(self) -> list[tuple[str, str]]:
        """(job id, state) of the queued and running jobs, one a line (an array's task: the array's id)."""
        raise NotImplementedError

    def records(self, ids: list[str], since: float) -> list[Rec]:
        raise NotImplementedError

    def cancel(self, ids: list[str]) -> None:
        for chunk in range(0, len(ids), 200):
            run([self.cmd("scancel"), *ids[chunk:chunk + 200]], self.env, self.cwd, check=False)


def _base_ids(lines: str) -> list[tuple[str, str]]:
    """(job id, state) from a queue listing of '%i %T': '12', '12_5' and '12_[0-999%4]' all give '12'."""
    return [(line.split()[0].split("_")[0], (line.split()[1:] or [""])[0])
            for line in lines.splitlines() if line.strip()]


def _stamp(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


class SlurmSide(Side):
    def listing(self) -> list[tuple[str, str]]:
        return _base_ids(run([self.cmd("squeue"), "-h", "-o", "%i %T", "-t", ACTIVE_SLURM_STATES], self.env,
                             self.cwd).stdout)

    def records(self, ids: list[str], since: float) -> list[Rec]:
        recs: list[Rec] = []
        for chunk in range(0, len(ids), 500):
            out = run([self.cmd("sacct"), "-n", "-P", "-X", "-S", _stamp(since - 3600), "-j",
                       ",".join(ids[chunk:chunk + 500]), "-o", "JobIDRaw,State,Submit,Start,End"],
                      self.env, self.cwd).stdout
            for line in out.splitlines():
                parts = line.split("|")
                if len(parts) >= 5:
                    recs.append(Rec(parts[0], parts[1].split()[0] if parts[1] else "", _slurm_time(parts[2]),
                                    _slurm_time(parts[3]), _slurm_time(parts[4]), 1.0))
        return recs


def _slurm_time(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None  # Unknown, None


class PslurmSide(Side):
    def listing(self) -> list[tuple[str, str]]:
        return _base_ids(run([self.cmd("squeue"), "-h", "-o", "%i %T"], self.env, self.cwd).stdout)

    def records(self, ids: list[str], since: float) -> list[Rec]:
        recs: list[Rec] = []
        for chunk in range(0, len(ids), 500):
            out = run([self.cmd("sacct"), "-S", _stamp(since - 3600), "-j", ",".join(ids[chunk:chunk + 500]),
                       "--json"], self.env, self.cwd).stdout
            for job in json.loads(out).get("jobs", []):
                recs.append(Rec(str(job.get("job_id")), str(_field(job, "state", "job_state") or ""),
                                _epoch(_field(job, "submit_time")), _epoch(_field(job, "start_time")),
                                _epoch(_field(job, "end_time")), 0.0))
        return recs


def _field(job: dict, *names: str) -> object:
    for name in names:
        if name in job:
            value = job[name]
            if isinstance(value, dict) and "current" in value:  # sacct 22.05's --json: state: {current: ..}
                value = value["current"]
            if isinstance(value, list):  # slurmrestd style: ["COMPLETED"]
                value = value[0] if value else None
            return value
        time_block = job.get("time")  # slurmrestd v0.0.40 style: time: {start: ..}
        key = {"submit": "submission"}.get(name.removesuffix("_time"), name.removesuffix("_time"))
        if isinstance(time_block, dict) and key in time_block:
            return time_block[key]
    return None


def _epoch(value: object) -> float | None:
    if isinstance(value, dict):  # slurmrestd style: {"set": true, "number": N}
        if value.get("set") is False:
            return None
        value = value.get("number")
    if isinstance(value, (int, float)) and value > 0:
        return float(value)
    return None


# --------------------------------------------------------------------------- starting them

def ensure_slurm_installed() -> None:
    if (SLURM_BIN / "sbatch").exists() and Path("/usr/sbin/slurmctld").exists():
        return
    if os.geteuid() != 0:
        raise BenchError("Slurm is not installed and this is not root: apt-get install " + " ".join(SLURM_PACKAGES))
    log("Slurm packages missing: apt-get install " + " ".join(SLURM_PACKAGES))
    proc = subprocess.run(["apt-get", "install", "-y", "-q", *SLURM_PACKAGES], capture_output=True, text=True,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if proc.returncode != 0:
        raise BenchError(f"apt-get install failed: {proc.stderr.strip()[-400:]}")


def start_slurm(setup: Path, tune: str, acct: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(ACCT=acct, TUNE=tune, MULTI="1", CPUS="8")
    log(f"starting Slurm: ACCT={acct} TUNE={tune} MULTI=1 CPUS=8 bash {setup}")
    proc = subprocess.run(["bash", str(setup)], env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise BenchError(f"{setup} exited {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-600:]}")
    return proc.stdout


def slurm_knobs() -> str:
    first = SLURM_CONF.read_text().splitlines()[0] if SLURM_CONF.exists() else ""
    found = re.findall(r"\b(MULTI|ACCT|TUNE|CPUS)=(\S+)", first)
    return " ".join(f"{k}={v}" for k, v in found) or "(unknown: slurm.conf not written by setup.sh)"


def conf_ports(path: Path) -> set[int]:
    text = path.read_text()
    ports = {int(p) for p in re.findall(r"\b\w*Port\w*=(\d+)", text, flags=re.I)}
    ports |= {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", text)}
    return ports


def slurm_ports() -> set[int]:
    ports = conf_ports(SLURM_CONF) if SLURM_CONF.exists() else set()
    dbd = Path("/etc/slurm/slurmdbd.conf")
    if dbd.exists():
        ports |= conf_ports(dbd)
    return ports | {6817, 6818, 6819, 3306}


# --------------------------------------------------------------------------- cold commands

@dataclass
class Series:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, int, str, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", "timed out after 60 s"
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, rc, out, err


@dataclass
class Cmd:
    """One command of a rotation: ``argv()`` may prepare (untimed) and return the argv to time."""
    label: str
    side: Side | None
    argv: Callable[[], list[str]]
    env: dict[str, str]
    cwd: str


def rotation(cmds: list[Cmd], runs: int, warmup: int = 1) -> list[Series]:
    series = [Series() for _ in cmds]
    for i in range(warmup + runs):
        for cmd, s in zip(cmds, series, strict=True):
            argv = cmd.argv()
            wall, cpu, rc, out, err = timed(argv, cmd.env, cmd.cwd)
            if cmd.side is not None and cmd.label.startswith("sbatch"):
                cmd.side.submitted.update(re.findall(r"(\d+)\s*$", out.strip()))
            if rc != 0:
                s.errors.append(f"{' '.join(argv)[:120]}: rc {rc}: {(err or out).strip()[-200:]}")
            if i >= warmup:
                s.wall.append(wall)
                s.cpu.append(cpu)
    return series


def pair_ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True) if y > 0]


# --------------------------------------------------------------------------- jobs end to end

@dataclass
class Throughput:
    count: int
    t0: float
    submitted: float          # when the last submit returned
    end: float                # last job's end (scheduler's record)
    end_unc: float            # +- on end
    last_start: float | None
    last_start_unc: float
    failed: int
    how: str
    failures: str = ""        # e.g. "FAILED: 12, 15" (the jobs that did not end COMPLETED)

    @property
    def rate(self) -> float:
        return self.count / (self.end - self.t0)

    @property
    def submit_rate(self) -> float:
        return self.count / max(self.submitted - self.t0, 1e-9)

    @property
    def scheduled_rate(self) -> float | None:
        if self.last_start is None:
            return None
        return self.count / max(self.last_start - self.t0, 1e-3)


def wait_done(side: Side, ids: set[str], timeout: float) -> tuple[float, float | None]:
    """Sleep-poll until none of ``ids`` is queued. Returns when that was first seen and the start of the
    last poll that still saw one of them pending or running (not COMPLETING), if any: the last end lies
    between. On timeout the jobs are cancelled and BenchError says how many were left."""
    deadline = time.monotonic() + timeout
    last_live: float | None = None
    while True:
        t_poll = time.perf_counter()
        t_wall = time.time()
        left, live = side.poll(ids)
        cost = time.perf_counter() - t_poll
        if left == 0:
            return time.time(), last_live
        if live:
            last_live = t_wall
        if time.monotonic() > deadline:
            side.cancel(sorted(ids))
            raise BenchError(f"{side.name}: {left} of the {len(ids)} jobs/arrays were still queued or running "
                             f"after {timeout:.0f} s: timed out (cancelled them)")
        time.sleep(max(0.1, 3 * cost))


def finish(side: Side, ids: list[str], expect: int, t0: float, submitted: float,
           polled: tuple[float, float | None], how: str) -> Throughput:
    """Read the scheduler's records of the jobs (accounting can lag the queue: retry for 60 s)."""
    deadline = time.monotonic() + 60
    while True:
        recs = side.records(ids, t0)
        done = [r for r in recs if r.end is not None]
        if len(done) >= expect or time.monotonic() > deadline:
            break
        time.sleep(1)
    if len(done) < expect:
        raise BenchError(f"{side.name}: accounting shows {len(done)} of {expect} jobs ended "
                         f"({len(recs)} records)")
    res = max(r.res for r in done)
    first_empty, last_live = polled
    # the record (whole seconds for Slurm) bounded by what the polls saw; a record may read before t0
    lo = max(max(r.end for r in done if r.end is not None), t0, (last_live or t0) if res else t0)
    hi = min(lo + res, first_empty)
    hi = max(hi, lo)
    starts = [r.start for r in done if r.start is not None]
    last_start, start_unc = None, 0.0
    if starts:  # in [S, S + res), and no later than the last end
        s_lo = max(max(starts), t0)
        s_hi = max(min(s_lo + res, hi), s_lo)
        last_start, start_unc = (s_lo + s_hi) / 2, (s_hi - s_lo) / 2
    bad: dict[str, list[str]] = {}
    for r in done:
        if r.state.upper() not in ("COMPLETED", "CD"):
            bad.setdefault(r.state, []).append(r.job_id)
    failures = "; ".join(f"{state}: {', '.join(ids[:10])}{' ...' if len(ids) > 10 else ''}"
                         for state, ids in sorted(bad.items()))
    return Throughput(expect, t0, submitted, (lo + hi) / 2, (hi - lo) / 2, last_start, start_unc,
                      sum(len(ids) for ids in bad.values()), how, failures)


def shell_loop(side: Side, count: int, extra: str, timeout: float) -> Throughput:
    script = (f"for i in $(seq {count}); do {side.cmd('sbatch')} --parsable -o /dev/null {extra} --wrap true "
              f"|| echo SUBMIT-FAILED >&2; done")
    t0 = time.time()
    proc = run(["bash", "-c", script], side.env, side.cwd, timeout=timeout)
    submitted = time.time()
    ids = [line.split(";")[0] for line in proc.stdout.split() if line.split(";")[0].isdigit()]
    side.submitted.update(ids)
    if len(ids) != count:
        side.cancel(ids)
        raise BenchError(f"{side.name}: {count - len(ids)} of {count} submits failed: {proc.stderr.strip()[-300:]}")
    polled = wait_done(side, set(ids), timeout)
    return finish(side, ids, count, t0, submitted, polled, f"bash loop of {Path(side.cmd('sbatch')).name}")


def array(side: Side, count: int, timeout: float) -> Throughput:
    t0 = time.time()
    job_id = side.submit("-o", "/dev/null", f"--array=0-{count - 1}", "--wrap", "true")
    submitted = time.time()
    polled = wait_done(side, {job_id}, timeout)
    return finish(side, [job_id], count, t0, submitted, polled, "one --array submit")


API_SUBMIT = r"""
import json, os, pwd, sys, time
from pslurm.client import Client
from pslurm.core.request import JobOptions, build_spec
n = int(sys.argv[1])
client = Client()
spec = build_spec(JobOptions(output="/dev/null"), user=pwd.getpwuid(os.getuid()).pw_name, uid=os.getuid(),
                  gid=os.getgid(), cwd=os.getcwd(), environ={"PATH": os.environ["PATH"]},
                  script="#!/bin/sh\ntrue\n", default_name="wrap")
client.jobs(job_ids=[1])  # connect (and load the wire) before the clock starts
print("READY", flush=True)
sys.stdin.readline()
t0 = time.time()
ids = [client.submit(spec) for _ in range(n)]
print(json.dumps({"t0": t0, "t1": time.time(), "ids": ids}), flush=True)
"""


def api_many(side: Side, count: int, timeout: float) -> Throughput:
    """pslurm: one client process submitting through pslurm.client, connected before the clock."""
    proc = subprocess.Popen([side.cmd("python"), "-c", API_SUBMIT, str(count)], env=side.env, cwd=side.cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    ready = proc.stdout.readline()
    if ready.strip() != "READY":
        _, err = proc.communicate(timeout=30)
        raise BenchError(f"pslurm.client submitter failed to start: {err.strip()[-400:]}")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise BenchError(f"pslurm.client submitter: {count} submits did not return in {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise BenchError(f"pslurm.client submitter failed: {err.strip()[-400:]}")
    data = json.loads(out.strip().splitlines()[-1])
    ids = [str(i) for i in data["ids"]]
    side.submitted.update(ids)
    polled = wait_done(side, set(ids), timeout)
    return finish(side, ids, count, data["t0"], data["t1"], polled, "one client over pslurm.client")


def latency(sides: list[Side], count: int, tmp: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The job's first command ran (the time it wrote) minus when the submit command started, and minus
    when it returned (negative when the job started before the command exited), alternating the sides."""
    out: dict[str, list[float]] = {s.name: [] for s in sides}
    after: dict[str, list[float]] = {s.name: [] for s in sides}
    for i in range(count):
        for side in sides:
            stamp = tmp / f"lat-{side.name}-{i}"
            body = f"date +%s.%N > {stamp}.tmp && mv {stamp}.tmp {stamp}"
            began = time.time()
            side.submit("-o", "/dev/null", "--wrap", body)
            returned = time.time()
            deadline = time.monotonic() + 120
            while not stamp.exists():
                if time.monotonic() > deadline:
                    raise BenchError(f"{side.name}: latency job {i} did not start within 120 s")
                time.sleep(0.005)
            started = float(stamp.read_text())
            out[side.name].append(started - began)
            after[side.name].append(started - returned)
            time.sleep(0.2)  # let it end: the next one meets an idle cluster
    return out, after


# --------------------------------------------------------------------------- report

def commit() -> str:
    """The work tree's HEAD (read only; local edits are not seen)."""
    proc = subprocess.run(["git", "--no-optional-locks", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return proc.stdout.strip() or "unknown"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if abs(seconds) < 1 else f"{seconds:.2f} s"


def spread(values: list[float]) -> str:
    return f"{ms(statistics.median(values))} ({ms(min(values))}-{ms(max(values))})"


def ratio_word(r: float, lower_is_better: bool) -> str:
    better = r < 1 if lower_is_better else r > 1
    factor = 1 / r if r < 1 else r
    return f"{r:.2f} ({factor:.1f}x {'better' if better else 'worse'})" if abs(r - 1) > 0.005 else f"{r:.2f} (even)"


def yes_no(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def cold_commands(measure: Callable[[str, Callable[[Side], Callable[[], list[str]]]], None], slurm: Side,
                  pslurm: Side, held: dict[str, str], acct_up: bool,
                  rows: list[tuple[str, Series | None, Series | None, Series, str | None]]) -> None:
    """The cold commands, each measured in turn on both sides (``measure``)."""
    measure("sbatch -o /dev/null --wrap true", lambda side: lambda: [side.cmd("sbatch"), "-o", "/dev/null",
                                                                     "--wrap", "true"])
    measure("squeue", lambda side: lambda: [side.cmd("squeue")])

    def cancel_argv(side: Side) -> Callable[[], list[str]]:
        return lambda: [side.cmd("scancel"), side.submit("-H", "-o", "/dev/null", "--wrap", "true")]

    measure("scancel ID (a held job)", cancel_argv)
    done_id = {side.name: side.submit("-o", "/dev/null", "--wrap", "true") for side in (slurm, pslurm)}
    for side in (slurm, pslurm):
        wait_done(side, {done_id[side.name]}, 60)
    if acct_up:
        time.sleep(1)  # slurmdbd records the end a moment after the queue drops it
        measure("sacct -j ID (a finished job)", lambda side: lambda: [side.cmd("sacct"), "-j", done_id[side.name]])
    else:
        rows.append(("sacct -j ID", None, None, Series(), "Slurm runs without slurmdbd (ACCT=none)"))
    held.update({side.name: side.submit("-H", "-o", "/dev/null", "--wrap", "true") for side in (slurm, pslurm)})
    measure("scontrol show job ID (a held job)",
            lambda side: lambda: [side.cmd("scontrol"), "show", "job", held[side.name]])
    for side in (slurm, pslurm):
        side.cancel([held.pop(side.name)])
        wait_done(side, side.submitted, 60)
    measure("srun true", lambda side: lambda: [side.cmd("srun"), "true"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts: checks the script, figures not to quote")
    parser.add_argument("--out", type=Path, help="also write the report to this file")
    parser.add_argument("--tune", default="lowlat", choices=["lowlat", "default", "htc"],
                        help="setup.sh TUNE (default lowlat: Slurm's low-latency settings)")
    parser.add_argument("--acct", default="dbd", choices=["dbd", "none"],
                        help="setup.sh ACCT (default dbd: slurmdbd, so sacct can be measured)")
    parser.add_argument("--setup", type=Path, default=DEFAULT_SETUP, help="Slurm's setup.sh")
    parser.add_argument("--no-setup", action="store_true", help="use the Slurm that is running as it is")
    parser.add_argument("--runs", type=int, help="runs of each cold command (default 20, quick 5)")
    parser.add_argument("--keep", action="store_true", help="keep the pslurm state dir (logs) afterwards")
    parser.add_argument("--throughput-only", action="store_true",
                        help="only the end-to-end figures (no cold commands, no submit-to-start)")
    parser.add_argument("--accept-drained", action="store_true",
                        help="with --no-setup: a Slurm whose nodes are not all up is measured as it is, and "
                             "pslurm gets as many nodes as Slurm has up (the bench still drains or resumes nothing)")
    args = parser.parse_args()
    q = args.quick
    runs = args.runs or (5 if q else 20)
    n_loop, n_gpu, n_many, n_array, n_lat = (30, 10, 100, 100, 5) if q else (300, 100, 1000, 1000, 20)

    bin_dir = venv_bin()
    shebang = (bin_dir / "psbatch").read_text(errors="replace").splitlines()[0]
    py = shebang[2:].strip().split()[0] if shebang.startswith("#!") else str(bin_dir / "python")
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("SLURM_") and k not in ("PSLURM_CONF", "PYTHONDONTWRITEBYTECODE")}
    had_no_bytecode = "PYTHONDONTWRITEBYTECODE" in os.environ

    ensure_slurm_installed()
    if args.no_setup:
        setup_out = "(setup.sh not run: --no-setup)"
    else:
        setup_out = start_slurm(args.setup, args.tune, args.acct)
    log("setup.sh: " + " | ".join(setup_out.strip().splitlines()[-7:]))
    knobs = slurm_knobs()
    acct_up = "ACCT=dbd" in knobs
    for name in ("sbatch", "squeue", "scancel", "scontrol", "srun", "sacct"):
        if not (SLURM_BIN / name).exists():
            raise BenchError(f"{SLURM_BIN / name} is missing")
    nodes = run([str(SLURM_BIN / "sinfo"), "-h", "-o", "%t %D"], base_env, "/").stdout.split()
    up = sum(int(n) for st, n in zip(nodes[0::2], nodes[1::2], strict=False) if st in ("idle", "mix", "alloc"))
    if any(s not in ("idle", "mix", "alloc") for s in nodes[0::2]) and not (args.accept_drained and up):
        raise BenchError(f"Slurm's nodes are not all up ({' '.join(nodes)}): this bench drains or resumes nothing")
    ps_nodes = min(4, up)
    slurm_version = run([str(SLURM_BIN / "sbatch"), "--version"], base_env, "/").stdout.strip()

    tmp = Path(tempfile.mkdtemp(prefix="vs-slurm-"))
    state = tmp / "pslurm"
    work = tmp / "work"
    work.mkdir()
    slurm = SlurmSide("Slurm", dict(base_env), str(work),
                      {n: str(SLURM_BIN / n) for n in ("sbatch", "squeue", "scancel", "sacct", "scontrol", "srun")})
    pslurm = PslurmSide("pslurm", {**base_env, "PSLURM_CONF": str(state / "pslurm.conf")}, str(work),
                        {n: str(bin_dir / ("ps" + n[1:])) for n in ("sbatch", "squeue", "scancel", "sacct",
                                                                     "scontrol", "srun")} | {"python": py})
    floor_env = dict(base_env)
    lines: list[str] = []
    notes: list[str] = []
    details: list[str] = []
    ok = False
    t_start = time.time()
    load_start = os.getloadavg()
    try:
        log(f"pslurm up (state dir {state})")
        run([str(bin_dir / "pslurm"), "up", "--state-dir", str(state), "-N", str(ps_nodes), "-G", "2", "--cpus", "8",
             "--memory", "4000"], base_env, str(work), timeout=180)
        if ps_nodes < 4:
            notes.append(f"Slurm had {up} of its nodes up ({' '.join(nodes)}; another bench's): pslurm ran "
                         f"{ps_nodes} nodes too")
        ps_ports = conf_ports(state / "pslurm.conf")
        clash = ps_ports & slurm_ports()
        if clash:
            raise BenchError(f"pslurm and Slurm share ports {sorted(clash)}")
        for name, want in (("sbatch", SLURM_BIN / "sbatch"), ("psbatch", bin_dir / "psbatch")):
            found = shutil.which(name)
            if found is None or Path(found).resolve() != want.resolve():
                notes.append(f"`{name}` in PATH is {found}, not {want}: the bench runs {want} by its full path")
        for side in (slurm, pslurm):
            left = side.active(None)
            if left:
                notes.append(f"{side.name} had {left} jobs queued when the bench started: figures are disturbed")
        log(f"ports: Slurm {sorted(slurm_ports())}, pslurm {sorted(ps_ports)}: no overlap")

        # ---- cold commands -------------------------------------------------------------------
        held: dict[str, str] = {}  # a held job on each side while `scontrol show job` is measured
        rows: list[tuple[str, Series | None, Series | None, Series, str | None]] = []  # label, S, P, F, skip

        def floor_cmd() -> Cmd:
            return Cmd("python -c pass", None, lambda: [py, "-c", "pass"], floor_env, str(work))

        def measure(label: str, s_argv: Callable[[Side], Callable[[], list[str]]]) -> None:
            log(f"cold: {label} x {runs}")
            s, p, f = rotation([Cmd(label, slurm, s_argv(slurm), slurm.env, slurm.cwd),
                                Cmd(label, pslurm, s_argv(pslurm), pslurm.env, pslurm.cwd), floor_cmd()], runs)
            rows.append((label, s, p, f, None))
            for side in (slurm, pslurm):
                wait_done(side, side.submitted - set(held.values()), 120)

        if not args.throughput_only:
            cold_commands(measure, slurm, pslurm, held, acct_up, rows)
        lat: dict[str, list[float]] = {}
        lat_after: dict[str, list[float]] = {}
        if not args.throughput_only:
            log(f"submit-to-start x {n_lat}")
            lat, lat_after = latency([slurm, pslurm], n_lat, work)


        # ---- end to end ----------------------------------------------------------------------
        timeout = lambda n: 120 + 2.0 * n  # noqa: E731  (a 300-job loop at 3 jobs/s fits)
        tp: dict[str, dict[str, Throughput | str]] = {}

        def throughput(key: str, fn: Callable[[Side], Throughput]) -> None:
            tp[key] = {}
            for side in (slurm, pslurm):
                log(f"{key}: {side.name}")
                try:
                    tp[key][side.name] = fn(side)
                except BenchError as exc:
                    tp[key][side.name] = str(exc)
                    log(f"  failed: {exc}")
                try:
                    wait_done(side, set(side.submitted), 120)
                except BenchError as exc:
                    notes.append(str(exc))

        throughput("loop", lambda side: shell_loop(side, n_loop, "", timeout(n_loop)))
        throughput("gpu", lambda side: shell_loop(side, n_gpu, "--gres=gpu:1", timeout(n_gpu)))

        def many(side: Side) -> Throughput:
            if side is pslurm:
                try:
                    return api_many(side, n_many, timeout(n_many))
                except BenchError as exc:
                    notes.append(f"pslurm.client submitter failed ({exc}); the {n_many} jobs went through a "
                                 f"bash loop of psbatch instead")
                    wait_done(side, set(side.submitted), 120)
            return shell_loop(side, n_many, "", timeout(n_many))

        throughput("many", many)
        throughput("array", lambda side: array(side, n_array, timeout(n_array)))

        # ---- the report ----------------------------------------------------------------------
        floor_all = [w for *_, f, _skip in rows for w in f.wall]
        floor_med = statistics.median(floor_all) if floor_all else float("nan")
        now = dt.datetime.now().astimezone()
        lines += [
            "## pslurm vs Slurm, side by side "
            f"({'--quick: small counts, not figures to quote' if q else 'full counts'})",
            "",
            f"- date: {now.strftime('%Y-%m-%d %H:%M %Z')}; machine: {os.cpu_count()} CPUs "
            f"(nproc {len(os.sched_getaffinity(0))}), {platform.platform()}; load average at start "
            f"{load_start[0]:.2f}, at end {os.getloadavg()[0]:.2f}",
            f"- python: {run([py, '-V'], base_env, '/').stdout.strip()} ({py}); PYTHONDONTWRITEBYTECODE unset for "
            f"the commands{' (it was set in the calling shell)' if had_no_bytecode else ''}",
            f"- Slurm: {slurm_version} from setup.sh, {knobs}; commands from {SLURM_BIN}",
            f"- pslurm: commit {commit()}, `pslurm up -N {ps_nodes} -G 2 --cpus 8` (private state dir), "
            f"commands from {bin_dir}",
            f"- cold commands: {runs} runs each after a warm-up, in turn Slurm, pslurm, `python -c pass`; "
            f"medians of the runs; ratios are medians of run-by-run ratios; floor (all rotations): {ms(floor_med)}",
            "",
            "| measure | Slurm | pslurm | pslurm/Slurm | goal | met? |",
            "|---|---|---|---|---|---|",
            f"| `python -c pass` (the floor) | | {spread(floor_all) if floor_all else 'n/a'} | | | |",
        ]
        for label, s, p, f, skip in rows:
            if skip or s is None or p is None:
                lines.append(f"| `{label}` | n/a | n/a | | | n/a: {skip} |")
                continue
            errs = s.errors + p.errors
            if errs:
                notes.extend(f"{label}: {e}" for e in errs[:3])
            r = statistics.median(pair_ratios(p.wall, s.wall))
            if label == "srun true":
                goal, met = "faster than `srun true`", r < 1
            else:
                rf = statistics.median(pair_ratios(p.wall, f.wall))
                goal, met = f"<= 2x floor (pslurm: {rf:.1f}x)", rf <= 2
            flag = " (errors, see notes)" if errs else ""
            lines.append(f"| `{label}` | {spread(s.wall)} | {spread(p.wall)}{flag} | {ratio_word(r, True)} | "
                         f"{goal} | {yes_no(met)} |")
            details.append(f"| `{label}` | {spread(s.cpu)} | {spread(p.cpu)} | {spread(f.cpu)} |")

        if lat:
            ls, lp = lat["Slurm"], lat["pslurm"]
            lines.append(f"| batch submit-to-start, {n_lat} jobs (submit command started -> job's first command) | "
                         f"{spread(ls)} | {spread(lp)} | "
                         f"{ratio_word(statistics.median(lp) / statistics.median(ls), True)} | | |")
            ls, lp = lat_after["Slurm"], lat_after["pslurm"]
            lines.append(f"| the same from the submit command's exit (< 0: the job ran before it exited) | "
                         f"{spread(ls)} | {spread(lp)} | | | |")

        def tp_row(key: str, label: str, goal: str, check: Callable[[Throughput, Throughput | str], bool] | None,
                   scheduled: bool = False) -> None:
            s, p = tp[key]["Slurm"], tp[key]["pslurm"]

            def cell(t: Throughput | str) -> str:
                if isinstance(t, str):
                    return "failed (see notes)"
                rate = t.scheduled_rate if scheduled else t.rate
                extra = f", {t.failed} failed" if t.failed else ""
                return f"{rate:.1f}/s{extra}" if rate is not None else "n/a"

            for name, t in (("Slurm", s), ("pslurm", p)):
                if isinstance(t, str):
                    notes.append(f"{label}: {t}")
                elif t.failures and not scheduled:
                    notes.append(f"{label}: {name}: {t.failed} jobs did not end COMPLETED ({t.failures})")
            if isinstance(s, Throughput) and isinstance(p, Throughput):
                rs = s.scheduled_rate if scheduled else s.rate
                rp = p.scheduled_rate if scheduled else p.rate
                ratio = ratio_word(rp / rs, False) if rs and rp else ""
            else:
                ratio = ""
            met = check(p, s) if check and isinstance(p, Throughput) else None
            lines.append(f"| {label} | {cell(s)} | {cell(p)} | {ratio} | {goal} | {yes_no(met)} |")

        tp_row("loop", f"{n_loop} trivial jobs, bash loop of sbatch/psbatch, end to end", ">= 30 jobs/s, > Slurm",
               lambda p, s: p.rate >= 30 and (isinstance(s, str) or p.rate > s.rate))
        tp_row("gpu", f"{n_gpu} one-GPU jobs, bash loop, end to end", "", None)
        tp_row("many", f"{n_many} trivial jobs as fast as each takes them, end to end", ">= 500 jobs/s",
               lambda p, s: p.rate >= 500)
        tp_row("array", f"array of {n_array} tasks, end to end", "", None)
        tp_row("array", f"array of {n_array} tasks, submit to last task started", ">= 1000 tasks/s",
               lambda p, s: (p.scheduled_rate or 0) >= 1000, scheduled=True)

        lines += ["", "Details: CPU (user+sys) of the cold commands, median (min-max):", "",
                  "| command | Slurm | pslurm | python -c pass |", "|---|---|---|---|", *details, "",
                  "Details: end to end (t0 = just before the first submit; times in s from t0; "
                  "+- is the resolution of the scheduler's record):", "",
                  "| measure | cluster | how | submits done | last start | last end | jobs/s | submits/s |",
                  "|---|---|---|---|---|---|---|---|"]
        for key in ("loop", "gpu", "many", "array"):
            for name, t in tp[key].items():
                if isinstance(t, Throughput):
                    start = f"{t.last_start - t.t0:.2f} +- {t.last_start_unc:.2f}" if t.last_start else "n/a"
                    lines.append(f"| {key} | {name} | {t.how} | {t.submitted - t.t0:.2f} | {start} | "
                                 f"{t.end - t.t0:.2f} +- {t.end_unc:.2f} | {t.rate:.1f} | {t.submit_rate:.1f} |")
                else:
                    lines.append(f"| {key} | {name} | failed | | | | | |")
        if q:
            notes.append("--quick: the counts are smaller than the goals' (300 / 1000 / 1000-task array); "
                         "'met?' there says only how these small runs came out")
        lines += ["", f"Whole run: {time.time() - t_start:.0f} s."]
        if notes:
            lines += ["", "Notes:", *[f"- {n}" for n in notes]]
        ok = True
    finally:
        for side in (slurm, pslurm):
            try:
                leftover = sorted(side.ids() & side.submitted) if side.submitted else []
                if leftover:
                    log(f"cancelling {len(leftover)} jobs the bench left on {side.name}")
                    side.cancel(leftover)
            except BenchError as exc:
                log(f"cleanup on {side.name}: {exc}")
        down = subprocess.run([str(bin_dir / "pslurm"), "down", "--state-dir", str(state)], capture_output=True,
                              text=True, env=base_env)
        log((down.stdout or down.stderr).strip())
        if ok and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"pslurm state dir (logs) kept in {state}")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"vs_slurm: error: {exc}", file=sys.stderr)
        sys.exit(1)
