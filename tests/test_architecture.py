"""The house rules of docs/architecture.md, held by reading the source: what each layer may import,
that the reference model never reads the description it is the proof of, and that every file,
module and name the document cites exists (a change that breaks the document fails here)."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def module_of(path: Path) -> str:
    """archspec/memory/cache.py -> archspec.memory.cache; reference/build.py -> archspec.reference.build."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] == "reference":
        parts = ["archspec", "reference", *parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def is_module(name: str) -> bool:
    """Whether `name` is a module of the tree (`from archspec import memory` imports one)."""
    parts = name.split(".")
    if parts[:2] == ["archspec", "reference"] or parts[:2] == ["archspec", "presets"]:
        parts = parts[1:]
    where = ROOT.joinpath(*parts)
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports(path: Path, module_level: bool) -> set[str]:
    """The modules `path` imports: at module level (top-level statements and the blocks of top-level
    if/try, not function bodies), or anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_of(path) if path.name == "__init__.py" else module_of(path).rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if module_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*up, base] if base else up)
                found.add(base)
                found.update(f"{base}.{a.name}" for a in child.names if is_module(f"{base}.{a.name}"))
            visit(child)

    visit(tree)
    return found


def within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# ---------------------------------------------------------------- the layers and what each may import

# docs/architecture.md, "The tree, and what each layer may import": each layer of archspec/ by its folders (a
# module outside every folder, or a folder in no layer, fails below), and the layers it may import at
# module level (function bodies may reach up, lazily)
LAYERS = {
    "base": ("archspec.core", "archspec.presets", "archspec._source_tree", "archspec._moved"),
    "spec": ("archspec.spec",),
    "description": ("archspec.describe",),
    "quantities": ("archspec.count", "archspec.memory", "archspec.plan", "archspec.validate"),
    "inputs": ("archspec.io", "archspec.hf", "archspec.sources"),
    "front door": ("archspec.__main__", "archspec.cli", "archspec.render"),
}
MAY_IMPORT = {
    "base": {"base"},
    "spec": {"base", "spec"},
    "description": {"base", "spec", "description"},
    "quantities": {"base", "spec", "description", "quantities"},
    "inputs": {"base", "spec", "inputs"},
    "front door": set(LAYERS),
}
HEAVY = ("torch", "fvcore", "transformers", "matplotlib", "archspec.reference")
# the reference model's own layer: the spec, the per-layer view and the base, never the description
# it proves (archspec.describe.blocks, entries, mixers) nor the quantities summed over it; verify.py compares
# with them
DESCRIPTION = LAYERS["description"] + LAYERS["quantities"]
READS_THE_DESCRIPTION = {"archspec.reference.verify"}


def layer_of(module: str) -> str | None:
    if module == "archspec":  # the package's front door: archspec.preset, count_params, ...
        return "front door"
    return next((layer for layer, mods in LAYERS.items() if within(module, mods)), None)


def test_every_module_lives_in_a_layer_folder():
    """archspec/ holds folders, one layer each: no flat module but the package's own plumbing, and no
    folder that the layer table does not place."""
    plumbing = {"__init__", "__main__", "_source_tree", "_moved"}
    flat = sorted(p.name for p in (ROOT / "archspec").glob("*.py") if p.stem not in plumbing)
    assert not flat, f"modules outside the layer folders: {flat} (move them into the folder of their layer)"
    folders = {f"archspec.{p.parent.name}" for p in (ROOT / "archspec").glob("*/__init__.py")}
    unplaced = sorted(f for f in folders if layer_of(f) is None)
    assert not unplaced, f"folders in no layer: {unplaced} (name them in docs/architecture.md and in LAYERS)"


@pytest.mark.parametrize("path", sources("archspec"), ids=lambda p: str(p.relative_to(ROOT)))
def test_archspec_imports_no_torch_and_no_reference_at_module_level(path):
    heavy = {m for m in imports(path, module_level=True) if within(m, HEAVY)}
    assert not heavy, f"{path.relative_to(ROOT)} imports {sorted(heavy)} at module level (import it where it is used)"


@pytest.mark.parametrize("path", sources("archspec"), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_layer_imports_only_the_layers_beneath_it(path):
    layer = layer_of(module_of(path))
    assert layer is not None, f"{module_of(path)} is in no layer: name it in docs/architecture.md and in LAYERS"
    wrong = {
        m: layer_of(m)
        for m in imports(path, module_level=True)
        if m.startswith("archspec") and not within(m, HEAVY) and layer_of(m) not in MAY_IMPORT[layer]
    }
    assert not wrong, f"{module_of(path)} ({layer}) imports {wrong} at module level"


@pytest.mark.parametrize("path", sources("reference"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_reference_model_never_reads_the_description(path):
    if module_of(path) in READS_THE_DESCRIPTION:
        pytest.skip("compares with the description")
    read = {m for m in imports(path, module_level=False) if within(m, DESCRIPTION)}
    assert not read, f"{path.relative_to(ROOT)} imports {sorted(read)}: the proof would share the counter's widths"


# ---------------------------------------------------------------- the document is true to the tree


def defined_names() -> set[str]:
    """Every name bound in archspec/, reference/ and tests/: functions, classes, assignments (module,
    class and `self.` attributes, pydantic fields), and the identifier-like strings (config keys)."""
    names: set[str] = set()
    for folder in ("archspec", "reference", "tests"):
        for path in sources(folder):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                    names.add(node.value)  # a config key an adapter reads, a registry's key
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                        for t in ast.walk(target):
                            if isinstance(t, ast.Name):
                                names.add(t.id)
                            elif isinstance(t, ast.Attribute):
                                names.add(t.attr)
    return names


def resolves(dotted: str) -> bool:
    """`archspec.memory.STORAGE`, `reference.verify`, `blocks.block_parts`: a module and the attributes
    after it, found by importing (bare module names under archspec/ and reference/ too)."""
    candidates = [dotted] if dotted.startswith("archspec.") else [f"archspec.{dotted}", f"archspec.reference.{dotted}"]
    if dotted.startswith("reference."):
        candidates = [f"archspec.{dotted}"]
    for name in candidates:
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attr in parts[cut:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                break
            return True
    return False


def prose(text: str) -> str:
    return re.sub(r"```.*?```", "", text, flags=re.S)


PATH = re.compile(r"^[\w.-]+(/[\w.-]*)+$|^[\w-]+\.(py|md|toml|json|yaml|svg)$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+(\(.*\))?$")
NAME = re.compile(r"^([A-Za-z_]\w*)(\(.*\))?$")


def test_every_file_module_and_name_the_architecture_document_cites_exists():
    pytest.importorskip("torch")  # archspec.reference.* names resolve by importing them
    text = DOC.read_text(encoding="utf-8")
    defined = defined_names()
    missing = []
    for token in dict.fromkeys(re.findall(r"`([^`\n]+)`", prose(text))):
        if PATH.match(token):
            if not (ROOT / token).exists():
                missing.append(f"file {token}")
        elif DOTTED.match(token) and token.split(".")[0] in ("archspec", "reference", "blocks", "layers", "memory"):
            if not resolves(token.split("(")[0]):
                missing.append(f"module.symbol {token}")
        elif (m := NAME.match(token)) and ("_" in m[1] or m[1][:1].isupper() or m[2]):  # a name, not a word
            missing += [] if m[1] in defined or hasattr(builtins, m[1]) else [f"name {token}"]
    assert not missing, f"docs/architecture.md cites what the tree does not hold: {missing}"


def test_the_architecture_documents_code_examples_name_what_their_files_define():
    """Each ```python block that opens with `# <file>` (the worked examples) uses only names that file
    defines or imports, and parses as Python."""
    blocks = re.findall(r"```python\n# (\S+\.py)[^\n]*\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert blocks, "docs/architecture.md has no worked example tied to a file"
    for file, code in blocks:
        source = ast.parse((ROOT / file).read_text(encoding="utf-8"))
        bound = {n.name for n in ast.walk(source) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        bound |= {a.asname or a.name for n in ast.walk(source) if isinstance(n, (ast.Import, ast.ImportFrom))
                  for a in n.names}  # fmt: skip
        bound |= {t.id for n in ast.walk(source) if isinstance(n, ast.Assign) for t in n.targets
                  if isinstance(t, ast.Name)}  # fmt: skip
        used = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
        unknown = {n for n in used if n not in bound and not hasattr(builtins, n)}
        assert not unknown, f"the example for {file} uses {sorted(unknown)}, which {file} does not define"


def test_the_readme_links_the_architecture_document_and_nothing_cites_an_outside_design():
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    outside = "DESIGN" + ".md"  # a document outside the project
    folders = ("archspec", "reference", "tests", "benchmarks", "presets", "docs")
    files = [
        ROOT / "README.md",
        *(p for f in folders for p in (ROOT / f).rglob("*") if p.suffix in (".py", ".md", ".toml")),
    ]
    citing = [str(p.relative_to(ROOT)) for p in files if outside in p.read_text(encoding="utf-8")]
    assert not citing, f"{citing} cite {outside}; cite docs/architecture.md"


def test_the_module_paths_from_before_the_folders_import_as_the_same_modules():
    """A script written against archspec 0.3 (`from archspec.sizing import pad_vocab`,
    `archspec.hardware.resolve_peak`) runs unchanged: each old path is the moved module itself."""
    import archspec
    from archspec._moved import MOVED

    for old, new in MOVED.items():
        assert not is_module(old), f"{old} is still a module of its own: drop it from MOVED"
        assert is_module(new), f"{new} does not exist: MOVED names a module that moved again"
        assert importlib.import_module(old) is importlib.import_module(new)
        assert getattr(archspec, old.rpartition(".")[2]) is importlib.import_module(new)
    from archspec.sizing import pad_vocab  # noqa: F401  (the import statement form)


def test_every_package_of_the_tree_is_in_the_wheel():
    """pyproject.toml lists the packages a wheel holds: a folder of archspec/ or reference/ left out
    of the list imports from a clone and is missing from an install."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    tree = {module_of(p) for folder in ("archspec", "reference") for p in (ROOT / folder).rglob("__init__.py")}
    assert tree - listed == set(), f"packages missing from pyproject.toml's [tool.setuptools] packages: {tree - listed}"
