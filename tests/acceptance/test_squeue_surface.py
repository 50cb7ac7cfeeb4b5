"""squeue's surface in psqueue against a real cluster (`pslurm up`): --me, %L, %b, -O/--Format, -S/--sort."""

from __future__ import annotations

import getpass
import re
import subprocess

from tests.conftest import BIN, wait_for


def test_me_long_format_time_left_and_sort(cluster, tmp_path):
    ids = []
    for gres in ("gpu:1", "gpu:2"):
        proc = cluster.run("psbatch", "--parsable", "-t", "10", f"--gres={gres}", "-J", "surf", "--wrap", "sleep 60",
                           cwd=tmp_path, check=True)
        ids.append(proc.stdout.strip())
    try:
        jobs = ",".join(ids)
        wait_for(lambda: cluster.run("psqueue", "-h", "-j", jobs, "-o", "%T", check=True).stdout.split()
                 == ["RUNNING", "RUNNING"])
        mine = cluster.run("psqueue", "--me", "-h", "-o", "%i %u", check=True).stdout.split("\n")
        assert {line.split()[0] for line in mine if line} >= set(ids)
        assert all(line.split()[1] == getpass.getuser() for line in mine if line)

        rows = cluster.run("psqueue", "-h", "-j", jobs, "-S", "-i", "-o", "%i|%b|%L|%l", check=True).stdout
        assert [r.split("|")[0] for r in rows.splitlines()] == ids[::-1]
        for row, gres in zip(rows.splitlines()[::-1], ("gres:gpu:1", "gres:gpu:2"), strict=True):
            _, tres, left, limit = row.split("|")
            assert tres == gres and limit == "10:00" and re.fullmatch(r"(10:00|\d:\d\d)", left)

        out = cluster.run("psqueue", "-j", jobs, "-S", "i", "-O", "JobID:.8,StateCompact:4,TimeLeft,tres-per-node",
                          check=True).stdout.splitlines()
        assert out[0] == "   JOBIDST  TIME_LEFT           TRES_PER_NODE"
        assert out[1].startswith(ids[0].rjust(8) + "R   ") and out[1].endswith("gres:gpu:1")
        assert len(out[1]) == 8 + 4 + 20 + len("gres:gpu:1")

        bad = cluster.run("psqueue", "-O", "JobID,Frobnicate")  # squeue: an error line, the other fields printed
        assert bad.returncode == 0 and "Invalid job format specification: Frobnicate" in bad.stderr
        assert bad.stdout.splitlines()[0].rstrip() == "JOBID"
        both = cluster.run("psqueue", "-o", "%i", "-O", "JobID")
        assert both.returncode == 1 and "-O (--Format) is incompatible with -o (--format)" in both.stderr
        sort = cluster.run("psqueue", "-S", "#")
        assert sort.returncode == 1 and "Invalid sort specification: #" in sort.stderr
    finally:
        cluster.run("pscancel", *ids)


def test_alloc_sid_is_the_submitting_session(cluster, tmp_path):
    """squeue -O AllocSID and scontrol's AllocNode:Sid= are the session of the shell that submitted (sbatch
    records getsid(0)): here a session of its own, whose id is the submitting process's."""
    proc = subprocess.Popen([str(BIN / "psbatch"), "--parsable", "-H", "--wrap", "true"], env=cluster.env,
                            cwd=tmp_path, stdout=subprocess.PIPE, text=True, start_new_session=True)
    job = proc.communicate(timeout=60)[0].strip()
    assert proc.returncode == 0 and job.isdigit()
    try:
        out = cluster.run("psqueue", "-h", "-j", job, "-O", "JobID:8,AllocSID", check=True).stdout
        assert out.split() == [job, str(proc.pid)]
        show = cluster.run("pscontrol", "show", "job", job, check=True).stdout
        assert re.search(rf"AllocNode:Sid=\S+:{proc.pid}\b", show), show
    finally:
        cluster.run("pscancel", job)
