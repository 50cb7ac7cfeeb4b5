"""No import circles in pslurm: the graph of which module imports which, read from the source, has
no cycle (outside the known ones below, each with who removes it).

Every import counts: at module level, inside functions (deferred imports still tie two modules
together: one cannot be understood, tested or moved without the other) and under
``if TYPE_CHECKING:`` (a circle of types is a circle of design). An edge goes to the module an
import names: ``from pslurm.core import gres`` is an edge to ``pslurm.core.gres``,
``from pslurm.core.gres import GresRequest`` one to ``pslurm.core.gres``; a package's
``__init__`` that an import only passes through is not an edge."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pslurm"

# Circles that exist today, each removed by the work named beside it; delete an entry with that work
# (the test fails once an entry is no longer a circle, so the list only shrinks).
KNOWN: dict[frozenset[str], str] = {
    frozenset({"pslurm.core.dependency", "pslurm.core.jobdesc", "pslurm.core.jobinfo", "pslurm.core.jobspec"}):
        "conform (issue 17 item 2: one job model for the commands)",
}


def module_files(package: Path) -> dict[str, Path]:
    """Every module of ``package`` (a directory) by its dotted name; a package by its own name."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of the same package it imports, anywhere in it."""
    modules = module_files(package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found.update(_module_of(alias.name, modules) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, here)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in modules else _module_of(base, modules))
        found.discard("")
        found.discard(name)
        graph[name] = found
    return graph


def _absolute(node: ast.ImportFrom, here: str) -> str:
    """The module ``from ... import`` names, relative imports resolved against the package ``here``."""
    if not node.level:
        return node.module or ""
    parts = here.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _module_of(dotted: str, modules: Mapping[str, Path]) -> str:
    """The longest known module that ``dotted`` names or lies in; "" for one of another package."""
    while dotted and dotted not in modules:
        dotted = dotted.rpartition(".")[0]
    return dotted


def circles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def a_cycle(graph: Mapping[str, Iterable[str]], component: frozenset[str]) -> list[str]:
    """One cycle through ``component``'s first module, as the modules it passes (for the message)."""
    start = min(component)
    paths = [[start]]
    seen = {start}
    while paths:
        path = paths.pop(0)
        for nxt in sorted(graph[path[-1]]):
            if nxt == start:
                return [*path, start]
            if nxt in component and nxt not in seen:
                seen.add(nxt)
                paths.append([*path, nxt])
    return [start]


def test_pslurm_has_no_import_circles_but_the_known_ones() -> None:
    graph = import_graph(PACKAGE)
    found = circles(graph)
    new = [" -> ".join(a_cycle(graph, c)) for c in found if c not in KNOWN]
    assert not new, "import circles (break them: move what both need below both):\n" + "\n".join(new)
    gone = [f"{sorted(c)} ({who})" for c, who in KNOWN.items() if c not in found]
    assert not gone, "no longer circles: delete them from KNOWN:\n" + "\n".join(gone)


def test_the_graph_counts_every_kind_of_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")  # a module named through its package
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import x\n")  # deferred, relative
    (package / "c.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import pkg.a\nx = 1\n")
    (package / "d.py").write_text("import os\nfrom pkg.sub.b import f\n")  # outside the circle
    graph = import_graph(package)
    assert graph == {"pkg": set(), "pkg.sub": set(), "pkg.a": {"pkg.sub.b"}, "pkg.sub.b": {"pkg.c"},
                     "pkg.c": {"pkg.a"}, "pkg.d": {"pkg.sub.b"}}
    assert circles(graph) == [frozenset({"pkg.a", "pkg.sub.b", "pkg.c"})]
    assert a_cycle(graph, circles(graph)[0]) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
