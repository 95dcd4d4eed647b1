"""The README's examples stay true: every `$ archspec ...` line in it is run, and its output must be
what the README shows (a line `...` stands for any run of lines the README leaves out)."""

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from archspec.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def examples() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) for every `$ archspec` line of the README's code blocks."""
    out = []
    for block in re.findall(r"```\n(\$ archspec.*?)```", README, re.S):
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


EXAMPLES = examples()
# `archspec verify` builds and counts every preset (the session's shared reports): a slow proof
VERIFY = [pytest.mark.slow, pytest.mark.preset_reports]
CASES = [pytest.param(c, e, id=c, marks=VERIFY if c.startswith("archspec verify") else []) for c, e in EXAMPLES]


def test_the_readme_has_examples_to_check():
    assert len(EXAMPLES) >= 8


@pytest.fixture
def in_a_copy_of_the_root(tmp_path, monkeypatch):
    """The README's commands run where it says, the repository's root, but write into a folder of their
    own: tests/ is linked, docs/ empty (the pictures are compared with the committed ones instead)."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command, expected", CASES)
def test_readme_output_is_what_the_command_prints(command, expected, request, in_a_copy_of_the_root):
    if command.startswith("archspec verify"):
        pytest.importorskip("torch")
        request.getfixturevalue("shared_verify")  # the presets' reports, computed once per session
    actual = run(command)
    assert matches(expected, actual), (
        "README shows:\n" + "\n".join(expected) + "\n\nthe command prints:\n" + "\n".join(actual)
    )
    for out in re.findall(r"-o (docs/\S+)", command):
        # the README's pictures are the ones the commands draw; regenerate them by running the README's
        # `archspec plot` lines from the repository's root
        assert (in_a_copy_of_the_root / out).read_bytes() == (ROOT / out).read_bytes(), f"{out} is out of date"


def test_the_claims_file_example_validates(run_cli, tmp_path):
    block = re.search(r"```toml\n(# my-claims.toml\n.*?)```", README, re.S).group(1)
    path = tmp_path / "my-claims.toml"
    path.write_text(block)
    code, out, _ = run_cli("validate", str(path))
    assert code == 0 and "2 claims: 2 match" in out


def test_the_spec_file_example_loads(run_cli, tmp_path):
    block = re.search(r"```toml\n(# my-model.toml\n.*?)```", README, re.S).group(1)
    path = tmp_path / "my-model.toml"
    path.write_text(block)
    code, _, err = run_cli("params", str(path))
    assert code == 0, err


def test_the_two_commands_are_in_the_readme():
    assert "pip install . && archspec compare transformer-base gpt2 gpt3-175b" in README
    assert 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest' in README
