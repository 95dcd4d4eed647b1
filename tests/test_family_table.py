"""One family table read both ways: archspec.hf's adapters (config.json -> spec) and the reference's
checkpoint entries (spec -> transformers config), which take their key maps and fixed values from the
adapter of the same model_type.

Round trips, through transformers' own config class of the type (its `to_dict()`, as a checkpoint's
config.json holds it): every spec the parity tests build and every preset a checkpoint represents comes
back from its transformers config as the same model, layer by layer; every released config of such a
type in tests/data/hf is a fixed point of config -> spec -> config -> spec.
"""

import json
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

import test_parity_families  # noqa: E402  (tests/ is on sys.path: the parity tests' toy specs)
import test_parity_hybrids  # noqa: E402

import archspec  # noqa: E402
from archspec import ModelSpec, count_params  # noqa: E402
from archspec.hf import FAMILIES, from_mapping  # noqa: E402
from archspec.reference.convert import transformers_config  # noqa: E402
from archspec.reference.families import CHECKPOINTS, Checkpoint, checkpoint  # noqa: E402
from archspec.reference.families.engine import fixed_needs  # noqa: E402
from archspec.reference.model import sliding_window  # noqa: E402
from archspec.spec.layers import layer_kinds  # noqa: E402
from archspec.spec.model import KIND_FIELDS  # noqa: E402

DATA = Path(__file__).parent / "data" / "hf"


def back(entry: Checkpoint, spec: ModelSpec) -> ModelSpec:
    """`spec` -> the entry's transformers config -> its dict (a config.json, the class named) -> the adapter's
    spec. T5Config forces tie_word_embeddings = True whatever it is given; a checkpoint with a head of its own
    keeps its file's false (the entry's `untie`), as the released files do."""
    config = transformers_config(spec, entry.name).to_dict()
    config["architectures"] = [entry.model_class]
    if entry.untie:
        config["tie_word_embeddings"] = spec.tie_embeddings
    imported = from_mapping(json.loads(json.dumps(config)), spec.name)
    assert imported.model_type == entry.model_type
    return ModelSpec(**imported.data)


def view(spec: ModelSpec) -> dict:
    """The model a spec describes, whatever the spelling: the fields outside the layers, then each layer's
    kind fields as that layer sees them (kinds may be named and grouped differently). Within a layer, a
    score scale left to its default is 1/sqrt(d_head), and an MoE layer without leading dense layers has
    no use for d_ff; a layer's window is its own (sliding_layers is how a spec spells which layers have one)."""
    top = spec.model_dump(exclude={"name", "kinds", "layers", *KIND_FIELDS})
    layers = []
    for i, (_, k) in enumerate(layer_kinds(spec, max(spec.encoder_layers, spec.decoder_layers))):
        layer = k.model_dump(include=set(KIND_FIELDS))
        if k.mixer.kind == "standard":  # the layer's own window, and its scale
            scale = k.d_head**-0.5 if k.mixer.scale is None else k.mixer.scale
            window = sliding_window(spec, i)
            layer["mixer"] = {
                **dict(k.mixer),
                "scale": scale,
                "sliding_window": window,
                "sliding_layers": "all",
            }
        if k.mlp.kind == "moe" and not k.mlp.dense_layers:
            del layer["d_ff"]
        layers.append(layer)
    return {**top, "layers": layers}


def _specs() -> dict[str, ModelSpec]:
    specs = {f"preset:{name}": archspec.preset(name) for name in archspec.presets()}
    for module in (test_parity_families, test_parity_hybrids):
        for key, case in module.CASES.items():
            specs[f"toy:{key}"] = case.spec
            for feature, change in getattr(case, "features", {}).items():
                specs[f"toy:{key}-{feature}"] = case.spec.replace(**change)
    return specs


SPECS = _specs()
ROUND_TRIPS = [pytest.param(c, s, id=f"{c.model_type}-{key}")
               for key, s in SPECS.items() for c in CHECKPOINTS.values() if not c.unsupported(s)]  # fmt: skip


def test_every_checkpoint_reads_its_adapter():
    for entry in CHECKPOINTS.values():
        assert entry.model_type in FAMILIES, f"{entry.name}: no adapter of model_type {entry.model_type!r}"
        assert entry.model_class in FAMILIES[entry.model_type].class_names
        assert checkpoint(entry.model_type) is checkpoint(entry.name) is entry


