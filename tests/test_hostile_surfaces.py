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
    assert '<td class="l">mixer</td>' in page and f">{mixer:,}</td>" in page  # its row of the breakdown
    assert ">mixer</text>" in page  # and its bar's legend in the picture


# ---------------------------------------------------------------- frozen specs, all the way down


def _containers(value, path="spec"):
    """Every list, dict or set inside a spec's fields, by path (a frozen spec holds none it can lose)."""
    from pydantic import BaseModel

    from archspec.subtables import FrozenDict

    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _containers(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, FrozenDict | tuple):
        for k, v in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _containers(v, f"{path}[{k!r}]")
    elif isinstance(value, list | dict | set | bytearray):
        yield path, type(value).__name__


@pytest.mark.parametrize("name", archspec.presets())
def test_a_preset_holds_no_container_a_caller_can_change(name):
    spec = archspec.preset(name)
    assert list(_containers(spec)) == []
    validated = archspec.ModelSpec.model_validate(spec.model_dump())  # the validated path freezes alike
    assert validated == spec and list(_containers(validated)) == []


def test_a_shared_preset_cannot_be_changed_in_place():
    spec = archspec.preset("gemma-3-1b")
    kv = archspec.estimate_memory(spec, 1, 1024).kv_cache_bytes
    with pytest.raises(AttributeError):
        spec.layers.pattern.append("global")
    with pytest.raises(TypeError):
        spec.layers.pattern[0] = "global"
    with pytest.raises(TypeError, match="frozen"):
        spec.kinds["global"] = spec.kinds["local"]
    with pytest.raises(TypeError, match="frozen"):
        spec.kinds["local"].attention.update(sliding_window=None)
    with pytest.raises(Exception, match="frozen"):
        spec.layers.pattern = ("global",)
    again = archspec.preset("gemma-3-1b")
    assert archspec.estimate_memory(again, 1, 1024).kv_cache_bytes == kv
    assert again.layers.pattern == ("local",) * 5 + ("global",)  # as presets/gemma3.toml writes it


def test_a_changed_pattern_through_replace_is_checked():
    spec = archspec.preset("gemma-3-1b")
    with pytest.raises(archspec.SpecError, match="'nope'.*local, global"):
        spec.replace(layers={"pattern": ["local", "nope"]})
    changed = spec.replace(layers={"pattern": ["global", "local"]})
    assert changed.layers.pattern == ("global", "local") and spec.layers.pattern != changed.layers.pattern


def test_frozen_specs_copy_pickle_and_hash():
    import copy
    import pickle

    spec = archspec.preset("gemma-3-1b")
    assert copy.deepcopy(spec) == spec == pickle.loads(pickle.dumps(spec)) == spec.model_copy(deep=True)
    assert hash(spec) == hash(archspec.ModelSpec.model_validate(spec.model_dump()))


# ---------------------------------------------------------------- options checked against the model


def _mamba_only() -> archspec.ModelSpec:
    """Nemotron-H with its attention layers left out: Mamba-2 mixers and MLPs only."""
    spec = archspec.preset("nemotron-h-56b")
    kinds = {k: v for k, v in spec.kinds.items() if k != "attention"}
    return spec.replace(name="mamba-only", kinds=kinds, layers={"pattern": ["mamba", "mlp"]})


@pytest.mark.parametrize(("spec", "targets", "lacking"), [
    (_mamba_only(), "q", "q"), (_mamba_only(), "attention", "'attention'"), (_mamba_only(), "q,v,up", "q, v"),
    (archspec.preset("gpt2"), "gate", "gate"), (archspec.preset("gpt2"), "q,gate", "gate"),
])  # fmt: skip
def test_lora_targets_the_model_lacks_are_refused_by_name(spec, targets, lacking):
    from archspec.memory import lora_params

    with pytest.raises(archspec.SpecError, match=f"has no {lacking} projection"):
        lora_params(spec, 8, targets)
    with pytest.raises(archspec.SpecError, match=f"has no {lacking} projection"):
        archspec.estimate_memory(spec, 1, 128, lora_rank=8, lora_targets=targets)


def test_lora_targets_by_group_adapt_what_the_model_has():
    """A group adapts the projections of it the model has: GPT-2's MLP is up and down, no gate."""
    from archspec.memory import lora_params

    gpt2 = archspec.preset("gpt2")
    assert lora_params(gpt2, 8, "mlp")[0] == lora_params(gpt2, 8, "up,down")[0] == 12 * 8 * 2 * (768 + 3072)
    assert lora_params(_mamba_only(), 8, "mlp")[0] == lora_params(_mamba_only(), 8, "all")[0] > 0


