"""Association and QOS limits (issue 34) against Slurm 22.05 with slurmdbd: a scenario of its own.

Both clusters of the suite's shape (scenario.py), each started afresh with
``AccountingStorageEnforce=associations,limits,qos`` (Slurm: slurm/setup.sh's ``CONF_EXTRA``; pslurm:
the same line in its pslurm.conf). The same sacctmgr lines then make the same accounts, QOS and
limits on both (SET_UP), and each case runs a line that submits jobs and, a few seconds later, asks
squeue or scontrol what became of them: the reasons pending jobs wait for, the limits given, a submit
refused. ``python -m tests.conformance.limits`` runs it and prints each case's answers and whether
they are the same (it stops Slurm's daemons of the main suite's scenario: run it on its own); the
pytest test below does the same under ``pytest tests/conformance/limits.py`` (root, as the suite).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import scenario
from tests.conformance.corpus import Case
from tests.conformance.harness import Answer, compare, normalise

ENFORCE = "AccountingStorageEnforce=associations,limits,qos"
SET_UP = [
    "sacctmgr -i add account lab1,lab2",
    "sacctmgr -i add user root account=lab1,lab2",
    "sacctmgr -i add qos onegpu MaxTRESPerUser=gres/gpu=1",
    "sacctmgr -i add qos onesubmit MaxSubmitJobsPerUser=1",
    "sacctmgr -i add qos strict Flags=DenyOnLimit MaxWall=5",
    "sacctmgr -i modify user root where account=lab2 set qos=normal,onegpu,onesubmit,strict",
    "sacctmgr -i modify account lab1 set GrpTRES=gres/gpu=1",
    "sacctmgr -i modify account lab2 set MaxWall=10",
]
_JOB = "-o /dev/null --wrap 'sleep 300' >/dev/null"
CASES: list[Case] = [
    Case("limits: GrpTRES gres/gpu on an account",
         "squeue", f"sbatch -A lab1 --gres=gpu:1 -J grp1 {_JOB}; sbatch -A lab1 --gres=gpu:1 -J grp2 {_JOB}; "
                   "sleep 6; squeue -h -n grp1,grp2 -S j -o '%j %T %r'"),
    Case("limits: an account's MaxWall reaches its user", "squeue",
         f"sbatch -A lab2 -t 60 -J wall {_JOB}; sleep 6; squeue -h -n wall -o '%j %T %r %l'"),
    Case("limits: MaxWall is the limit of a job that asks none", "squeue",
         f"sbatch -A lab2 -H -J walldefault {_JOB}; squeue -h -n walldefault -o '%j %l'"),
    Case("limits: QOS MaxTRESPerUser", "squeue",
         f"sbatch -A lab2 -q onegpu --gres=gpu:1 -J pu1 {_JOB}; sbatch -A lab2 -q onegpu --gres=gpu:1 -J pu2 {_JOB}; "
         "sleep 6; squeue -h -n pu1,pu2 -S j -o '%j %T %r'"),
    Case("limits: QOS MaxSubmitJobsPerUser refuses at submit", "sbatch",
         f"sbatch -A lab2 -q onesubmit -H -J sub1 {_JOB}; sbatch -A lab2 -q onesubmit -H -J sub2 --wrap true"),
    Case("limits: DenyOnLimit refuses a job over MaxWall", "sbatch",
         "sbatch -A lab2 -q strict -t 30 -J deny -o /dev/null --wrap true"),
    Case("limits: a QOS the association does not allow", "sbatch",
         "sbatch -A lab1 -q onegpu -J noqos -o /dev/null --wrap true"),
    Case("limits: scontrol show job of a job held by MaxWall", "scontrol",
         "scontrol show job $(squeue -h -n wall -o %i) | grep -o 'JobState=[A-Z]* Reason=[A-Za-z]*'"),
    Case("limits: sacctmgr lists the limits", "sacctmgr",
         "sacctmgr -nP list assoc account=lab1,lab2 format=account,user,grptres,maxwall,qos"),
    Case("limits: sacctmgr lists the QOS limits", "sacctmgr",
         "sacctmgr -nP list qos onegpu,onesubmit,strict format=name,flags,maxtrespu,maxsubmitpu,maxwall"),
]


def start_slurm() -> None:
    env = {"PATH": scenario.SYSTEM_PATH, "RESET": "1", "ACCT": "dbd", "CONF_EXTRA": ENFORCE}
    proc = subprocess.run(["bash", str(scenario.SLURM_SETUP)], env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or "idle" not in proc.stdout:
        raise RuntimeError(f"Slurm did not start: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def start_pslurm(root: Path, bin_dir: Path) -> tuple[Path, Path]:
    """pslurm of the suite's shape with the same enforcement (scenario.start_pslurm's, one line more)."""
    conf = scenario.PSLURM_CONF
    scenario.PSLURM_CONF = conf + ENFORCE + "\n"
    try:
        return scenario.start_pslurm(root, bin_dir)
    finally:
        scenario.PSLURM_CONF = conf


class LimitsRun:
    """Both clusters up with limits enforced and SET_UP run on each."""

    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        start_slurm()
        self.state, names = start_pslurm(root, bin_dir)
        self.slurm, self.pslurm = scenario.sides(root, self.state, names)
        for side in (self.slurm, self.pslurm):
            for line in SET_UP:
                done = side.run(line)
                if done.rc != 0:
                    raise RuntimeError(f"{side.name}: {line}: {done.err.strip() or done.out.strip()}")

    def run_case(self, case: Case) -> tuple[Answer, Answer, str]:
        answers = []
        for side in (self.slurm, self.pslurm):  # one after the other: each waits for its own scheduler
            got = side.run(case.line, timeout=120)
            answers.append(Answer(got.rc, normalise(got.out, side, {}), normalise(got.err, side, {})))
        return answers[0], answers[1], compare(answers[0], answers[1])

    def close(self) -> None:
        scenario.stop_pslurm(self.state, self.bin_dir)


@pytest.fixture(scope="module")
def limits_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LimitsRun]:
    if os.geteuid() != 0:
        pytest.fail("the conformance suite starts Slurm's daemons: it runs as root (CI does)")
    run = LimitsRun(tmp_path_factory.mktemp("limits"), Path(sys.executable).parent)
    try:
        yield run
    finally:
        run.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_limits_case(limits_run: LimitsRun, case: Case) -> None:
    slurm, pslurm, differs = limits_run.run_case(case)
    assert not differs, f"{case.id} differs from Slurm 22.05 ({differs}):\nslurm: {slurm}\npslurm: {pslurm}"


def main() -> int:
    run = LimitsRun(Path(tempfile.mkdtemp(prefix="conformance-limits-")), Path(sys.executable).parent)
    try:
        for case in CASES:
            slurm, pslurm, differs = run.run_case(case)
            print(f"== {case.id}: {'differs (' + differs + ')' if differs else 'identical'}\n"
                  f"-- slurm  rc={slurm.rc} out={slurm.out!r} err={slurm.err!r}\n"
                  f"-- pslurm rc={pslurm.rc} out={pslurm.out!r} err={pslurm.err!r}")
    finally:
        run.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
