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

from pslurm.auth.credential import TTL, AuthError, Identity, load_key, sign, verify
from pslurm.core.config import ClusterConfig

METADATA_KEY = "x-pslurm-cred"
Clock = Callable[[], float]
Metadata = tuple[tuple[str, str], ...]  # what a gRPC call takes as metadata=


def signed_metadata(key: bytes, clock: Clock = time.time) -> Metadata:
    """gRPC metadata with a fresh credential for this process, signed with ``key`` (the daemons)."""
    return ((METADATA_KEY, sign(key, Identity(os.getuid(), os.getgid()), clock())),)


class Credentials:
    """A client's credential, for this process's uid and gid: signed here when this process can
    read the key, else got from the credential socket; renewed well before it expires."""

    def __init__(self, key_path: str, socket_path: str, clock: Clock = time.time) -> None:
        self.key_path, self.socket_path, self._clock = key_path, socket_path, clock
        self._credential = ""
        self._made = 0.0

    @classmethod
    def for_cluster(cls, config: ClusterConfig) -> Credentials:
        return cls(config.auth_key_path, config.auth_socket_path)

    def metadata(self) -> Metadata:
        """gRPC metadata to send with a call. Raises AuthError when no credential can be had."""
        now = self._clock()
        if not self._credential or now - self._made > TTL / 2:
            self._credential, self._made = self._fetch(now), now
        return ((METADATA_KEY, self._credential),)

    def _fetch(self, now: float) -> str:
        try:
            key = load_key(self.key_path)
        except AuthError as unreadable:
            try:
                return ask_credential_socket(self.socket_path)
            except AuthError as no_service:
                raise AuthError(f"{unreadable}, and {no_service}") from None
        return sign(key, Identity(os.getuid(), os.getgid()), now)


class Authenticator:
    """A server's side: refuses requests without a good credential (as a gRPC interceptor) and
    tells handlers who sent a request (checked again: an HMAC is cheap, and no handler then
    trusts metadata that it did not verify itself)."""

    def __init__(self, key: bytes, clock: Clock = time.time) -> None:
        self.key, self._clock = key, clock

    def identity(self, context: grpc.ServicerContext) -> Identity:
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
            verify(self._auth.key, _credential_in(handler_call_details.invocation_metadata),
                   self._auth._clock())
        except AuthError as exc:
            return _refusal(handler, f"authentication failed: {exc}")
        return handler


def _credential_in(metadata: Any) -> str:
    for key, value in metadata or ():
        if key == METADATA_KEY:
            return str(value)
    raise AuthError("request carries no credential")


def _refusal(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as ``handler`` that answers UNAUTHENTICATED."""

    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    def refuse_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        refuse(request, context)
        yield  # unreachable: makes this a generator, as a streaming handler must be

    codec = dict(request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(refuse_stream, **codec)
    return grpc.unary_unary_rpc_method_handler(refuse, **codec)


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