def test_lora_refusals_on_the_command_line():
    refused("memory", "gpt2", "--lora", "8", "--lora-targets", "gate", message="gpt2 has no gate projection")


@pytest.mark.parametrize("call", [
    lambda lp: lp(None, 8), lambda lp: lp("gpt2", 8), lambda lp: lp(archspec.preset("gpt2"), "8"),
    lambda lp: lp(archspec.preset("gpt2"), 8, ["q"]),
])  # fmt: skip
def test_lora_api_with_wrong_types_names_the_argument(call):
    from archspec.memory import lora_params

    with pytest.raises(TypeError, match=r"^lora_params: (spec|rank|lora_targets) must be"):
        call(lora_params)


@pytest.mark.parametrize(("optimizer", "dtype"), [("none", "bf16"), ("none", "fp32"), ("sgd", "fp32")])
def test_offloading_an_optimizer_that_keeps_nothing_is_refused(optimizer, dtype):
    with pytest.raises(archspec.SpecError, match=f"optimizer '{optimizer}' in {dtype} keeps no states"):
        archspec.estimate_memory(archspec.preset("gpt2"), 1, 128, dtype, optimizer, offload="optimizer")
    refused("memory", "gpt2", "--optimizer", optimizer, "--dtype", dtype, "--offload", "optimizer",
            message="nothing to offload")  # fmt: skip


def test_offloading_sgd_in_mixed_precision_moves_its_master_copy():
    m = archspec.estimate_memory(archspec.preset("gpt2"), 1, 128, "bf16", "sgd", offload="optimizer")
    assert m.host_bytes == 4 * archspec.count_params(archspec.preset("gpt2")).total  # the fp32 master copy


@pytest.mark.parametrize("kv_dtype", ["mxfp4", "nf4", "int4", "q4_k_m"])
def test_a_kv_dtype_no_cache_is_held_in_is_refused(kv_dtype):
    from archspec.inference import estimate_inference

    gpt2 = archspec.preset("gpt2")
    with pytest.raises(archspec.SpecError, match=f"kv_dtype '{kv_dtype}'.*use one of fp32, bf16"):
        archspec.estimate_memory(gpt2, 1, 128, kv_dtype=kv_dtype)
    with pytest.raises(archspec.SpecError, match=f"kv_dtype '{kv_dtype}'"):
        estimate_inference(gpt2, "h100", kv_dtype=kv_dtype)
    refused("inference", "gpt2", "--gpu", "h100", "-p", "8", "-g", "8", "--kv-dtype", kv_dtype, message=kv_dtype)


def test_a_kv_dtype_a_cache_is_held_in_counts_its_bytes():
    from archspec.memory import kv_cache_bytes

    gpt2 = archspec.preset("gpt2")
    for kv_dtype, per in (("int8", 1), ("fp8", 1), ("fp16", 2), ("fp32", 4)):
        m = archspec.estimate_memory(gpt2, 1, 128, kv_dtype=kv_dtype)
        assert m.kv_cache_bytes == kv_cache_bytes(gpt2, 1, 128, "fp32") * per // 4 == 12 * 2 * 768 * 128 * per


@pytest.mark.parametrize("peak", [-1, -1e15, 0, 0.0, float("nan"), float("-inf")])
def test_resolve_peak_refuses_a_peak_that_is_not_positive(peak):
    from archspec.hardware import resolve_peak

    with pytest.raises(archspec.SpecError, match="peak_tflops must be"):
        resolve_peak("h100", peak, "bf16")


@pytest.mark.parametrize("peak", ["989", [989], True])
def test_resolve_peak_refuses_a_peak_that_is_not_a_number(peak):
    from archspec.hardware import resolve_peak

    with pytest.raises(TypeError, match="resolve_peak: peak_tflops must be a number"):
        resolve_peak(None, peak, "bf16")


def test_resolve_peak_takes_a_positive_peak_exactly():
    from archspec.hardware import accelerator, resolve_peak

    assert resolve_peak(None, 989, "bf16") == (989 * 10**12, None)
    assert resolve_peak("h100", None, "bf16") == (accelerator("h100").peak("bf16"), accelerator("h100"))
