import json

import pytest

from archspec.cli import main


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""

    def run(*argv: str):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse errors and --help
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def run_json(run_cli):
    def run(*argv: str):
        code, out, err = run_cli(*argv, "--format", "json")
        assert code == 0, err
        return json.loads(out)

    return run
