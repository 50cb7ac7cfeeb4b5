"""Credentials on the wire: what clients send, what servers check, and the credential socket."""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc

from pslurm.auth.credential import API, AuthError, Identity, sign, verify
from pslurm.auth.credentials import METADATA_KEY, Clock, Credentials, Metadata, ask_credential_socket
from pslurm.auth.ratelimit import TokenBuckets
from pslurm.auth.replay import ReplayCache

__all__ = ["METADATA_KEY", "MAX_REQUEST_BYTES", "SERVER_OPTIONS", "Authenticator", "Clock", "CredentialService",
           "Credentials", "Metadata", "ask_credential_socket", "signed_metadata"]
# The most a server takes in one message: a submit (or a launch) with a 4 MiB script and a 1 Mi-character
# environment (up to 4 MiB of UTF-8), with room to spare. Bigger ones are refused (RESOURCE_EXHAUSTED)
# by gRPC itself, never reaching a handler; gRPC's default would be 4 MiB, too small for such a job.
MAX_REQUEST_BYTES = 12 * 1024 * 1024
SERVER_OPTIONS = [("grpc.max_receive_message_length", MAX_REQUEST_BYTES), ("grpc.so_reuseport", 0)]


def signed_metadata(key: bytes, audience: str, clock: Clock = time.time) -> Metadata:
    """gRPC metadata with a fresh credential for this process made for ``audience`` (the controller's
    CONTROLLER, or an agent's node_audience), signed with ``key`` (the daemons)."""
    return ((METADATA_KEY, sign(key, Identity(os.getuid(), os.getgid()), clock(), audience=audience)),)


class Authenticator:
    """A server's side: refuses requests without a good, unused credential made for ``audience``
    (as a gRPC interceptor, before the request is even read) and tells handlers who sent a request.
    ``only``: the uids it serves at all (the controller's gRPC: operators, the agents); another's
    good credential is refused before it is spent, so nobody else can fill its replay cache.

    The interceptor spends the credential (:class:`ReplayCache`, the server's own); :meth:`identity`
    checks it again for the handler without spending it (an HMAC is cheap, and no handler then
    trusts metadata that it did not verify itself)."""

    def __init__(self, key: bytes, clock: Clock = time.time, replay: ReplayCache | None = None,
                 audience: str = API, only: frozenset[int] | None = None) -> None:
        self.key, self._clock, self.audience, self.only = key, clock, audience, only
        self.replay = replay or ReplayCache()

    def admit(self, metadata: Any) -> Identity:
        """The sender of a new call, its credential now spent; AuthError when it is bad or used."""
        credential, now = _credential_in(metadata), self._clock()
        if self.only is not None and verify(self.key, credential, now, self.audience).uid not in self.only:
            raise AuthError("this server takes calls from its cluster's daemons only")
        return self.replay.verify_once(self.key, credential, now, self.audience)

    def identity(self, context: grpc.ServicerContext) -> Identity:
        """Who sent the call being handled (admitted by the interceptor)."""
        return verify(self.key, _credential_in(context.invocation_metadata()), self._clock(), self.audience)

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


CREDENTIAL_RATE = 100  # credentials a second that one uid gets from the credential socket (AuthCredentialRate=)
_ACCEPT_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})  # out of resources: wait
RATE_LIMITED = "error: Rate limit exceeded, please retry momentarily"  # SLURMCTLD_COMMUNICATIONS_BACKOFF


class CredentialService:
    """The credential socket (Slurm's sackd): a Unix socket anyone may connect to; each connection
    gets a credential for the API, for the uid and gid the kernel reports for its peer, then is
    closed. One uid gets at most ``rate`` a second (twice that at once; root, who can read the key
    anyway, as many as it likes): past it the answer is an error line the client waits on and
    retries, so that no user can spend credentials faster than the servers forget them. When the
    process is out of file descriptors it waits instead of spinning."""

    def __init__(self, path: str, key: bytes, clock: Clock = time.time, rate: int = CREDENTIAL_RATE) -> None:
        self.path, self._key, self._clock = path, key, clock
        self._buckets = TokenBuckets(rate, 2 * rate, clock=time.monotonic)
        self._sock: socket.socket | None = None

    def start(self) -> None:
        if os.path.exists(self.path):
            os.unlink(self.path)  # left by a controller that did not stop cleanly
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)
        os.chmod(self.path, 0o666)  # every local user may ask; each gets only their own identity
        sock.listen(512)
        self._sock = sock
        threading.Thread(target=self._serve, args=(sock,), name="credentials", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError as exc:
                if exc.errno in _ACCEPT_ERRORS and self._sock is not None:
                    time.sleep(0.5)  # no descriptor to take the connection with: wait, never a hot loop
                    continue
                return  # closed: stopping
            with conn:
                try:
                    _, uid, gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                   _PEERCRED.size))
                    if uid == 0 or self._buckets.take(uid):
                        conn.sendall(sign(self._key, Identity(uid, gid), self._clock()).encode() + b"\n")
                    else:
                        conn.sendall(RATE_LIMITED.encode() + b"\n")
                except OSError:
                    continue  # the client went away first

    def close(self) -> None:
        if self._sock is not None:
            sock, self._sock = self._sock, None
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() in the serving thread
            except OSError:
                pass
            sock.close()
            if os.path.exists(self.path):
                os.unlink(self.path)
