"""#SBATCH / #PSBATCH directive scanning, as sbatch does it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.core.directives import DirectiveError, has_shebang, parse_directives


def test_forms_and_trailing_comment() -> None:
    script = (
        "#!/bin/bash\n"
        "#SBATCH --job-name=train  # the name\n"
        "\n"
        "#SBATCH -J other\n"
        "# an ordinary comment\n"
        "#PSBATCH --gres gpu:2\n"
        '#SBATCH --wrap="echo # not a comment"\n'
        "echo hi\n"
        "#SBATCH --time=5\n"
    )
    assert parse_directives(script) == [
        "--job-name=train",
        "-J",
        "other",
        "--gres",
        "gpu:2",
        "--wrap=echo # not a comment",
    ]


def test_stops_at_first_command() -> None:
    assert parse_directives("#!/bin/sh\nhostname\n#SBATCH -N 2\n") == []


def test_prefix_must_be_followed_by_space_and_at_column_zero() -> None:
    assert parse_directives("#SBATCHX --a\n  #SBATCH --b\n#SBATCH --c\n") == ["--c"]


def test_custom_prefixes_and_crlf() -> None:
    assert parse_directives("#X -p gpu\r\n#SBATCH -q\r\n", prefixes=("#X",)) == ["-p", "gpu"]


def test_unclosed_quote() -> None:
    with pytest.raises(DirectiveError, match="line 2"):
        parse_directives("#!/bin/sh\n#SBATCH -J 'oops\n")


def test_has_shebang() -> None:
    assert has_shebang("#!/bin/bash\necho")
    assert not has_shebang("echo hi\n")


@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_directive_error(text: str) -> None:
    try:
        tokens = parse_directives(text)
    except DirectiveError:
        return
    assert all(isinstance(t, str) for t in tokens)


@given(st.lists(st.from_regex(r"--[a-z]{1,8}=[a-z0-9:]{1,8}", fullmatch=True), max_size=8))
def test_directives_round_trip(opts: list[str]) -> None:
    script = "#!/bin/bash\n" + "".join(f"#SBATCH {o}\n" for o in opts) + "srun true\n"
    assert parse_directives(script) == opts


def test_each_directive_line_stands_alone() -> None:
    from pslurm.core.directives import directive_lines

    assert directive_lines("#!/bin/sh\n#SBATCH -J\n#SBATCH --gres=gpu:1 -t 5\nhostname\n") == [
        (2, ["-J"]), (3, ["--gres=gpu:1", "-t", "5"])]


def test_script_checks_in_sbatchs_words() -> None:
    from pslurm.core.directives import DirectiveError, decode_script, script_problem

    assert script_problem("#!/bin/sh\ntrue\n") is None
    assert script_problem("#!/bin/sh\ntrue\n", max_size=5) == (
        "Batch script is too large: 15 bytes, at most 5 (max_script_size)")
    assert decode_script("#!/bin/sh\necho é\n".encode()) == "#!/bin/sh\necho é\n"
    with pytest.raises(DirectiveError, match="NULL character"):
        decode_script(b"#!/bin/sh\x00")
    with pytest.raises(DirectiveError, match="not UTF-8"):
        decode_script(b"#!/bin/sh\n\xff")
