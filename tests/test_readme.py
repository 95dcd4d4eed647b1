"""The README's examples stay true."""

import re
from pathlib import Path

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


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
