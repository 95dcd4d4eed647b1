"""Activation bytes of every layer kind and block feature equal what autograd saves in one training
step of the reference model, exactly: archspec's activations_bytes (a sum over the Saved records the
rule set torch-cpu of archspec.memory.saved gives each part) against the storages measured on the
CPU (saved_tensors_hooks, each storage once, weights excluded, the loss included), in fp32 and bf16,
for both attention modes and every recomputation mode. Each spec is small (2-4 layers) and has the
feature under test; the mixed specs put several features in one heterogeneous stack, where each
layer runs its own attention (a layer with sinks runs explicit products while its neighbours run the
fused kernel).

A mixture of experts is routed for real: each expert keeps one row per token routed to it, so the
per-expert counts vary with the routing, but their sum is N·k routed rows, and every tensor an
expert (and the combine step) keeps has one row per routed row; the total is therefore exact for
any routing, which the randomly initialised router here exercises."""

import pytest

torch = pytest.importorskip("torch")

from matrix import fast_corner  # noqa: E402

from archspec import ModelSpec  # noqa: E402
from archspec.core.vocab import ATTENTION, RECOMPUTE  # noqa: E402
from archspec.memory import estimate_memory  # noqa: E402
from archspec.reference import build  # noqa: E402
from archspec.reference.memory_measure import measure_activations  # noqa: E402

BASE = dict(vocab_size=53, d_model=32, n_heads=4, d_head=8, max_positions=24, decoder_layers=2)
LLAMA = dict(position="rotary", norm="rmsnorm", activation="swiglu", bias=False)


def std(**options) -> dict:
    return {"kind": "standard", **options}


BERT = dict(encoder_layers=2, decoder_layers=0, norm_position="post", type_vocab_size=2, embedding_norm=True,
            head="mlm")  # fmt: skip
