"""No module of pslurm reaches for another module's private names.

A leading underscore says "only this module uses it": its author may rename it, change what it takes
or drop it while reading only this module. A name another module needs is public (no underscore, a
docstring saying what it promises) or lives where it is used. So no ``from pslurm.x import _name``
(nor a relative ``from .x import _name``), and no ``x._name`` on what a pslurm import bound. Dunders
(``__version__``) are public; the standard library's private modules are not pslurm's to judge."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pslurm"
GENERATED = ("_pb2.py", "_pb2_grpc.py")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(source: str, where: str = "m.py") -> list[str]:
    """Each use in ``source`` of another pslurm module's private name: ``where:line: what``."""
    found, bound = [], set()
    tree = ast.parse(source, where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "pslurm"):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{where}:{node.lineno}: from {module} import {alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pslurm":
                    bound.add(alias.asname or alias.name.split(".")[0])
                    found.extend(f"{where}:{node.lineno}: import {alias.name}" for part in alias.name.split(".")
                                 if _private(part))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in bound):
            found.append(f"{where}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if not path.name.endswith(GENERATED):
            found += private_imports(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE.parent).as_posix())
    assert not found, ("private names used across modules: make each public (renamed, with a docstring) or "
                       "move it where it is used:\n" + "\n".join(found))


def test_what_counts_as_reaching_for_a_private_name() -> None:
    source = ("from pslurm.core import jobspec, _hidden\n"
              "from .routes import reply, _reply as r\n"
              "import pslurm.auth.credential as cred\n"
              "from pslurm import __version__\n"
              "from _operator import _compare_digest\n"  # the standard library's: not judged here
              "import os\n"
              "jobspec._COLUMNS, cred._mac(b''), os._exit, __version__, jobspec.__doc__\n"
              "class C:\n    def f(self):\n        return self._own\n")
    assert private_imports(source) == ["m.py:1: from pslurm.core import _hidden", "m.py:2: from .routes import _reply",
                                       "m.py:7: jobspec._COLUMNS", "m.py:7: cred._mac"]
