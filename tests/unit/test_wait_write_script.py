"""psbatch -W/--wait's exit status, ``-t 0``, ``pscontrol write batch_script`` and the expanded
StdOut/StdErr/StdIn of ``pscontrol show job`` (no controller: the API is a stand-in)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pslurm.cli import psbatch, pscontrol
from pslurm.cli.options import parse_command_line, parse_directive_lines
from pslurm.core.timefmt import parse_time_limit


@pytest.mark.parametrize("text", ["0", "0:00", "0:0:0", "0-0", "00"])
def test_a_zero_time_limit_is_no_limit(text: str) -> None:
    assert parse_time_limit(text) is None  # sbatch: "A time limit of zero requests that no time limit be imposed"


def test_wait_is_a_setting_of_sbatch_and_an_inert_value_of_srun() -> None:
    for argv in (["-W", "x.sh"], ["--wait", "x.sh"], ["--wait", "x.sh", "a"]):
        parsed = parse_command_line(argv, "sbatch")
        assert parsed.values["wait"] is True and parsed.positional[0] == "x.sh" and not parsed.inert
    assert parse_directive_lines([(2, ["-W"])]).values["wait"] is True
    srun = parse_command_line(["-W", "30", "true"], "srun")  # srun -W SECONDS: another option
    assert srun.inert == {"wait": "30"} and srun.positional == ["true"]


def test_wait_status_is_the_exit_code_or_1_for_a_signal() -> None:
    assert psbatch.job_exit_status(0, 0) == 0
    assert psbatch.job_exit_status(3, 0) == 3
    assert psbatch.job_exit_status(0, 15) == 1  # cancelled: ExitCode=0:15


def _job(**kw: Any) -> SimpleNamespace:
    spec = SimpleNamespace(name="train", user="ana", workdir="/home/ana", stdout=None, stderr=None,
                           script="#!/bin/sh\necho hi\n", uid=os.getuid(), interactive=False,
                           environment={"A": "1"})
    for key in ("name", "user", "workdir", "stdout", "stderr", "script", "uid", "interactive", "environment"):
        if key in kw:
            setattr(spec, key, kw.pop(key))
    fields = {"job_id": 14, "node": None, "array_job_id": None, "array_task_id": None, **kw}
    return SimpleNamespace(spec=spec, **fields)


def test_std_paths_are_expanded_and_absolute() -> None:
    assert pscontrol.std_paths(_job()) == ("/home/ana/slurm-14.out", "/home/ana/slurm-14.out", "/dev/null")
    task = _job(job_id=17, array_job_id=14, array_task_id=3)
    assert pscontrol.std_paths(task)[0] == "/home/ana/slurm-14_3.out"
    named = _job(stdout="logs/%x_%u_%j_%N.out", stderr="/tmp/e_%A_%a.err", node="c[001-002]")
    assert pscontrol.std_paths(named) == ("/home/ana/logs/train_ana_14_c001.out", "/tmp/e_14_4294967294.err",
                                          "/dev/null")
    assert pscontrol.std_paths(_job(stdout="o_%N.out"))[0] == "/home/ana/o_%N.out"  # no node yet


def _serve(monkeypatch: pytest.MonkeyPatch, jobs: list[SimpleNamespace]) -> None:
    monkeypatch.setattr(pscontrol, "connect",
                        lambda prog: SimpleNamespace(job=lambda job_id: next((j for j in jobs if j.job_id == job_id),
                                                                             None)))



def test_write_batch_script_to_a_file_to_stdout_and_its_errors(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, run_pscontrol: Callable[..., tuple[int, str, str]]) -> None:
    other = os.getuid() + 1
    _serve(monkeypatch, [_job(), _job(job_id=15, interactive=True, script=None),
                         _job(job_id=16, uid=other, script=None, environment={}),
                         _job(job_id=18, uid=other, interactive=True, script=None, environment={}),
                         _job(job_id=19, uid=other),
                         _job(job_id=20, uid=other, interactive=True, script=None)])
    monkeypatch.chdir(tmp_path)
    assert run_pscontrol("write", "batch_script", "14") == (0, "batch script for job 14 written to slurm-14.sh\n", "")
    assert (tmp_path / "slurm-14.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert run_pscontrol("write", "batch", "14", "mine.sh") == (0, "batch script for job 14 written to mine.sh\n", "")
    assert (tmp_path / "mine.sh").read_text() == "#!/bin/sh\necho hi\n"
    assert run_pscontrol("write", "batch_script", "14", "-") == (0, "#!/bin/sh\necho hi\n", "")
    assert run_pscontrol("write", "batch_script", "19", "-")[1] == "#!/bin/sh\necho hi\n"  # an operator's view
    # scontrol's words, and its status 0
    failed = "job script retrieval failed: "
    assert run_pscontrol("write", "batch_script", "99") == (0, "", failed + "Invalid job id specified\n")
    assert run_pscontrol("write", "batch_script", "x") == (0, "", failed + "Invalid job id specified\n")
    assert run_pscontrol("write", "batch_script", "15") == (0, "", failed + "Job script not specified\n")
    assert run_pscontrol("write", "batch_script", "16") == (0, "", failed + "Invalid user id\n")
    assert run_pscontrol("write", "batch_script", "18") == (0, "", failed + "Invalid user id\n")
    assert run_pscontrol("write", "batch_script", "20") == (0, "", failed + "Job script not specified\n")  # operator
    assert not (tmp_path / "slurm-16.sh").exists()
    assert run_pscontrol("write", "bogus", "14")[::2] == (1, "invalid write argument:bogus\n")  # no name in front
    assert run_pscontrol("write", "batch_script", "14", "a", "b")[0] == 1
