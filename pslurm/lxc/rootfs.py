"""``--rootfs debian``: a real Debian root with pslurm installed into it, made once and cached.

The cache (``/var/cache/pslurm/lxc/<suite>``) holds a ``debootstrap --variant=minbase`` root with
Debian's python3, and pslurm with its dependencies installed by pip into ``/opt/pslurm`` of that
root (``pip install --target``, from the project this pslurm runs from, or from the index). Each
container's root is an overlay over the cached one, as with the default overlay of the host's /.
A root is ready once its ``.pslurm-ready`` marker exists; ``rm -r`` the cache to rebuild it. The
marker names the pslurm installed (a hash of the source tree, or the released version): when the
running pslurm differs, pslurm is installed again into the cached root before it is used, so the
agents inside never run other code than the controller outside.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from pslurm.lxc.host import HostError

CACHE = Path("/var/cache/pslurm/lxc")
SUITE = "bookworm"  # its python3 is 3.11, like pslurm's own: the host's binary wheels fit
MIRROR = "http://deb.debian.org/debian"
SITE = "/opt/pslurm"  # inside the root


def project_source() -> str:
    """What to pip-install: the source tree this pslurm runs from (an editable or source checkout),
    else the released distribution of the same version."""
    import pslurm

    tree = Path(pslurm.__file__).resolve().parent.parent
    if (tree / "pyproject.toml").exists():
        return str(tree)
    from importlib.metadata import version

    return f"pslurm=={version('pslurm')}"


def source_fingerprint() -> str:
    """What pslurm this is: the source tree and a hash of its files, or the released version."""
    source = project_source()
    tree = Path(source)
    if not tree.is_dir():
        return source
    digest = hashlib.sha256()
    for path in sorted([tree / "pyproject.toml", *(tree / "pslurm").rglob("*")]):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(tree)).encode() + b"\0" + path.read_bytes())
    return f"{source} {digest.hexdigest()[:16]}"


def debian_root(cache: Path = CACHE, suite: str = SUITE) -> tuple[str, str]:
    """The cached root (made now when missing, its pslurm refreshed when stale) and the agent's
    interpreter command inside it."""
    root = cache / suite
    python = f"env PYTHONPATH={SITE} /usr/bin/python3"
    marker = root / ".pslurm-ready"
    if marker.exists():
        fingerprint = source_fingerprint()
        if marker.read_text().strip() != fingerprint:
            _install_pslurm(root, cache / f"{suite}.log")
            marker.write_text(fingerprint + "\n")
        return str(root), python
    if shutil.which("debootstrap") is None:
        raise HostError("--rootfs debian needs debootstrap (apt-get install debootstrap)")
    if sys.version_info[:2] != (3, 11):
        raise HostError(f"--rootfs debian ({suite}, Python 3.11) needs pslurm on Python 3.11 to install its "
                        f"wheels, not {sys.version_info.major}.{sys.version_info.minor}")
    tmp = cache / f"{suite}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log = cache / f"{suite}.log"
    try:
        _run(["debootstrap", "--variant=minbase", "--include=python3", suite, str(tmp), MIRROR], log)
        _install_pslurm(tmp, log)
        (tmp / ".pslurm-ready").write_text(source_fingerprint() + "\n")
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(root), python


def _install_pslurm(root: Path, log: Path) -> None:
    """pip-install this pslurm and its dependencies into the root's SITE (replacing what is there)."""
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", "--no-warn-script-location",
          "--target", str(root / SITE.lstrip("/")), project_source()], log)


def _run(argv: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise HostError(f"making the Debian root failed: {argv[0]} {argv[-1]} exited {proc.returncode} (see {log})")
