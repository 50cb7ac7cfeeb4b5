"""psrun's output through the one stream path (agent -> controller -> psrun): every byte, in order,
whatever its size and however slowly psrun reads; a stream that breaks is an error, never a quiet
success; a batch job whose output directory appears just after submission still runs."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import BIN, Cluster, local_cluster, wait_for

MB = 1 << 20

# 50 MiB of pseudo-random bytes, the same each time (every byte value, no line structure)
GENERATE = ("import random, sys; r = random.Random(7); w = sys.stdout.buffer\n"
            "for _ in range(50): w.write(r.randbytes(1 << 20))\n")


def expected_bytes() -> bytes:
    import random

    r = random.Random(7)
    return b"".join(r.randbytes(MB) for _ in range(50))


def test_psrun_delivers_50_mb_of_binary_output_exactly(cluster: Cluster, tmp_path: Path) -> None:
    proc = subprocess.run([str(BIN / "psrun"), sys.executable, "-c", GENERATE], env=cluster.env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    want = expected_bytes()
    assert len(proc.stdout) == len(want)
    assert hashlib.sha256(proc.stdout).hexdigest() == hashlib.sha256(want).hexdigest()


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _daemons(state_dir: Path) -> dict[int, str]:
    """The cluster's daemons: pid -> psctld or psd (``python -m pslurm.controller.app -f CONF``...)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        line = " ".join(a.decode(errors="replace") for a in argv)
        if str(state_dir) in line and "pslurm.nodeagent.app" in line:
            found[int(entry.name)] = "psd"
        elif str(state_dir) in line and "pslurm.controller.app" in line:
            found[int(entry.name)] = "psctld"
    return found


def test_a_slow_reader_holds_the_job_back_not_the_daemons_memory(cluster: Cluster, tmp_path: Path) -> None:
    """psrun reading slowly: the job blocks as on a pipe; psd and psctld hold a bounded buffer, not
    what the job writes (300 MB here); then every byte arrives."""
    daemons = _daemons(cluster.state_dir)
    assert daemons, "the cluster's daemons are not found"
    before = {pid: _rss_kb(pid) for pid in daemons}
    size = 300 * MB
    proc = subprocess.Popen([str(BIN / "psrun"), "sh", "-c", f"head -c {size} /dev/zero"], env=cluster.env,
                            cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    got = len(proc.stdout.read(64 * 1024))
    time.sleep(4)  # psrun reads nothing meanwhile: the pipe to it fills, then psrun stops reading its stream
    grown = {pid: _rss_kb(pid) - before[pid] for pid in daemons}
    while chunk := proc.stdout.read(MB):
        got += len(chunk)
    proc.wait(timeout=120)
    assert proc.returncode == 0 and got == size
    worst = max(grown.values())
    print(f"\nlargest growth of a daemon's RSS while psrun did not read: {worst / 1024:.1f} MiB "
          f"({', '.join(f'{daemons[p]}: {g / 1024:.1f}' for p, g in grown.items())})")
    assert worst < 64 * 1024, grown  # 300 MB written: the daemons kept a few MiB of it


def test_a_stream_that_breaks_is_one_line_and_a_failure(tmp_path: Path) -> None:
    """The job's node agent dies while psrun follows it: psrun says its output may be missing and
    exits non-zero (the job ends NODE_FAIL once the node has been silent for SlurmdTimeout)."""
    with local_cluster(tmp_path / "state", 1, 0) as small:
        proc = subprocess.Popen([str(BIN / "psrun"), "sh", "-c", "echo started; exec sleep 30"], env=small.env,
                                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "started\n"
        [agent] = [pid for pid, kind in _daemons(small.state_dir).items() if kind == "psd"]
        os.kill(agent, signal.SIGKILL)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode != 0, err
        assert re.search(r"^psrun: error: job \d+: its output stream broke, output may be missing: ", err, re.M), err


def test_an_output_directory_made_just_after_submission_is_waited_for(cluster: Cluster, tmp_path: Path) -> None:
    """submitit makes a job's folder only once sbatch has returned: the job still starts (Slurm 22.05
    fails it with "Could not open stdout file" when its start wins the race)."""
    folder = tmp_path / "later"
    submitted = cluster.run("psbatch", "--parsable", "-o", f"{folder}/%j.out", "--wrap", "echo ran in $PWD",
                            cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    time.sleep(0.5)
    folder.mkdir()
    out = folder / f"{job_id}.out"
    wait_for(lambda: out.exists() and out.read_text() == f"ran in {tmp_path}\n", timeout=30, interval=0.1)
    shown = cluster.run("pscontrol", "show", "job", job_id)
    assert re.search(r"JobState=COMPLETED", shown.stdout), shown.stdout