LATENT = dict(kind="latent", q_rank=16, kv_rank=8, rope_dims=4)
MOE = dict(kind="moe", experts=4, top_k=2, d_expert=8)
FEATURES = {
    "sliding-window": dict(attention=std(sliding_window=4)),
    "sliding-window-rotary-gqa": dict(**LLAMA, n_kv_heads=2, attention=std(sliding_window=3)),
    "chunked": dict(**LLAMA, attention=std(chunk=4)),
    "alibi": dict(position="alibi"),
    "t5-relative-bias": dict(position="relative", norm="rmsnorm", activation="relu", bias=False),
    # umT5: a relative bias table in every layer, looked up by the stack's one bucket index; encoder and decoder
    "umt5-relative-bias-per-layer": dict(position={"kind": "relative", "per_layer": True}, norm="rmsnorm",
                                         activation="geglu", bias=False, encoder_layers=2, decoder_layers=3,
                                         tie_embeddings=False),
    # Transformer-XL's relative attention (Gopher): W_r and u, v in every layer; one u, v per stack, grouped queries
    "transformer-xl": dict(position="transformer_xl", norm="rmsnorm"),
    "transformer-xl-shared-biases-gqa": dict(position={"kind": "transformer_xl", "per_layer": False}, n_kv_heads=2,
                                             norm="rmsnorm", bias=False),
    # OPT-350M's factorised embeddings: project_in, positions d_model wide, project_out before the tied head
    "opt-project-in-out": dict(position={"kind": "learned", "offset": 2}, norm_position="post", activation="relu",
                               embedding={"d_embed": 16, "projection_bias": False, "project_out": True,
                                          "position_width": "d_model"}),
    "sinks": dict(**LLAMA, attention=std(sinks=True)),
    "output-gate": dict(**LLAMA, attention=std(gate=True)),
    "shared-kv": dict(**LLAMA, attention=std(shared_kv=True)),
    # Gemma 4's global layers: keys as values, a per-head QK-norm, proportional rotary on a quarter of each head
    "shared-kv-qk-norm-proportional-rotary": dict(**{**LLAMA, "position": {"kind": "rotary", "fraction": 0.25,
                                                                         "proportional": True}},
                                                  attention=std(shared_kv=True, qk_norm="head", scale=1.0)),
    "value-norm": dict(**LLAMA, n_kv_heads=2, attention=std(value_norm=True)),
    "value-norm-nope": dict(norm="rmsnorm", attention=std(value_norm=True)),
    "shared-kv-value-norm-qk-norm": dict(**LLAMA, attention=std(shared_kv=True, value_norm=True, qk_norm="head")),
    "proportional-rotary": dict(**{**LLAMA, "position": {"kind": "rotary", "fraction": 0.5, "proportional": True}}),
    "qk-norm-head": dict(**LLAMA, n_kv_heads=2, attention=std(qk_norm="head")),
    "qk-norm-head-partial-rotary": dict(**{**LLAMA, "position": {"kind": "rotary", "fraction": 0.5}},
                                        attention=std(qk_norm=True)),
    "qk-norm-head-layernorm-learned": dict(attention=std(qk_norm="head")),
    "qk-norm-head-no-weight": dict(**LLAMA, norm_affine="none", attention=std(qk_norm="head")),
    "qk-norm-full": dict(**LLAMA, attention=std(qk_norm="full")),
    "qk-norm-full-layernorm": dict(attention=std(qk_norm="full")),
    "qk-norm-l2": dict(**LLAMA, n_kv_heads=1, attention=std(qk_norm="l2")),
    "qk-norm-l2-nope": dict(norm="rmsnorm", attention=std(qk_norm="l2")),
    "sandwich": dict(norm_position="sandwich"),
    "post-sublayer-rmsnorm": dict(**LLAMA, norm_position="post_sublayer"),
    "parallel-shared-norm": dict(block={"kind": "parallel"}),
    "parallel-two-norms-rmsnorm": dict(**LLAMA, block={"kind": "parallel", "shared_norm": False}),
    "moe-softmax": dict(**LLAMA, mlp=MOE),
    "moe-sigmoid-correction-shared-gate": dict(**LLAMA, mlp={**MOE, "scoring": "sigmoid", "correction_bias": True,
                                                             "routed_scale": 2.5, "d_shared": 12, "shared_gate": True}),
    # Llama 4's routing: the weights scale each expert's input (the product keeps the rows, not the outputs)
    "moe-weight-input": dict(**LLAMA, mlp={**MOE, "scoring": "sigmoid", "normalize": False, "weight_input": True,
                                           "d_shared": 8}),
    "moe-unnormalized-relu2": dict(activation="relu2", mlp={**MOE, "normalize": False, "top_k": 1, "d_shared": 12}),
    "relu2": dict(activation="relu2"),
    "clamped-swiglu": dict(activation="clamped_swiglu", swiglu_limit=7.0),
    "residual-and-embedding-multipliers": dict(residual_scale=0.5, embedding_scale=2.0),
    "layernorm-weight-only": dict(norm_affine="weight"),
    "layernorm-no-affine": dict(norm_affine="none"),
    "rmsnorm-no-weight": dict(**LLAMA, norm_affine="none"),
    # DeepSeek's latent attention: explicit products (d_head != d_value) or the fused kernel
    "latent-q-rank": dict(**LLAMA, d_head=12, d_value=8, attention=LATENT),
    "latent-no-q-rank": dict(**LLAMA, d_head=12, d_value=8, attention={**LATENT, "q_rank": None}),
    "latent-fused": dict(**LLAMA, d_head=12, d_value=12, attention=LATENT),
    "latent-layernorm-fused": dict(position="rotary", d_head=12, d_value=12, attention={**LATENT, "q_rank": None}),
    # BERT's masked-LM head (dense, GELU, LayerNorm, the tied table); ALBERT's over a factorised table
    "mlm-head": dict(**BERT),
    "mlm-head-factorised-relu": dict(**BERT, activation="relu", embedding={"d_embed": 16}),
    # ELECTRA's discriminator (one logit per token, a binary cross-entropy) and ModernBERT's head without two biases
    "discriminator-head-factorised": dict(**{**BERT, "head": "discriminator"}, tie_embeddings=False,
                                          embedding={"d_embed": 16}),
    "discriminator-head-relu": dict(**{**BERT, "head": "discriminator"}, tie_embeddings=False, activation="relu"),
    # DeBERTa's disentangled attention: a bucketed table with its LayerNorm projected by the layers' own q and k
    # (both terms); an unbucketed clipped table, pos_key of each layer, c2p alone; no norm, p2c alone, shared
    "deberta-disentangled-shared": dict(**BERT, position={"kind": "disentangled", "buckets": 8, "max_distance": 24},
                                        attention=std(scale=(8 * 3) ** -0.5)),
    "deberta-disentangled-own-c2p": dict(**BERT, position={"kind": "disentangled", "buckets": 0, "max_distance": 6,
                                                           "share_key": False, "p2c": False}),
    "deberta-disentangled-p2c-no-norm": dict(**BERT, position={"kind": "disentangled", "buckets": 4,
                                                               "max_distance": 24, "c2p": False, "norm": False}),
    "mlm-head-no-dense-or-vocabulary-bias": dict(**{**BERT, "head": {"kind": "mlm", "dense_bias": False,
                                                                      "bias": False}}),
    # the recurrent mixers (the toy widths of tests/test_mixers.py), their scans checkpointed in training
    "mamba2-groups": dict(**LLAMA, attention={"kind": "mamba2", "heads": 4, "head_dim": 8, "d_state": 4, "groups": 2,
                                              "d_conv": 4}),
    "mamba2-one-group-bias": dict(**LLAMA, attention={"kind": "mamba2", "heads": 4, "head_dim": 6, "d_state": 4,
                                                      "groups": 1, "d_conv": 3, "conv_bias": False, "bias": True,
                                                      "dt_min": 0.7}),
    "gated-deltanet-fused": dict(**LLAMA, attention={"kind": "gated_deltanet", "key_heads": 2, "value_heads": 4,
                                                     "d_key": 4, "d_value_head": 6, "d_conv": 4}),
    "gated-deltanet-fused-one-value-head-per-key": dict(**LLAMA, attention={
        "kind": "gated_deltanet", "key_heads": 2, "value_heads": 2, "d_key": 4, "d_value_head": 6, "d_conv": 3}),
    "gated-deltanet-split": dict(**LLAMA, attention={"kind": "gated_deltanet", "key_heads": 1, "value_heads": 3,
                                                     "d_key": 8, "d_value_head": 4, "d_conv": 2,
                                                     "projections": "split"}),
    "mamba-bias": dict(**LLAMA, attention={"kind": "mamba", "d_inner": 64, "d_state": 4, "d_conv": 4, "dt_rank": 3,
                                           "conv_bias": True, "bias": True}),
    "mamba-dt-norms": dict(**LLAMA, attention={"kind": "mamba", "d_inner": 32, "d_state": 4, "d_conv": 4,
                                               "dt_rank": 3, "conv_bias": False, "dt_norms": True}),
    # Falcon-H1's layer: attention and a Mamba-2 mixer side by side on one norm, each norm mode of the mixer
    "attention-beside-mamba2": dict(**LLAMA, n_kv_heads=2, attention=std(ssm={
        "kind": "mamba2", "heads": 4, "head_dim": 6, "d_state": 4, "groups": 2, "d_conv": 3})),
    "attention-beside-mamba2-norm-before-gate-out-bias": dict(**LLAMA, attention=std(ssm={
        "kind": "mamba2", "heads": 4, "head_dim": 8, "d_state": 4, "groups": 2, "norm": "before_gate",
        "out_bias": True})),
    "attention-beside-mamba2-no-norm-learned-positions": dict(norm="rmsnorm", activation="swiglu", attention=std(ssm={
        "kind": "mamba2", "heads": 2, "head_dim": 8, "d_state": 4, "norm": "none", "bias": True})),
    "no-mlp": dict(mlp="none"),
    "no-mixer": dict(attention="none"),
}  # fmt: skip

