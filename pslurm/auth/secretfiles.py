"""Files that hold secrets (the cluster key, the database URL) and whether other users can read them.

psctld refuses to start when a secret lies where another user can read it, as munged refuses a
munge.key others may read, and as Slurm keeps StoragePass in a 0600 slurmdbd.conf: a readable
cluster key lets anyone sign themselves root's credential, a readable database URL with its
password gives anyone the database.
"""

from __future__ import annotations

import contextlib
import os
import stat
from urllib.parse import parse_qs, urlsplit

from pslurm.auth.credential import AuthError
from pslurm.core.config import ClusterConfig

_GROUP_OR_OTHERS_READ = stat.S_IRGRP | stat.S_IROTH
_GROUP_OR_OTHERS_SEARCH = stat.S_IXGRP | stat.S_IXOTH


def exposure(path: str) -> str | None:
    """Why users other than the owner of ``path`` (and root) can read it, e.g. ``mode 0644``;
    None when they cannot, or when there is no such file.

    The file's group and other read bits count only where other users can also reach it: a
    directory on the way that grants no group or other search (x) bit, and that belongs to root
    or to the file's owner, keeps everyone else out (pytest's 0700 temporary directories, a 0700
    /etc/pslurm)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    mode = stat.S_IMODE(st.st_mode)
    if not mode & _GROUP_OR_OTHERS_READ:
        return None
    directory = os.path.dirname(os.path.realpath(path))
    while True:
        try:
            dst = os.stat(directory)
        except OSError:
            return None
        closed = not stat.S_IMODE(dst.st_mode) & _GROUP_OR_OTHERS_SEARCH
        if closed and dst.st_uid in (0, st.st_uid):
            return None
        parent = os.path.dirname(directory)
        if parent == directory:
            return f"mode {mode:04o}"
        directory = parent


def check_private(path: str, what: str) -> None:
    """AuthError (one line, with the fix) when other users can read the secret file ``path``."""
    why = exposure(path)
    if why is not None:
        raise AuthError(f"{what} {path} can be read by other users ({why}): chmod 600 {path}")


def has_password(url: str) -> bool:
    """Whether a database URL carries a password (``user:password@host``, or ``?password=``)."""
    try:
        parts = urlsplit(url)
        return bool(parts.password) or any(k.lower() == "password" for k in parse_qs(parts.query))
    except ValueError:  # not a URL the store could use either: it will say so
        return False


def check_cluster_secrets(config: ClusterConfig) -> None:
    """psctld's start-up check: the cluster key, DatabaseURLFile, and a DatabaseURL with a password
    in pslurm.conf itself, each readable by no other user. Raises AuthError saying which and how
    to fix it."""
    check_private(config.auth_key_path, "the cluster key")
    if config.database_url_file:
        check_private(config.database_url_file, "DatabaseURLFile")
    if has_password(config.database_url) and exposure(config.path) is not None:
        raise AuthError(f"{config.path} can be read by other users ({exposure(config.path)}) and its DatabaseURL "
                        "holds a password: put the URL in a file only the controller's user can read and name "
                        "it with DatabaseURLFile=")


def read_database_url(path: str) -> str:
    """The database URL in ``path`` (DatabaseURLFile=: one line), after checking no other user can
    read it. Raises AuthError."""
    check_private(path, "DatabaseURLFile")
    try:
        with open(path, encoding="utf-8") as f:
            url = f.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthError(f"cannot read DatabaseURLFile {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not url or "\n" in url:
        raise AuthError(f"DatabaseURLFile {path} must hold one line: the database URL")
    return url


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only, from its first byte: a new file made
    0600 beside it (O_EXCL, so it is nobody else's) is filled, then renamed over ``path``. Never a
    window where the secret lies in a file others may read, and a reader who opened an older
    ``path`` keeps reading the older file, not this text."""
    directory, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)  # whatever the umask said
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
