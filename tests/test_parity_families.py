"""Numerical parity with implementations nobody here wrote, given the same weights (float32): every
transformers family of archspec.reference.families and torch.nn.Transformer, by one harness.

The harness builds both models from a case's spec (the other implementation by its family, every
parameter drawn anew), loads the other's weights into the reference model by the family's weight map
(a table), compares the outputs and nudges one named weight, so that the comparison can fail.

Each toy is a small model of its family (2-3 layers, a vocabulary of about 100) in which the family's
own computation shows: Mixtral routes tokens, Qwen2 has biases on q/k/v only, OLMo 2 normalises after each
sub-layer only and q/k over all heads at once, Gemma 2 has sandwich
norms stored as (1 + w), soft-caps, a score scale of its own and a window on alternate layers, GPT-NeoX
rotates a quarter of each head and fuses q/k/v per head, OPT reads its positions 2 rows in, T5 buckets
relative positions and does not scale scores; gpt-oss has sinks, biases on its experts (stored interleaved,
(E, in, out)) and the clamped SwiGLU; Gemma 3 gives its sliding and global layers their own rotary bases
and a (1 + w) QK-norm; Llama 4 chunks its rotary layers, leaves a NoPE layer unrotated, L2-normalises q
and k and scales each expert's input (not its output) by its routing weight. Every transformers parameter
is drawn anew before the comparison (biases and norm weights too, which transformers initialises to
constants), so a tensor loaded into the wrong place cannot pass. The weights travel by the families'
weight maps (tables).
"""

import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow  # each case builds two models and runs both

from parity import Case, cached, max_diff, randomize  # noqa: E402  (tests/parity.py)

from archspec import ModelSpec, count_params  # noqa: E402
from archspec.reference import build  # noqa: E402
from archspec.reference.convert import (  # noqa: E402
    TORCH_TRANSFORMER_WEIGHTS,
    family_of,
    load_bert,
    load_gpt2,
    load_llama,
    load_torch_transformer,
    load_transformers,
    transformers_config,
    transformers_model,
)
from archspec.reference.families import checkpoint  # noqa: E402
from archspec.reference.weights import load_weights  # noqa: E402

ATOL = 1e-5
TORCH = TORCH_TRANSFORMER_WEIGHTS.name  # the family of torch.nn.Transformer (no transformers config)

GPT2_TOY = ModelSpec(name="gpt2-toy", vocab_size=211, d_model=96, decoder_layers=3, n_heads=4, max_positions=64)
LLAMA_TOY = ModelSpec(name="llama-toy", vocab_size=173, d_model=64, decoder_layers=2, n_heads=8, n_kv_heads=2,
                      d_ff=172, max_positions=64, position="rotary", norm="rmsnorm", activation="swiglu",
                      bias=False, tie_embeddings=False)  # fmt: skip
BERT_TOY = ModelSpec(name="bert-toy", vocab_size=99, d_model=64, encoder_layers=2, n_heads=4, d_ff=128,
                     max_positions=40, norm_position="post", type_vocab_size=2, embedding_norm=True,
                     pooler=True, head="none")  # fmt: skip
# nn.Transformer ends each stack in a norm, hence final_norm = true; it takes embedded inputs.
T2017_TOY = ModelSpec(name="t2017-toy", vocab_size=50, d_model=64, encoder_layers=2, decoder_layers=3, n_heads=4,
                      d_ff=128, max_positions=32, norm_position="post", final_norm=True, activation="relu",
                      position="none")  # fmt: skip

