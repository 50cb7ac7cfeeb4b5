"""``#SBATCH`` / ``#PSBATCH`` directives at the top of a batch script, read the way sbatch does."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


class DirectiveError(ValueError):
    """A directive line that cannot be split into arguments (e.g. an unclosed quote)."""


MAX_SCRIPT_SIZE = 4 * 1024 * 1024  # bytes: Slurm's default SchedulerParameters=max_script_size


def has_shebang(script: str) -> bool:
    """True when the script's first line is an interpreter line (``#!/bin/bash``)."""
    return script.startswith("#!")


def script_problem(script: str, max_size: int = MAX_SCRIPT_SIZE) -> str | None:
    """Why a batch script cannot be submitted, in sbatch's words, or None. sbatch checks this
    before it sends; the controller checks it again (a raw client skips sbatch)."""
    size = len(script.encode("utf-8", "surrogatepass"))
    if size == 0:
        return "Batch script is empty!"
    if not script.strip():
        return "Batch script contains only whitespace!"
    if not has_shebang(script):
        return ("This does not look like a batch script.  The first line must start with #! followed by "
                "the path to an interpreter.  For instance: #!/bin/sh")
    if "\x00" in script:
        return "The Slurm controller does not allow scripts that contain a NULL character '\\0'."
    if "\r\n" in script:
        return "Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)."
    if size > max_size:
        return f"Batch script is too large: {size} bytes, at most {max_size} (max_script_size)"
    return None


def decode_script(data: bytes) -> str:
    """A script file's bytes as text; DirectiveError, in sbatch's words where it has them, for a
    binary file or one that is not UTF-8 (the wire carries text)."""
    if b"\x00" in data:
        raise DirectiveError("The Slurm controller does not allow scripts that contain a NULL character '\\0'.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DirectiveError(f"Batch script is not UTF-8 text (byte {exc.start}): is it a binary file?") from None


def _split(text: str, lineno: int) -> list[str]:
    import shlex  # here, not at the top: most scripts have no directive line, and psbatch pays every import

    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"  # as in sbatch, an unquoted '#' starts a trailing comment
    try:
        return list(lexer)
    except ValueError as exc:
        raise DirectiveError(f"line {lineno}: cannot parse batch script directive: {exc}") from None


def parse_directives(script: str, prefixes: Sequence[str] = ("#SBATCH", "#PSBATCH")) -> list[str]:
    """Collect the argv-style tokens of the directive lines at the top of ``script`` (see
    :func:`directive_lines`), in order."""
    return [token for _, tokens in directive_lines(script, prefixes) for token in tokens]


def directive_lines(script: str, prefixes: Sequence[str] = ("#SBATCH", "#PSBATCH")) -> list[tuple[int, list[str]]]:
    """The directive lines at the top of ``script``: (line number, its argv-style tokens) each.

    As in sbatch: a directive starts at column 0 with a prefix followed by whitespace; scanning
    stops at the first line that is neither blank nor a comment (the shebang counts as a
    comment); unquoted ``#`` starts a trailing comment. Tokens are left for the option parser
    (``--opt=value``, ``--opt value``, ``-J name`` all come through as written).
    Each line stands alone, as sbatch parses it: an option whose value is missing at the end of
    one line does not take the next line's first word (the caller checks that per line).
    Raises DirectiveError on an unclosed quote.
    """
    lines: list[tuple[int, list[str]]] = []
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
                lines.append((lineno, _split(rest, lineno)))
                break
    return lines
