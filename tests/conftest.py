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


def pytest_configure(config):
    # the fast set (-m "not slow") fuzzes fewer examples (tests/test_hostile.py: FUZZ), read when the test
    # modules load, after this
    if "not slow" in (config.getoption("markexpr") or ""):
        os.environ["ARCHSPEC_FAST_SET"] = "1"


# ---------------------------------------------------------------- the presets' verify reports
#
# Building and counting every preset (archspec.reference.verify) is the suite's largest cost, about a
# minute on one core. When the session selects a test that reads those reports, they are computed in a
# second process from the start of the session, beside the other tests, and those tests run last: on
# two cores the proof costs little wall time. The reports are the same verify() results, pickled back.

_BACKGROUND: dict = {}  # "pool": the worker, "futures": preset name -> Future of its report


def _reads_preset_reports(item) -> bool:
    return "preset_report" in getattr(item, "fixturenames", ()) or item.get_closest_marker("preset_reports") is not None


def pytest_collection_modifyitems(config, items):
    items[:] = [i for i in items if not _reads_preset_reports(i)] + [i for i in items if _reads_preset_reports(i)]


def _presets_read(items) -> set[str]:
    """The presets whose reports the selected tests read: each one's `name` parameter, or every preset
    for a test that verifies them all (the CLI's and the README's `archspec verify`)."""
    every, names = set(archspec.presets()), set()
    for item in filter(_reads_preset_reports, items):
        name = getattr(getattr(item, "callspec", None), "params", {}).get("name")
        if name not in every or "shared_verify" in item.fixturenames or item.get_closest_marker("preset_reports"):
            return every
        names.add(name)
    return names


def pytest_collection_finish(session):
    names = set() if session.config.option.collectonly else _presets_read(session.items)
    if len(names) < 8 or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a few, or a worker of pytest -n, whose cores are taken: verified where they are asked for
    try:
        import torch  # noqa: F401
    except ImportError:  # the tests that read reports skip
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from archspec.reference import verify

    # at the lowest priority: it takes the time the tests leave (one core while a test runs Python,
    # most of it while a test waits on processes of its own), never theirs
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=os.nice, initargs=(19,))
    longest_first = sorted(names, key=lambda n: -archspec.preset(n).n_layers)
    _BACKGROUND.update(pool=pool, futures={n: pool.submit(verify, archspec.preset(n)) for n in longest_first})


def pytest_sessionfinish(session):
    if "pool" in _BACKGROUND:
        _BACKGROUND.pop("pool").shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def preset_report():
    """archspec.reference.verify(preset) by preset name, computed once per test session (in the second
    process when it runs) and shared by every test that proves the presets (tensors, parameters and
    FLOPs by component, the CLI's and the README's `archspec verify`)."""
    pytest.importorskip("torch")
    from archspec.reference import verify

    reports = {}
    futures = _BACKGROUND.get("futures", {})

    def get(name: str):
        if name not in reports:
            future = futures.get(name)
            try:
                reports[name] = future.result() if future is not None else verify(archspec.preset(name))
            except Exception:  # the worker could not report (it died): here, where an error is the model's
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
