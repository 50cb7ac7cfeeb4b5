"""A minimal HTTP/1.1 client over a socket: what the user API needs and nothing more.

Requests with a Content-Length body (or a chunked one, for a job's stdin as it comes); replies
with a Content-Length body, or chunked (the streams: a job's updates, its output), read as they
come; connections kept alive between requests.

Why not :mod:`http.client`: measured here, ``import http.client`` costs some 26 ms (it imports
``email.parser`` and ``ssl``), most of the 36 ms a whole command may take (issue 12's goal: twice
a bare interpreter's start). The API is plain HTTP on a trusted address, so this small client is
enough. It speaks through CPython's ``_socket`` itself and reads with a buffer of its own:
:mod:`socket` imports ``selectors`` and makes enums, and its ``getaddrinfo`` and
``create_connection`` load the IDNA codec for any host given as text (some 4 ms of a command's
start, together); an address is connected to straight, a name resolved as bytes.
"""

from __future__ import annotations

import _socket

TYPE_CHECKING = False  # mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

MAX_LINE = 65536  # a status, header or chunk-size line longer than this is not from our server
RECV_SIZE = 65536  # bytes asked of the socket at once
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
            data = self.conn.read_to_end()  # until the server closes
        self.complete = True
        return data

    def chunks(self) -> Iterator[bytes]:
        """The body's pieces as they come (a chunked body's chunks; else the body in one)."""
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            yield self.read()
            return
        conn = self.conn
        while True:
            line = conn.readline()
            if not line.endswith(b"\n"):
                raise ProtocolError("connection ended inside a chunked reply")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size line: {line[:40]!r}") from None
            if size == 0:
                while conn.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers: none expected
                self.complete = True
                return
            data = conn.read_exactly(size)
            conn.readline()  # the CRLF after the chunk
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
        self.sock = connect(host, port, timeout)
        self._buffer = bytearray()  # what was received and not read yet
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
        self.sock.close()

    def abort(self) -> None:
        """End the connection now, from another thread too (a blocked read returns)."""
        try:
            self.sock.shutdown(_socket.SHUT_RDWR)
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
        line = self.readline()
        if not line:
            raise ProtocolError("the server closed the connection without a reply")
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError(f"not an HTTP reply: {line[:40]!r}")
        headers: dict[str, str] = {}
        while True:
            field = self.readline()
            if field in (b"\r\n", b"\n"):
                break
            if not field:
                raise ProtocolError("connection ended inside a reply's head")
            name, _, value = field.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        return Response(self, int(parts[1]), headers)

    def _fill(self) -> bool:
        """Receive what has come (waiting for it); False at the connection's end."""
        data = self.sock.recv(RECV_SIZE)
        self._buffer += data
        return bool(data)

    def readline(self, limit: int = MAX_LINE) -> bytes:
        """The next line with its newline (at most ``limit`` bytes; without a newline at the end)."""
        while True:
            cut = self._buffer.find(b"\n", 0, limit)
            if cut >= 0 or len(self._buffer) >= limit:
                size = cut + 1 if cut >= 0 else limit
                line = bytes(self._buffer[:size])
                del self._buffer[:size]
                return line
            if not self._fill():
                line = bytes(self._buffer)
                self._buffer.clear()
                return line

    def read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                raise ProtocolError("connection ended inside a reply's body")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def read_to_end(self) -> bytes:
        while self._fill():
            pass
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def connect(host: str, port: int, timeout: float | None) -> _socket.socket:
    """A TCP connection to ``host:port`` (``timeout``: connecting and each read; None: none), small
    writes sent at once. An IP address is connected to straight; a name is resolved by getaddrinfo,
    given as bytes (text goes through the IDNA codec), and its addresses tried in turn. OSError when
    none answers."""
    family = _address_family(host)
    addresses: list[tuple[int, tuple[str, int] | tuple[str, int, int, int] | tuple[int, bytes]]]
    if family is not None:
        addresses = [(family, (host, port))]
    else:
        name: str | bytes = host.encode() if host.isascii() else host
        addresses = [(info[0], info[4]) for info in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM)]
    failure: OSError = OSError(f"{host}: no address")
    for family, address in addresses:
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)  # small requests go out at once
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    raise failure


def _address_family(host: str) -> int | None:
    """AF_INET or AF_INET6 for an IP address, None for a name."""
    for family in (_socket.AF_INET, _socket.AF_INET6):
        try:
            _socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return family
    return None
