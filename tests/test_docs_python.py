"""The documents' Python stays true: every ```python block of the README and of the docs/ pages is run, a
page's blocks in order in one namespace (a block marked as a Jupyter cell runs as a script), in a folder of
its own that holds the spec file the pages load. A plain ``` block right after a Python block is what that
block prints, compared line by line; a line `EXPR  # VALUE` whose VALUE is a Python literal says what EXPR
is, and a line `print(EXPR)  # TEXT` what it prints (`...` any text), compared after its block ran."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
         for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}  # fmt: skip
# blocks that show a module's source, not a script: names of that module only (archspec/hf/qwen.py's Family)
SHOWN_SOURCE = {"docs/architecture.md"}
BLOCK = re.compile(r"^```python\n(.*?)^```\n(?:\s*\n)*(?:^```\n(?!\$ )(.*?)^```\n)?", re.S | re.M)
CLAIM = re.compile(r"^(?P<expr>\S.*?)\s+#\s+(?P<value>.+?)(?::\s.*)?$")


def blocks(text: str) -> list[tuple[str, str | None]]:
    """(code, the output block after it or "") for every ```python block of a page."""
    return [(code, shown) for code, shown in BLOCK.findall(text)]


def claims(code: str) -> list[tuple[str, object]]:
    """(expression, value) of the block's lines `EXPR  # VALUE`, VALUE a Python literal (not a `...` one)."""
    out = []
    for line in code.splitlines():
        m = CLAIM.match(line)
        if not m or "..." in m["value"]:
            continue
        try:
            value = ast.literal_eval(m["value"].strip())
            ast.parse(m["expr"], mode="eval")  # an assignment is no expression
        except (ValueError, SyntaxError):
            continue
        out.append((m["expr"], value))
    return out


def printed(code: str) -> list[tuple[str, str]]:
    """(expression, what the page says it prints) of the block's lines `print(EXPR)  # TEXT`; a `...` in TEXT
    stands for any text."""
    found = re.findall(r"^print\((.+)\)\s+#\s+(.+)$", code, re.M)
    return [(expr, text) for expr, text in found if not re.match(r"^\w+$", text)]


def says(text: str, actual: str) -> bool:
    return re.fullmatch(r".*".join(re.escape(part) for part in text.split("...")), actual) is not None


PYTHON_PAGES = [page for page, text in PAGES.items() if blocks(text) and page not in SHOWN_SOURCE]
# blocks that take tens of seconds on a shared two-core machine (the 10^5-shape sweeps: 22 to 53 s measured
# there), run by the full suite only; the reference-model page builds GPT-2 and transformers' GPT-2 on the CPU
SLOW_BLOCKS = {"README.md": "# 10^5 shapes", "docs/planning-at-scale.md": "range(1, 1001)"}
SLOW_PAGES = {"docs/reference-model.md"}


def _slow(page: str, code: str) -> bool:
    return page in SLOW_PAGES or (page in SLOW_BLOCKS and SLOW_BLOCKS[page] in code)


def _cases() -> list:
    """(page, every block): the whole page (slow where one of its blocks is), and the page without its slow
    blocks in the fast set where that leaves any."""
    out = []
    for page in PYTHON_PAGES:
        slow = [_slow(page, code) for code, _ in blocks(PAGES[page])]
        if any(slow) and not all(slow):
            out.append(pytest.param(page, False, id=f"{page} without its slow blocks"))
        out.append(pytest.param(page, True, id=page, marks=[pytest.mark.slow] if any(slow) else []))
    return out


def test_the_pages_python_blocks_are_found():
    assert len(blocks(PAGES["README.md"])) >= 5
    assert "README.md" in PYTHON_PAGES and "docs/planning.md" in PYTHON_PAGES
    shown = [s for _, s in blocks(PAGES["README.md"]) if s]
    assert any("n_kv_heads=32" in s for s in shown), "the README's n_kv_heads table is no longer read as output"
    assert ("swiglu_hidden(4096)", 11008) in claims(PAGES["README.md"])
    assert any(printed(code) for code, _ in blocks(PAGES["docs/planning-at-scale.md"]))
    for page, marker in SLOW_BLOCKS.items():
        assert any(marker in code for code, _ in blocks(PAGES[page])), f"{page} has no block with {marker!r}"


def test_the_readers_can_fail():
    assert claims("f(1)  # 3: three\nx = g()  # 4\nh()  # a comment\nk()  # [1, ...]") == [("f(1)", 3)]
    page = "```python\nprint(1)\n```\n\n```\n2\n```\n```python\nx\n```\n```\n$ archspec params gpt2\n```\n"
    assert blocks(page) == [("print(1)\n", "2\n"), ("x\n", "")]
    assert printed("print(s)  # <Sweep of a ... 3 rows>\nprint(x)") == [("s", "<Sweep of a ... 3 rows>")]
    assert says("<a ... c>", "<a b b c>") and not says("<a ... c>", "<a b b d>")


@pytest.fixture
def in_a_folder_of_its_own(tmp_path, monkeypatch):
    """The pages' scripts run in a folder that holds the spec file docs/spec-format.md shows (my-model.toml)."""
    spec_file = re.search(r"```toml\n# my-model.toml\n(.*?)```", PAGES["docs/spec-format.md"], re.S)
    (tmp_path / "my-model.toml").write_text(spec_file.group(1))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("page", "every_block"), _cases())
def test_the_pages_python_runs_and_prints_what_the_page_shows(page, every_block, in_a_folder_of_its_own):
    pytest.importorskip("torch")
    namespace: dict = {"__name__": "__main__"}
    for i, (code, shown) in enumerate(blocks(PAGES[page]), 1):
        if not every_block and _slow(page, code):
            continue
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(code, f"{page} python block {i}", "exec"), namespace)  # noqa: S102 - the page's own code
        if shown:
            lines = [line.rstrip() for line in stdout.getvalue().rstrip("\n").split("\n")]
            assert lines == [line.rstrip() for line in shown.rstrip("\n").split("\n")], (
                f"{page} python block {i}: the page shows\n{shown}\nthe block prints\n{stdout.getvalue()}"
            )
        for expr, text in printed(code):
            shown_line = str(eval(expr, namespace))  # noqa: S307 - the page's own expression
            assert says(text, shown_line), f"{page} python block {i}: print({expr}) prints {shown_line}, not {text}"
        for expr, value in claims(code):
            got = eval(expr, namespace)  # noqa: S307 - the page's own expression
            assert got == value, f"{page} python block {i}: {expr} is {got!r}, the page says {value!r}"
