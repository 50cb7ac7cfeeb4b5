"""``--rootfs debian``: a real Debian root with pslurm installed into it, made once and cached.

The cache (``/var/cache/pslurm/lxc/<suite>``) holds a ``debootstrap --variant=minbase`` root with
Debian's python3, and pslurm with its dependencies installed by pip into ``/opt/pslurm`` of that
root (``pip install --target``, from the project this pslurm runs from, or from the index). Each
container's root is an overlay over the cached one, as with the default overlay of the host's /.
A root is ready once its ``.pslurm-ready`` marker exists; ``rm -r`` the cache to rebuild it.
"""

from __future__ import annotations

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


def debian_root(cache: Path = CACHE, suite: str = SUITE) -> tuple[str, str]:
    """The cached root (made now when missing) and the agent's interpreter command inside it."""
    root = cache / suite
    python = f"env PYTHONPATH={SITE} /usr/bin/python3"
    if (root / ".pslurm-ready").exists():
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
        _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-warn-script-location",
              "--target", str(tmp / SITE.lstrip("/")), project_source()], log)
        (tmp / ".pslurm-ready").write_text(f"pslurm from {project_source()}\n")
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return str(root), python


def _run(argv: list[str], log: Path) -> None:
    with open(log, "ab") as out:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise HostError(f"making the Debian root failed: {argv[0]} {argv[-1]} exited {proc.returncode} (see {log})")
