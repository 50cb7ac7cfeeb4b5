"""Typer set-up for the `pslurm` admin command (pslurm_cmd, lxc_cmd): plain errors in Slurm's style.

The ps* commands do not use Typer (see argv.py); only the admin command imports this."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from pslurm.cli.common import fail


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
