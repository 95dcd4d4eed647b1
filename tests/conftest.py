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
# No test reaches the real Hub: a Hub id resolves against a closed port on this machine unless the test
# starts its local Hub (tests/hubserver.py) and points HF_ENDPOINT there; no user's cache or token is read
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="archspec-hf-home-")
for _name in ("HF_TOKEN", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HUGGINGFACE_HUB_CACHE"):
    os.environ.pop(_name, None)

settings.register_profile("archspec", database=None)
settings.load_profile("archspec")
set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "archspec-hypothesis"))


@pytest.fixture(autouse=True)
def programs_afresh():
    """Each test starts without the programs archspec.core.compiled recorded per structure (a cache): a test
    that patches the description is never answered by a program recorded before its patch."""
    from archspec.core.compiled import forget

    forget()


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


def pytest_configure(config):
    # the fast set (-m "not slow") fuzzes fewer examples (tests/test_hostile.py: FUZZ), read when the test
    # modules load, after this
    if "not slow" in (config.getoption("markexpr") or ""):
        os.environ["ARCHSPEC_FAST_SET"] = "1"


# ---------------------------------------------------------------- the presets' verify reports
#
# Building and counting every preset (archspec.reference.verify) is the suite's largest cost. Each preset's
# report is computed once per process, in the first test that asks for it, and shared by the tests that prove
# that preset (tests/test_presets_proven.py: tensors, parameters and FLOPs by component, `archspec verify
# NAME`), which sit in one file so that pytest-xdist's `--dist loadfile` gives them to one worker.

_PRESETS = set(archspec.presets())


@pytest.fixture(scope="session")
def preset_report():
    """archspec.reference.verify(preset) by preset name, computed once per process, when first asked for."""
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
    """`archspec verify` in this test reads the process's reports for unchanged presets (and verifies
    anything else, a preset changed by --set or a spec file, as it would)."""
    import archspec.cli.verify

    def verify_all(reference, specs):
        return [preset_report(s.name) if s.name in _PRESETS and s == archspec.preset(s.name) else reference.verify(s)
                for s in specs]  # fmt: skip

    monkeypatch.setattr(archspec.cli.verify, "_verify_all", verify_all)
