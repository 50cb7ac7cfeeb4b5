"""The commands' command-line parser: GNU ``getopt_long`` as Slurm's commands use it, over a table.

Why not argparse: Slurm's commands parse with ``getopt_long``, and argparse differs from it where
users notice. argparse looks at every word, also those after the command psrun runs (``psrun
python train.py --gp 1`` fails: "ambiguous option"); it gives an optional-argument option the
next word (``--exclusive hostname`` takes ``hostname`` as the value); and it cannot stop at the
first word that is not an option. This parser does what getopt does:

- ``--name=value``, ``--name value`` (required arguments only), ``-x value``, ``-xvalue``,
  clustered flags ``-Hv``; an optional argument only attached (``--nice=5``, ``-I5``);
- a long name may be shortened to any unique prefix (``--part`` is ``--partition``); an exact
  name wins; a prefix of several options is ambiguous, unless they are names of one option;
- ``--`` ends the options; with ``stop_at_positional`` (sbatch, srun) so does the first word
  that is not an option, else the words are collected and parsing goes on (squeue, scancel).

Standard library only, and little of it: every command imports this on its path.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Container, Iterable, Sequence

NONE, REQUIRED, OPTIONAL = "none", "required", "optional"  # what an option takes, as getopt's has_arg


class Opt:
    """One option: its long names (the first is its name, the others aliases), its short letter,
    what argument it takes, the variable it sets (``dest``), and the help line. A flag (``NONE``)
    sets ``flag_value`` (``--no-requeue`` sets ``requeue`` to False)."""

    __slots__ = ("names", "short", "arg", "dest", "help", "flag_value", "metavar")

    def __init__(self, names: str | tuple[str, ...], short: str = "", arg: str = REQUIRED, dest: str = "",
                 help: str = "", flag_value: object = True, metavar: str = "") -> None:
        self.names = (names,) if isinstance(names, str) else names
        self.short = short
        self.arg = arg
        self.dest = dest or self.names[0].replace("-", "_")
        self.help = help
        self.flag_value = flag_value
        self.metavar = metavar

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def flag(self) -> str:
        """``--name`` as the user sees it in messages."""
        return "--" + self.names[0]

    def __repr__(self) -> str:
        return f"Opt({self.flag})"


class OptionError(ValueError):
    """A word the table does not allow; the message is getopt's (``unrecognized option '--foo'``)."""


# The acceptance tests (and so older scripts) look for click's words for an unknown option; getopt's
# come first.
UNRECOGNIZED = "unrecognized option '{}' (No such option)"


def _lookup_long(word: str, options: Sequence[Opt], written: str) -> Opt:
    """The option ``--word`` names: an exact name, or the one option of which it is a prefix.
    ``written``: the whole word as given (``--frob=1``), for the message as getopt words it."""
    matches: list[tuple[str, Opt]] = []
    for opt in options:
        for name in opt.names:
            if name == word:
                return opt
            if name.startswith(word):
                matches.append((name, opt))
    distinct = {id(opt) for _, opt in matches}
    if not matches:
        raise OptionError(UNRECOGNIZED.format(written))
    if len(distinct) > 1:
        names = " ".join(f"'--{name}'" for name, _ in matches)
        raise OptionError(f"option '--{word}' is ambiguous; possibilities: {names}")
    return matches[0][1]


def parse(argv: Sequence[str], options: Sequence[Opt], *,
          stop_at_positional: bool) -> tuple[list[tuple[Opt, object]], list[str]]:
    """The options found in ``argv``, in order, as (option, value) pairs, and the other words.

    A flag's value is its ``flag_value``; an optional argument not given is None. Raises
    OptionError with getopt's message for a word the table does not allow.
    """
    shorts = {opt.short: opt for opt in options if opt.short}
    found: list[tuple[Opt, object]] = []
    positional: list[str] = []
    i, n = 0, len(argv)
    while i < n:
        word = argv[i]
        i += 1
        if word == "--":
            positional.extend(argv[i:])
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            if stop_at_positional:
                positional.extend(argv[i:])
                break
            continue
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            opt = _lookup_long(name, options, word)
            if opt.arg == NONE:
                if eq:
                    raise OptionError(f"option '{opt.flag}' doesn't allow an argument")
                found.append((opt, opt.flag_value))
            elif eq or opt.arg == OPTIONAL:
                found.append((opt, value if eq else None))
            elif i < n:
                found.append((opt, argv[i]))
                i += 1
            else:
                raise OptionError(f"option '{opt.flag}' requires an argument")
            continue
        j = 1  # a cluster of short options: -Hv, -J name, -Jname, -I5
        while j < len(word):
            letter = word[j]
            j += 1
            short_opt = shorts.get(letter)
            if short_opt is None:
                raise OptionError(f"invalid option -- '{letter}'")
            if short_opt.arg == NONE:
                found.append((short_opt, short_opt.flag_value))
                continue
            rest = word[j:]
            if rest or short_opt.arg == OPTIONAL:
                found.append((short_opt, rest or None))
            elif i < n:
                found.append((short_opt, argv[i]))
                i += 1
            else:
                raise OptionError(f"option -{letter} requires an argument")
            break
    return found, positional


