"""The option table of psbatch/psrun and its getopt-style parser: prefixes, directives, inert options."""

from __future__ import annotations

import dataclasses

import pytest

from pslurm.cli.argv import NONE, OPTIONAL, REQUIRED, Opt, OptionError, parse
from pslurm.cli.options import (
    JOB_FIELDS,
    TABLE,
    DirectiveError,
    Parsed,
    parse_command_line,
    parse_directive_lines,
    table,
    warn_inert,
)
from pslurm.core.directives import directive_lines
from pslurm.core.request import JobOptions


def test_the_table_sets_exactly_the_job_options_fields() -> None:
    assert {f.name for f in dataclasses.fields(JobOptions)} == JOB_FIELDS
    dests = {opt.dest for opt in TABLE if opt.inert is None}
    assert JOB_FIELDS <= dests


def test_every_row_is_well_formed_and_names_are_unique_per_command() -> None:
    for opt in TABLE:
        assert opt.arg in (NONE, REQUIRED, OPTIONAL) and opt.commands and set(opt.commands) <= set("bra")
    for command in ("sbatch", "srun", "salloc"):
        rows = table(command)
        names = [name for opt in rows for name in opt.names]
        shorts = [opt.short for opt in rows if opt.short]
        assert len(names) == len(set(names)), command
        assert len(shorts) == len(set(shorts)), command


@pytest.mark.parametrize("argv,dest,value", [
    (["--part", "gpu"], "partition", "gpu"),  # a unique prefix is the option, as getopt
    (["--partition=gpu"], "partition", "gpu"),
    (["-pgpu"], "partition", "gpu"),
    (["--job=x"], "job_name", "x"),
    (["--mem", "4G"], "mem", "4G"),  # exact name wins over --mem-per-cpu etc.
    (["--gres=gpu:1"], "gres", "gpu:1"),  # exact, though --gres-flags starts alike
    (["--no-r"], "requeue", False),
    (["--req"], "requeue", True),
    (["-J", "-x"], "job_name", "-x"),  # a required value is the next word, whatever it looks like
    (["--nice"], "nice", "100"),  # --nice alone: Slurm's 100
    (["--nice=-5"], "nice", "-5"),
    (["--open-mode=append"], "open_mode", "append"),
    (["--open", "t"], "open_mode", "t"),
])
def test_sbatch_command_line(argv: list[str], dest: str, value: object) -> None:
    parsed = parse_command_line([*argv, "job.sh"], "sbatch")
    assert parsed.values[dest] == value and parsed.positional == ["job.sh"]


@pytest.mark.parametrize("argv,message", [
    (["--ma=x"], "option '--ma' is ambiguous; possibilities: '--mail-type' '--mail-user'"),
    (["--gp=1"], "option '--gp' is ambiguous"),
    (["--frobnicate"], "unrecognized option '--frobnicate'"),
    (["--frob=1"], "unrecognized option '--frob=1'"),
    (["-g"], "invalid option -- 'g'"),
    (["-J"], "option -J requires an argument"),
    (["--job-name"], "option '--job-name' requires an argument"),
    (["--hold=yes"], "option '--hold' doesn't allow an argument"),
    (["--label"], "unrecognized option '--label'"),  # srun's, not sbatch's
])
def test_sbatch_refusals_in_getopts_words(argv: list[str], message: str) -> None:
    with pytest.raises(OptionError, match="^" + message.replace("(", r"\(").replace("[", r"\[")):
        parse_command_line(argv, "sbatch")


def test_options_end_at_the_command_and_its_arguments_are_its_own() -> None:
    parsed = parse_command_line(["-n", "2", "python", "train.py", "--gp", "1", "-J", "x"], "srun")
    assert parsed.values == {"ntasks": "2"}
    assert parsed.positional == ["python", "train.py", "--gp", "1", "-J", "x"]
    assert parse_command_line(["--", "-weird"], "srun").positional == ["-weird"]


