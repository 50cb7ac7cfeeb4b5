"""Credentials on the wire: what clients send, what servers check, and the credential socket."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from pslurm.auth.credential import AuthError, Identity, ReplayCache, load_key, sign, verify
from pslurm.core.config import ClusterConfig

METADATA_KEY = "x-pslurm-cred"
# The most a server takes in one message: a submit (or a launch) with a 4 MiB script and a 1 Mi-character
# environment (up to 4 MiB of UTF-8), with room to spare. Bigger ones are refused (RESOURCE_EXHAUSTED)
# by gRPC itself, never reaching a handler; gRPC's default would be 4 MiB, too small for such a job.
MAX_REQUEST_BYTES = 12 * 1024 * 1024
SERVER_OPTIONS = [("grpc.max_receive_message_length", MAX_REQUEST_BYTES), ("grpc.so_reuseport", 0)]
Clock = Callable[[], float]
Metadata = tuple[tuple[str, str], ...]  # what a gRPC call takes as metadata=


def signed_metadata(key: bytes, clock: Clock = time.time) -> Metadata:
    """gRPC metadata with a fresh credential for this process, signed with ``key`` (the daemons)."""
    return ((METADATA_KEY, sign(key, Identity(os.getuid(), os.getgid()), clock())),)


class Credentials:
    """A client's credentials, for this process's uid and gid: a fresh one for every call, since a
    server accepts each credential once. Signed here when this process can read the key (the key
    is read once), else asked of the credential socket per call (a local round trip, well under a
    millisecond)."""

    def __init__(self, key_path: str, socket_path: str, clock: Clock = time.time) -> None:
        self.key_path, self.socket_path, self._clock = key_path, socket_path, clock
        self._key: bytes | None = None
        self._unreadable: AuthError | None = None  # why the key could not be read: ask the socket
        self._lock = threading.Lock()

    @classmethod
    def for_cluster(cls, config: ClusterConfig) -> Credentials:
        return cls(config.auth_key_path, config.auth_socket_path)

    def metadata(self) -> Metadata:
        """gRPC metadata with a new credential, for one call. Raises AuthError when none can be had."""
        return ((METADATA_KEY, self._fetch(self._clock())),)

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


class Authenticator:
    """A server's side: refuses requests without a good, unused credential (as a gRPC interceptor,
    before the request is even read) and tells handlers who sent a request.

    The interceptor spends the credential (:class:`ReplayCache`); :meth:`identity` checks it again
    for the handler without spending it (an HMAC is cheap, and no handler then trusts metadata
    that it did not verify itself)."""

    def __init__(self, key: bytes, clock: Clock = time.time, replay: ReplayCache | None = None) -> None:
        self.key, self._clock = key, clock
        self.replay = replay or ReplayCache()

    def admit(self, metadata: Any) -> Identity:
        """The sender of a new call, its credential now spent; AuthError when it is bad or used."""
        return self.replay.verify_once(self.key, _credential_in(metadata), self._clock())

    def identity(self, context: grpc.ServicerContext) -> Identity:
        """Who sent the call being handled (admitted by the interceptor)."""
        return verify(self.key, _credential_in(context.invocation_metadata()), self._clock())

    def interceptor(self) -> grpc.ServerInterceptor:
        return _CredentialInterceptor(self)


class _CredentialInterceptor(grpc.ServerInterceptor):
    def __init__(self, auth: Authenticator) -> None:
        self._auth = auth

    def intercept_service(self, continuation, handler_call_details):  # type: ignore[no-untyped-def]
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        try:
            self._auth.admit(handler_call_details.invocation_metadata)
        except AuthError as exc:
            return _refusal(handler, f"authentication failed: {exc}")
        return handler


def _credential_in(metadata: Any) -> str:
    for key, value in metadata or ():
        if key == METADATA_KEY:
            return str(value)
    raise AuthError("request carries no credential")


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler that answers UNAUTHENTICATED without reading the request.

    It takes the request as a stream, whatever the method's shape, and never reads it: the body
    of an unauthenticated call is never received into Python, let alone parsed (the method's
    deserializer would log every undecodable body). On the wire a unary request is a stream of
    one message, so the caller, unary or not, just gets the status."""

    def refuse(requests: Iterator[bytes], context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    def refuse_stream(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[Any]:
        refuse(requests, context)
        yield  # unreachable: makes this a generator, as a streaming handler must be

    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    return grpc.stream_unary_rpc_method_handler(refuse)


# -- the credential socket ---------------------------------------------------------------------

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class CredentialService:
    """The credential socket (Slurm's sackd): a Unix socket anyone may connect to; each connection
    gets a credential for the uid and gid the kernel reports for its peer, then is closed."""

    def __init__(self, path: str, key: bytes, clock: Clock = time.time) -> None:
        self.path, self._key, self._clock = path, key, clock
        self._sock: socket.socket | None = None

    def start(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)  # left by a controller that did not stop cleanly
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)
        os.chmod(self.path, 0o666)  # every local user may ask; each gets only their own identity
        sock.listen(64)
        self._sock = sock
        threading.Thread(target=self._serve, args=(sock,), name="credentials", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:  # closed: stopping
                return
            with conn:
                try:
                    _, uid, gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                   _PEERCRED.size))
                    conn.sendall(sign(self._key, Identity(uid, gid), self._clock()).encode() + b"\n")
                except OSError:
                    continue  # the client went away first

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() in the serving thread
            except OSError:
                pass
            self._sock.close()
            self._sock = None
            if os.path.exists(self.path):
                os.unlink(self.path)


def ask_credential_socket(path: str) -> str:
    """A credential for this process from the credential socket at ``path``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            line = sock.makefile("rb").readline().decode().strip()
    except OSError as exc:
        raise AuthError(f"no credential service at {path}: {exc.strerror or exc}") from None
    if not line:
        raise AuthError(f"the credential service at {path} gave no credential")
    return line
