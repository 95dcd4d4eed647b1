"""Hostile and extreme input on the surfaces beside the counts: the report and the plots, frozen specs,
options checked against the model, accelerator files, closed streams, the Python API's own inputs,
sizes people type, and terminals.

The contract is tests/test_hostile.py's: a right answer, or exit 2 with one line on stderr naming the
problem (SpecError or TypeError from the API), never a traceback.
"""

from __future__ import annotations

import pytest
from test_hostile import cli, refused

import archspec
from archspec.vocab import COMPONENTS

# ---------------------------------------------------------------- every component has a colour, a label, a place


def test_every_component_has_its_own_colour():
    from archspec.plot import COMPONENT_COLOURS

    assert set(COMPONENT_COLOURS) == set(COMPONENTS)
    assert len(set(COMPONENT_COLOURS.values())) == len(COMPONENTS)


def test_the_breakdown_draws_every_component_with_its_label(tmp_path):
    pytest.importorskip("matplotlib")
    from archspec.plot import BreakdownData, draw_breakdown

    n = len(COMPONENTS)
    data = BreakdownData(models=["a", "b"], components=list(COMPONENTS), counts=[[1] * n, list(range(1, n + 1))],
                         totals=[n, n * (n + 1) // 2])  # fmt: skip
    out = tmp_path / "all.svg"
    draw_breakdown(data, out)
    text = out.read_text(encoding="utf-8")
    for component in COMPONENTS:
        assert f">{component}<" in text, component


def _covering_presets() -> list[str]:
    """Presets that between them have every component the presets hold (mtp aside: counted when asked)."""
    chosen, missing = [], set(COMPONENTS) - {"mtp"}
    for name in archspec.presets():
        have = {c for c, v in archspec.count_params(archspec.preset(name)).components.items() if v}
        if have & missing:
            chosen.append(name)
            missing -= have
    assert not missing, f"no preset has {sorted(missing)}"
    return chosen


def test_the_breakdown_of_presets_covering_every_component(tmp_path):
    pytest.importorskip("matplotlib")
    names = _covering_presets()
    code, out, err = cli("plot", "breakdown", *names, "-o", tmp_path / "b.svg")
    assert code == 0, err
    text = (tmp_path / "b.svg").read_text(encoding="utf-8")
    for component in set(COMPONENTS) - {"mtp"}:
        assert f">{component}<" in text, component


@pytest.mark.parametrize("model", ["nemotron-h-56b", "qwen3-next-80b-a3b"])
def test_report_of_a_hybrid_model(tmp_path, model):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.html"
    code, _, err = cli("report", model, "--gpu", "h100", "-o", out)
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    mixer = archspec.count_params(archspec.preset(model)).components["mixer"]
    assert f'<td class="l">mixer</td>' in page and f">{mixer:,}</td>" in page  # its row of the breakdown
    assert ">mixer</text>" in page  # and its bar's legend in the picture
