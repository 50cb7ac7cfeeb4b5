"""sacctmgr and sshare through the real commands (issue 20), on a cluster started with `pslurm up --conf`
whose pslurm.conf names one account (``lab``, root's): what snakemake and Open OnDemand ask, and an
account added with psacctmgr charged by the next job without a restart.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Cluster, cluster_from_conf, wait_for

CONF = """ClusterName=acctmgr
SlurmdTimeout=10
KillWait=1
NodeName=c000 CPUs=4 RealMemory=4000 Gres=gpu:2
PartitionName=gpu Nodes=c000 Default=YES MaxTime=1:00:00 DefaultTime=10:00
AccountName=lab Users=root Fairshare=2 Description="the lab"
"""


@pytest.fixture(scope="module")
def acct() -> Iterator[Cluster]:
    where = Path(tempfile.mkdtemp(prefix="pslurm-acctmgr-"))
    try:
        with cluster_from_conf(where, CONF, "NodeName=c000 Name=gpu Count=2\n") as c:
            yield c
    finally:
        shutil.rmtree(where)


def out(c: Cluster, *args: str) -> str:
    return c.run(*args, check=True).stdout


def test_snakemake_and_open_ondemand_find_the_accounts(acct: Cluster) -> None:
    # snakemake's Slurm executor: sacctmgr -n -s list user "$USER" format=account%256, account right-justified
    lines = out(acct, "psacctmgr", "-n", "-s", "list", "user", "root", "format=account%256").splitlines()
    assert [line.strip() for line in lines] == ["root", "lab"]
    assert all(len(line) == 257 for line in lines)  # 256 wide and print_fields' blank after it
    # Open OnDemand: sacctmgr -nP show users withassoc format=account,cluster,partition,qos where user=U
    assert out(acct, "psacctmgr", "-nP", "show", "users", "withassoc", "format=account,cluster,partition,qos",
               "where", "user=root") == "root|acctmgr||normal\nlab|acctmgr||normal\n"
    table = out(acct, "psacctmgr", "list", "account", "lab").splitlines()
    assert table[0] == "   Account                Descr                  Org "
    assert table[2] == "       lab              the lab                  lab "


def test_an_account_added_is_charged_by_the_next_job_without_a_restart(acct: Cluster, tmp_path: Path) -> None:
    added = acct.run("psacctmgr", "-i", "add", "account", "zz_new", "Description=new one", "Fairshare=3")
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines()[:2] == [" Adding Account(s)", "  zz_new"]
    refused = acct.run("psbatch", "-A", "zz_new", "--wrap", "true", cwd=tmp_path)
    assert refused.returncode == 1
    assert "Invalid account or account/partition combination specified" in refused.stderr
    user = acct.run("psacctmgr", "-i", "add", "user", "root", "account=zz_new")
    assert user.returncode == 0 and "  U = root      A = zz_new     C = acctmgr   " in user.stdout, user.stdout
    job = acct.run("psbatch", "--parsable", "-A", "zz_new", "-o", str(tmp_path / "o"),
                   "--wrap", "echo $SLURM_JOB_ACCOUNT", cwd=tmp_path)
    assert job.returncode == 0, job.stderr
    wait_for(lambda: (tmp_path / "o").exists() and (tmp_path / "o").read_text() == "zz_new\n")
    assert out(acct, "psacctmgr", "-nP", "list", "assoc", "account=zz_new", "format=account,user,share") \
        == "zz_new||3\nzz_new|root|1\n"
    # without -i the change is shown, then discarded unless the answer is y
    asked = acct.run("psacctmgr", "modify", "account", "zz_new", "set", "fairshare=5", input="n\n")
    assert " Modified account associations..." in asked.stdout and " Changes Discarded" in asked.stdout
    assert out(acct, "psacctmgr", "-nP", "list", "assoc", "account=zz_new", "user=", "format=share") != "5\n"
    gone = acct.run("psacctmgr", "-i", "delete", "account", "zz_new")
    assert gone.returncode == 0 and gone.stdout == " Deleting accounts...\n  zz_new\n", gone.stdout
    assert out(acct, "psacctmgr", "-nP", "list", "account", "zz_new") == ""


def test_bad_words_are_one_line_errors(acct: Cluster) -> None:
    bad = acct.run("psacctmgr", "list", "account", "format=nosuchfield")
    assert bad.returncode == 1 and bad.stderr == "Unknown field 'nosuchfield'\n"
    nothing = acct.run("psacctmgr", "-i", "add", "account", "lab")
    assert nothing.returncode == 1 and nothing.stdout == " Nothing new added.\n"  # as sacctmgr


def test_sshare_lists_the_tree_and_snakemakes_account(acct: Cluster) -> None:
    lines = out(acct, "psshare", "-a").splitlines()
    assert lines[0] == "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare "
    assert [line[:32].rstrip() for line in lines[2:]][:4] == [
        "root", " root                      root", " lab", "  lab                      root"]
    top = [line.split() for line in lines[2:] if line.startswith(" ") and not line.startswith("  ")]
    shares = {row[0]: int(row[2] if len(row) == 7 else row[1]) for row in top}  # the root's children
    assert shares["lab"] == 2 and shares["root"] == 1  # lab's 2 shares beside root's own 1 (and others')
    assert float(lines[4].split()[2]) == round(2 / sum(shares.values()), 6)
    # snakemake: sshare -U --format Account%256 --noheader: the user's accounts, right-justified
    accounts = out(acct, "psshare", "-U", "--format", "Account%256", "--noheader").splitlines()
    assert [a.strip() for a in accounts] == ["root", "lab"]
    assert out(acct, "psshare", "-P", "-n", "-A", "lab", "-o", "Account,User,RawShares") == "lab||2\n lab|root|1\n"
    bad = acct.run("psshare", "-o", "Nope")
    assert bad.returncode == 1 and bad.stderr == 'psshare: error: Invalid field requested: "nope"\n'


def test_the_tools_lookups_work_by_slurms_names(acct: Cluster, tmp_path: Path) -> None:
    """snakemake's and Open OnDemand's commands, through `pslurm compat install`'s sacctmgr and sshare."""
    import os
    import subprocess

    from tests.conftest import BIN

    installed = acct.run("pslurm", "compat", "install", "--bin-dir", str(tmp_path / "bin"))
    assert installed.returncode == 0, installed.stderr
    env = {**acct.env, "PATH": f"{tmp_path / 'bin'}:{BIN}:{os.environ.get('PATH', '')}"}

    def slurm(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=60)

    snakemake = slurm("sacctmgr", "-n", "-s", "list", "user", "root", "format=account%256")
    assert [line.strip() for line in snakemake.stdout.splitlines()] == ["root", "lab"]
    assert [a.strip() for a in slurm("sshare", "-U", "--format", "Account%256", "--noheader").stdout.splitlines()] \
        == ["root", "lab"]
    ood = slurm("sacctmgr", "-nP", "show", "users", "withassoc", "format=account,cluster,partition,qos",
                "where", "user=root")
    assert ood.stdout.splitlines() == ["root|acctmgr||normal", "lab|acctmgr||normal"]
    for name in ("sdiag", "sreport", "seff"):
        assert (tmp_path / "bin" / name).exists()
    assert slurm("sshare", "-o", "Nope").stderr == 'sshare: error: Invalid field requested: "nope"\n'
