"""No function of pslurm runs past 80 lines without a comment saying why.

A function's length is its lines from ``def`` to its last line (decorators aside; a nested
function counts on its own and within its parent). One past the limit needs a comment that starts
with ``# long:`` and says why, within it or on the line before it (before its decorators). The
generated protobuf stubs are not ours to shorten."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pslurm"
LIMIT = 80
GENERATED = ("_pb2.py", "_pb2_grpc.py")

# Functions past the limit in other engineers' areas, with who shortens them (or says why in a
# ``# long:`` comment); delete an entry with that work (the test fails once an entry needs no place here).
ALLOWED: dict[str, str] = {}


def long_functions(path: Path, root: Path) -> dict[str, int]:
    """Each function of ``path`` past LIMIT lines without a ``# long:`` comment saying why:
    ``file::qualified.name`` (relative to ``root``) and its length."""
    text = path.read_text(encoding="utf-8")
    reasons = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
               if tok.type == tokenize.COMMENT and tok.string.startswith("# long:") and tok.string[7:].strip()}
    found = {}
    for name, node in _functions(ast.parse(text, str(path))):
        length = node.end_lineno - node.lineno + 1 if node.end_lineno else 0
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        if length > LIMIT and not any(first - 1 <= line <= node.end_lineno for line in reasons):
            found[f"{path.relative_to(root).as_posix()}::{name}"] = length
    return found


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method in ``tree`` with its qualified name (``Class.method``, ``f.inner``)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((prefix + node.name, node))
            found.extend(_functions(node, f"{prefix}{node.name}."))
        elif isinstance(node, ast.ClassDef):
            found.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            found.extend(_functions(node, prefix))
    return found


def test_no_function_runs_past_80_lines_without_saying_why() -> None:
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if not path.name.endswith(GENERATED):
            found.update(long_functions(path, PACKAGE))
    unexplained = [f"{name}: {length} lines" for name, length in sorted(found.items()) if name not in ALLOWED]
    assert not unexplained, (f"functions past {LIMIT} lines: shorten them, or say why in a '# long: why' comment "
                             "within them or on the line before:\n" + "\n".join(unexplained))
    stale = [f"{name} ({who})" for name, who in ALLOWED.items() if name not in found]
    assert not stale, "within the limit now (or saying why): delete them from ALLOWED:\n" + "\n".join(stale)


def test_the_length_and_the_reason_are_read_as_the_rule_says(tmp_path: Path) -> None:
    def body(indent: int, lines: int) -> str:
        return "".join(f"{' ' * indent}x{i} = {i}\n" for i in range(lines))

    source = (f"def short():\n{body(4, LIMIT - 1)}\n"  # with its def: LIMIT lines, within
              f"class C:\n    def method(self):\n{body(8, LIMIT)}\n"  # LIMIT + 1: too long
              f"# long: a table of cases, one a line\n@staticmethod\ndef explained():\n{body(4, LIMIT)}\n"
              f"def empty_reason():\n    # long:\n{body(4, LIMIT)}\n"
              f"def outer():\n    def inner():\n{body(8, LIMIT)}\n"
              f"def reason_inside():\n{body(4, 40)}    # long: says why, anywhere within\n{body(4, 40)}\n")
    (tmp_path / "m.py").write_text(source)
    found = long_functions(tmp_path / "m.py", tmp_path)
    assert found == {"m.py::C.method": LIMIT + 1, "m.py::empty_reason": LIMIT + 2, "m.py::outer": LIMIT + 2,
                     "m.py::outer.inner": LIMIT + 1}
