"""No raw control character reaches a terminal: a job whose every text field holds escape sequences,
printed by every psqueue letter and -O name, every psacct field (table and parsable), pscontrol show
job (both forms), psacctmgr's tables and a sinfo-style node reason (cli/printable.py)."""

from __future__ import annotations

import json
import re

from pslurm.cli.printable import escaped
from pslurm.cli.printfields import Field, render
from pslurm.cli.psacct import account_fields
from pslurm.cli.psacct import render as render_accounting
from pslurm.cli.psqueue import job_fields, long_format, render_queue
from pslurm.cli.scontrol_show import show_job
from pslurm.core import restjson
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.states import JobState

EVIL = "\x1b]0;pwned\x07\x1b[2J\r\n\x9b31m\x00\x7f"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # a line break between lines is the command's own


def hostile() -> JobInfo:
    spec = JobSpec(name="n" + EVIL, user="ana", uid=1000, gid=100, workdir="/w" + EVIL, partition="gpu",
                   script="#!/bin/sh\n", stdout="/o" + EVIL, stderr="/e" + EVIL, comment="c" + EVIL,
                   mail_user="m" + EVIL, mail_type="END", submit_host="h" + EVIL, submit_line="psbatch " + EVIL,
                   command="/cmd" + EVIL, dependency="", account="lab", constraint="", nodelist="")
    record = JobRecord(job_id=7, spec=spec, state=JobState.RUNNING, submit_time=1.0, start_time=2.0,
                       partition="gpu", time_limit=3600, node="c000", nodes=("c000",), system_comment="s" + EVIL)
    return JobInfo(json.loads(json.dumps(restjson.job_to_json(record))))


def clean(lines: list[str]) -> None:
    for line in lines:
        assert not RAW.search(line.replace("\n", "")), repr(line)


def test_escaped_escapes_c0_del_and_c1() -> None:
    assert escaped("a\x1b[2Jb\tc\n\x9b") == "a\\x1b[2Jb\\tc\\n\\x9b"
    assert escaped(escaped(EVIL)) == escaped(EVIL)  # once escaped, nothing left to escape


def test_every_psqueue_letter_and_long_name() -> None:
    job, fields = hostile(), job_fields(now=10.0)
    letters = [k for k in fields if len(k) == 1]
    clean(render_queue(" ".join(f"%{k}" for k in letters), [job], True))
    names = [k for k in fields if len(k) > 1]
    fmt, extra = long_format(",".join(f"{n}:300" for n in names), fields, warn=False)
    lines = render_queue(fmt, [job], True, {**fields, **extra})
    clean(lines)
    assert "\\x1b" in lines[1]  # shown, escaped, not dropped


def test_every_psacct_field_as_a_table_and_parsable() -> None:
    job, fields = hostile(), account_fields(10.0, "c")
    columns = [(name, name, 300) for name in fields]
    clean(render_accounting([job], columns, fields, True, None, False))
    clean(render_accounting([job], columns, fields, True, "|", True))


def test_pscontrol_show_job_both_forms() -> None:
    for one_liner in (False, True):
        text = show_job(hostile(), one_liner=one_liner, details=True, now=10.0)
        clean(text.splitlines())
        for key in ("StdOut=", "StdErr=", "WorkDir=", "MailUser=", "AllocNode:Sid=", "Command="):
            assert f"{key}" in text


def test_print_fields_tables() -> None:
    rows = [["u" + EVIL, None, "1"]]
    for parsable in ("", "p", "P"):
        clean(render([Field("User", 10), Field("Account", 10), Field("Share", 5, number=True)], rows, True, parsable))
