"""Every preset proven against its reference model: each preset's `archspec.reference.verify` report
(computed once per process by the `preset_report` fixture of tests/conftest.py) is read by the four proofs
below. They live in one file so that under pytest-xdist (`--dist loadfile`) one worker verifies each
preset once. The comparisons a report makes can fail: tests/test_blocks.py and tests/test_cli.py show them
naming the tensor and the component on models made to differ."""

import pytest

import archspec
from archspec import count_params
from archspec.count.flops import count_flops

pytest.importorskip("torch")

pytestmark = [pytest.mark.slow, pytest.mark.parametrize("name", archspec.presets())]


def test_every_tensor_of_the_model_is_in_the_description(name, preset_report):
    """Every parameter of the built model is found in the description by path and shape, and every
    described tensor in the model; a mismatch names the one tensor."""
    assert preset_report(name).tensor_mismatches == []


def test_preset_analytic_equals_instantiated_by_component(name, preset_report):
    """count_params(spec) against the parameters of build(spec, device="meta"), by component and by
    role."""
    report = preset_report(name)
    assert {c: p for c, p in report.components.items() if not p.ok} == {}
    assert {r: p for r, p in report.roles.items() if not p.ok} == {}
    assert report.params.ok and report.params.analytic == count_params(archspec.preset(name)).total


def test_preset_forward_flops_equal_flopcountermode(name, preset_report):
    """count_flops at batch 1 x max_positions against FlopCounterMode on the meta model, by component."""
    spec, report = archspec.preset(name), preset_report(name)
    assert (report.batch, report.seq_len) == (1, spec.max_positions)
    assert report.flops.ok and report.flops.analytic == count_flops(spec, 1, spec.max_positions).forward
    assert {c: p for c, p in report.flops_components.items() if not p.ok} == {}


def test_verify_passes_for_every_preset(name, run_json, shared_verify):
    """`archspec verify NAME --format json` says ok, analytic equal to instantiated."""
    (obj,) = run_json("verify", name)
    assert obj["name"] == name and obj["ok"] and obj["analytic"] == obj["instantiated"]