def values(found: Iterable[tuple[Opt, object]], joined: Container[str] = ()) -> dict[str, object]:
    """dest -> value, the last given winning (as getopt's callers do); of the dests in ``joined``, every
    value given, joined by commas (sacct adds each -j, -u ... to its list)."""
    out: dict[str, object] = {}
    for opt, value in found:
        before = out.get(opt.dest)
        both = opt.dest in joined and isinstance(before, str) and isinstance(value, str)
        out[opt.dest] = f"{before},{value}" if both else value
    return out


def help_text(usage: str, description: str, options: Iterable[Opt], footer: str = "",
              arguments: Sequence[tuple[str, str]] = ()) -> str:
    """A help page: usage line, description, the arguments, then one line per option (the shape
    Typer printed)."""
    rows = []
    for opt in options:
        if not opt.help:
            continue
        spec = ", ".join(([f"-{opt.short}"] if opt.short else []) + [opt.flag])
        if opt.arg == REQUIRED:
            spec += f" <{opt.metavar or 'str'}>"
        elif opt.arg == OPTIONAL:
            spec += f"[=<{opt.metavar or 'str'}>]"
        rows.append((spec, opt.help))
    rows.append(("--help", "Show this message and exit."))
    width = min(max(len(spec) for spec, _ in rows) + 2, 32)
    lines = [f"Usage: {usage}", "", f"  {description}", ""]
    if arguments:
        arg_width = max(len(name) for name, _ in arguments) + 2
        lines += ["Arguments:", *(f"  {name.ljust(arg_width)}{text}" for name, text in arguments), ""]
    lines.append("Options:")
    for spec, text in rows:
        if len(spec) + 2 > width:
            lines.append(f"  {spec}")
            lines.append(" " * (width + 2) + text)
        else:
            lines.append(f"  {spec.ljust(width)}{text}")
    if footer:
        lines += ["", footer]
    return "\n".join(lines) + "\n"


def parse_or_fail(prog: str, argv: Sequence[str] | None, options: Sequence[Opt], *, stop_at_positional: bool,
                  usage: str, description: str, arguments: Sequence[tuple[str, str]] = ()
                  ) -> tuple[list[tuple[Opt, object]], list[str]]:
    """:func:`parse` for a command: ``--help`` prints the help page and exits 0; a bad word is
    Slurm's one-line error and exit 1."""
    from pslurm.cli.common import fail

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        found, positional = parse(args, options, stop_at_positional=stop_at_positional)
    except OptionError as exc:
        fail(prog, str(exc))
    if any(opt.dest == "help" for opt, _ in found):
        sys.stdout.write(help_text(usage, description, options, arguments=arguments))
        raise SystemExit(0)
    return found, positional


HELP = Opt("help", arg=NONE, help="")  # every command's --help (listed last by help_text)
# The read commands' shared options (psqueue, psacct, psprio, psinfo, pscontrol).
JOBS = Opt("jobs", "j", help="comma-separated job ids")
USERS = Opt("user", "u", dest="users", help="comma-separated user names")
NOHEADER = Opt("noheader", "h", NONE, help="no header line")
JSON = Opt("json", arg=OPTIONAL, dest="as_json", metavar="pslurm",
           help="print JSON for programs, in Slurm's shape (as Slurm 22.05's --json); --json=pslurm: pslurm's own")
# --json's values: Slurm's shape (bare --json, or its data_parser version, as later Slurm's --json=v0.0.39
# names one), or pslurm's own shape (what pslurm's --json printed before it printed Slurm's)
JSON_FORMATS = {"": "slurm", "v0.0.38": "slurm", "pslurm": "pslurm"}


def json_format(prog: str, given: dict[str, object]) -> str | None:
    """What ``--json[=FORMAT]`` asked for, from :func:`values`: None (not given), ``"slurm"`` or
    ``"pslurm"``; any other FORMAT is Slurm's one-line error."""
    if "as_json" not in given:
        return None
    value = str(given["as_json"] or "")
    found = JSON_FORMATS.get(value.lower())
    if found is None:
        from pslurm.cli.common import fail

        fail(prog, f"--json={value}: unknown JSON format (v0.0.38, the default: Slurm's; pslurm: pslurm's own)")
    return found


def no_positionals(prog: str, positional: Sequence[str]) -> None:
    """A read command takes no words but its options: name the extra ones, as Typer did."""
    if positional:
        from pslurm.cli.common import fail

        fail(prog, f"Got unexpected extra argument(s) ({' '.join(positional)})")
