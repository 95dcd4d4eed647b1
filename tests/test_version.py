"""One version: written in archspec/__init__.py, read by pyproject.toml (setuptools' attr), printed by
`archspec --version` (and the report), and the newest release of CHANGELOG.md."""

import re
from pathlib import Path

import archspec

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_reads_the_version_from_the_package():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in pyproject["project"], "the version is written once, in archspec/__init__.py"
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "archspec.__version__"}


def test_the_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", archspec.__version__)


def test_archspec_version_prints_it(run_cli):
    code, out, _ = run_cli("--version")
    assert code == 0 and out == f"archspec {archspec.__version__}\n"


def test_the_changelog_newest_release_is_the_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", text, re.M)
    assert releases and releases[0] == archspec.__version__, (
        f"CHANGELOG.md's newest release is {releases[:1]}, the package says {archspec.__version__}"
    )
    assert releases == sorted(releases, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
