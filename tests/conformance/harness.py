"""Two clusters of one shape, the same command lines on both, their answers compared.

A :class:`Side` is one cluster and how its commands are run: Slurm 22.05's own (``/usr/bin``), or
pslurm's under Slurm's names (``pslurm compat install``), each from a working directory of its own.
:func:`compare` says whether two answers are the same once what must differ is made equal
(:func:`normalise`): job ids where the two clusters gave different ones, the working directory, the
host name, absolute times; a duration (``0:07``, ``00:01:05``) may differ by a few seconds (a job's
run time goes on while the two commands run) but not in its form.
"""

from __future__ import annotations

import re
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Answer:
    """What a command line gave: exit status, stdout, stderr."""

    rc: int
    out: str
    err: str


@dataclass
class Side:
    """One cluster: ``name`` (``slurm`` or ``pslurm``), the environment its commands run in, the
    directory they run from, and the ids of the jobs set up by name."""

    name: str
    env: dict[str, str]
    workdir: Path
    ids: dict[str, str] = field(default_factory=dict)

    def line(self, template: str) -> str:
        """A case's command line for this side: ``{name}`` is the id of the job set up by that name,
        ``{dir}`` the working directory."""
        return template.format(dir=self.workdir, **self.ids)

    def run(self, template: str, stdin: str = "", timeout: float = 60) -> Answer:
        try:
            proc = subprocess.run(["bash", "-c", self.line(template)], cwd=self.workdir, env=self.env, input=stdin,
                                  capture_output=True, text=True, timeout=timeout, errors="replace")
        except subprocess.TimeoutExpired as exc:
            return Answer(124, _text(exc.stdout), _text(exc.stderr) + f"\n(timed out after {timeout} s)")
        return Answer(proc.returncode, proc.stdout, proc.stderr)


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode(errors="replace")


