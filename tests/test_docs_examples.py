"""The documents' examples stay true: every `$ archspec ...` line in a code block of the README and of
every page of docs/ is run, and its output must be what the page shows (a line `...` stands for any run
of lines the page leaves out)."""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from archspec.cli import main

ROOT = Path(__file__).resolve().parent.parent
PAGES = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
         for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}  # fmt: skip
README = PAGES["README.md"]


def examples(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every `$ archspec` line of a page's code blocks."""
    out = []
    for block in re.findall(r"```\n(\$ archspec.*?)```", text, re.S):
        for chunk in re.split(r"^(?=\$ )", block, flags=re.M):
            if chunk.strip():
                command, *lines = chunk.rstrip("\n").split("\n")
                out.append((command[2:], [line.rstrip() for line in lines]))
    return out


def run(command: str) -> list[str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), contextlib.suppress(SystemExit):
        main(shlex.split(command)[1:])
    return [line.rstrip() for line in (stdout.getvalue() + stderr.getvalue()).rstrip("\n").split("\n")]


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; an expected `...` line matches any run of actual lines (none included)."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


EXAMPLES = [(page, c, e) for page, text in PAGES.items() for c, e in examples(text)]
# `archspec verify` builds and counts its presets (the process's shared reports): a slow proof
CASES = [pytest.param(c, e, id=f"{page}: {c}", marks=[pytest.mark.slow] if c.startswith("archspec verify") else [])
         for page, c, e in EXAMPLES]  # fmt: skip


def test_the_documents_have_examples_to_check():
    assert len(examples(README)) >= 5
    pages_with_examples = {page for page, _, _ in EXAMPLES}
    for page in ("docs/cli.md", "docs/huggingface.md", "docs/planning.md", "docs/inference.md", "docs/validation.md"):
        assert page in pages_with_examples, f"{page} lost its `$ archspec` examples"


def test_the_matcher_can_fail():
    assert matches(["a", "...", "c"], ["a", "b", "b", "c"])
    assert not matches(["a", "...", "c"], ["a", "b"])
    assert not matches(["a"], ["a", "b"])


@pytest.fixture
def in_a_copy_of_the_root(tmp_path, monkeypatch):
    """The pages' commands run where they say, the repository's root, but write into a folder of their
    own: tests/ is linked, docs/ empty (the pictures are compared with the committed ones instead)."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command, expected", CASES)
def test_the_page_shows_what_the_command_prints(command, expected, request, in_a_copy_of_the_root):
    if command.startswith("archspec verify"):
        pytest.importorskip("torch")
        request.getfixturevalue("shared_verify")  # the presets' reports, computed once per process
    actual = run(command)
    assert matches(expected, actual), (
        "the page shows:\n" + "\n".join(expected) + "\n\nthe command prints:\n" + "\n".join(actual)
    )
    for out in re.findall(r"-o (docs/\S+)", command):
        # the pictures are the ones the commands draw; regenerate them by running the pages' `archspec plot`
        # lines from the repository's root
        assert (in_a_copy_of_the_root / out).read_bytes() == (ROOT / out).read_bytes(), f"{out} is out of date"


def _toml_block(first_line: str) -> str:
    found = [m for text in PAGES.values() for m in re.findall(r"```toml\n(" + re.escape(first_line) + r"\n.*?)```",
                                                               text, re.S)]  # fmt: skip
    assert len(found) == 1, f"{len(found)} ```toml blocks open with {first_line!r}"
    return found[0]


def test_the_claims_file_example_validates(run_cli, tmp_path):
    path = tmp_path / "my-claims.toml"
    path.write_text(_toml_block("# my-claims.toml"))
    code, out, _ = run_cli("validate", str(path))
    assert code == 0 and "2 claims: 2 match" in out


def test_the_spec_file_example_loads(run_cli, tmp_path):
    path = tmp_path / "my-model.toml"
    path.write_text(_toml_block("# my-model.toml"))
    code, _, err = run_cli("params", str(path))
    assert code == 0, err


def test_the_two_commands_are_in_the_readme():
    assert "pip install . && archspec compare transformer-base gpt2 gpt3-175b" in README
    assert 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -n auto --dist loadfile' in README


def test_ci_runs_the_readmes_test_command():
    command = re.search(r'pip install -e "\.\[test\]" && (python -m pytest[^\n`]*)\n', README).group(1)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert command.strip() in ci, f".ci/run does not run the README's test command `{command}`"


def test_the_readme_is_a_short_guide():
    assert len(README.encode("utf-8")) <= 25 * 1024, "the README is a guide of at most 25 KB; reference goes to docs/"
