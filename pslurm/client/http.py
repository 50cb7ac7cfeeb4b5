"""A minimal HTTP/1.1 client over a socket: what the user API needs and nothing more.

Requests with a Content-Length body (or a chunked one, for a job's stdin as it comes); replies
with a Content-Length body, or chunked (the streams: a job's updates, its output), read as they
come; connections kept alive between requests.

Why not :mod:`http.client`: measured here, ``import http.client`` costs some 26 ms (it imports
``email.parser`` and ``ssl``), most of the 36 ms a whole command may take (issue 12's goal: twice
a bare interpreter's start). The API is plain HTTP on a trusted address, so this small client is
enough; it imports only :mod:`socket`.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Iterator

MAX_LINE = 65536  # a status, header or chunk-size line longer than this is not from our server
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class ProtocolError(OSError):
    """The server's answer is not HTTP as expected (or the connection ended inside it)."""


def quote(text: str) -> str:
    """Percent-encode ``text`` for a path segment or a query value."""
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in text.encode())


def query_string(params: Iterable[tuple[str, str]]) -> str:
    pairs = [f"{quote(k)}={quote(v)}" for k, v in params]
    return "?" + "&".join(pairs) if pairs else ""


class Response:
    """A reply whose head has been read; its body is read with :meth:`read` or :meth:`lines`."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str]) -> None:
        self.conn, self.status, self.headers = conn, status, headers
        self.complete = False  # the body has been read to its end: the connection may be reused

    @property
    def reusable(self) -> bool:
        return self.complete and self.headers.get("connection", "").lower() != "close"

    def read(self) -> bytes:
        """The whole body."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = b"".join(self.chunks())
        elif "content-length" in self.headers:
            data = self.conn.read_exactly(int(self.headers["content-length"]))
        else:
            data = self.conn.reader.read()  # until the server closes
        self.complete = True
        return data

    def chunks(self) -> Iterator[bytes]:
        """The body's pieces as they come (a chunked body's chunks; else the body in one)."""
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            yield self.read()
            return
        reader = self.conn.reader
        while True:
            line = reader.readline(MAX_LINE)
            if not line.endswith(b"\n"):
                raise ProtocolError("connection ended inside a chunked reply")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line: {line[:40]!r}") from None
            if size == 0:
                while reader.readline(MAX_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailers: none expected
                self.complete = True
                return
            data = self.conn.read_exactly(size)
            reader.readline(MAX_LINE)  # the CRLF after the chunk
            yield data

    def lines(self) -> Iterator[bytes]:
        """The body's lines (NDJSON) as they come, without their newline."""
        pending = b""
        for data in self.chunks():
            pending += data
            *done, pending = pending.split(b"\n")
            yield from (line for line in done if line)
        if pending:
            yield pending


class Connection:
    """One HTTP/1.1 connection to ``host:port``; ``timeout`` bounds connecting and each read (None: no
    bound, for the streams). OSError (ConnectionRefusedError, TimeoutError, ...) when the server
    cannot be reached or the connection fails."""

    def __init__(self, host: str, port: int, timeout: float | None) -> None:
        self.host, self.port = host, port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small requests go out at once
        self.reader = self.sock.makefile("rb")
        self.used = False  # a request was sent on it before (a reused connection may have been closed)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def dropped(self) -> bool:
        """Whether the server closed this idle connection (or anything else came on it): a request sent
        on it now would fail, unsent. Nothing is read."""
        import select

        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)  # an idle HTTP connection has nothing to read but its end

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.sock.close()

    def abort(self) -> None:
        """End the connection now, from another thread too (a blocked read returns)."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _head(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes | None = None) -> None:
        """A request with a Content-Length body (or none)."""
        headers = {**headers, "Content-Length": str(len(body or b""))} if body is not None or method != "GET" \
            else headers
        self.used = True
        self.sock.sendall(self._head(method, path, headers) + (body or b""))

    def send_chunked(self, method: str, path: str, headers: dict[str, str], pieces: Iterable[bytes]) -> None:
        """A request whose body is sent chunked, each piece as ``pieces`` yields it."""
        self.used = True
        self.sock.sendall(self._head(method, path, {**headers, "Transfer-Encoding": "chunked"}))
        for piece in pieces:
            if piece:
                self.sock.sendall(b"%x\r\n%b\r\n" % (len(piece), piece))
        self.sock.sendall(b"0\r\n\r\n")

    def response(self) -> Response:
        """The head of the reply to the request just sent."""
        line = self.reader.readline(MAX_LINE)
        if not line:
            raise ProtocolError("the server closed the connection without a reply")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"not an HTTP reply: {line[:40]!r}")
        headers: dict[str, str] = {}
        while True:
            field = self.reader.readline(MAX_LINE)
            if field in (b"\r\n", b"\n"):
                break
            if not field:
                raise ProtocolError("connection ended inside a reply's head")
            name, _, value = field.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return Response(self, int(parts[1]), headers)

    def read_exactly(self, size: int) -> bytes:
        data = self.reader.read(size)
        if len(data) != size:
            raise ProtocolError("connection ended inside a reply's body")
        return data
