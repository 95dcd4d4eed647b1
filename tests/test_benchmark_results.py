"""benchmarks/results.py: a benchmark script rewrites its own section of RESULTS.md and no other."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def results():
    spec = importlib.util.spec_from_file_location("bench_results", BENCHMARKS / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_script_rewrites_its_own_section_and_keeps_the_others(tmp_path, monkeypatch, capsys):
    r = results()
    path = tmp_path / "RESULTS.md"
    monkeypatch.setattr(sys, "argv", ["depth.py", "--runs", "3"])
    assert r.run("depth.py", lambda: print("ratio 1.10") or 0, path) == 0
    assert r.run("cli_latency.py", lambda: print("ratio 1.20") or 1, path) == 1
    assert capsys.readouterr().out == "ratio 1.10\nratio 1.20\n"  # printed as well as recorded
    assert r.run("depth.py", lambda: print("ratio 1.30"), path) == 0
    text = path.read_text(encoding="utf-8")
    found = r.sections(text)
    assert list(found) == ["cli_latency.py", "depth.py"]
    assert "ratio 1.30" in found["depth.py"] and "ratio 1.10" not in text
    assert "ratio 1.20" in found["cli_latency.py"] and "exit code 1" in found["cli_latency.py"]
    assert "`python benchmarks/depth.py --runs 3`" in found["depth.py"]
    assert text.startswith(r.HEADER)


def test_a_run_that_fails_writes_nothing(tmp_path):
    r = results()
    path = tmp_path / "RESULTS.md"

    def usage_error():
        raise SystemExit(2)

    with pytest.raises(SystemExit):
        r.run("depth.py", usage_error, path)
    assert not path.exists()


def test_every_benchmark_script_writes_its_section():
    scripts = sorted(p for p in BENCHMARKS.glob("*.py") if p.name not in ("timing.py", "results.py"))
    assert scripts
    for script in scripts:
        text = script.read_text(encoding="utf-8")
        assert f'sys.exit(run("{script.name}", main))' in text, f"{script.name} does not write RESULTS.md"
