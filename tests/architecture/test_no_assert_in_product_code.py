"""No ``assert`` statement in the product's code: ``python -O`` drops them, so a check
that must hold is an explicit error (a tool's becomes its failed invocation) and a type
is narrowed by the code's own shape or a commented ``typing.cast``."""

from __future__ import annotations

import ast

from tests.architecture.test_code_shape import ROOT, _product_files


def _asserts(tree: ast.AST) -> list[int]:
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assert)]


def test_no_product_module_uses_an_assert_statement() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _product_files()
        for line in _asserts(ast.parse(path.read_text(), str(path)))
    ]
    assert not found, "assert statements (gone under python -O):\n" + "\n".join(found)


def test_the_check_sees_an_assert_when_there_is_one() -> None:
    source = "def window(end):\n    if end:\n        assert end is not None\n    return end\n"
    assert _asserts(ast.parse(source)) == [3]
