"""The size of what a newcomer reads at once: no module of archspec/ or reference/ over 500 lines and no
function over 80, declarative tables excepted (docs/architecture.md, "The tree").

A declarative table is a top-level assignment whose value is written out as data: a list, tuple, set or
dict display (the adapters' ``FAMILIES``, a name map) or a constant (a stylesheet). Its lines do not count
towards its module's 500, whatever its rows hold, because a table is read by looking a row up, not from
top to bottom. Nothing else is excepted: a table built inside a function counts towards the function (put
it at module level), and so do a class's fields. A function's lines run from its ``def`` to its last line,
its docstring, comments and nested functions included; a method is a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("archspec", "reference")
MODULE_LINES = 500
FUNCTION_LINES = 80

DATA = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Constant)


def is_table(node: ast.stmt) -> bool:
    """A top-level assignment of data written out: ``NAME = [...]``, ``NAME: T = {...}``, ``A = B = (...)``."""
    return isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, DATA)


def span(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def code_lines(source: str) -> int:
    """The module's lines less the lines of its top-level tables."""
    tree = ast.parse(source)
    return len(source.splitlines()) - sum(span(node) for node in tree.body if is_table(node))


def long_functions(source: str) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function or method over FUNCTION_LINES, nested ones included."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}."
                if not isinstance(child, ast.ClassDef) and span(child) > FUNCTION_LINES:
                    found.append((name[:-1], span(child)))
            visit(child, name)

    visit(ast.parse(source), "")
    return found


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def test_the_walk_reads_both_trees():
    folders = {p.relative_to(ROOT).parts[0] for p in sources()}
    assert folders == set(FOLDERS), f"no Python modules found under {set(FOLDERS) - folders}"


def test_no_module_is_over_500_lines_besides_its_tables():
    over = {}
    for path in sources():
        source = path.read_text(encoding="utf-8")
        if (n := code_lines(source)) > MODULE_LINES:
            total = len(source.splitlines())
            over[str(path.relative_to(ROOT))] = f"{n} lines" + (f" ({total} with its tables)" if total != n else "")
    assert not over, (
        f"modules over {MODULE_LINES} lines, not counting top-level tables: {over}; split each into cohesive "
        "modules (docs/architecture.md says which folder holds which layer)"
    )


def test_no_function_is_over_80_lines():
    over = {
        f"{path.relative_to(ROOT)}: {name}": f"{n} lines"
        for path in sources()
        for name, n in long_functions(path.read_text(encoding="utf-8"))
    }
    assert not over, (
        f"functions over {FUNCTION_LINES} lines: {over}; extract named steps (a table inside a function "
        "goes to module level as data)"
    )


# ---------------------------------------------------------------- the measures, on sources of known size


def _function(name: str, body_lines: int, indent: str = "") -> str:
    return f"{indent}def {name}():\n" + "".join(f"{indent}    x = {i}\n" for i in range(body_lines))


@pytest.mark.parametrize("body, flagged", [(79, False), (80, True)])
def test_a_function_of_81_lines_is_flagged_and_one_of_80_is_not(body, flagged):
    source = "import os\n\n" + _function("f", body)  # def line + body
    assert long_functions(source) == ([("f", body + 1)] if flagged else [])


def test_methods_and_nested_functions_are_measured_by_their_own_lines():
    inner = _function("inner", 85, "        ")
    method = "    def method(self):\n" + inner + "        return inner\n"
    source = "class C:\n" + method
    assert long_functions(source) == [("C.method", 1 + 86 + 1), ("C.method.inner", 86)]


def test_a_table_written_out_is_not_counted_and_code_that_builds_one_is():
    rows = "".join(f"    ({i}, 'row {i}'),\n" for i in range(600))
    table = "ROWS = [\n" + rows + "]\n"
    built = "ROWS = [\n" + rows + "]\nBY_NAME = {name: i for i, name in ROWS}\n"
    assert code_lines(table) == 0
    assert code_lines('"""doc"""\n\n' + table + "STYLE: str = 'x'\n") == 2
    assert code_lines(built) == 1  # the comprehension is code
    function = "def rows():\n    return [\n" + rows + "    ]\n"
    assert code_lines(function) == 603
    assert long_functions(function) == [("rows", 603)]
