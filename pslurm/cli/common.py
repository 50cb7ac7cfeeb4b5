"""What every command shares: finding the cluster, the RPC client, Slurm-style errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from pslurm.auth.transport import Metadata
    from pslurm.core.config import ClusterConfig
    from pslurm.proto import pslurm_pb2_grpc

import typer


def fail(prog: str, message: str, code: int = 1) -> NoReturn:
    """Slurm's one-line error: ``psbatch: error: ...`` on stderr, non-zero exit."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def load_config(prog: str) -> ClusterConfig:
    from pslurm.core.config import ConfigError, find_config_path, load_cluster_config

    path = find_config_path()
    if not os.path.exists(path):
        fail(prog, f"no cluster configuration at {path}: start one with 'pslurm up' or set PSLURM_CONF")
    try:
        return load_cluster_config(path)
    except ConfigError as exc:
        fail(prog, str(exc))


class Client:
    """The controller's stub with this user's identity on every call."""

    def __init__(self, prog: str) -> None:
        import grpc

        from pslurm.auth.transport import Credentials
        from pslurm.proto import pslurm_pb2_grpc

        self.prog = prog
        self.config = load_config(prog)
        self.channel = grpc.insecure_channel(self.config.controller_target,
                                             options=[("grpc.max_receive_message_length", 512 * 1024 * 1024)])
        self.stub: pslurm_pb2_grpc.ControllerStub = pslurm_pb2_grpc.ControllerStub(self.channel)
        self.credentials = Credentials.for_cluster(self.config)

    @property
    def metadata(self) -> Metadata:
        """A credential for this user, for the next call (signed here, or by the credential socket)."""
        from pslurm.auth.credential import AuthError

        try:
            return self.credentials.metadata()
        except AuthError as exc:
            fail(self.prog, f"cannot authenticate: {exc}")

    def call(self, method: str, request: Any, prefix: str = "", timeout: float = 30.0) -> Any:
        """Call a unary RPC; errors become ``prog: error: [prefix]message`` and exit 1."""
        import grpc

        try:
            return getattr(self.stub, method)(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as exc:
            self.rpc_failed(exc, prefix)

    def stream(self, method: str, request: Any) -> Any:
        return getattr(self.stub, method)(request, metadata=self.metadata)

    def rpc_failed(self, exc: Exception, prefix: str = "") -> NoReturn:
        import grpc

        code = exc.code() if isinstance(exc, grpc.Call) else None
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            fail(self.prog, f"Unable to contact pslurm controller at {self.config.controller_target} "
                            f"(connect failure): is the cluster up?")
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        fail(self.prog, f"{prefix}{details}")


def print_listing(prog: str, render: Callable[[], list[str]]) -> None:
    """Print a listing's lines; a bad -o/--format (ValueError from rendering) is a one-line error."""
    try:
        lines = render()
    except ValueError as exc:
        fail(prog, str(exc))
    sys.stdout.write("".join(line + "\n" for line in lines))


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
