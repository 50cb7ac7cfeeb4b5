"""``#SBATCH`` / ``#PSBATCH`` directives at the top of a batch script, read the way sbatch does."""

from __future__ import annotations

import shlex
from collections.abc import Sequence


class DirectiveError(ValueError):
    """A directive line that cannot be split into arguments (e.g. an unclosed quote)."""


def has_shebang(script: str) -> bool:
    """True when the script's first line is an interpreter line (``#!/bin/bash``)."""
    return script.startswith("#!")


def _split(text: str, lineno: int) -> list[str]:
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"  # as in sbatch, an unquoted '#' starts a trailing comment
    try:
        return list(lexer)
    except ValueError as exc:
        raise DirectiveError(f"line {lineno}: cannot parse batch script directive: {exc}") from None


def parse_directives(script: str, prefixes: Sequence[str] = ("#SBATCH", "#PSBATCH")) -> list[str]:
    """Collect the argv-style tokens of the directive lines at the top of ``script``.

    As in sbatch: a directive starts at column 0 with a prefix followed by whitespace; scanning
    stops at the first line that is neither blank nor a comment (the shebang counts as a
    comment); unquoted ``#`` starts a trailing comment. Tokens are left for the option parser
    (``--opt=value``, ``--opt value``, ``-J name`` all come through as written).
    Raises DirectiveError on an unclosed quote.
    """
    tokens: list[str] = []
    for lineno, raw in enumerate(script.splitlines(), start=1):
        line = raw.rstrip("\r")
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break  # the first command ends the directive block
        for prefix in prefixes:
            rest = line[len(prefix) :]
            if line.startswith(prefix) and (not rest or rest[0].isspace()):
                tokens.extend(_split(rest, lineno))
                break
    return tokens
