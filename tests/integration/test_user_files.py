"""The agent acts as the job's user for what is the user's: its output files, its working directory,
slurmstepd's lines in its stderr file, and the batch script's directory (real processes: a root
agent's Launcher running jobs of ``nobody``, and one Launcher that is itself ``nobody``)."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState
from pslurm.nodeagent.launcher import Launcher, RunningJob
from tests.conftest import wait_for

NOBODY = 65534
ENV = {"PATH": "/usr/bin:/bin"}

if os.geteuid() != 0:
    pytest.skip("the agent acts as another user only when it is root", allow_module_level=True)
try:
    NOGROUP = pwd.getpwuid(NOBODY).pw_gid
except KeyError:
    pytest.skip("no user 65534 (nobody)", allow_module_level=True)


class Place:
    """A directory tree that nobody can reach (pytest's tmp_path is under a 0700 root directory):
    ``home`` is nobody's (the jobs' submit directory), ``victim`` a root file nobody may not write,
    ``private`` a directory only root may enter."""

    def __init__(self, top: Path) -> None:
        self.top = top
        top.chmod(0o755)
        self.home = top / "home"
        self.home.mkdir()
        os.chown(self.home, NOBODY, NOGROUP)
        self.victim = top / "victim"
        self.victim.write_text("root's own\n")
        self.victim.chmod(0o644)
        self.private = top / "private"
        self.private.mkdir(mode=0o700)
        self.private.chmod(0o700)
        self.spool = top / "spool"

    def user_symlink(self, name: str, target: Path) -> Path:
        """A symlink in nobody's directory, as nobody would plant it."""
        link = self.home / name
        link.symlink_to(target)
        os.lchown(link, NOBODY, NOGROUP)
        return link

    def victim_untouched(self) -> bool:
        st = self.victim.stat()
        found = (self.victim.read_text(), st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))
        return found == ("root's own\n", 0, 0, 0o644)


@pytest.fixture
def place() -> Iterator[Place]:
    top = Path(tempfile.mkdtemp(prefix="pslurm-userfiles-"))
    try:
        yield Place(top)
    finally:
        shutil.rmtree(top)


class Ends:
    """The launcher's on_end: each run's end, waited for by job id."""

    def __init__(self) -> None:
        self.runs: dict[int, RunningJob] = {}
        self.changed = threading.Condition()

    def __call__(self, running: RunningJob) -> None:
        with self.changed:
            self.runs[running.job.job_id] = running
            self.changed.notify_all()

    def wait(self, job_id: int, timeout: float = 20.0) -> RunningJob:
        with self.changed:
            assert self.changed.wait_for(lambda: job_id in self.runs, timeout), f"job {job_id} did not end"
            return self.runs[job_id]


@pytest.fixture
def launcher(place: Place) -> tuple[Launcher, Ends]:
    ends = Ends()
    return Launcher("c000", "userfiles", str(place.spool), 1.0, ends), ends


def job(job_id: int, place: Place, *, script: str | None = "#!/bin/sh\necho hi\n", argv: tuple[str, ...] = (),
        stdout: str | Path | None = None, stderr: str | Path | None = None, workdir: Path | None = None,
        env: dict[str, str] | None = None, interactive: bool = False, time_limit: int | None = None,
        open_mode: str = "") -> JobRecord:
    spec = JobSpec(name="t", user="nobody", uid=NOBODY, gid=NOGROUP, workdir=str(workdir or place.home),
                   script=None if argv else script, argv=argv, environment={**ENV, **(env or {})},
                   stdout=None if stdout is None else str(stdout), stderr=None if stderr is None else str(stderr),
                   interactive=interactive, open_mode=open_mode)
    return JobRecord(job_id=job_id, spec=spec, state=JobState.RUNNING, node="c000", time_limit=time_limit)