MIXED = {
    # Gemma-4-like: windowed local layers; a global kind of wider heads, one key/value head whose keys serve as
    # values, proportional rotary on a quarter of each head; per-head QK- and value norms, scale 1, sandwich norms
    "gemma4-local-global": dict(**LLAMA, decoder_layers=3, n_kv_heads=2, norm_position="sandwich",
                                attention=std(qk_norm="head", value_norm=True, scale=1.0),
                                kinds={"local": {"attention": std(sliding_window=3)},
                                       "global": {"attention": std(shared_kv=True), "d_head": 16, "n_kv_heads": 1,
                                                  "position": {"kind": "rotary", "base": 1e6, "fraction": 0.25,
                                                               "proportional": True}}},
                                layers={"pattern": ["local", "local", "global"]}),
    # Gemma-3-like: windowed local layers and a global one with another rotary base and width
    "local-global": dict(**LLAMA, decoder_layers=4, n_kv_heads=2,
                         kinds={"local": {"attention": std(sliding_window=3)},
                                "global": {"position": {"kind": "rotary", "base": 1e6}, "d_head": 12}},
                         layers={"pattern": ["local", "local", "global"]}),
    # gpt-oss-like: sinks on windowed layers beside full ones, MoE everywhere, clamped SwiGLU
    "sinks-windows-moe": dict(**{**LLAMA, "activation": "clamped_swiglu"}, decoder_layers=3, swiglu_limit=7.0,
                              mlp={**MOE, "scoring": "sigmoid", "correction_bias": True},
                              kinds={"sink": {"attention": std(sinks=True, sliding_window=4)}, "full": {}},
                              layers={"pattern": ["sink", "full"]}),
    # Llama-4-like: chunked and NoPE layers, MoE every other layer, a gate and keys as values elsewhere
    "chunk-nope-moe-gate": dict(**LLAMA, decoder_layers=4,
                                kinds={"chunked": {"attention": std(chunk=4), "mlp": MOE},
                                       "nope": {"position": "none", "n_kv_heads": 2},
                                       "gated": {"attention": std(gate=True, shared_kv=True), "d_ff": 20,
                                                 "mlp": "dense"}},
                                layers={"prefix": ["gated"], "pattern": ["chunked", "nope"]}),
    # OLMo-2 / Llama-4-like: post-sublayer norms, QK-norm over all heads, L2 QK-norm on NoPE layers
    "qk-modes-post-sublayer": dict(**LLAMA, decoder_layers=3, norm_position="post_sublayer",
                                   attention=std(qk_norm="full"),
                                   kinds={"l2": {"attention": std(qk_norm="l2"), "position": "none"},
                                          "full": {}}, layers={"pattern": ["full", "l2"]}),
    # Nemotron-H-like blocks of one sub-layer: attention alone, MLP alone, MoE alone
    "single-sublayer-blocks": dict(**{**LLAMA, "activation": "relu2"}, decoder_layers=4,
                                   kinds={"att": {"mlp": "none"}, "ffn": {"attention": "none"},
                                          "moe": {"attention": "none", "mlp": MOE}},
                                   layers={"pattern": ["att", "ffn", "att", "moe"]}),
    # a hybrid of the three recurrent mixers and attention, MoE on the attention layer
    "recurrent-hybrid": dict(**LLAMA, decoder_layers=4,
                             kinds={"m2": {"attention": {"kind": "mamba2", "heads": 4, "head_dim": 8, "d_state": 4,
                                                         "groups": 2}},
                                    "gdn": {"attention": {"kind": "gated_deltanet", "key_heads": 2, "value_heads": 4,
                                                          "d_key": 4, "d_value_head": 6}},
                                    "m1": {"attention": {"kind": "mamba", "d_inner": 64, "dt_rank": 4, "d_state": 4,
                                                         "dt_norms": True}},
                                    "att": {"mlp": MOE}},
                             layers={"pattern": ["m2", "gdn", "m1", "att"]}),
    # ModernBERT-like encoder: no norm before the first layer's attention, local layers with a bidirectional
    # window and their own rotary base, GeGLU, weight-only LayerNorms, the masked-LM head with only its vocabulary bias
    "modernbert-encoder": dict(encoder_layers=4, decoder_layers=0, position="rotary", activation="geglu", bias=False,
                               norm_affine="weight", embedding_norm=True,
                               head={"kind": "mlm", "dense_bias": False, "norm_bias": False},
                               kinds={"first": {"attention_norm": False},
                                      "local": {"attention": std(sliding_window=3), "position": {"base": 100.0}},
                                      "global": {}},
                               layers={"prefix": ["first"], "pattern": ["local", "global"]}),
}  # fmt: skip

