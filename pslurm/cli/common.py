"""What every command shares: the cluster's client, Slurm-style errors, Typer set-up."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pslurm.client import Client

import typer


def fail(prog: str, message: str, code: int = 1) -> NoReturn:
    """Slurm's one-line error: ``psbatch: error: ...`` on stderr, non-zero exit."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def connect(prog: str) -> Client:
    """The cluster's client (:mod:`pslurm.client`) for this command; a missing or unreadable
    configuration is a one-line error. Nothing is sent, and gRPC not imported, before its first call."""
    from pslurm.client import Client, ClientError

    try:
        return Client()
    except ClientError as exc:
        fail(prog, str(exc))


@contextlib.contextmanager
def reporting(prog: str, prefix: str = "") -> Iterator[None]:
    """A failed request inside becomes Slurm's one-line error, ``prog: error: [prefix]message``, and
    exit 1. The prefix (``Batch job submission failed: ``) goes only before what the controller
    answered, not before an unreachable controller or a credential this side could not get."""
    from pslurm.client import ClientError

    try:
        yield
    except ClientError as exc:
        fail(prog, f"{prefix if exc.remote else ''}{exc}")


def print_listing(prog: str, render: Callable[[], list[str]]) -> None:
    """Print a listing's lines; a bad -o/--format (ValueError from rendering) is a one-line error."""
    try:
        lines = render()
    except ValueError as exc:
        fail(prog, str(exc))
    sys.stdout.write("".join(line + "\n" for line in lines))


def current_umask() -> int:
    """This process's umask (read by setting it and back: the commands are single-threaded)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def user_identity() -> tuple[str, int, int]:
    import pwd

    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return name, uid, os.getgid()


def click_errors() -> tuple[type[Exception], type[Exception]]:
    """(ClickException, Abort) of the click that Typer uses (recent Typer vendors its own)."""
    try:
        from typer._click.exceptions import ClickException
    except ImportError:  # older Typer on the real click
        from click import ClickException  # type: ignore[assignment]
    return ClickException, typer.Abort


def run(app: typer.Typer, prog: str, argv: list[str] | None = None) -> None:
    """Run a Typer app with Slurm's error style for bad flags (one line, exit 1)."""
    click_exception, abort = click_errors()
    command = typer.main.get_command(app)
    try:
        result = command.main(args=argv, prog_name=prog, standalone_mode=False)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except click_exception as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `pslurm` alone: show the help
            exc.show()  # type: ignore[attr-defined]
            raise SystemExit(0) from None
        fail(prog, exc.format_message())  # type: ignore[attr-defined]
    except abort:
        raise SystemExit(1) from None
    if isinstance(result, int) and result:  # --help and friends return their exit code
        raise SystemExit(result)


def typer_app(help_text: str, **settings: Any) -> typer.Typer:
    """A single-command Typer app with plain (not rich) errors and Slurm-like parsing."""
    context = {"help_option_names": ["--help"], **settings}
    return typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                       context_settings=context, help=help_text)


def typer_group(help_text: str) -> typer.Typer:
    """A Typer app of subcommands (``pslurm up|down``), with the same plain errors."""
    return typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                       no_args_is_help=True, help=help_text)


def entry(make: Callable[[], typer.Typer], prog: str) -> Callable[[], None]:
    def main() -> None:
        run(make(), prog)

    return main