def test_the_round_trips_cover_every_checkpoint():
    """Each entry represents at least one preset or toy spec, so each is round-tripped."""
    covered = {c.model_type for c, _ in (p.values for p in ROUND_TRIPS)}
    assert covered == {c.model_type for c in CHECKPOINTS.values()}


def test_adapter_fixed_values_are_needs():
    """A spec without the adapter's fixed value (here OPT's two extra position rows) cannot be expressed."""
    needs = fixed_needs(FAMILIES["opt"].fixed)
    assert needs["position.offset"] == (2,) and needs["norm_eps"] == (1e-5,)
    spec = test_parity_families.OPT
    assert not checkpoint("opt").unsupported(spec)
    assert "position.offset=0 (needs 2)" in checkpoint("opt").unsupported(spec.replace(position="learned"))


def test_config_keys_come_from_the_adapter_fields():
    """The reverse direction writes every key the adapter reads into a plain field (the entry adds the rest)."""
    spec = test_parity_families.LLAMA_TOY
    values = checkpoint("llama").config_values(spec)
    for field, key in FAMILIES["llama"].fields.items():
        assert values[key] == getattr(spec, field), key


@pytest.mark.parametrize("entry, spec", ROUND_TRIPS)
def test_spec_comes_back_from_its_transformers_config(entry, spec):
    again = back(entry, spec)
    assert view(again) == view(spec)
    assert count_params(again).total == count_params(spec).total


# released configs whose layers a checkpoint entry does not build (each still refused for that reason)
NOT_BUILT = {"nemotron-3-nano-30b-a3b": "mixer='none', mlp='moe'"}  # Nemotron-H's E layers: no experts


def _released() -> list:
    out = []
    types = {c.model_type for c in CHECKPOINTS.values()}
    for path in sorted(DATA.glob("*.json")):
        raw = json.loads(path.read_text())
        try:
            imported = from_mapping(raw, path.stem)
        except archspec.SpecError:  # refused by its adapter (opt-350m): nothing to round-trip
            continue
        if imported.model_type in types:
            out.append(pytest.param(path, imported.model_type, id=path.stem))
    return out


RELEASED = _released()


def test_released_configs_of_every_checkpoint_type_are_round_tripped():
    assert len(RELEASED) >= 20


@pytest.mark.parametrize("path, model_type", RELEASED)
def test_released_config_is_a_fixed_point(path, model_type):
    """config -> spec -> config -> spec: the spec read from the released file is what its checkpoint entry's
    config gives back, and a second trip changes nothing."""
    entry = checkpoint(model_type)
    raw = json.loads(path.read_text())
    if raw.get("model_type") == model_type and raw.get("architectures") not in (None, [entry.model_class]):
        raw["architectures"] = [entry.model_class]  # the class the entry builds (BertModel for a BertForMaskedLM file)
    spec = ModelSpec(**from_mapping(raw, path.stem).data)
    if path.stem in NOT_BUILT:
        assert any(NOT_BUILT[path.stem] in why for why in entry.unsupported(spec))
        return
    assert not entry.unsupported(spec), f"{entry.name} cannot represent {path.name}: {entry.unsupported(spec)}"
    once = back(entry, spec)
    assert view(once) == view(spec)
    assert back(entry, once) == once


def test_features_no_checkpoint_builds_are_refused_by_every_one():
    """umT5's per-layer relative bias and Falcon-H1's Mamba-2 beside attention have no checkpoint entry: every
    entry refuses them by name (on any layer kind), and the same specs without them are accepted."""
    t5 = archspec.preset("t5-base")
    assert not checkpoint("t5").unsupported(t5)
    per_layer = t5.replace(position={"kind": "relative", "per_layer": True})
    assert any("position.per_layer=true" in why for why in checkpoint("t5").unsupported(per_layer))
    llama = archspec.preset("llama-3.2-1b")
    ssm = {"kind": "mamba2", "heads": 32, "head_dim": 64, "d_state": 16}
    assert not checkpoint("llama").unsupported(llama)
    for beside in (llama.replace(attention={"kind": "standard", "ssm": ssm}),
                   llama.replace(kinds={"h": {"attention": {"kind": "standard", "ssm": ssm}}, "plain": {}},
                                 layers={"prefix": ["h"], "pattern": ["plain"]})):  # fmt: skip
        assert all(any("mixer.ssm" in why for why in c.unsupported(beside)) for c in CHECKPOINTS.values())