SPECS = {name: ModelSpec(name=name, **{**BASE, **changes}) for name, changes in {**FEATURES, **MIXED}.items()}


@pytest.fixture(scope="module")
def models():
    cache = {}

    def get(name, dtype):
        if (name, dtype) not in cache:
            cache[name, dtype] = build(SPECS[name], dtype=dtype)
        return cache[name, dtype]

    return get


def planned_and_measured(spec, model, dtype, attention, recompute, B=2, T=9):
    measured = measure_activations(spec, B, T, dtype, attention, recompute, model=model)
    planned = estimate_memory(spec, B, T, dtype, recompute=recompute, attention=attention)
    return planned.activations_bytes, measured.total_bytes


# the fast set: every feature in mixed precision with the fused kernel, the first in every mode; of the
# recurrent mixers (a second or so each) the hybrid of all three with attention, each kind and variant in CI
RECURRENT_VARIANTS = ("mamba2-groups", "mamba2-one-group-bias", "gated-deltanet-fused",
                      "gated-deltanet-fused-one-value-head-per-key", "gated-deltanet-split", "mamba-bias",
                      "mamba-dt-norms", "attention-beside-mamba2", "attention-beside-mamba2-norm-before-gate-out-bias",
                      "attention-beside-mamba2-no-norm-learned-positions")  # fmt: skip


