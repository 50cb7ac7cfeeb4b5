"""squeue's surface in psqueue against a real cluster (`pslurm up`): --me, %L, %b, -O/--Format, -S/--sort."""

from __future__ import annotations

import getpass
import re

from tests.conftest import wait_for


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
