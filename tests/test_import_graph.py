"""No import circle: the imports of archspec/ and reference/ form no cycle, neither those at module level
nor those anywhere, function bodies included (a function that imports a module which imports its own
module back is a circle that the order of first use happens to hide). archspec.hf maps a config's object
and never imports archspec.io.loading, which reads files and imports archspec.hf on first use. A package's
own __init__ importing its modules (archspec.hf gathering its lineages) is not an edge back."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"archspec": "archspec", "reference": "archspec.reference"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            out[name] = path
    return out


def import_graph(anywhere: bool = False) -> dict[str, set[str]]:
    """module -> the archspec modules its module-level statements import (`if TYPE_CHECKING:` left out),
    or, `anywhere`, the modules any of its statements imports, inside functions too."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree) if anywhere else tree.body:
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                deps |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[name] = {d for d in deps if d in modules and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                out.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_the_imports_it_must():
    graph = import_graph()
    assert "archspec.hf.engine" in graph["archspec.hf.llama"]
    assert "archspec.spec.model" in graph["archspec.io.loading"]
    assert "archspec.reference.families.engine" in graph["archspec.reference.families.llama"]


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    found = cycles(import_graph())
    assert not found, f"module-level import circles: {found} (import inside the function that needs it instead)"


def test_no_import_circle_even_inside_functions():
    found = cycles(import_graph(anywhere=True))
    assert not found, f"import circles through function bodies: {found} (a lower module must not reach back up)"


def test_the_graph_sees_imports_inside_functions():
    # archspec.io.catalog parses a preset's claims only when they are asked for
    assert "archspec.io.loading" in import_graph(anywhere=True)["archspec.io.catalog"]
    assert "archspec.validate.claims" in import_graph(anywhere=True)["archspec.io.catalog"]
    assert "archspec.validate.claims" not in import_graph()["archspec.io.catalog"]


def test_hf_does_not_import_loading():
    graph = import_graph()
    reach, todo = set(), ["archspec.hf"]
    while todo:
        for dep in graph[todo.pop()] - reach:
            reach.add(dep)
            todo.append(dep)
    assert "archspec.io.loading" not in reach


def test_either_module_imports_first():
    """Each side imports on its own in a fresh interpreter, in either order."""
    for order in (("archspec.hf", "archspec.io.loading"), ("archspec.io.loading", "archspec.hf")):
        code = "import importlib; " + "; ".join(f"importlib.import_module({m!r})" for m in order)
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