MIXTRAL = ModelSpec(name="mixtral-toy", vocab_size=101, d_model=64, decoder_layers=2, n_heads=8, n_kv_heads=2,
                    max_positions=64, position={"kind": "rotary", "base": 1e6}, norm="rmsnorm", norm_eps=1e-5,
                    activation="swiglu", bias=False, tie_embeddings=False,
                    mlp={"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 48})  # fmt: skip
QWEN2 = ModelSpec(name="qwen2-toy", vocab_size=103, d_model=64, decoder_layers=2, n_heads=4, n_kv_heads=2, d_ff=112,
                  max_positions=64, position={"kind": "rotary", "base": 1e6}, norm="rmsnorm", activation="swiglu",
                  bias={"qkv": True, "out": False, "mlp": False}, tie_embeddings=False)  # fmt: skip
# soft-caps small enough to bite at toy scale (the 2B model's 50 and 30 leave random toy scores untouched)
GEMMA2_ATTENTION = {"kind": "standard", "scale": 20**-0.5, "softcap": 0.5, "sliding_window": 8,
                    "sliding_layers": "even"}  # fmt: skip
GEMMA2 = ModelSpec(name="gemma2-toy", vocab_size=97, d_model=64, decoder_layers=2, n_heads=4, n_kv_heads=2, d_head=24,
                   d_ff=128, max_positions=64, position="rotary", norm="rmsnorm", norm_position="sandwich",
                   activation="geglu", bias=False, embedding_scale="sqrt_d_model", attention=GEMMA2_ATTENTION,
                   head={"kind": "lm", "softcap": 0.5})  # fmt: skip
NEOX = ModelSpec(name="neox-toy", vocab_size=89, d_model=64, decoder_layers=2, n_heads=4, d_ff=256, max_positions=64,
                 position={"kind": "rotary", "fraction": 0.25}, block={"kind": "parallel", "shared_norm": False},
                 tie_embeddings=False)  # fmt: skip
# OLMo 2: x + N(f(x)) with no norm before the sub-layer, q and k normalised over all heads at once; GQA, biases
OLMO2 = ModelSpec(name="olmo2-toy", vocab_size=95, d_model=64, decoder_layers=2, n_heads=4, n_kv_heads=2, d_head=24,
                  d_ff=112, max_positions=64, position={"kind": "rotary", "base": 5e5}, norm="rmsnorm",
                  norm_position="post_sublayer", norm_eps=1e-6, activation="swiglu",
                  attention={"kind": "standard", "qk_norm": "full"}, bias={"qkv": True, "out": True, "mlp": False},
                  tie_embeddings=False)  # fmt: skip
# Gemma 3: two sliding layers (window 8, rotary base 10k) then a global one (base 1M), sandwich (1 + w) norms, a
# per-head (1 + w) QK-norm, its own score scale, embeddings times sqrt(d_model)
GEMMA3_ATTENTION = {"kind": "standard", "qk_norm": "head", "scale": 20**-0.5}
GEMMA3_KINDS = {"local": {"attention": {"sliding_window": 8}, "position": {"base": 1e4}}, "global": {}}
GEMMA3 = ModelSpec(name="gemma3-toy", vocab_size=97, d_model=64, decoder_layers=3, n_heads=4, n_kv_heads=2, d_head=24,
                   d_ff=128, max_positions=64, position={"kind": "rotary", "base": 1e6}, norm="rmsnorm",
                   norm_eps=1e-6, norm_position="sandwich", activation="geglu", bias=False,
                   embedding_scale="sqrt_d_model", attention=GEMMA3_ATTENTION, kinds=GEMMA3_KINDS,
                   layers={"pattern": ["local", "local", "global"]})  # fmt: skip
# Llama 4: interleaved rotary with the L2 QK-norm and chunks of 8 on rotary layers, a NoPE layer, experts (sigmoid
# scores scaling each expert's input) beside a shared expert on odd layers, a dense MLP on even ones
LLAMA4_MOE = {"kind": "moe", "experts": 4, "top_k": 1, "d_expert": 48, "d_shared": 48, "normalize": False,
              "scoring": "sigmoid", "weight_input": True}  # fmt: skip
LLAMA4_KINDS = {
    "rope-dense": {"attention": {"chunk": 8, "qk_norm": "l2"}, "mlp": "dense"},
    "rope-moe": {"attention": {"chunk": 8, "qk_norm": "l2"}},
    "nope-dense": {"position": "none", "mlp": "dense"},
    "rope-moe-full": {"attention": {"qk_norm": "l2"}},
}
LLAMA4 = ModelSpec(name="llama4-toy", vocab_size=101, d_model=64, decoder_layers=4, n_heads=4, n_kv_heads=2,
                   d_head=16, d_ff=112, max_positions=64, position={"kind": "rotary", "base": 5e5, "interleaved": True},
                   norm="rmsnorm", norm_eps=1e-5, activation="swiglu", bias=False, tie_embeddings=False,
                   mlp=LLAMA4_MOE, kinds=LLAMA4_KINDS,
                   layers={"pattern": ["rope-dense", "rope-moe", "nope-dense", "rope-moe-full"]})  # fmt: skip
# gpt-oss: sinks, biases everywhere, a window on even layers, experts with biases; a clamp that bites at toy scale
GPT_OSS_ATTENTION = {"kind": "standard", "sinks": True, "sliding_window": 8, "sliding_layers": "even"}
GPT_OSS = ModelSpec(name="gpt-oss-toy", vocab_size=99, d_model=64, decoder_layers=2, n_heads=4, n_kv_heads=2,
                    d_head=16, max_positions=64, position={"kind": "rotary", "base": 1.5e5}, norm="rmsnorm",
                    activation="clamped_swiglu", swiglu_limit=0.1, bias=True, tie_embeddings=False,
                    attention=GPT_OSS_ATTENTION,
                    mlp={"kind": "moe", "experts": 4, "top_k": 2, "d_expert": 48, "router_bias": True})  # fmt: skip
OPT = ModelSpec(name="opt-toy", vocab_size=91, d_model=64, decoder_layers=2, n_heads=4, d_ff=128, max_positions=40,
                position={"kind": "learned", "offset": 2}, activation="relu")  # fmt: skip
OPT_350M_EMBEDDING = {"d_embed": 32, "projection_bias": False, "project_out": True, "position_width": "d_model"}
T5_RELATIVE = {"kind": "relative", "buckets": 8, "max_distance": 20}  # sequences longer than max_distance
# T5 v1.1 / Flan-T5: gated GELU, one table for source and target, a head of its own, unscaled
T5_V1_1 = ModelSpec(name="t5-v1-1-toy", vocab_size=99, d_model=64, encoder_layers=2, decoder_layers=2, n_heads=4,
                    d_head=16, d_ff=96, max_positions=64, position=T5_RELATIVE, norm="rmsnorm", bias=False,
                    activation="geglu", attention={"kind": "standard", "scale": 1.0}, embedding_scale="none",
                    share_embeddings=True, tie_embeddings=False)  # fmt: skip
# the original T5: ReLU, every table tied, the head's input scaled by d_model^-0.5; n_heads * d_head < d_model
T5 = T5_V1_1.replace(name="t5-toy", decoder_layers=3, d_head=8, activation="relu", tie_embeddings=True,
                     head={"kind": "lm", "scale": 64**-0.5})  # fmt: skip


FIRST_CASES = {
    "gpt2": Case(GPT2_TOY, "GPT-2", "embed.weight", {"relu": {"activation": "relu"}}),
    "gpt2-relu": Case(GPT2_TOY.replace(activation="relu"), "GPT-2", "decoder.layers.2.mlp.up.weight"),
    "gpt2-eps-untied": Case(GPT2_TOY.replace(norm_eps=1e-3, tie_embeddings=False), "GPT-2", "head.weight",
                            {"default-eps": {"norm_eps": 1e-5}}),
    "llama-no-bias-untied": Case(LLAMA_TOY, "LLaMA", "head.weight"),
    "llama-bias-tied": Case(LLAMA_TOY.replace(bias=True, tie_embeddings=True), "LLaMA",
                            "decoder.layers.1.mlp.down.bias"),
    "llama-geglu-eps": Case(LLAMA_TOY.replace(activation="geglu", norm_eps=1e-5), "LLaMA",
                            "decoder.final_norm.weight", {"swiglu": {"activation": "swiglu"}}),
    "bert": Case(BERT_TOY, "BERT", "pooler.dense.weight"),
    "bert-silu": Case(BERT_TOY.replace(activation="silu"), "BERT", "token_type.weight",
                      {"gelu": {"activation": "gelu"}}),
    "torch-transformer": Case(T2017_TOY, TORCH, "encoder.layers.0.attention.qkv.weight",
                              {"gelu": {"activation": "gelu"}}),
}  # fmt: skip

CASES = {
    **FIRST_CASES,
    "mixtral": Case(MIXTRAL, "Mixtral", "decoder.layers.1.mlp.experts.down.weight", {
        "no-renormalised-top-k": {"mlp": {**MIXTRAL.mlp.model_dump(), "normalize": False}},
        "top-1": {"mlp": {**MIXTRAL.mlp.model_dump(), "top_k": 1}},
    }),
    "mixtral-sliding-window": Case(
        MIXTRAL.replace(attention={"kind": "standard", "sliding_window": 8}), "Mixtral",
        "decoder.layers.0.mlp.router.weight", {"no-window": {"attention": "standard"}}),
    "qwen2": Case(QWEN2, "Qwen2", "decoder.layers.0.attention.qkv.bias", {
        "rotary-base": {"position": "rotary"},
    }),
    "qwen2-tied-window-odd": Case(
        QWEN2.replace(tie_embeddings=True,
                      attention={"kind": "standard", "sliding_window": 6, "sliding_layers": "odd"}),
        "Qwen2", "decoder.layers.1.attention.out.weight", {"no-window": {"attention": "standard"}}),
    "gemma2": Case(GEMMA2, "Gemma 2", "decoder.layers.1.mlp_post_norm.weight", {
        "no-score-softcap": {"attention": {**GEMMA2_ATTENTION, "softcap": None}},
        "no-logit-softcap": {"head": "lm"},
        "window-on-odd-layers": {"attention": {**GEMMA2_ATTENTION, "sliding_layers": "odd"}},
        "default-scale": {"attention": {**GEMMA2_ATTENTION, "scale": None}},
        "unscaled-embeddings": {"embedding_scale": "none"},
    }),
    "gpt-neox": Case(NEOX, "GPT-NeoX", "decoder.layers.1.attention.qkv.weight", {
        "half-rotary": {"position": {"kind": "rotary", "fraction": 0.5}},
        "interleaved-rotary": {"position": {"kind": "rotary", "fraction": 0.25, "interleaved": True}},
        "sequential": {"block": "sequential"},
    }),
    "gpt-neox-sequential-no-attention-bias": Case(
        NEOX.replace(block="sequential", bias={"qkv": False, "out": False, "mlp": True}, tie_embeddings=True),
        "GPT-NeoX", "decoder.layers.0.mlp_norm.bias",
        {"parallel": {"block": {"kind": "parallel", "shared_norm": False}}}),
    "olmo2": Case(OLMO2, "OLMo 2", "decoder.layers.1.attention.k_norm.weight", {
        "rotary-base": {"position": "rotary"},
    }),
    "olmo2-tied-no-bias": Case(OLMO2.replace(tie_embeddings=True, bias=False, n_kv_heads=4), "OLMo 2",
                               "decoder.layers.0.mlp_post_norm.weight", {"geglu": {"activation": "geglu"}}),
    "gemma3_text": Case(GEMMA3, "Gemma 3", "decoder.layers.2.attention.q_norm.weight", {
        "default-scale": {"attention": {**GEMMA3_ATTENTION, "scale": None}},
        "unscaled-embeddings": {"embedding_scale": "none"},
        "no-window": {"kinds": {**GEMMA3_KINDS, "local": {"position": {"base": 1e4}}}},
        "one-rotary-base": {"kinds": {**GEMMA3_KINDS, "local": {"attention": {"sliding_window": 8}}}},
        "global-first": {"layers": {"pattern": ["global", "local", "local"]}},
    }),
    "llama4_text": Case(LLAMA4, "Llama 4", "decoder.layers.3.mlp.experts.up.weight", {
        "weighted-output": {"mlp": {**LLAMA4_MOE, "weight_input": False}},
        "half-split-rotary": {"position": {"kind": "rotary", "base": 5e5}},
        "no-chunks": {"kinds": {**LLAMA4_KINDS, "rope-dense": {"attention": {"qk_norm": "l2"}, "mlp": "dense"},
                                "rope-moe": {"attention": {"qk_norm": "l2"}}}},
        "no-l2-qk-norm": {"kinds": {**LLAMA4_KINDS, "rope-moe-full": {}}},
        "rotary-everywhere": {"kinds": {**LLAMA4_KINDS, "nope-dense": {"mlp": "dense"}}},
    }),
    "gpt_oss": Case(GPT_OSS, "gpt-oss", "decoder.layers.1.attention.sinks", {
        "no-clamp": {"swiglu_limit": 7.0},
        "no-window": {"attention": {**GPT_OSS_ATTENTION, "sliding_window": None}},
        "window-on-odd-layers": {"attention": {**GPT_OSS_ATTENTION, "sliding_layers": "odd"}},
        "top-1": {"mlp": {**GPT_OSS.mlp.model_dump(), "top_k": 1}},
    }),
    "opt": Case(OPT, "OPT", "decoder.position.weight", {"gelu": {"activation": "gelu"}}),
    "opt-post-norm-untied": Case(OPT.replace(norm_position="post", tie_embeddings=False), "OPT",
                                 "decoder.layers.1.mlp_norm.weight", {"gelu": {"activation": "gelu"}}),
    # OPT-350M's layout: token embeddings word_embed_proj_dim wide, project_in and project_out, a tied head at that
    # width, positions hidden_size wide; post-norm without a final norm; and untied
    "opt-350m-projections": Case(OPT.replace(embedding=OPT_350M_EMBEDDING, norm_position="post"), "OPT",
                                 "project_out.weight", {"gelu": {"activation": "gelu"}}),
    "opt-projections-untied": Case(OPT.replace(embedding=OPT_350M_EMBEDDING, tie_embeddings=False), "OPT",
                                   "embed_proj.weight", {"gelu": {"activation": "gelu"}}),
    "t5-v1.1": Case(T5_V1_1, "T5", "decoder.position.weight", {
        "max-distance": {"position": {**T5_RELATIVE, "max_distance": 40}},
        "scaled-scores": {"attention": "standard"},
        "swiglu": {"activation": "swiglu"},
    }),
    "t5": Case(T5, "T5", "encoder.position.weight", {"unscaled-head": {"head": "lm"}}),
}  # fmt: skip


def other_model(case: Case):
    """The independent implementation of the case's spec: transformers' model of its family, or
    torch.nn.Transformer built from the spec's fields; every parameter drawn anew, in eval mode."""
    torch.manual_seed(0)
    s = case.spec
    if case.family == TORCH:
        model = torch.nn.Transformer(d_model=s.d_model, nhead=s.n_heads, num_encoder_layers=s.encoder_layers,
                                     num_decoder_layers=s.decoder_layers, dim_feedforward=s.d_ff, dropout=0.0,
                                     activation=s.activation, layer_norm_eps=s.norm_eps, batch_first=True)  # fmt: skip
    else:
        model = transformers_model(s, case.family)
    return randomize(model).eval()


def inputs_of(case: Case) -> tuple:
    """Token ids of the spec's kind (BERT: with token types); nn.Transformer takes embedded inputs."""
    s, gen = case.spec, torch.Generator().manual_seed(1)
    if case.family == TORCH:
        return torch.randn(2, 11, s.d_model, generator=gen), torch.randn(2, 7, s.d_model, generator=gen)
    if s.kind == "encoder-decoder":
        return (torch.randint(0, s.vocab_size, (2, 29), generator=gen),
                torch.randint(0, s.vocab_size, (2, 23), generator=gen))  # fmt: skip
    if s.kind == "encoder-only":
        return (torch.randint(0, s.vocab_size, (2, 25), generator=gen),
                torch.randint(0, s.type_vocab_size, (2, 25), generator=gen))  # fmt: skip
    return (torch.randint(0, s.vocab_size, (2, 33), generator=gen),)


def run_other(case: Case, model, inputs) -> tuple:
    """The other implementation's outputs: logits; BertModel's hidden states and pooled output."""
    if case.family == TORCH:
        mask = torch.nn.Transformer.generate_square_subsequent_mask(inputs[1].shape[1])
        return (model(*inputs, tgt_mask=mask, tgt_is_causal=True),)
    if case.spec.kind == "encoder-decoder":
        return (model(input_ids=inputs[0], decoder_input_ids=inputs[1]).logits,)
    if case.spec.kind == "encoder-only":
        out = model(inputs[0], token_type_ids=inputs[1])
        return out.last_hidden_state, out.pooler_output
    return (model(inputs[0]).logits,)


def run_reference(case: Case, model, inputs) -> tuple:
    """The reference model's outputs, the same as run_other's."""
    if case.family == TORCH:  # nn.Transformer has no embeddings: its stacks alone
        src, tgt = inputs
        return (model.decoder(tgt, model.encoder(src)),)
    if case.spec.kind == "encoder-only":
        return model(inputs[0], token_types=inputs[1], pool=True)
    return (model(*inputs),)


def reference_model(case: Case, state_dict, spec: ModelSpec | None = None):
    """The reference model of `spec` (default: the case's) loaded with the other implementation's
    weights by the family's weight map; a seed of its own, so that a table that missed a tensor
    cannot pass on identically drawn initial weights."""
    model = build(spec or case.spec, seed=1234)
    if case.family == TORCH:
        return load_torch_transformer(model, state_dict).eval()
    if spec is None:
        return load_transformers(model, state_dict, case.family).eval()
    return load_weights(model, state_dict, checkpoint(case.family).weights).eval()  # a spec the family may refuse


def _other(key: str) -> tuple:
    case = CASES[key]
    other, inputs = other_model(case), inputs_of(case)
    with torch.no_grad():
        return other, inputs, run_other(case, other, inputs)


@pytest.fixture(scope="module")
def hf_models():
    """One other implementation per case (built once), its inputs and its outputs."""
    return cached(_other)


def nudge(model, name: str) -> None:
    p = model.get_parameter(name)
    p.add_(1e-2 * torch.randn_like(p))


@pytest.mark.parametrize("key", list(CASES))
def test_family_matches_its_implementation_given_the_same_weights(key, hf_models):
    case = CASES[key]
    other, inputs, expected = hf_models(key)
    model = reference_model(case, other.state_dict())
    with torch.no_grad():
        assert max_diff(run_reference(case, model, inputs), expected) <= ATOL
        # the comparison can fail: nudging one weight moves the output away from the other implementation's
        nudge(model, case.nudge)
        assert max_diff(run_reference(case, model, inputs), expected) > ATOL


FEATURES = [pytest.param(k, f, id=f"{k}-{f}") for k, c in CASES.items() for f in c.features]


@pytest.mark.parametrize("key, feature", FEATURES)
def test_parity_depends_on_each_feature_of_the_family(key, feature, hf_models):
    """The toys exercise what makes the family: a spec without the feature (same shapes, the same
    weights) computes something else, beyond the tolerance."""
    case = CASES[key]
    other, inputs, expected = hf_models(key)
    model = reference_model(case, other.state_dict(), case.spec.replace(**case.features[feature]))
    with torch.no_grad():
        assert max_diff(run_reference(case, model, inputs), expected) > 10 * ATOL


@pytest.mark.parametrize("key", [k for k, c in CASES.items() if c.family != TORCH])
def test_spec_builds_its_family_and_counts_what_transformers_builds(key, hf_models):
    case = CASES[key]
    hf, _, _ = hf_models(key)
    assert family_of(case.spec).name == case.family
    assert type(hf).__name__ == checkpoint(case.family).model_class
    assert count_params(case.spec).total == sum(p.numel() for p in hf.parameters())


def test_mixtral_toy_really_routes_tokens(hf_models):
    """Every expert gets tokens and tokens differ in the experts they get: the parity covers routing."""
    hf, (x,), _ = hf_models("mixtral")
    model = load_transformers(build(MIXTRAL, seed=1), hf.state_dict()).eval()
    chosen = []
    hook = model.decoder.layers[1].mlp.router.register_forward_hook(
        lambda m, args, out: chosen.append(out.topk(MIXTRAL.mlp.top_k, dim=-1).indices)
    )
    with torch.no_grad():
        model(x)
    hook.remove()
    pairs = {tuple(sorted(p.tolist())) for p in chosen[0]}
    assert {e for p in pairs for e in p} == set(range(MIXTRAL.mlp.experts))
    assert len(pairs) > 1


def test_olmo2_parity_needs_the_norms_after_the_sublayers_and_the_full_width_qk_norm(hf_models):
    """Remove OLMo 2's features, keeping every weight: the same norms before the sub-layers (pre-norm), or no
    QK-norm, or a QK-norm per head, and the logits leave transformers'."""
    hf, (x,), expected = hf_models("olmo2")
    model = load_transformers(build(OLMO2, seed=1234), hf.state_dict()).eval()
    state = model.state_dict()
    pre = build(OLMO2.replace(norm_position="pre"), seed=1).eval()
    pre.load_state_dict({k.replace("_post_norm.", "_norm."): v for k, v in state.items()})
    no_qk = build(OLMO2.replace(attention="standard"), seed=1).eval()
    no_qk.load_state_dict({k: v for k, v in state.items() if not re.search(r"\.[qk]_norm\.", k)})
    per_head = build(OLMO2.replace(attention={"kind": "standard", "qk_norm": "head"}), seed=1).eval()
    per_head.load_state_dict({k: v[:24] if re.search(r"\.[qk]_norm\.", k) else v for k, v in state.items()})
    with torch.no_grad():
        assert max_diff(model(x), expected) <= ATOL
        for other in (pre, no_qk, per_head):
            assert max_diff(other(x), expected) > 10 * ATOL


def _per_expert_layout(state_dict):
    """transformers 5's stacked Mixtral experts as the published checkpoints hold them (w1, w3, w2 per expert)."""
    out = {}
    for k, v in state_dict.items():
        if ".mlp.experts.gate_up_proj" in k:
            layer = k.split(".mlp.")[0]
            for e, (gate, up) in enumerate(zip(*v.chunk(2, dim=1), strict=True)):
                out[f"{layer}.block_sparse_moe.experts.{e}.w1.weight"] = gate
                out[f"{layer}.block_sparse_moe.experts.{e}.w3.weight"] = up
        elif ".mlp.experts.down_proj" in k:
            layer = k.split(".mlp.")[0]
            for e, down in enumerate(v):
                out[f"{layer}.block_sparse_moe.experts.{e}.w2.weight"] = down
        else:
            out[k.replace(".mlp.gate.", ".block_sparse_moe.gate.")] = v
    return out


@pytest.mark.parametrize(
    "key, convert",
    [
        ("mixtral", _per_expert_layout),
        ("gpt-neox", lambda sd: {k.replace("lm_head.", "embed_out."): v for k, v in sd.items()}),
    ],
    ids=["mixtral-per-expert-checkpoint", "gpt-neox-embed-out-checkpoint"],
)
def test_older_checkpoint_layouts_load_by_their_own_table(key, convert, hf_models):
    hf, inputs, expected = hf_models(key)
    model = load_transformers(build(CASES[key].spec, seed=1234), convert(hf.state_dict())).eval()
    with torch.no_grad():
        assert max_diff(model(*inputs), expected) <= ATOL


def test_weight_map_names_a_missing_key(hf_models):
    hf, _, _ = hf_models("mixtral")
    sd = {k: v for k, v in hf.state_dict().items() if k != "model.layers.1.mlp.experts.down_proj"}
    with pytest.raises(ValueError, match=r"has no 'layers\.1\.mlp\.experts\.down_proj' \(for decoder\.layers\.1\."):
        load_transformers(build(MIXTRAL), sd)


def test_weight_map_names_a_key_left_over(hf_models):
    hf, _, _ = hf_models("qwen2")
    sd = {**hf.state_dict(), "model.layers.0.self_attn.o_proj.bias": torch.zeros(64)}  # Qwen2 has none
    with pytest.raises(ValueError, match=r"1 tensors were not loaded, e\.g\. \['layers\.0\.self_attn\.o_proj\.bias'\]"):
        load_transformers(build(QWEN2), sd)


def test_weight_map_refuses_a_tied_source_that_differs(hf_models):
    """T5 ties its encoder's and decoder's tables to `shared`; a checkpoint where they differ is not this spec."""
    hf, _, _ = hf_models("t5")
    sd = dict(hf.state_dict())
    sd["decoder.embed_tokens.weight"] = sd["shared.weight"] + 1
    with pytest.raises(ValueError, match=r"decoder\.embed_tokens\.weight differs from embed\.weight"):
        load_transformers(build(T5), sd)


def test_weight_map_refuses_a_fused_tensor_of_another_width(hf_models):
    """Mixtral's fused gate_up_proj (E, 2 * 48, d) cannot split into experts 32 wide."""
    hf, _, _ = hf_models("mixtral")
    narrow = MIXTRAL.replace(mlp={**MIXTRAL.mlp.model_dump(), "d_expert": 32})
    with pytest.raises(ValueError, match=r"layers\.0\.mlp\.experts\.gate_up_proj has shape \(4, 96, 64\)"):
        load_transformers(build(narrow), hf.state_dict())


@pytest.mark.parametrize(
    "spec, name, field",
    [
        (MIXTRAL.replace(mlp={**MIXTRAL.mlp.model_dump(), "d_shared": 32}), "mixtral", "mlp.d_shared=32"),
        (MIXTRAL.replace(attention={"kind": "standard", "sliding_window": 8, "sliding_layers": "even"}), "mixtral",
         "mixer.sliding_layers='even'"),
        (QWEN2.replace(attention={"kind": "standard", "qk_norm": True}), "qwen2", "mixer.qk_norm=true"),
        (QWEN2.replace(bias=True), "qwen2", "bias.out=true"),
        (GEMMA2.replace(attention={**GEMMA2_ATTENTION, "scale": 0.3}), "gemma2", "mixer.scale=0.3"),
        (GEMMA2.replace(norm_position="pre"), "gemma2", "norm_position='pre'"),
        (NEOX.replace(position={"kind": "rotary", "interleaved": True}), "gpt_neox", "position.interleaved=true"),
        (NEOX.replace(block="parallel"), "gpt_neox", "block.shared_norm=true"),
        (OPT.replace(position="learned"), "opt", "position.offset=0"),
        (OPT.replace(norm_eps=1e-6), "opt", "norm_eps=1e-06"),
        (T5.replace(share_embeddings=False), "t5", "share_embeddings=False"),
        (T5.replace(head={"kind": "lm", "scale": 0.5}), "t5", "head.scale=0.5"),
        (T5.replace(attention="standard"), "t5", "mixer.scale=0.3535"),
        (QWEN2, "mixtral", "mlp='dense'"),
        (OLMO2.replace(norm_position="sandwich"), "olmo2", "norm_position='sandwich'"),
        (OLMO2.replace(attention={"kind": "standard", "qk_norm": "head"}), "olmo2", 'mixer.qk_norm="head"'),
        (GPT_OSS.replace(attention={**GPT_OSS_ATTENTION, "sinks": False}), "gpt_oss", "mixer.sinks=false"),
        (GPT_OSS.replace(mlp={**GPT_OSS.mlp.model_dump(), "router_bias": False}), "gpt_oss", "mlp.router_bias=false"),
        (GEMMA3.replace(attention={**GEMMA3_ATTENTION, "qk_norm": False}), "gemma3_text", "mixer.qk_norm=false"),
        (GEMMA3.replace(kinds={**GEMMA3_KINDS, "global": {"d_ff": 96}}), "gemma3_text", "layer 2: differs"),
        (GEMMA3.replace(kinds={**GEMMA3_KINDS, "global": {"attention": {"sliding_window": 4}}}), "gemma3_text",
         "layer 2: attention or position differs from layer 0's"),
        (LLAMA4.replace(mlp={**LLAMA4_MOE, "weight_input": False}), "llama4_text", "layer 1: mlp (needs one sigmoid"),
        (LLAMA4.replace(position={"kind": "rotary", "base": 5e5}), "llama4_text", "position.interleaved=false"),
        (LLAMA4.replace(kinds={**LLAMA4_KINDS, "rope-moe": {"attention": {"chunk": 4, "qk_norm": "l2"}}}),
         "llama4_text", "mixer.chunk: [4, 8]"),
        (LLAMA4.replace(kinds={**LLAMA4_KINDS, "rope-moe-full": {}}), "llama4_text", "layer 3: attention"),
        (GPT_OSS.replace(mlp={**GPT_OSS.mlp.model_dump(), "expert_scales": True}), "gpt_oss", "Gemma 4's MoE"),
        (LLAMA4.replace(mlp={**LLAMA4_MOE, "router_norm": True}), "llama4_text", "Gemma 4's MoE"),
    ],
    ids=["mixtral-shared-expert", "mixtral-window-pattern", "qwen2-qk-norm", "qwen2-out-bias", "gemma2-scale",
         "gemma2-pre-norm", "neox-interleaved", "neox-shared-norm", "opt-offset", "opt-eps", "t5-two-tables",
         "t5-head-scale", "t5-scaled-scores", "dense-as-mixtral", "olmo2-sandwich", "olmo2-qk-norm-per-head",
         "gpt_oss-no-sinks", "gpt_oss-no-router-bias", "gemma3-no-qk-norm", "gemma3-global-d_ff",
         "gemma3-two-windows", "llama4-weighted-output", "llama4-half-split-rotary", "llama4-two-chunks",
         "llama4-qk-norm-on-some-rotary-layers", "gpt_oss-expert-scales", "llama4-router-norm"],
)  # fmt: skip
def test_what_a_family_cannot_represent_is_refused_by_field(spec, name, field):
    with pytest.raises(ValueError, match=f"cannot represent this spec: .*{re.escape(field)}"):
        transformers_config(spec, name)


def test_loader_refuses_weights_of_another_shape():
    hf = transformers.GPT2LMHeadModel(transformers_config(GPT2_TOY))
    with pytest.raises(ValueError, match="has shape"):
        load_gpt2(build(GPT2_TOY.replace(d_ff=64)), hf.state_dict())


def test_per_family_loaders_are_the_family_tables(hf_models):
    """load_gpt2, load_llama and load_bert load what load_transformers loads, by the same table."""
    for key, load in (("gpt2", load_gpt2), ("llama-no-bias-untied", load_llama), ("bert", load_bert)):
        case = CASES[key]
        other, inputs, expected = hf_models(key)
        model = load(build(case.spec, seed=1234), other.state_dict()).eval()
        with torch.no_grad():
            assert max_diff(run_reference(case, model, inputs), expected) <= ATOL


def test_no_transformers_equivalent_is_a_clear_error():
    with pytest.raises(ValueError, match="no transformers equivalent.*norm_position='post'"):
        transformers_config(GPT2_TOY.replace(norm_position="post"))


@pytest.mark.parametrize(
    "spec, field",
    [
        (GPT2_TOY.replace(activation="swiglu"), "activation='swiglu'"),
        (LLAMA_TOY.replace(embedding_norm=True), "embedding_norm=True"),
        (BERT_TOY.replace(head="lm"), "head='lm'"),
        (GPT2_TOY.replace(head={"kind": "lm", "bias": True}), "head.bias=true"),
        (LLAMA_TOY.replace(d_value=4), "d_value=4"),
    ],
    ids=["gpt2-gated", "llama-embedding-norm", "bert-with-lm-head", "head-bias", "d_value"],
)
def test_what_a_family_cannot_represent_is_refused_by_name(spec, field):
    with pytest.raises(ValueError, match=re.escape(field)):
        transformers_config(spec)


def test_loaders_check_that_every_parameter_was_written():
    """Both directions: a state dict that lacks nothing the loader reads still fails when a parameter
    of the reference model is left unwritten (here: a LLaMA state dict with the tied head cut, into an
    untied model whose head has no source)."""
    hf = transformers.LlamaForCausalLM(transformers_config(LLAMA_TOY.replace(tie_embeddings=True)))
    model = build(LLAMA_TOY.replace(tie_embeddings=True), seed=1)
    model.head.weight = torch.nn.Parameter(torch.zeros_like(model.head.weight))  # untie behind the loader's back
    with pytest.raises(ValueError, match="parameters were not written, e.g. \\['head.weight'\\]"):
        load_llama(model, hf.state_dict())


# features that own tensors: the spec without the feature, loaded with the other implementation's weights but those
@pytest.mark.parametrize(
    "key, change, dropped",
    [
        ("gpt_oss", {"attention": {**GPT_OSS_ATTENTION, "sinks": False}}, r"\.self_attn\.sinks"),
        ("gpt_oss", {"bias": {"qkv": True, "out": True, "mlp": False}}, r"\.experts\.(gate_up|down)_proj_bias"),
        ("gemma3_text", {"attention": {**GEMMA3_ATTENTION, "qk_norm": False}}, r"\.self_attn\.[qk]_norm\."),
        ("gemma3_text", {"norm_position": "pre"}, r"\.post_(attention|feedforward)_layernorm\."),
        ("llama4_text", {"mlp": {**LLAMA4_MOE, "d_shared": 0}}, r"\.feed_forward\.shared_expert\."),
    ],
    ids=["gpt_oss-no-sinks", "gpt_oss-no-expert-biases", "gemma3_text-no-qk-norm", "gemma3_text-no-sandwich",
         "llama4_text-no-shared-expert"],
)  # fmt: skip
def test_parity_depends_on_each_feature_that_has_tensors(key, change, dropped, hf_models):
    case = CASES[key]
    other, inputs, expected = hf_models(key)
    sd = {k: v for k, v in other.state_dict().items() if not re.search(dropped, k)}
    assert len(sd) < len(other.state_dict())
    model = reference_model(case, sd, case.spec.replace(**change))
    with torch.no_grad():
        assert max_diff(run_reference(case, model, inputs), expected) > 10 * ATOL


def test_only_the_llama4_family_builds_routing_weights_on_the_experts_inputs():
    """mlp.weight_input changes the computation (Llama 4): every other family refuses it by name."""
    import archspec
    from archspec.reference.families import CHECKPOINTS

    spec = archspec.preset("mixtral-8x7b").replace(**{"mlp.weight_input": True})
    refusals = {f.model_type: f.unsupported(spec) for f in CHECKPOINTS.values()}
    assert any("mlp.weight_input=true" in why for why in refusals["mixtral"])
    assert not any("mlp.weight_input" in why for why in refusals["llama4_text"])
