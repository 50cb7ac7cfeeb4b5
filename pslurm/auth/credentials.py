"""A client's credentials, without gRPC: what ``pslurm.client`` (and so every command) imports.

A credential is signed here when this process can read the cluster key, else asked of the
controller's credential socket. :mod:`pslurm.auth.transport` (the daemons' gRPC side) re-exports
these names.
"""

from __future__ import annotations

import os
import time
from _thread import allocate_lock

from pslurm.auth.credential import AuthError, Identity, load_key, sign

TYPE_CHECKING = False  # typing costs every command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Callable

    from pslurm.core.config import ClusterConfig

    Clock = Callable[[], float]
else:
    Clock = "Callable[[], float]"  # for annotations only: collections.abc costs every command's start

METADATA_KEY = "x-pslurm-cred"  # the gRPC metadata key, and the HTTP header (X-Pslurm-Cred)
Metadata = tuple[tuple[str, str], ...]  # what a gRPC call takes as metadata=


class Credentials:
    """A client's credentials, for this process's uid and gid: a fresh one for every call, since a
    server accepts each credential once. Signed here when this process can read the key (the key
    is read once), else asked of the credential socket per call (a local round trip, well under a
    millisecond)."""

    def __init__(self, key_path: str, socket_path: str, clock: Clock = time.time) -> None:
        self.key_path, self.socket_path, self._clock = key_path, socket_path, clock
        self._key: bytes | None = None
        self._unreadable: AuthError | None = None  # why the key could not be read: ask the socket
        self._lock = allocate_lock()  # threading's Lock, without importing threading at every command's start

    @classmethod
    def for_cluster(cls, config: ClusterConfig) -> Credentials:
        return cls(config.auth_key_path, config.auth_socket_path)

    def token(self) -> str:
        """A new credential, for one request. Raises AuthError when none can be had."""
        return self._fetch(self._clock())

    def metadata(self) -> Metadata:
        """gRPC metadata with a new credential, for one call. Raises AuthError when none can be had."""
        return ((METADATA_KEY, self.token()),)

    def _fetch(self, now: float) -> str:
        with self._lock:
            if self._key is None and self._unreadable is None:
                try:
                    self._key = load_key(self.key_path)
                except AuthError as exc:
                    self._unreadable = exc
            key, unreadable = self._key, self._unreadable
        if key is not None:
            return sign(key, Identity(os.getuid(), os.getgid()), now)
        try:
            return ask_credential_socket(self.socket_path)
        except AuthError as no_service:
            raise AuthError(f"{unreadable}, and {no_service}") from None


RETRIES = 6  # a rate-limited ask is made again after 0.1, 0.2, ... 3.2 s (as Slurm's clients back off)


def ask_credential_socket(path: str) -> str:
    """A credential for this process from the credential socket at ``path``; asked again, after a
    growing wait, while the socket says this user asks too fast."""
    for attempt in range(RETRIES + 1):
        try:
            line = _ask(path)
        except OSError as exc:
            raise AuthError(f"no credential service at {path}: {exc.strerror or exc}") from None
        if not line.startswith("error:"):
            break
        if attempt == RETRIES:
            raise AuthError(f"the credential service at {path}: {line[6:].strip()}")
        time.sleep(0.1 * 2**attempt)
    if not line:
        raise AuthError(f"the credential service at {path} gave no credential")
    return line


def _ask(path: str) -> str:
    """The credential socket's one line (at most 4096 bytes), through ``_socket`` as the client's
    HTTP is (:mod:`pslurm.client.http`: :mod:`socket` costs a command's start milliseconds)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(5)
        sock.connect(path)
        data = b""
        while b"\n" not in data and len(data) < 4096:
            piece = sock.recv(4096)
            if not piece:
                break
            data += piece
    finally:
        sock.close()
    return data.split(b"\n", 1)[0][:4096].decode(errors="replace").strip()
