import json
import os
import tempfile

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

import archspec
from archspec.cli import main

# hypothesis keeps no example database and its caches outside the working directory (it would make
# .hypothesis/ there): the suite writes nothing into the tree it runs from
settings.register_profile("archspec", database=None)
settings.load_profile("archspec")
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "archspec-hypothesis"))


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


@pytest.fixture(scope="session")
def preset_report():
    """archspec.reference.verify(preset) by preset name, computed once per test session and shared by
    every test that proves the presets (tensors, parameters and FLOPs by component, the CLI's and the
    README's `archspec verify`): building and counting every preset is the suite's largest cost."""
    pytest.importorskip("torch")
    from archspec.reference import verify

    reports = {}

    def get(name: str):
        if name not in reports:
            reports[name] = verify(archspec.preset(name))
        return reports[name]

    return get


@pytest.fixture
def shared_verify(monkeypatch, preset_report):
    """`archspec verify` in this test reads the session's reports for unchanged presets (and verifies
    anything else, a preset changed by --set or a spec file, as it would)."""
    import archspec.cli.verify

    def verify_all(reference, specs):
        known = set(archspec.presets())
        return [preset_report(s.name) if s.name in known and s == archspec.preset(s.name) else reference.verify(s)
                for s in specs]  # fmt: skip

    monkeypatch.setattr(archspec.cli.verify, "_verify_all", verify_all)
