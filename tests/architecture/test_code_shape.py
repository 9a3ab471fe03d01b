"""The shape of the code that reviews keep asking for, checked on every run.

- No import cycle between the project's modules (runtime imports: the ones under
  ``if TYPE_CHECKING:`` do not run).
- No project import inside a function: a function-local import is how a cycle hides.
- No function over 80 lines: a function that long is doing more than one job.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

from tests.architecture.conftest import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 80


def _product_files() -> list[Path]:
    files: list[Path] = []
    for package in PACKAGES:
        found = sorted((ROOT / package).rglob("*.py"))
        files.extend(path for path in found if "migrations" not in path.parts)
    return files


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_project(module: str | None) -> bool:
    return bool(module) and str(module).split(".")[0] in PACKAGES


def _function_local_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and (node.level or _is_project(node.module)):
                found.append((node.lineno, node.module or "." * node.level))
            elif isinstance(node, ast.Import):
                found.extend((node.lineno, a.name) for a in node.names if _is_project(a.name))
    return found


def test_the_project_has_no_import_cycle(graph: grimp.ImportGraph) -> None:
    cycles: set[str] = set()
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if imported == importer or not _is_project(imported):
                continue
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                cycles.add(" → ".join((importer, *back)))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles))


def test_no_function_imports_a_project_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _product_files()
        for line, module in _function_local_imports(ast.parse(path.read_text(), str(path)))
    ]
    assert not found, "function-local project imports:\n" + "\n".join(found)


def test_no_function_is_longer_than_80_lines() -> None:
    long: list[str] = []
    for path in _product_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length})")
    assert not long, "functions over 80 lines:\n" + "\n".join(long)


def test_the_checks_see_a_cycle_and_a_local_import_when_there_is_one() -> None:
    """The checks themselves can fail: a planted cycle and a planted local import."""
    planted = grimp.ImportGraph()
    for module in ("diagnosis", "diagnosis.a", "diagnosis.b"):
        planted.add_module(module)
    planted.add_import(importer="diagnosis.a", imported="diagnosis.b")
    planted.add_import(importer="diagnosis.b", imported="diagnosis.a")
    assert planted.find_shortest_chain(importer="diagnosis.b", imported="diagnosis.a")
    tree = ast.parse("def f():\n    from diagnosis.models import X\n    import json\n")
    assert _function_local_imports(tree) == [(2, "diagnosis.models")]
