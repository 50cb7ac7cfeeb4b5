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
