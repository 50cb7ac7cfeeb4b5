"""The two clusters, of one shape, and the jobs every case reads, set up the same way on both.

Slurm 22.05 from Debian's packages (``slurm/setup.sh`` here, RESET=1: job ids from 1, an empty
accounting database) and pslurm (``pslurm up --conf`` of the same shape): cluster ``anchor``, nodes
``c[000-003]`` with 8 CPUs, 4000 MB and 2 GPUs each, one partition ``gpu``, and root's account
``root`` (a new slurmdbd's association). The scenario's command
lines run on both in the same order, so both clusters give their jobs the same ids; where they do
not, the ids are mapped (harness.normalise).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.conformance.harness import Side, base_env, id_from_submission

HERE = Path(__file__).parent
SLURM_SETUP = HERE / "slurm" / "setup.sh"
CLUSTER = "anchor"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

HOST = socket.gethostname().split(".")[0]
PSLURM_CONF = f"""ClusterName={CLUSTER}
SlurmctldHost={HOST}(127.0.0.1)
KillWait=30
MaxJobCount=20000
MaxArraySize=10001
MinJobAge=3600
AccountName=root Users=root
NodeName=c000 CPUs=8 RealMemory=4000 Gres=gpu:2
NodeName=c001 CPUs=8 RealMemory=4000 Gres=gpu:2
NodeName=c002 CPUs=8 RealMemory=4000 Gres=gpu:2
NodeName=c003 CPUs=8 RealMemory=4000 Gres=gpu:2
PartitionName=gpu Nodes=c[000-003] Default=YES MaxTime=INFINITE State=UP
"""
PSLURM_GRES = "".join(f"NodeName=c00{i} Name=gpu Count=2\n" for i in range(4))

# The jobs every case may name, in submission order (their ids: 1, 2, ...): (name, command line, the
# state it is waited for). A held array comes last: Slurm gives an array's tasks ids of their own as
# they start, which would shift every id after it.
JOBS: list[tuple[str, str, str]] = [
    ("timeout", "sbatch -J timeout -t 1 -o /dev/null --wrap 'sleep 300'", "TIMEOUT"),
    ("done", "sbatch -J done --wrap 'echo hello'", "COMPLETED"),
    ("failed", "sbatch -J failed -o /dev/null --wrap 'exit 3'", "FAILED"),
    ("cancelled", "sbatch -J cancelled -H -o /dev/null --wrap true", "CANCELLED"),
    ("running", "sbatch -J running -o /dev/null --wrap 'sleep 3000'", "RUNNING"),
    ("gpujob", "sbatch -J gpujob --gres=gpu:1 -o /dev/null --wrap 'sleep 3000'", "RUNNING"),
    ("multi", "sbatch -J multi -N 2 -o /dev/null --wrap 'sleep 3000'", "RUNNING"),
    ("held", "sbatch -J held -H -t 10 -o /dev/null --wrap true", "PENDING"),
    ("dep", "sbatch -J dep -d afterok:{running} -o /dev/null --wrap true", "PENDING"),
    ("stepjob", "sbatch -J stepjob -o /dev/null --wrap 'srun sleep 3000'", "RUNNING"),
    ("rich", "sbatch -J rich -H -t 1-00:00:00 -N 1 -n 4 --mem=100 --comment=note --nice=10 -o out.%j --wrap true",
     "PENDING"),
    ("killed", "sbatch -J killed -o /dev/null --wrap 'kill -9 $$'", "FAILED"),
    # c000's second GPU is gpujob's: this one waits for Resources (sprio lists it)
    ("waiting", "sbatch -J waiting --gres=gpu:2 -w c000 -o /dev/null --wrap true", "PENDING"),
    ("arr", "sbatch -J arr --array=0-3 -H -o /dev/null --wrap true", "PENDING"),
]
AFTER = ["scancel {cancelled}", "scontrol update NodeName=c003 State=DRAIN Reason=maint"]
FINAL = {"TIMEOUT", "COMPLETED", "FAILED", "CANCELLED"}


def start_slurm() -> None:
    """Slurm from nothing (about 20 s; the packages are installed on a machine that lacks them)."""
    proc = subprocess.run(["bash", str(SLURM_SETUP)], env={"PATH": SYSTEM_PATH, "RESET": "1", "ACCT": "dbd"},
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or "idle" not in proc.stdout:
        raise RuntimeError(f"Slurm did not start: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def start_pslurm(root: Path, bin_dir: Path) -> tuple[Path, Path]:
    """pslurm of the same shape, and Slurm's command names for its commands; (state dir, names' dir)."""
    source = root / "conf"
    source.mkdir(parents=True)
    (source / "pslurm.conf").write_text(PSLURM_CONF)
    (source / "gres.conf").write_text(PSLURM_GRES)
    state = root / "state"
    names = root / "bin"
    subprocess.run([str(bin_dir / "pslurm"), "up", "--conf", str(source / "pslurm.conf"), "--state-dir", str(state)],
                   check=True, capture_output=True, text=True, timeout=120)
    subprocess.run([str(bin_dir / "pslurm"), "compat", "install", "--bin-dir", str(names)], check=True,
                   capture_output=True, text=True, timeout=60)
    return state, names


def stop_pslurm(state: Path, bin_dir: Path) -> None:
    subprocess.run([str(bin_dir / "pslurm"), "down", "--state-dir", str(state)], capture_output=True, timeout=120)


def sides(root: Path, pslurm_state: Path, names: Path) -> tuple[Side, Side]:
    """The two sides, each with a working directory of its own (the scenario's jobs run there)."""
    made = []
    for name in ("slurm", "pslurm"):
        work = root / f"work-{name[0]}"  # one length for both: a path cut to a column's width cuts alike
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        if name == "slurm":
            env = base_env(SYSTEM_PATH, work)
        else:
            env = base_env(f"{names}:{SYSTEM_PATH}", work, {"PSLURM_CONF": str(pslurm_state / "pslurm.conf")})
        made.append(Side(name, env, work))
    return made[0], made[1]


def _states(side: Side) -> dict[str, str]:
    """Each job's state by name, as this side's squeue says (the array's tasks under ``arr``)."""
    answer = side.run("squeue -h -t all -o '%j|%T'")
    states: dict[str, str] = {}
    for line in answer.out.splitlines():
        name, _, state = line.partition("|")
        states[name.strip()] = state.strip()
    return states


def _accounted(side: Side, names: list[str]) -> dict[str, str]:
    answer = side.run("sacct -X -n -P -o JobName,State -j " + ",".join(f"{{{name}}}" for name in names))
    return {name: state.split()[0] for name, _, state in (line.partition("|") for line in answer.out.splitlines())}


def _steps_running(side: Side) -> bool:
    lines = side.run("sacct -n -P -o JobID,State -j {stepjob}").out.splitlines()
    return f"{side.ids['stepjob']}.0|RUNNING" in lines


def wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise RuntimeError(f"the scenario did not come about in {timeout:.0f} s: {what}")


def set_up(side: Side) -> None:
    """Submit the scenario's jobs (learning their ids), then wait until each is in its state."""
    for name, line, _ in JOBS:
        answer = side.run(line)
        job_id = id_from_submission(answer.out)
        if answer.rc != 0 or job_id is None:
            raise RuntimeError(f"{side.name}: {side.line(line)}: {answer.err.strip() or answer.out.strip()}")
        side.ids[name] = job_id
        time.sleep(0.3)  # one after the other, as a user would: the same placements on both
    for line in AFTER:
        answer = side.run(line)
        if answer.rc != 0:
            raise RuntimeError(f"{side.name}: {side.line(line)}: {answer.err.strip()}")
    wanted = {name: state for name, _, state in JOBS}

    def reached() -> bool:
        states = _states(side)
        return all(states.get(name) == state for name, state in wanted.items())

    wait(f"{side.name}: {wanted} (now {_states(side)})", reached, 150)
    wait(f"{side.name}: stepjob's step", lambda: _steps_running(side), 30)
    ended = {name: state for name, state in wanted.items() if state in FINAL}
    wait(f"{side.name}: sacct lists the ended jobs", lambda: all(
        _accounted(side, list(ended)).get(name) == state for name, state in ended.items()), 60)


def set_up_both(slurm: Side, pslurm: Side) -> None:
    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(set_up, slurm), pool.submit(set_up, pslurm)]:
            future.result()


def id_map(slurm: Side, pslurm: Side) -> dict[str, str]:
    """pslurm's job ids that differ from Slurm's, -> Slurm's."""
    return {mine: slurm.ids[name] for name, mine in pslurm.ids.items()
            if name in slurm.ids and mine != slurm.ids[name] and re.fullmatch(r"\d+", mine)}
