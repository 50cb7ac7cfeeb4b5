"""What a client reads of pslurm.conf: where the controller is and how to get a credential.

The commands need a handful of keys (SlurmctldHost, SlurmctldPort, RestPort, AuthKey, AuthSocket),
not the nodes, partitions and GRES that :func:`pslurm.core.config.load_cluster_config` builds into
dataclasses for the daemons. :func:`read_client_conf` reads just those, with the one tokenizer of
slurm.conf lines (:func:`logical_lines`, which :mod:`pslurm.core.confparse` parses with too) and
the same checks and messages for the keys it reads. Standard library only, and little of it: every
command imports this on its path.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from collections.abc import Iterator

# The keys a client reads (lower case), and the global keys with whole-number values that
# confparse reads with the same check.
CLIENT_KEYS = ("slurmctldhost", "controlmachine", "slurmctldport", "restport", "authkey", "authsocket", "clustername",
               "slurmctldtimeout")
DEFAULT_CONTROLLER_PORT = 6817
DEFAULT_REST_PORT = 6820
DEFAULT_SLURMCTLD_TIMEOUT = 10  # seconds (Slurm's default is 120; a lab's cluster fails over sooner)


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the file and the line."""


def config_error(path: str, lineno: int, what: str) -> ConfigError:
    return ConfigError(f"{path}:{lineno}: {what}")


def logical_lines(text: str, path: str, wanted: tuple[str, ...] = ()) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """Yield (first line number, [(key, value)]) per logical line: backslash continuations joined,
    ``#`` comments dropped, quoted values unquoted (shell rules, as Slurm). Keys keep their
    spelling. ``wanted``: lower-case keys; a line that names none of them is skipped untokenized
    (a client reading a few keys of a file of many nodes)."""
    pending, start = "", 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        if not pending:
            start = lineno
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical, pending = pending + line, ""
        if wanted:
            low = logical.lower()
            if not any(key in low for key in wanted):
                continue
        tokens = _tokens(logical, path, start)
        pairs = []
        for tok in tokens:
            key, eq, value = tok.partition("=")
            if not eq or not key:
                raise config_error(path, start, f"expected Key=Value, got '{tok}'")
            pairs.append((key, value))
        if pairs:
            yield start, pairs
    if pending:
        raise config_error(path, start, "line continuation (trailing backslash) at end of file")


_SHELL_SPECIAL = frozenset("'\"\\")
_BLANKS = str.maketrans("\t\r\n", "   ")  # shlex's whitespace
_WHITESPACE = frozenset(" \t\r\n")


def _tokens(line: str, path: str, lineno: int) -> list[str]:
    """The line's words as ``shlex`` (POSIX, whitespace-split, ``#`` comments) makes them: quotes
    (``'...'`` as it is, ``"..."`` with ``\\"`` and ``\\\\``), backslashes, a ``#`` outside a quote
    ending the line. Not shlex itself: it imports ``re`` (and ``enum``), milliseconds of every command's
    start, and pslurm.conf's writers quote values such as ``SlurmctldHost='host(addr)'``."""
    if _SHELL_SPECIAL.isdisjoint(line):  # the common line: words and a comment, nothing to unquote
        return [word for word in line.partition("#")[0].translate(_BLANKS).split(" ") if word]
    try:
        return _split_quoted(line)
    except ValueError as exc:
        raise config_error(path, lineno, f"cannot parse line: {exc}") from None


def _split_quoted(line: str) -> list[str]:
    """shlex.split(line, comments=True) in POSIX mode (tests/unit/test_clientconf.py holds the two
    side by side); ValueError with shlex's words for an open quote or a trailing backslash."""
    words: list[str] = []
    word: list[str] = []
    started = False  # a word is under way (an empty quoted word counts: '' is a word)
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c in _WHITESPACE or c == "#":
            if started:
                words.append("".join(word))
                word, started = [], False
            if c == "#":
                break
        elif c == "\\":
            if i + 1 >= n:
                raise ValueError("No escaped character")
            i += 1
            word.append(line[i])
            started = True
        elif c in "'\"":
            end = i + 1
            while True:
                if end >= n:
                    raise ValueError("No closing quotation")
                if line[end] == c:
                    break
                if c == '"' and line[end] == "\\":
                    if end + 1 >= n:
                        raise ValueError("No escaped character")
                    if line[end + 1] in '"\\':
                        end += 1
                word.append(line[end])
                end += 1
            i = end
            started = True
        else:
            word.append(c)
            started = True
        i += 1
    if started:
        words.append("".join(word))
    return words


def whole_number(path: str, lineno: int, key: str, value: str, hi: int = 2**31 - 1) -> int:
    """A key's whole-number value (0..hi); ConfigError naming the line otherwise."""
    if not value.isascii() or not value.isdigit() or int(value) > hi:
        raise config_error(path, lineno, f"{key}={value}: expected a whole number from 0 to {hi}")
    return int(value)


def port_number(path: str, lineno: int, key: str, value: str) -> int:
    return whole_number(path, lineno, key, value, 65535)