@pytest.mark.parametrize(
    "name, dtype, attention, recompute",
    fast_corner(
        SPECS, ["fp32", "bf16"], ATTENTION, RECOMPUTE, corner=("bf16", "flash", "none"), slow=RECURRENT_VARIANTS
    ),
)
def test_activations_of_every_feature_equal_the_saved_tensors(models, name, dtype, attention, recompute):
    planned, measured = planned_and_measured(SPECS[name], models(name, dtype), dtype, attention, recompute)
    assert planned == measured


@pytest.mark.parametrize("layers", [3, 4])
def test_deeper_stacks_add_exactly_one_layer_of_each_kind(layers):
    """Depth changes the count of each kind, and the plan follows the measurement layer by layer."""
    spec = SPECS["chunk-nope-moe-gate"].replace(decoder_layers=layers)
    planned, measured = planned_and_measured(spec, build(spec), "fp32", "flash", "none", T=11)
    assert planned == measured


def test_sinks_run_explicit_products_beside_fused_layers(models):
    """In a stack mixing sink layers and plain ones, 'flash' keeps a score matrix for the sink
    layers only: the plan is per layer, not one mode for the model."""
    spec = SPECS["sinks-windows-moe"]
    B, T = 2, 9
    report = measure_activations(spec, B, T, "fp32", "flash", model=models("sinks-windows-moe", "fp32"))
    probabilities = [s for s in report.storages if s.shape == (B, spec.n_heads, T, T + 1)]
    assert len(probabilities) == 2  # layers 0 and 2 have sinks; layer 1 runs the fused kernel
    planned, measured = planned_and_measured(spec, models("sinks-windows-moe", "fp32"), "fp32", "flash", "none")
    assert planned == measured


def test_moe_with_skewed_routing_is_still_exact():
    """A router biased towards one expert sends it most rows: the per-expert counts change, their
    sum (N·k) does not, nor does the total kept."""
    spec = SPECS["moe-softmax"]
    model = build(spec)
    with torch.no_grad():
        for layer in model.decoder.layers:
            layer.mlp.router.weight.zero_()
            layer.mlp.router.weight[0] += 1.0  # expert 0 scores higher for most tokens
    planned, measured = planned_and_measured(spec, model, "fp32", "flash", "none")
    assert planned == measured
    counts = measure_activations(spec, 2, 9, model=model).by_component["experts"]
    assert counts > 0