def test_an_optional_argument_is_only_ever_attached() -> None:
    parsed = parse_command_line(["--exclusive", "hostname"], "srun")
    assert parsed.values == {"exclusive": ""} and parsed.positional == ["hostname"]  # "": given, no value
    assert parse_command_line(["--exclusive=user", "hostname"], "srun").values == {"exclusive": "user"}
    parsed = parse_command_line(["--bcast", "hostname"], "srun")
    assert parsed.inert == {"bcast": None} and parsed.positional == ["hostname"]


def test_clustered_short_flags() -> None:
    parsed = parse_command_line(["-HQn2", "x"], "sbatch")
    assert parsed.values == {"hold": True, "quiet": True, "ntasks": "2"}


def test_aliases_of_one_option_are_not_ambiguous() -> None:
    options = [Opt(("cpu-bind", "cpu_bind")), Opt("cpus-per-task", "c")]
    assert parse(["--cpu_b=x"], options, stop_at_positional=True)[0][0][0].name == "cpu-bind"
    with pytest.raises(OptionError, match="ambiguous"):
        parse(["--cpu=x"], options, stop_at_positional=True)


def test_permuting_commands_collect_words_between_options() -> None:
    options = [Opt("signal", "s")]
    found, words = parse(["12", "-s", "KILL", "13"], options, stop_at_positional=False)
    assert [(o.dest, v) for o, v in found] == [("signal", "KILL")] and words == ["12", "13"]


def test_known_but_inert_options_are_kept_and_warned_about_once(capsys: pytest.CaptureFixture[str]) -> None:
    cli = parse_command_line(["--bb=x", "--acctg-f", "10", "--get-user-env", "-J", "n", "job.sh"], "sbatch")
    assert cli.inert == {"bb": "x", "acctg-freq": "10", "get-user-env": None}
    assert cli.values == {"job_name": "n"}
    directives = parse_directive_lines([(2, ["--bb=y"])])
    warn_inert("psbatch", directives, cli)
    assert capsys.readouterr().err.splitlines() == [
        "psbatch: warning: --bb has no effect in pslurm (no burst buffers)",
        "psbatch: warning: --acctg-freq has no effect in pslurm (no accounting gather plugin)",
        "psbatch: warning: --get-user-env has no effect in pslurm",
    ]
    warn_inert("psbatch", parse_command_line(["-Q", "--licenses=matlab", "x"], "sbatch"))
    assert capsys.readouterr().err == ""


def test_directive_lines_go_through_the_same_table() -> None:
    script = ("#!/bin/sh\n#SBATCH --part=gpu -J train  # the name\n#PSBATCH --gres gpu:2 --bb=END\n"
              "#SBATCH --no-requeue\nhostname\n#SBATCH -J ignored\n")
    parsed = parse_directive_lines(directive_lines(script))
    assert parsed.values == {"partition": "gpu", "job_name": "train", "gres": "gpu:2", "requeue": False}
    assert parsed.inert == {"bb": "END"}
    opts = parse_command_line(["-J", "cli", "x"], "sbatch").job_options().over(parsed.job_options())
    assert opts == JobOptions(job_name="cli", partition="gpu", gres="gpu:2", requeue=False)


@pytest.mark.parametrize("line,message", [
    (["-J"], "invalid #SBATCH directive on line 4: option -J requires an argument"),
    (["--frob"], "invalid #SBATCH directive on line 4: unrecognized option '--frob'"),
    (["-J", "a", "stray"], "invalid #SBATCH directive on line 4: unexpected argument 'stray'"),
])
def test_bad_directive_lines_name_the_line(line: list[str], message: str) -> None:
    with pytest.raises(DirectiveError) as err:
        parse_directive_lines([(4, line)])
    assert str(err.value).startswith(message)


def test_every_sbatch_option_is_accepted_by_the_directive_parser() -> None:
    for opt in table("sbatch"):
        if opt.dest in ("help", "usage", "version"):
            continue
        token = f"--{opt.name}" if opt.arg == NONE else f"--{opt.name}=1"
        parsed = parse_directive_lines([(2, [token])])
        assert opt.name in parsed.inert or opt.dest in parsed.values, opt


def test_parsed_job_options_ignore_the_commands_own_settings() -> None:
    parsed = Parsed()
    parsed.values.update(wrap="true", parsable=True, job_name="x")
    assert parsed.job_options() == JobOptions(job_name="x")
