"""The ``lxc`` Python bindings (Debian's python3-lxc, or the PyPI ``lxc`` package).

Debian installs the bindings for ``/usr/bin/python3`` only. Another CPython of the same version
(a pyenv or venv interpreter) can load them from there: only the two modules ``lxc`` and
``_lxc`` are taken from that directory, which is removed from ``sys.path`` again at once.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


class BindingsMissing(ImportError):
    """Neither an installed ``lxc`` module nor Debian's python3-lxc for this Python version."""


def load_lxc(fallback: str = DEBIAN_DIST_PACKAGES) -> ModuleType:
    """Import and return the ``lxc`` module; raises BindingsMissing with a one-line reason."""
    try:
        return importlib.import_module("lxc")
    except ImportError:
        pass
    sys.path.insert(0, fallback)
    try:
        return importlib.import_module("lxc")
    except ImportError as exc:
        for name in ("lxc", "_lxc"):  # a half-import must not shadow a later proper install
            sys.modules.pop(name, None)
        raise BindingsMissing(
            f"the LXC Python bindings are not installed for Python {sys.version_info.major}."
            f"{sys.version_info.minor} (apt-get install lxc python3-lxc): {exc}"
        ) from None
    finally:
        if fallback in sys.path:
            sys.path.remove(fallback)
