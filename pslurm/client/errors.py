"""What a client call can fail with: one exception family, each with a one-line message for the user."""

from __future__ import annotations


class ClientError(Exception):
    """A request that failed. ``str(error)`` is one line for the user: the controller's (or the node
    agent's) own message when it answered with an error, else what went wrong on this side.

    ``remote`` is True when the server answered with this error (Slurm's CLIs prefix those, e.g.
    ``Batch job submission failed: ...``), False when it was raised here (no configuration, no
    credential, server unreachable, an argument this side refused)."""

    def __init__(self, message: str, *, remote: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.remote = remote

    def __str__(self) -> str:
        return self.message


class ConfigurationError(ClientError):
    """No cluster configuration could be found or read."""


class Unreachable(ClientError):
    """The server did not answer (not running, wrong address, or no answer within the timeout)."""

    def __init__(self, message: str, target: str) -> None:
        super().__init__(message)
        self.target = target


class ControllerUnreachable(Unreachable):
    """The controller did not answer: ``Unable to contact pslurm controller at HOST:PORT ...``."""

    def __init__(self, target: str) -> None:
        super().__init__(f"Unable to contact pslurm controller at {target} (connect failure): is the cluster up?",
                         target)


class NodeUnreachable(Unreachable):
    """A node's agent did not answer (psrun's output and input streams)."""

    def __init__(self, target: str) -> None:
        super().__init__(f"Unable to contact pslurm node agent at {target} (connect failure)", target)


class InvalidRequest(ClientError):
    """The request is malformed, or can never be done (or not in the job's present state)."""


class NotFound(ClientError):
    """No such job or node."""


class PermissionDenied(ClientError):
    """The caller may not do this (another user's job, an operator's action)."""


class AuthenticationFailed(ClientError):
    """No credential could be had here (``remote`` False: ``cannot authenticate: ...``), or the
    server refused the one sent (``remote`` True: ``authentication failed: ...``)."""


class StepBusy(InvalidRequest):
    """A step cannot start yet: the job's allocation is busy with another step (``Requested nodes are
    busy``). psrun asks again after a moment, as srun."""
