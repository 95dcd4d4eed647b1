"""Numerical parity with transformers' hybrids, whole model, given the same weights (float32).

Qwen3-Next (Gated DeltaNet layers and gated attention with per-head QK-norm and partial rotary,
experts with a gated shared expert beside a dense layer, zero-centred RMSNorms) and Nemotron-H (one
sub-layer per layer: Mamba-2 with its dt clamp, attention without positions, squared-ReLU MLP).
transformers runs its PyTorch paths: no fla, causal-conv1d or mamba_ssm kernels are installed (the
test refuses to run if they are). Every transformers parameter is drawn anew before the comparison,
so a tensor loaded into the wrong place cannot pass; weights travel by the families' weight maps.

The caches: after a forward over T tokens, archspec.memory.kv_cache_bytes equals the bytes of the
tensors in transformers' own cache of the whole model, and the reference model's cache_bytes.
"""

import dataclasses
import importlib.util
import warnings

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # each case builds two whole models and runs both, as tests/test_parity_families.py

from parity import Case, cached, max_diff, randomize  # noqa: E402  (tests/parity.py)

from archspec import ModelSpec, count_params  # noqa: E402
from archspec.memory import kv_cache_bytes  # noqa: E402
from archspec.reference import build  # noqa: E402
from archspec.reference.convert import family_of, load_transformers, transformers_model  # noqa: E402
from archspec.reference.families import checkpoint  # noqa: E402
from archspec.reference.model import cache_bytes  # noqa: E402
from archspec.reference.weights import WeightMap, load_weights  # noqa: E402

ATOL = 1e-5
B, T = 2, 19

