"""psrun's output stream that breaks is an error, never a quiet success; a batch job whose output
directory appears just after submission still runs. (Every byte of huge output, and a psrun that stops
reading: tests/adversarial/test_output_attacks.py, as an ordinary user.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, Cluster, local_cluster, wait_for


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