def controller_host(path: str, lineno: int, key: str, value: str) -> tuple[str, str]:
    """SlurmctldHost=``name`` or ``name(addr)``: (name, the address to reach it on). Without an
    address, ``localhost`` is reached on 127.0.0.1 and any other name on itself."""
    name, paren, rest = value.partition("(")
    addr = rest[:-1] if paren and rest.endswith(")") else ""
    if not _word(name) or (paren and not _word(addr)):
        raise config_error(path, lineno, f"{key}={value}: expected name or name(address)")
    return name, addr or ("127.0.0.1" if name == "localhost" else name)


def _word(text: str) -> bool:
    return bool(text) and not any(c in "()" or c.isspace() for c in text)


class ClientAddresses:
    """Where a client finds the cluster, from the keys both configurations have (a mixin of
    :class:`ClientConf` and of :class:`pslurm.core.config.ClusterConfig`)."""

    __slots__ = ()
    path: str
    controller_host: str
    controller_addr: str
    backup_controllers: tuple[tuple[str, str], ...]
    slurmctld_timeout: int
    controller_port: int
    rest_port: int
    auth_key: str
    auth_socket: str
    cluster_name: str

    @property
    def auth_key_path(self) -> str:
        """The cluster key (Slurm's slurm.key): AuthKey=, else pslurm.key beside the file; every daemon
        needs it, users may not read it."""
        return self.auth_key or os.path.join(os.path.dirname(os.path.abspath(self.path)), "pslurm.key")

    @property
    def auth_socket_path(self) -> str:
        """The controller's credential socket, for users who cannot read the key: AuthSocket=, else
        pslurm.sock beside the file."""
        return self.auth_socket or os.path.join(os.path.dirname(os.path.abspath(self.path)), "pslurm.sock")

    @property
    def controller_hosts(self) -> tuple[tuple[str, str], ...]:
        """Every controller, (name, address) each, in SlurmctldHost= order: the primary, then its backups."""
        return ((self.controller_host, self.controller_addr), *self.backup_controllers)

    @property
    def controller_target(self) -> str:
        """host:port of the controller's gRPC (what an unreachable controller is named by)."""
        return f"{self.controller_addr}:{self.controller_port}"

    @property
    def rest_target(self) -> str:
        """host:port of the controller's HTTP/JSON user API (slurmrestd's customary port by default)."""
        return f"{self.controller_addr}:{self.rest_port}"


class ClientConf(ClientAddresses):
    """The client's part of a pslurm.conf (the attributes :class:`pslurm.core.config.ClusterConfig`
    has by the same names, so either serves a client)."""

    __slots__ = ("path", "controller_host", "controller_addr", "controller_port", "rest_port", "auth_key",
                 "auth_socket", "cluster_name", "backup_controllers", "slurmctld_timeout")

    def __init__(self, path: str, controller_addr: str = "127.0.0.1", controller_port: int = DEFAULT_CONTROLLER_PORT,
                 rest_port: int = DEFAULT_REST_PORT, auth_key: str = "", auth_socket: str = "",
                 cluster_name: str = "pslurm", controller_host: str = "localhost") -> None:
        self.path, self.controller_addr, self.controller_port = path, controller_addr, controller_port
        self.rest_port, self.auth_key, self.auth_socket = rest_port, auth_key, auth_socket
        self.cluster_name = cluster_name  # ClusterName= (ClusterConfig's default): the commands' JSON names it
        self.controller_host = controller_host
        self.backup_controllers: tuple[tuple[str, str], ...] = ()
        self.slurmctld_timeout = DEFAULT_SLURMCTLD_TIMEOUT



def read_client_conf(path: str) -> ClientConf:
    """The client's keys of the pslurm.conf at ``path``. ConfigError when it cannot be read or one of
    those keys is malformed (the rest of the file is the daemons' to check)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    conf = ClientConf(path)
    host_seen = False
    for lineno, pairs in logical_lines(text, path, CLIENT_KEYS):
        if pairs[0][0].lower() in ("nodename", "partitionname"):
            continue  # a node's or a partition's own keys
        for key, value in pairs:
            low = key.lower()
            if low == "slurmctldport":
                conf.controller_port = port_number(path, lineno, key, value)
            elif low == "restport":
                conf.rest_port = port_number(path, lineno, key, value)
            elif low == "authkey":
                conf.auth_key = value
            elif low == "authsocket":
                conf.auth_socket = value
            elif low == "clustername":
                conf.cluster_name = value
            elif low == "slurmctldtimeout":
                conf.slurmctld_timeout = whole_number(path, lineno, key, value)
            elif low in ("slurmctldhost", "controlmachine"):
                name, addr = controller_host(path, lineno, key, value)
                if not host_seen:
                    conf.controller_host, conf.controller_addr, host_seen = name, addr, True
                else:  # later lines name backup controllers
                    conf.backup_controllers += ((name, addr),)
    return conf


def default_state_dir() -> str:
    """Where ``pslurm up`` keeps the per-user local cluster: ``$XDG_STATE_HOME/pslurm`` or
    ``~/.local/state/pslurm``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "pslurm")


def find_config_path() -> str:
    """``$PSLURM_CONF``, else ``/etc/pslurm/pslurm.conf`` if it exists, else the per-user one."""
    env = os.environ.get("PSLURM_CONF")
    if env:
        return env
    if os.path.exists("/etc/pslurm/pslurm.conf"):
        return "/etc/pslurm/pslurm.conf"
    return os.path.join(default_state_dir(), "pslurm.conf")
