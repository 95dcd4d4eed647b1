"""The documentation site: every page of docs/ is in mkdocs.yml's navigation, the pages that show what a
command prints are filled from the command when the site builds (docs/hooks.py), and the `docs` extra
holds what builds it. CI builds the site with `mkdocs build --strict` (.ci/run)."""

import importlib.util
import json
import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MKDOCS = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nav_pages() -> list[str]:
    nav = MKDOCS.split("\nnav:\n", 1)[1]
    return re.findall(r":\s*(\S+\.md)\s*$", nav, re.M)


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    listed = nav_pages()
    assert len(listed) == len(set(listed)), f"mkdocs.yml lists a page twice: {listed}"
    assert sorted(listed) == pages, (
        f"docs/ pages not in mkdocs.yml's nav: {sorted(set(pages) - set(listed))}; "
        f"nav entries without a page: {sorted(set(listed) - set(pages))}"
    )


def test_the_command_line_page_is_the_parsers_help(run_cli, monkeypatch):
    from archspec.cli import COMMANDS

    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert "<!-- archspec: command-line reference -->" in page
    monkeypatch.setenv("COLUMNS", "100")
    text = hooks().fill(page)
    assert "<!-- archspec:" not in text
    for name in COMMANDS:
        section = text.split(f"\n## archspec {name}\n", 1)[1].split("\n## ", 1)[0]
        _, out, _ = run_cli(name, "--help")
        block = re.search(r"```text\n(.*?)\n```", section, re.S).group(1)
        assert block == out.rstrip(), f"the reference of `archspec {name}` is not its --help"


def test_the_spec_format_page_shows_the_schema_the_command_prints(run_cli):
    page = (DOCS / "spec-format.md").read_text(encoding="utf-8")
    assert "<!-- archspec: schema -->" in page and "<!-- archspec: schema table -->" in page
    text = hooks().fill(page)
    _, out, _ = run_cli("schema")
    shown = re.search(r"```json\n(.*?)\n```", text, re.S).group(1)
    assert json.loads(shown) == json.loads(out)
    _, table, _ = run_cli("schema", "--format", "markdown")
    assert table.rstrip() in text


def test_the_docs_extra_builds_the_site_and_the_test_extra_holds_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    names = {re.split(r"[<>=\[ ;]", r)[0] for r in extras["docs"]}
    assert {"mkdocs-material", "mkdocstrings"} <= names
    assert any("mkdocstrings[python]" in r for r in extras["docs"])
    assert any(r.startswith("archspec-transformers[") and "docs" in r for r in extras["test"])
    for plugin in ("mkdocstrings", "search"):
        assert f"  - {plugin}" in MKDOCS
    assert "name: material" in MKDOCS


def test_ci_builds_the_site_strictly_outside_the_tree():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"mkdocs build --strict (-d|--site-dir) \"\$\(mktemp -d\)\"", ci)


def test_every_page_is_linked_from_the_readme_and_the_home_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    home = (DOCS / "index.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert [p for p in pages if f"(docs/{p})" not in readme] == [], "README.md links every page of docs/"
    assert [p for p in pages if p != "index.md" and f"]({p})" not in home] == [], "docs/index.md links every page"