def owner_mode(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_uid, stat.S_IMODE(st.st_mode)


# -- what a user must not make root do ----------------------------------------------------------


def test_an_output_symlink_to_a_root_file_leaves_it_untouched_and_fails_the_launch(
        place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    link = place.user_symlink("out", place.victim)
    run.start(job(1, place, stdout=link), dict(ENV), None, None)
    end = ends.wait(1)
    assert place.victim_untouched()
    assert end.launch_failure == f"Could not open stdout file {link}: Permission denied"
    assert end.end is not None and (end.end.state, end.end.exit_code) == (JobState.FAILED, 2)


def test_an_error_symlink_to_a_root_file_leaves_it_untouched(place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    link = place.user_symlink("err", place.victim)
    run.start(job(2, place, stdout=place.home / "out", stderr=link), dict(ENV), None, None)
    end = ends.wait(2)
    assert place.victim_untouched()
    assert end.launch_failure == f"Could not open stderr file {link}: Permission denied"
    assert (place.home / "out").read_text() == ""  # opened (as nobody) before stderr was refused
    assert owner_mode(place.home / "out") == (NOBODY, 0o644)


def test_a_workdir_only_root_may_enter_fails_with_the_chdir_reason_written_as_the_user(
        place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    out = place.home / "out"
    err = place.user_symlink("err", place.victim)  # the failure line must not follow it as root either
    run.start(job(3, place, workdir=place.private, stdout=out), dict(ENV), None, None)
    end = ends.wait(3)
    reason = f"chdir({place.private}): Permission denied"
    assert (end.launch_failure, end.end and end.end.state) == (reason, JobState.FAILED)
    assert out.read_text() == f"slurmstepd: error: {reason}\n"
    assert owner_mode(out) == (NOBODY, 0o644)  # created by nobody, for the failure line

    run.start(job(4, place, workdir=place.private, stdout=out, stderr=err), dict(ENV), None, None)
    assert ends.wait(4).launch_failure == reason
    assert place.victim_untouched()


def test_an_interactive_job_enters_its_workdir_as_the_user(place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    running = run.start(job(5, place, argv=("pwd",), workdir=place.private, interactive=True), dict(ENV), None, None)
    reason = f"chdir({place.private}): Permission denied"
    assert ends.wait(5).launch_failure == reason
    assert bytes(running.step.output.buffers["stderr"]) == f"slurmstepd: error: {reason}\n".encode()
    running = run.start(job(6, place, argv=("sh", "-c", "pwd; id -u"), interactive=True), dict(ENV), None, None)
    assert ends.wait(6).launch_failure == ""
    assert bytes(running.step.output.buffers["stdout"]) == f"{place.home}\n{NOBODY}\n".encode()


# -- what the user's files look like --------------------------------------------------------------

SHOW = '#!/bin/sh\nid -u\numask\nstat -c "%a %u" "$(dirname "$0")"\necho oops >&2\n'


@pytest.mark.parametrize("env, mode, job_umask", [
    ({}, 0o644, None),  # no SLURM_UMASK: 0022 for the files, whatever the agent's own umask
    ({"SLURM_UMASK": "0022"}, 0o644, "0022"),
    ({"SLURM_UMASK": "0077"}, 0o600, "0077"),
])
def test_output_files_are_the_users_created_under_the_jobs_umask(
        place: Place, launcher: tuple[Launcher, Ends], env: dict[str, str], mode: int, job_umask: str | None) -> None:
    run, ends = launcher
    out, err = place.home / "o", place.home / "e"
    agent_umask = os.umask(0o077)
    try:
        run.start(job(7, place, script=SHOW, stdout="o", stderr=err, env=env), {**ENV, **env}, None, None)
    finally:
        os.umask(agent_umask)
    end = ends.wait(7)
    assert (end.launch_failure, end.end and end.end.state) == ("", JobState.COMPLETED)
    lines = out.read_text().splitlines()
    assert lines[0] == str(NOBODY)
    if job_umask is not None:  # the job runs under the submitter's umask, as slurmstepd does
        assert lines[1] == job_umask
    assert lines[2] == f"700 {NOBODY}"  # the batch script's directory is the user's, 0700
    assert err.read_text() == "oops\n"
    assert owner_mode(out) == owner_mode(err) == (NOBODY, mode)


def test_a_planted_job_directory_symlink_is_not_followed(place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    elsewhere = place.top / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    place.spool.mkdir(exist_ok=True)
    (place.spool / "job00008").symlink_to(elsewhere)  # e.g. left by something else: never written through
    run.start(job(8, place, script=SHOW, stdout="o"), dict(ENV), None, None)
    assert ends.wait(8).launch_failure == ""
    assert owner_mode(elsewhere) == (0, 0o755) and list(elsewhere.iterdir()) == []
    assert (place.home / "o").read_text().splitlines()[2] == f"700 {NOBODY}"
    assert not (place.spool / "job00008").exists()  # removed with the run's end


@pytest.mark.parametrize("how", ["cancel", "time limit"])
def test_slurmstepds_line_lands_in_the_file_the_user_opened(place: Place, launcher: tuple[Launcher, Ends],
                                                            how: str) -> None:
    run, ends = launcher
    err = place.home / "err"
    running = run.start(job(9, place, script="#!/bin/sh\necho started >&2\nexec sleep 30\n", stdout="/dev/null",
                            stderr=err, time_limit=1 if how == "time limit" else None), dict(ENV), None, None)
    wait_for(lambda: err.exists() and err.read_text() == "started\n", timeout=10, interval=0.02)
    held = running.step.stderr_file._fd if running.step.stderr_file is not None else None
    assert held is not None and fcntl.fcntl(held, fcntl.F_GETFD) & fcntl.FD_CLOEXEC  # no other child gets it
    # the user moves their file away and leaves a symlink to root's file in its place
    moved = place.home / "err.moved"
    os.rename(err, moved)
    place.user_symlink("err", place.victim)
    if how == "cancel":
        run.cancel(running)
    end = ends.wait(9)
    assert end.end is not None and end.end.state == (JobState.CANCELLED if how == "cancel" else JobState.TIMEOUT)
    assert place.victim_untouched()
    first, line = moved.read_text().splitlines()
    assert first == "started"
    assert line.startswith("slurmstepd: error: *** JOB 9 ON c000 CANCELLED AT ")
    assert line.endswith("DUE TO TIME LIMIT ***" if how == "time limit" else " ***")
    assert owner_mode(moved) == (NOBODY, 0o644)


def test_the_cgroup_setup_still_runs_in_the_child_and_says_why_it_failed(
        place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    cpu = min(os.sched_getaffinity(0))
    script = "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status\n"
    run.start(job(14, place, script=script, stdout="o"), dict(ENV), None, {cpu})
    assert ends.wait(14).launch_failure == ""
    assert (place.home / "o").read_text().split() == ["Cpus_allowed_list:", str(cpu)]
    run.start(job(15, place, stdout="o"), dict(ENV), None, {100000})  # no such CPU: sched_setaffinity refuses
    reason = "setting up the job's process failed: Invalid argument"
    assert ends.wait(15).launch_failure == reason
    assert (place.home / "o").read_text() == f"slurmstepd: error: {reason}\n"  # through the file nobody opened


# -- an agent that is not root already is the user -------------------------------------------------


def test_the_time_limit_line_and_the_jobs_later_output_both_survive(place: Place,
                                                                     launcher: tuple[Launcher, Ends]) -> None:
    """The job's own writes go to the end of the file (O_APPEND, as slurmstepd opens it): what it
    prints after slurmstepd's line (its SIGTERM trap) comes after the line, never over it."""
    run, ends = launcher
    out = place.home / "slurm-14.out"
    script = "#!/bin/sh\ntrap 'echo after-term; exit 3' TERM\necho before\nsleep 30 &\nwait\n"
    running = run.start(job(14, place, script=script, time_limit=1), dict(ENV), None, None)
    end = ends.wait(14)
    assert running is end and end.end is not None and end.end.state == JobState.TIMEOUT
    lines = out.read_text().splitlines()
    assert lines[0] == "before"
    assert lines[1].startswith("slurmstepd: error: *** JOB 14 ON c000 CANCELLED AT ")
    assert lines[1].endswith(" DUE TO TIME LIMIT ***")
    assert lines[2:] == ["after-term"]


@pytest.mark.parametrize("mode", ["", "truncate", "append"])
def test_open_mode_appends_or_truncates_as_the_user(place: Place, launcher: tuple[Launcher, Ends], mode: str) -> None:
    run, ends = launcher
    out, err = place.home / "o", place.home / "e"
    for path in (out, err):
        path.write_text("old\n")
        os.chown(path, NOBODY, NOGROUP)
    script = "#!/bin/sh\necho new\necho new-err >&2\n"
    run.start(job(15, place, script=script, stdout=out, stderr=err, open_mode=mode), dict(ENV), None, None)
    assert ends.wait(15).launch_failure == ""
    kept = ["old"] if mode == "append" else []
    assert out.read_text().splitlines() == [*kept, "new"]
    assert err.read_text().splitlines() == [*kept, "new-err"]
    assert fcntl is not None and owner_mode(out)[0] == NOBODY


def test_append_still_refuses_a_symlink_to_a_root_file(place: Place, launcher: tuple[Launcher, Ends]) -> None:
    run, ends = launcher
    link = place.user_symlink("out-append", place.victim)
    run.start(job(16, place, stdout=link, open_mode="append"), dict(ENV), None, None)
    assert ends.wait(16).launch_failure == f"Could not open stdout file {link}: Permission denied"
    assert place.victim_untouched()


def test_an_unprivileged_agent_takes_the_same_path(place: Place) -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the agent as nobody: a Launcher built after dropping root
        said: dict[str, object] = {}
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOGROUP)
            os.setuid(NOBODY)
            ends = Ends()
            run = Launcher("c000", "userfiles", str(place.home / "spool"), 1.0, ends)
            link = place.user_symlink("out-link", place.victim)
            run.start(job(11, place, script=SHOW, stdout="o", env={"SLURM_UMASK": "0077"}),
                      {**ENV, "SLURM_UMASK": "0077"}, None, None)
            run.start(job(12, place, stdout=link), dict(ENV), None, None)
            run.start(job(13, place, workdir=place.private, stdout="/dev/null"), dict(ENV), None, None)
            said = {str(n): ends.wait(n).launch_failure for n in (11, 12, 13)}
            said["out"] = (place.home / "o").read_text()
            said["mode"] = owner_mode(place.home / "o")
        except BaseException as exc:
            said = {"error": repr(exc)}
        finally:
            os.write(write, json.dumps(said).encode())
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        said = json.loads(f.read())
    os.waitpid(pid, 0)
    assert "error" not in said, said["error"]
    assert said["11"] == ""
    assert str(said["out"]).splitlines()[:3] == [str(NOBODY), "0077", f"700 {NOBODY}"]
    assert said["mode"] == [NOBODY, 0o600]
    assert said["12"] == f"Could not open stdout file {place.home / 'out-link'}: Permission denied"
    assert said["13"] == f"chdir({place.private}): Permission denied"
    assert place.victim_untouched()