def base_env(path: str, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment both sides' commands run in: nothing of the caller's Slurm or pslurm variables."""
    env = {"PATH": path, "HOME": str(home), "USER": "root", "LOGNAME": "root", "LANG": "C.UTF-8", "TZ": "UTC",
           "SHELL": "/bin/bash"}
    env.update(extra or {})
    return env


# -- normalising -------------------------------------------------------------------------------------

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_CTIME = re.compile(r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d "
                    r"\d\d:\d\d:\d\d \d{4}\b")
_DURATION = re.compile(r"(?<![\d:.\-])(?:\d+-)?\d{1,2}(?::\d\d){1,2}(?![\d:])")
TOLERANCE = 5  # seconds a duration may differ by between the two sides
TIMEOUT_TOLERANCE = 60  # ... on a timed-out job's line
_NUMBER = re.compile(r"(?<![\w.:-])\d+(?![\w.:-])")


def _first_id(line: str) -> str:
    """The job id a line begins with (``14``, of ``14.batch|...`` and of a record's ``JobId=14`` or
    ``StepId=14.0`` too), "" for none."""
    found = re.match(r"\s*(?:JobId=|StepId=)?(\d+)(?:[._][\w\[\]-]+)?(?=[\s|,]|$)", line)
    return found.group(1) if found else ""


_SRUN_PID = re.compile(r"(SrunHost:Pid=\S*:)\d+")
_ALLOC_SID = re.compile(r"AllocNode:Sid=[^\s:]+:(\d+)")
_NEW_JOB = re.compile(r"((?:job_id=|JobId=|[Jj]ob |job allocation |job step id ))(\d+)")


def normalise(text: str, side: Side, id_map: dict[str, str]) -> str:
    """``text`` with what must differ replaced: this side's working directory, host name, absolute times,
    process and session ids, the ids of jobs a case submitted, blanks at the ends of lines; and its job
    ids written as Slurm's (``id_map``: this side's id -> Slurm's, where they differ)."""
    text = text.replace(str(side.workdir), "{dir}")
    if side.name == "slurm":  # Debian's build names itself by its package (slurm-wlm 22.05.8); Slurm's own: slurm
        text = re.sub(r"(?m)^((?:\w+: )?)slurm-wlm (?=\d)", r"\1slurm ", text)
    host = socket.gethostname().split(".")[0]
    if host:
        text = re.sub(rf"(?<![\w-]){re.escape(host)}(?![\w-])", "{host}", text)
    text = _TIMESTAMP.sub("{time}", text)
    text = _CTIME.sub("{date}", text)
    text = _SRUN_PID.sub(r"\1{pid}", text)  # the process id of the srun that runs a step
    # the submitting host: Slurm's anchor sees "localhost", pslurm records the host's name (the session id,
    # the same shell's on both sides, is compared)
    text = _ALLOC_SID.sub(r"AllocNode:Sid={host}:\1", text)
    # a job a case submitted: its id is each side's next (Slurm numbers an array's tasks as they start)
    last = max((int(i) for i in side.ids.values() if i.isdigit()), default=0)
    text = _NEW_JOB.sub(lambda m: m.group(1) + ("{new}" if int(m.group(2)) > last else m.group(2)), text)
    for mine, theirs in sorted(id_map.items(), key=lambda kv: -len(kv[0])):
        text = re.sub(rf"(?<!\d){re.escape(mine)}(?!\d)", theirs, text)
    return "".join(line.rstrip() + "\n" for line in text.splitlines())


def _seconds(duration: str) -> int:
    days, _, rest = duration.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def _form(duration: str) -> tuple[int, bool, bool]:
    """What a duration's form says: its fields, a day part, a zero-padded first field (``00:05:00`` is
    not ``5:00``; ``9:59`` and ``10:01`` are one form)."""
    head = duration.rpartition("-")[2].split(":")[0]
    return duration.count(":"), "-" in duration, len(head) == 2 and head[0] == "0"


def same_text(mine: str, theirs: str, any_order: bool = False, slow: frozenset[str] = frozenset()) -> bool:
    """Equal, but for durations that differ by at most TOLERANCE seconds and have the same form;
    ``any_order``: the lines may come in another order; ``slow``: the ids of jobs whose
    times may differ by up to TIMEOUT_TOLERANCE (a job that timed out), plain numbers on their lines too
    (a line without an id is of the record the last id began: scontrol's records span lines)."""
    if mine == theirs:
        return True
    mine_lines, their_lines = mine.splitlines(), theirs.splitlines()
    if any_order:
        mine_lines = sorted(mine_lines, key=lambda s: _DURATION.sub("D", s))  # the header too: -h has none
        their_lines = sorted(their_lines, key=lambda s: _DURATION.sub("D", s))
    if len(mine_lines) != len(their_lines):
        return False
    record = ""
    for a, b in zip(mine_lines, their_lines, strict=True):
        record = _first_id(b) or ("" if not b.strip() else record)
        if a == b:
            continue
        # Slurm 22.05 checks time limits every 30 s (and then waits KillWait): a timed-out job's run time
        # there is up to a minute past its limit, pslurm's is the limit
        timed_out = "TIMEOUT" in a or " TO " in a or record in slow
        if timed_out and _NUMBER.sub("N", a) == _NUMBER.sub("N", b):
            if all(abs(int(x) - int(y)) <= TIMEOUT_TOLERANCE
                   for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b), strict=True)):
                continue
        if _DURATION.sub("D", a) != _DURATION.sub("D", b):
            return False
        tolerance = TIMEOUT_TOLERANCE if timed_out else TOLERANCE
        for x, y in zip(_DURATION.findall(a), _DURATION.findall(b), strict=True):
            if x != y and (_form(x) != _form(y) or abs(_seconds(x) - _seconds(y)) > tolerance):
                return False
    return True


def words(text: str) -> list[str]:
    return text.split()


@dataclass(frozen=True)
class Outcome:
    """How a case came out: both answers (normalised) and what differs ("" when nothing does)."""

    slurm: Answer
    pslurm: Answer
    differs: str


def compare(slurm: Answer, pslurm: Answer, any_order: bool = False, slow: frozenset[str] = frozenset()) -> str:
    """What differs between two normalised answers: "" when nothing does, else the parts by name.
    ``any_order``: a listing whose rows may come in any order (see :func:`rows_in_any_order`)."""
    parts = []
    if slurm.rc != pslurm.rc:
        parts.append(f"exit {pslurm.rc}, Slurm {slurm.rc}")
    if not same_text(pslurm.out, slurm.out, any_order, slow):
        parts.append("stdout")
    if words(pslurm.err) != words(slurm.err):
        parts.append("stderr")
    return ", ".join(parts)


def rows_in_any_order(line: str) -> bool:
    """squeue's rows of equal sort keys come in slurmctld's order of its job list, which depends on
    that daemon's history (its default sort, partition, state and priority, leaves most rows tied):
    a squeue line without an explicit sort (-S) is compared as a set of rows."""
    return line.startswith("squeue") and " -S" not in line and "--sort" not in line


def id_from_submission(out: str) -> str | None:
    """The job id an sbatch, salloc or srun line printed (``Submitted batch job N``, ``N``, ``N;cluster``,
    ``Granted job allocation N``)."""
    found = re.search(r"(?:Submitted batch job|Granted job allocation) (\d+)", out)
    if found:
        return found.group(1)
    first = out.strip().splitlines()[:1]
    if first and re.fullmatch(r"\d+(;\S+)?", first[0].strip()):
        return first[0].strip().split(";")[0]
    return None

