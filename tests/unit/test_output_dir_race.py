"""An output file that could not be created for a missing directory is a launch tried again (the
agent's bounded wait), even when the directory appeared between the child's open and the agent's
look at it: submitit makes a job's folder right after sbatch answers, and a cancel, a sacct and a
result read all follow at once."""

from __future__ import annotations

import errno
from pathlib import Path

from pslurm.nodeagent.userfiles import STDOUT, UserStart


def test_enoent_on_an_output_file_is_a_missing_directory_even_once_it_exists(tmp_path: Path) -> None:
    made_meanwhile = tmp_path / "log" / "5"
    made_meanwhile.mkdir(parents=True)  # the client made it after the child's open failed
    child = UserStart(str(tmp_path), str(made_meanwhile / "5_0_log.out"), None, {})
    reason = child._reason(STDOUT, errno.ENOENT, "")
    assert child.output_dir_missing
    assert reason == f"Could not open stdout file {made_meanwhile / '5_0_log.out'}: No such file or directory"
