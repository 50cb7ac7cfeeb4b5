"""Slurm workflows end to end on a `pslurm up` cluster (issue #11), each run the way a Slurm user runs it and
checked against what Slurm 22.05 prints for the same workflow: ranks of a 2-node job meeting over TCP, three
sequential steps, psalloc reading its commands from a here-document, every sbatch option of the man page in a
batch script's directives, and a program written for Slurm's command names run through `pslurm compat install`.

The local agents share one host, and their node names (c000, ...) resolve nowhere: the ranks find the first
node's address as a Slurm program does when names do not resolve, by `scontrol show node`'s NodeAddr."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pslurm.cli.options import parse_directive_lines, table, warn_inert
from pslurm.core.directives import directive_lines
from tests.conftest import BIN, Cluster, cli, cluster_from_conf, wait_for

FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "DEADLINE")


def with_bin(cluster: Cluster) -> dict[str, str]:
    """The cluster's environment with pslurm's commands on PATH, so scripts call them by name."""
    return {**cluster.env, "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def submit(cluster: Cluster, tmp_path: Path, wrap: str, *args: str) -> int:
    proc = cluster.run("psbatch", "--parsable", "-o", str(tmp_path / "out-%j.txt"), *args, "--wrap", wrap,
                       cwd=tmp_path, env=with_bin(cluster))
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def acct(cluster: Cluster, job: int | str, fields: str, *args: str) -> list[list[str]]:
    """psacct's parsable lines (sacct -P -n -o FIELDS) for one job, split."""
    out = cluster.run("psacct", "-j", str(job), "-P", "-n", "-o", fields, *args, check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def ended(cluster: Cluster, job: int, timeout: float = 90) -> str:
    """The job's final state, polled as a Slurm pipeline polls sacct."""
    def state() -> str:
        rows = acct(cluster, job, "State", "-X")
        return rows[0][0] if rows and rows[0][0].split()[0] in FINAL else ""

    return str(wait_for(state, timeout=timeout, interval=0.25))


# --- ranks of a 2-node job meeting over TCP -----------------------------------------------------------------------

RANK_PY = '''\
"""One rank of a job: rank 0 listens on the first node of the job, every rank (0 too) connects there and
sends its SLURM_PROCID and SLURMD_NODENAME; rank 0 checks it heard every rank, from every node."""
import os
import re
import socket
import subprocess
import sys
import time

scontrol, base = sys.argv[1], int(sys.argv[2])
nodes = subprocess.run([scontrol, "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]], capture_output=True,
                       text=True, check=True).stdout.split()
try:
    address, how = socket.gethostbyname(nodes[0]), "by name"
except OSError:  # node names that resolve nowhere: the node's address, as scontrol shows it
    shown = subprocess.run([scontrol, "show", "node", nodes[0]], capture_output=True, text=True, check=True).stdout
    address, how = re.search(r"NodeAddr=(\\S+)", shown).group(1), "by NodeAddr"
port = base + int(os.environ["SLURM_JOB_ID"]) % 1000
rank, ntasks = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
server = socket.create_server((address, port), backlog=ntasks) if rank == 0 else None
deadline = time.monotonic() + 60
while True:
    try:
        with socket.create_connection((address, port), timeout=5) as conn:
            conn.sendall(f"{rank} {os.environ['SLURMD_NODENAME']}\\n".encode())
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
if server is not None:
    server.settimeout(60)
    heard = {}
    while len(heard) < ntasks:
        conn, _ = server.accept()
        with conn:
            sender, node = conn.makefile().readline().split()
            heard[int(sender)] = node
    print(f"rank 0 of {nodes} on {address}:{port} ({how}) heard ranks {sorted(heard)} "
          f"from nodes {sorted(set(heard.values()))}", flush=True)
    everyone = sorted(heard) == list(range(ntasks)) and len(set(heard.values())) == int(os.environ["SLURM_NNODES"])
    sys.exit(0 if everyone else 1)
'''


def test_ranks_of_a_two_node_job_meet_over_tcp(cluster: Cluster, tmp_path: Path) -> None:
    # the same script, with scontrol and srun, runs unchanged on Slurm 22.05 (rank 0 there: 127.0.0.1 by NodeAddr)
    (tmp_path / "rank.py").write_text(RANK_PY)
    # below Linux's ephemeral range (32768-60999), where the daemons' free ports and every client's own port
    # come from: a port there was once taken when rank 0 bound it during a full run
    base = random.randrange(10000, 31000)
    job = submit(cluster, tmp_path, f"psrun python3 rank.py pscontrol {base}", "-N", "2", "--ntasks-per-node=2")
    state = ended(cluster, job)
    text = (tmp_path / f"out-{job}.txt").read_text()
    assert state == "COMPLETED", text
    port = base + job % 1000
    assert re.fullmatch(rf"rank 0 of \['c00\d', 'c00\d'\] on 127\.0\.0\.1:{port} \(by (name|NodeAddr)\) heard ranks "
                        r"\[0, 1, 2, 3\] from nodes \['c00\d', 'c00\d'\]\n", text), text
    first, second = re.findall(r"c00\d", text)[:2]
    assert first != second
    rows = acct(cluster, job, "JobID,State,ExitCode,NTasks,NodeList")
    assert [row[:4] for row in rows[1:]] == [[f"{job}.batch", "COMPLETED", "0:0", "1"],
                                             [f"{job}.0", "COMPLETED", "0:0", "4"]], rows
    assert rows[1][4] == first and rows[2][4] == rows[0][4]  # the script on the first node, the step on both
    shown = cluster.run("pscontrol", "show", "hostnames", rows[2][4], check=True).stdout.split()
    assert shown == [first, second], rows


# --- three sequential steps ---------------------------------------------------------------------------------------

def test_three_sequential_steps_are_listed_with_their_states(cluster: Cluster, tmp_path: Path) -> None:
    # as on Slurm 22.05 (srun for psrun): the script goes on after a failed step, and sacct lists
    # J|wrap|COMPLETED|0:0, J.batch|batch|COMPLETED|0:0, J.0|hostname|COMPLETED|0:0, J.1|true|COMPLETED|0:0,
    # J.2|sh|FAILED|3:0
    job = submit(cluster, tmp_path, 'psrun hostname; psrun -n 1 true; psrun -n 1 sh -c "exit 3"; echo rc=$?',
                 "-n", "2")
    state = ended(cluster, job)
    text = (tmp_path / f"out-{job}.txt").read_text()
    assert state == "COMPLETED", text
    host = subprocess.run(["hostname"], capture_output=True, text=True, check=True).stdout
    assert text.startswith(host * 2), text  # the two tasks of step 0
    assert re.search(r"^psrun: error: c00\d: task 0: Exited with exit code 3\nrc=3\n\Z", text, re.M), text
    rows = acct(cluster, job, "JobID,JobName,State,ExitCode,Start,End")
    assert [row[:4] for row in rows] == [
        [str(job), "wrap", "COMPLETED", "0:0"], [f"{job}.batch", "batch", "COMPLETED", "0:0"],
        [f"{job}.0", "hostname", "COMPLETED", "0:0"], [f"{job}.1", "true", "COMPLETED", "0:0"],
        [f"{job}.2", "sh", "FAILED", "3:0"]], rows
    steps = rows[2:]
    assert all(earlier[5] <= later[4] for earlier, later in zip(steps, steps[1:], strict=False)), rows
    assert [row[0] for row in acct(cluster, job, "NTasks")[2:]] == ["2", "1", "1"]


# --- psalloc reading a here-document --------------------------------------------------------------------------------

def test_psalloc_runs_a_here_document_in_the_login_shell(cluster: Cluster, tmp_path: Path) -> None:
    # salloc -n 1 <<EOF ... EOF: salloc's default command is the user's shell (the password database's, not
    # $SHELL), reading the here-document; the first srun must not read it (-i none, or </dev/null), as srun
    # sends its stdin to task 0. Slurm 22.05 prints the same lines, exits 4, and sacct says FAILED 4:0.
    here = ("psrun -i none printenv SLURM_STEP_ID SLURM_JOB_NUM_NODES\n"
            "psrun printenv SLURMD_NODENAME </dev/null\n"
            "echo job=$SLURM_JOB_ID\n"
            "exit 4\n")
    env = {**with_bin(cluster), "SHELL": "/bin/false"}  # salloc does not run $SHELL
    proc = cluster.run("psalloc", "-n", "1", input=here, env=env, cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    found = re.fullmatch(r"0\n1\n(c00\d)\njob=(\d+)\n", proc.stdout)
    assert found, proc.stdout + proc.stderr
    job = int(found.group(2))
    assert f"psalloc: Granted job allocation {job}\n" in proc.stderr
    assert f"psalloc: Relinquishing job allocation {job}\n" in proc.stderr
    assert ended(cluster, job) == "FAILED"
    assert acct(cluster, job, "JobID,State,ExitCode,NodeList") == [
        [str(job), "FAILED", "4:0", found.group(1)], [f"{job}.0", "COMPLETED", "0:0", found.group(1)],
        [f"{job}.1", "COMPLETED", "0:0", found.group(1)]]


# --- every sbatch option of the man page in #SBATCH lines -----------------------------------------------------------

# Every option of Slurm 22.05.8's sbatch(1) (its OPTIONS section, long names), each with a value the real sbatch's
# own parser takes: a file the test writes where it names one; None for a flag. (Checked against sbatch 22.05.8
# --test-only, one option a script: Slurm's controller then refuses only what its cluster lacks: --batch,
# --constraint, --prefer (features), --licenses, --reservation, --tmp, --clusters (no such cluster), and the GPU
# options that need a GPU request beside them, as COMPANIONS give them.)
MAN_PAGE_OPTIONS: dict[str, str | None] = {
    "account": "root", "acctg-freq": "task=30", "array": "0-1", "batch": "gpu", "bb": "capacity=1G",
    "bbf": "{dir}/bb.txt", "begin": "now+60", "chdir": "{dir}", "cluster-constraint": "c1", "clusters": "{cluster}",
    "comment": "'a comment'", "constraint": "gpu", "container": "{dir}", "contiguous": None, "core-spec": "0",
    "cores-per-socket": "1", "cpu-freq": "high", "cpus-per-gpu": "1", "cpus-per-task": "1",
    "deadline": "now+7days", "delay-boot": "5", "dependency": "singleton", "distribution": "block",
    "error": "{dir}/err-%j.txt", "exclude": "c001", "exclusive": None, "export": "ALL",
    "export-file": "{dir}/env.txt", "extra-node-info": "1:1:1", "get-user-env": None, "gid": "0",
    "gpu-bind": "closest", "gpu-freq": "high", "gpus": "1", "gpus-per-node": "1", "gpus-per-socket": "1",
    "gpus-per-task": "1", "gres": "gpu:1", "gres-flags": "enforce-binding", "help": None, "hint": "nomultithread",
    "hold": None, "ignore-pbs": None, "input": "/dev/null", "job-name": "every-option", "kill-on-invalid-dep": "yes",
    "licenses": "lic", "mail-type": "END", "mail-user": "ana@example.com", "mcs-label": "mcs", "mem": "100M",
    "mem-bind": "local", "mem-per-cpu": "100M", "mem-per-gpu": "100M", "mincpus": "1", "network": "sn_all",
    "nice": "10", "no-kill": None, "no-requeue": None, "nodefile": "{dir}/nodes.txt", "nodelist": "c000",
    "nodes": "1", "ntasks": "1", "ntasks-per-core": "1", "ntasks-per-gpu": "1", "ntasks-per-node": "1",
    "ntasks-per-socket": "1", "open-mode": "append", "output": "{dir}/out-%j.txt", "overcommit": None,
    "oversubscribe": None, "parsable": None, "partition": "gpu", "power": "level", "prefer": "gpu",
    "priority": "10", "profile": "none", "propagate": "NONE", "qos": "normal", "quiet": None, "reboot": None,
    "requeue": None, "reservation": "resv", "signal": "B:USR1@60", "sockets-per-node": "1", "spread-job": None,
    "switches": "1@1:00", "test-only": None, "thread-spec": "1", "threads-per-core": "1", "time": "10",
    "time-min": "5", "tmp": "10M", "uid": "0", "usage": None, "use-min-nodes": None, "verbose": None,
    "version": None, "wait": None, "wait-all-nodes": "0", "wckey": "wckey", "wrap": "true",
}
# sbatch(1)'s short letters, each for its long name
MAN_PAGE_SHORT = {
    "A": "account", "a": "array", "b": "begin", "D": "chdir", "M": "clusters", "C": "constraint", "S": "core-spec",
    "c": "cpus-per-task", "d": "dependency", "m": "distribution", "e": "error", "x": "exclude",
    "B": "extra-node-info", "G": "gpus", "h": "help", "H": "hold", "i": "input", "J": "job-name", "L": "licenses",
    "k": "no-kill", "F": "nodefile", "w": "nodelist", "N": "nodes", "n": "ntasks", "o": "output",
    "O": "overcommit", "s": "oversubscribe", "p": "partition", "q": "qos", "Q": "quiet", "t": "time",
    "v": "verbose", "V": "version", "W": "wait",
}
# A cluster with what the options name (as Slurm's controller checks them): node features, licenses, tmp disk
FEATURED_CONF = """ClusterName=workflows
SlurmdTimeout=10
KillWait=1
Licenses=lic:1
NodeName=c[000-001] CPUs=8 RealMemory=4000 Gres=gpu:2 Features=gpu TmpDisk=1000
PartitionName=gpu Nodes=c[000-001] Default=YES MaxTime=INFINITE
"""
FEATURED_GRES = "NodeName=c[000-001] Name=gpu Count=2\n"
# what Slurm's sbatch wants beside an option (the option alone is refused by sbatch itself)
COMPANIONS = {"gpus-per-socket": ["--sockets-per-node=1", "--gpus=1"], "gpus-per-task": ["--ntasks=1"],
              "mem-per-gpu": ["--gpus=1"], "ntasks-per-gpu": ["--gpus=1"]}
NOT_IN_A_JOB = {"help", "usage", "version"}  # sbatch ignores them in #SBATCH lines: it submits the job
PSLURM_OWN = {"gpu-mem"}  # the table's sbatch rows Slurm does not have
# names sbatch 22.05's getopt table takes (src/common/slurm_opt.c) that its man page does not list
GETOPT_ONLY = {"cluster", "context", "ntasks-per-tres", "tasks-per-node"}


def option_line(name: str, value: str | None, directory: Path, cluster_name: str) -> str:
    return f"--{name}" + ("" if value is None else "=" + value.format(dir=directory, cluster=cluster_name))


def option_files(directory: Path) -> None:
    """The files the options' values name."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "bb.txt").write_text("capacity=1G\n")
    (directory / "env.txt").write_text("FOO=1\n")
    (directory / "nodes.txt").write_text("c000\n")


def inert_names() -> set[str]:
    return {name for opt in table("sbatch") if opt.inert is not None for name in opt.names}


def test_the_option_table_knows_every_sbatch_option_of_the_man_page() -> None:
    rows = table("sbatch")
    names = {name for opt in rows for name in opt.names}
    assert names - PSLURM_OWN - GETOPT_ONLY == set(MAN_PAGE_OPTIONS) and GETOPT_ONLY <= names
    shorts = {opt.short: opt.names[0] for opt in rows if opt.short}
    assert shorts == MAN_PAGE_SHORT
    real = shutil.which("sbatch")
    from pslurm.cli.compat import is_ours  # pslurm's own sbatch also answers `slurm 22.05.8` now

    if real and not is_ours(Path(real)) and subprocess.run([real, "--version"], capture_output=True,
                                                           text=True).stdout.startswith("slurm"):
        # Slurm's own sbatch here (the anchor): each option its --help and --usage name is one of the man page's
        listed = "".join(subprocess.run([real, ask], capture_output=True, text=True).stdout
                         for ask in ("--help", "--usage"))
        assert "--mail-type" in listed
        assert set(re.findall(r"--([a-z][a-z-]+)", listed)) <= set(MAN_PAGE_OPTIONS)


def test_every_sbatch_option_in_one_script_goes_through_the_directive_parser(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    option_files(tmp_path)
    lines = [f"#SBATCH {option_line(name, value, tmp_path, 'pslurm')}" for name, value in MAN_PAGE_OPTIONS.items()]
    lines += [f"#SBATCH -{letter}" + ("" if MAN_PAGE_OPTIONS[name] is None else
                                      " " + str(MAN_PAGE_OPTIONS[name]).format(dir=tmp_path, cluster="pslurm"))
              for letter, name in MAN_PAGE_SHORT.items()]
    script = "#!/bin/bash\n" + "\n".join(lines) + "\ntrue\n"
    found = directive_lines(script)
    assert len(found) == len(MAN_PAGE_OPTIONS) + len(MAN_PAGE_SHORT)  # a directive every line
    parsed = parse_directive_lines(found)
    inert = inert_names()
    assert set(parsed.inert) == {n for n in MAN_PAGE_OPTIONS if n in inert}
    dest = {name: opt.dest for opt in table("sbatch") if opt.inert is None for name in opt.names}
    assert set(parsed.values) == {dest[n] for n in MAN_PAGE_OPTIONS if n not in inert and n not in NOT_IN_A_JOB}
    assert parsed.values["mail_type"] == "END" and parsed.values["job_name"] == "every-option"
    assert parsed.inert["licenses"] == "lic"
    warn_inert("psbatch", parsed)
    assert capsys.readouterr().err == ""  # --quiet (-Q) is among them
    del parsed.values["quiet"]
    warn_inert("psbatch", parsed)
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == len(parsed.inert)
    assert all(re.fullmatch(r"psbatch: warning: --[a-z-]+ has no effect in pslurm( \(.+\))?", w) for w in warnings)
    assert "psbatch: warning: --licenses has no effect in pslurm (no licenses)" in warnings


def test_every_sbatch_option_as_a_directive_through_psbatch_test_only(tmp_path: Path) -> None:
    (tmp_path / "featured").mkdir()
    with cluster_from_conf(tmp_path / "featured", FEATURED_CONF, FEATURED_GRES) as cluster:
        each_option_through_psbatch_test_only(cluster, tmp_path / "options")


def each_option_through_psbatch_test_only(cluster: Cluster, tmp_path: Path) -> None:
    option_files(tmp_path)
    cluster_name = re.search(r"^ClusterName=(\S+)", cluster.conf.read_text(), re.M).group(1)  # type: ignore[union-attr]
    inert = inert_names()

    def run(name: str) -> tuple[str, subprocess.CompletedProcess[str]]:
        script = tmp_path / f"{name}.sh"
        extra = "".join(f"#SBATCH {line}\n" for line in COMPANIONS.get(name, []))
        script.write_text(f"#!/bin/bash\n#SBATCH {option_line(name, MAN_PAGE_OPTIONS[name], tmp_path, cluster_name)}\n"
                          f"{extra}true\n")
        return name, cluster.run("psbatch", "--test-only", str(script), cwd=tmp_path)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, MAN_PAGE_OPTIONS))
    for name, proc in results:
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"--{name}: {said}"
        assert re.search(r"^psbatch: Job \d+ to start at \S+ using \d+ processors on nodes c00\d in partition gpu$",
                         proc.stderr, re.M), f"--{name}: {said}"
        assert "error" not in said, f"--{name}: {said}"
        warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
        expected = {f"--{n}" for n in [name, *(c[2:].split("=")[0] for c in COMPANIONS.get(name, []))] if n in inert}
        assert {w.split()[2] for w in warnings} == expected, f"--{name}: {said}"
        assert all(re.fullmatch(r"psbatch: warning: --[a-z-]+ has no effect in pslurm( \(.+\))?", w)
                   for w in warnings), f"--{name}: {said}"


# --- a workflow written for Slurm's commands ------------------------------------------------------------------------

WORKFLOW_SCRIPT = """#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=1
#SBATCH -o wf-%j.out
srun -n 2 -l printenv SLURM_PROCID SLURMD_NODENAME
srun -n 2 -l sh -c 'echo task $SLURM_PROCID of $SLURM_STEP_NUM_TASKS'
"""


def test_a_program_written_for_slurm_runs_through_the_compat_names(cluster: Cluster, tmp_path: Path) -> None:
    bin_dir = tmp_path / "slurm-bin"
    cli("pslurm", "compat", "install", "--bin-dir", str(bin_dir), check=True)
    env = {**cluster.env, "PATH": f"{bin_dir}:/usr/bin:/bin"}

    def slurm(*args: str, input: str = "") -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(list(args), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              input=input)
        assert proc.returncode == 0, f"{args}: {proc.stdout}{proc.stderr}"
        return proc

    def sacct_state(job: str) -> str:
        return slurm("sacct", "-X", "--parsable2", "--noheader", "-j", job, "-o", "State").stdout.strip()

    def done(job: str) -> str:
        return str(wait_for(lambda: (s := sacct_state(job)) and s.split()[0] in FINAL and s, timeout=90,
                            interval=0.5))

    # sbatch --parsable reading the script from stdin
    job = slurm("sbatch", "--parsable", input=WORKFLOW_SCRIPT).stdout
    assert re.fullmatch(r"\d+\n", job), job
    job = job.strip()
    # a second, long job, cancelled while it runs (squeue --json says so, as Slurm 22.05's)
    long = slurm("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 300").stdout.strip()
    wait_for(lambda: slurm("squeue", "-h", "-j", long, "-o", "%T").stdout.strip() == "RUNNING", timeout=60)
    listed = json.loads(slurm("squeue", "--json").stdout)
    assert listed["meta"]["plugin"]["type"] == "openapi/v0.0.38"
    assert {j["job_id"]: j["job_state"] for j in listed["jobs"]}.get(int(long)) == "RUNNING", listed["jobs"]
    slurm("scancel", long)
    assert done(long).split()[0] == "CANCELLED"  # Slurm 22.05 says "CANCELLED by UID"
    assert done(job) == "COMPLETED", (tmp_path / f"wf-{job}.out").read_text()

    text = (tmp_path / f"wf-{job}.out").read_text()
    lines = text.splitlines()
    nodes = re.fullmatch(r"0: 0\n0: (c00\d)\n1: 1\n1: (c00\d)", "\n".join(sorted(lines[:4])))  # step 0
    assert nodes and nodes.group(1) != nodes.group(2), text
    assert sorted(lines[4:]) == ["0: task 0 of 2", "1: task 1 of 2"], text
    steps = [line.split("|") for line in slurm("sacct", "--parsable2", "--noheader", "-j", job, "-o",
                                                 "JobID,JobName,State,ExitCode,NTasks,AllocCPUS").stdout.splitlines()]
    assert steps[1:] == [[f"{job}.batch", "batch", "COMPLETED", "0:0", "1", "1"],  # the batch host's CPU
                         [f"{job}.0", "printenv", "COMPLETED", "0:0", "2", "2"],
                         [f"{job}.1", "sh", "COMPLETED", "0:0", "2", "2"]], steps
    assert steps[0][:4] == [job, "sbatch", "COMPLETED", "0:0"]  # a script from stdin: the job is named sbatch
    cli("pslurm", "compat", "uninstall", "--bin-dir", str(bin_dir), check=True)