DELTANET = {"kind": "gated_deltanet", "key_heads": 2, "value_heads": 4, "d_key": 8, "d_value_head": 6, "d_conv": 4}
QWEN3_NEXT = ModelSpec(
    name="qwen3-next-toy", vocab_size=101, d_model=32, decoder_layers=4, n_heads=4, n_kv_heads=2, d_head=8, d_ff=48,
    max_positions=64, position={"kind": "rotary", "base": 1e4, "fraction": 0.5}, norm="rmsnorm", activation="swiglu",
    bias=False, tie_embeddings=False, attention={"kind": "standard", "qk_norm": "head", "gate": True},
    mlp={"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 24, "d_shared": 40, "shared_gate": True},
    kinds={"deltanet": {"attention": DELTANET}, "attention": {}, "deltanet-dense": {"attention": DELTANET,
                                                                                     "mlp": "dense"}},
    layers={"pattern": ["deltanet", "attention", "deltanet-dense", "attention"]},
)  # fmt: skip
MAMBA2 = {"kind": "mamba2", "heads": 4, "head_dim": 8, "d_state": 8, "groups": 2, "d_conv": 4, "dt_min": 0.7}
NEMOTRON_H = ModelSpec(
    name="nemotron-h-toy", vocab_size=97, d_model=32, decoder_layers=5, n_heads=4, n_kv_heads=2, d_ff=64,
    max_positions=64, position="none", norm="rmsnorm", norm_eps=1e-5, activation="relu2", bias=False,
    tie_embeddings=False,
    kinds={"mamba": {"attention": MAMBA2, "mlp": "none"}, "attention": {"mlp": "none"}, "mlp": {"attention": "none"}},
    layers={"pattern": ["mamba", "attention", "mlp", "mamba", "mlp"]},
)  # fmt: skip
MAMBA = {"kind": "mamba", "d_inner": 64, "d_state": 8, "d_conv": 4, "dt_rank": 6, "dt_norms": True}
JAMBA = ModelSpec(
    name="jamba-toy", vocab_size=89, d_model=32, decoder_layers=4, n_heads=4, n_kv_heads=2, d_ff=48,
    max_positions=64, position="none", norm="rmsnorm", activation="swiglu", bias=False, tie_embeddings=False,
    mlp={"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 48, "normalize": False},
    kinds={"mamba-dense": {"attention": MAMBA, "mlp": "dense"}, "attention": {}, "mamba": {"attention": MAMBA}},
    layers={"pattern": ["mamba-dense", "attention", "mamba-dense", "mamba"]},
)  # fmt: skip


def _plain_norms(wmap: WeightMap) -> WeightMap:
    """The table reading zero-centred norms as plain ones (w, not 1 + w)."""
    rows = tuple(dataclasses.replace(r, transform="copy") if r.transform == "plus_one" else r for r in wmap.rows)
    return dataclasses.replace(wmap, rows=rows)


def _interleaved_q_read_as_one(wmap: WeightMap) -> WeightMap:
    """The table reading Qwen3-Next's q_proj (q and gate interleaved per head) as all q, then all gates."""
    rows = tuple(dataclasses.replace(r, transform="cat") if r.transform == "q_gate" else r for r in wmap.rows)
    return dataclasses.replace(wmap, rows=rows)


CASES = {
    "qwen3_next": Case(QWEN3_NEXT, "Qwen3-Next", "decoder.layers.0.mixer.A_log", {
        "full-rotary": {"position": {"kind": "rotary", "base": 1e4}},
        "no-renormalised-top-k": {"mlp": {**QWEN3_NEXT.mlp.model_dump(), "normalize": False}},
    }, {"plain-norms": _plain_norms, "gate-not-interleaved": _interleaved_q_read_as_one}),
    "nemotron_h": Case(NEMOTRON_H, "Nemotron-H", "decoder.layers.3.mixer.dt_bias", {
        "no-dt-clamp": {"kinds": {**{k: v.model_dump(exclude_none=True) for k, v in NEMOTRON_H.kinds.items()},
                                  "mamba": {"attention": {**MAMBA2, "dt_min": 0.0}, "mlp": "none"}}},
        "relu": {"activation": "relu"},
    }),
    "jamba": Case(JAMBA, "Jamba", "decoder.layers.2.mixer.dt_layernorm.weight", {
        "renormalised-top-k": {"mlp": {**JAMBA.mlp.model_dump(), "normalize": True}},
    }),
}  # fmt: skip


@pytest.fixture(autouse=True)
def _pytorch_paths_only():
    for kernel in ("fla", "causal_conv1d", "mamba_ssm"):
        assert importlib.util.find_spec(kernel) is None, f"{kernel} is installed: transformers would not run PyTorch"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _transformers(key: str) -> tuple:
    spec = CASES[key].spec
    torch.manual_seed(0)
    hf = randomize(transformers_model(spec), std=0.1)
    tokens = torch.randint(0, spec.vocab_size, (B, T), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return hf, tokens, hf(tokens).logits


@pytest.fixture(scope="module")
def hf_models():
    """transformers' model of each case (built once), its tokens and its logits."""
    return cached(_transformers)


@pytest.mark.parametrize("key", list(CASES))
def test_hybrid_matches_transformers_given_the_same_weights(key, hf_models):
    case = CASES[key]
    hf, tokens, expected = hf_models(key)
    model = load_transformers(build(case.spec, seed=1234), hf.state_dict()).eval()
    with torch.no_grad():
        assert max_diff(model(tokens), expected) <= ATOL
        p = model.get_parameter(case.nudge)
        p.add_(1e-2 * torch.randn_like(p))
        assert max_diff(model(tokens), expected) > ATOL


FEATURES = [pytest.param(k, f, id=f"{k}-{f}") for k, c in CASES.items() for f in c.features]
TABLES = [pytest.param(k, f, id=f"{k}-{f}") for k, c in CASES.items() for f in c.tables]


@pytest.mark.parametrize("key, feature", FEATURES)
def test_parity_depends_on_each_feature_of_the_hybrid(key, feature, hf_models):
    case = CASES[key]
    hf, tokens, expected = hf_models(key)
    other = case.spec.replace(**case.features[feature])
    model = load_weights(build(other, seed=1234), hf.state_dict(), checkpoint(case.family).weights).eval()
    with torch.no_grad():
        assert max_diff(model(tokens), expected) > 10 * ATOL


@pytest.mark.parametrize("key, table", TABLES)
def test_parity_depends_on_each_layout_the_weight_map_reads(key, table, hf_models):
    """Zero-centred norms read as plain ones, or Qwen3-Next's per-head (q, gate) read as all q then all
    gates: the same shapes, another model."""
    case = CASES[key]
    hf, tokens, expected = hf_models(key)
    [wmap] = checkpoint(case.family).weights
    model = load_weights(build(case.spec, seed=1234), hf.state_dict(), case.tables[table](wmap)).eval()
    with torch.no_grad():
        assert max_diff(model(tokens), expected) > 10 * ATOL


@pytest.mark.parametrize("key", list(CASES))
def test_hybrid_spec_builds_its_family_and_counts_what_transformers_builds(key, hf_models):
    case = CASES[key]
    hf, _, _ = hf_models(key)
    assert family_of(case.spec).name == case.family
    assert count_params(case.spec).total == sum(p.numel() for p in hf.parameters())


def test_qwen3_next_toy_has_every_kind_of_layer(hf_models):
    hf, _, _ = hf_models("qwen3_next")
    layers = hf.model.layers
    assert [type(getattr(x, "linear_attn", None) or x.self_attn).__name__ for x in layers] == [
        "Qwen3NextGatedDeltaNet", "Qwen3NextAttention", "Qwen3NextGatedDeltaNet", "Qwen3NextAttention"]  # fmt: skip
    assert [type(x.mlp).__name__ for x in layers] == [
        "Qwen3NextSparseMoeBlock", "Qwen3NextSparseMoeBlock", "Qwen3NextMLP", "Qwen3NextSparseMoeBlock"]  # fmt: skip


# ---------------------------------------------------------------- caches


def _held_bytes(cache) -> int:
    """Bytes of every tensor transformers' cache holds: keys and values, conv and recurrent states."""
    total = 0
    for layer in cache.layers:
        for value in vars(layer).values():
            tensors = value.values() if isinstance(value, dict) else [value]
            total += sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
    return total


@pytest.mark.parametrize("key", list(CASES))
def test_cache_bytes_equal_transformers_cache_of_the_whole_model(key, hf_models):
    case = CASES[key]
    hf, tokens, _ = hf_models(key)
    with torch.no_grad():
        out = hf(tokens, use_cache=True)
        theirs = _held_bytes(getattr(out, "cache", None) or out.past_key_values)
        model = load_transformers(build(case.spec, seed=1234), hf.state_dict()).eval()
        kept = model.new_cache()
        model(tokens, cache=kept)
    assert kv_cache_bytes(case.spec, B, T, "fp32") == theirs == cache_bytes(kept) > 0
