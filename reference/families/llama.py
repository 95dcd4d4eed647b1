"""The Llama lineage's checkpoints: LLaMA, Mixtral, Qwen2, OLMo 2, Llama 4 and gpt-oss (their adapters:
archspec.hf.llama, qwen, olmo, openai)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archspec.reference.families.engine import (
    ACT,
    DEC,
    LLAMA_LIKE,
    Checkpoint,
    d_value_is_d_head,
    default_scale,
    dense_kind,
    embedding_is_d_model,
    layer_specs,
    layer_types,
    layer_windows,
    moe,
    one_attention_bias,
    one_window,
    window,
)
from archspec.sources.weightmap import WeightMap, each, row
from archspec.spec.model import ModelSpec, StandardAttention

NO_BIASES = {"bias.qkv": (False,), "bias.out": (False,), "bias.mlp": (False,)}


def window_on_every_layer(s: ModelSpec) -> str | None:
    att = s.mixer
    ok = att.kind != "standard" or not att.sliding_window or att.sliding_layers == "all"
    if not ok:
        return f"mixer.sliding_layers={att.sliding_layers!r} (needs 'all': one window for every layer)"
    windows = set(layer_windows(s))
    return None if len(windows) <= 1 else f"layers: windows {sorted(windows, key=str)} (one window for every layer)"


def llama4_layers(s: ModelSpec) -> str | None:
    """Llama 4: rotary layers (with the L2 QK-norm where any has it) and NoPE layers (without), chunked or
    full attention, one chunk; a dense MLP of one width or one MoE: sigmoid scores scaling the experts'
    inputs, not renormalised, a shared expert as wide as an expert."""
    layers = layer_specs(s)
    if any(k.mixer.kind != "standard" for k in layers):
        return "mixer.kind (needs standard attention on every layer)"
    l2 = any(k.mixer.qk_norm == "l2" for k in layers)
    chunks = {k.mixer.chunk for k in layers} - {None}
    if len(chunks) > 1:
        return f"mixer.chunk: {sorted(chunks)} (one attention_chunk_size)"
    for i, k in enumerate(layers):
        a, m, rotary = k.mixer, k.mlp, k.position.kind == "rotary"
        bare = a.model_copy(update={"chunk": None, "qk_norm": False})
        plain = bare == StandardAttention.model_construct()
        if not plain or a.qk_norm not in (False, "l2") or (a.qk_norm == "l2") != (l2 and rotary):
            return f"layer {i}: attention (needs plain attention, the L2 QK-norm on every rotary layer or none)"
        if k.position.kind not in ("rotary", "none") or (rotary and k.position != s.position):
            return f"layer {i}: position (needs the model's rotary or none)"
        if m.kind == "moe" and (m != moe(s) or m.normalize or not m.weight_input or m.scoring != "sigmoid"
                                or m.d_shared != m.d_expert or m.shared_gate or m.router_bias or m.correction_bias
                                or m.routed_scale != 1 or m.dense_layers):  # fmt: skip
            return f"layer {i}: mlp (needs one sigmoid MoE weighting the experts' inputs, a shared expert of d_expert)"
        if m.kind == "none" or (m.kind == "dense" and k.d_ff != (dense_kind(s) or s).d_ff):
            return f"layer {i}: mlp (needs experts or a dense MLP of one d_ff)"
        if (k.d_head, k.n_heads, k.n_kv_heads) != (s.d_head, s.n_heads, s.n_kv_heads):
            return f"layer {i}: heads differ from the model's"
    return None


# the keys of a Llama-like config beyond its adapter's fields (archspec.hf.llama's _LLAMA_FIELDS)
LLAMA_CONFIG: dict[str, Callable[[ModelSpec], Any] | None] = {
    "num_key_value_heads": lambda s: s.n_kv_heads,
    "head_dim": lambda s: s.d_head,
    "rope_theta": lambda s: s.position.base,
    "hidden_act": lambda s: ACT[s.activation],
    "tie_word_embeddings": lambda s: s.tie_embeddings,
    "attention_dropout": lambda s: 0.0,
}

LLAMA_ATTENTION = (
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight"),
    row("norm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
)
LLAMA_MLP = (
    row("layers.{}.mlp.gate_proj.{w}", DEC + "mlp.gate.{w}"),
    row("layers.{}.mlp.up_proj.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.mlp.down_proj.{w}", DEC + "mlp.down.{w}"),
)
ROTARY_BUFFERS = (r"layers\.\d+\.self_attn\.rotary_emb\.inv_freq",)  # kept by older checkpoints
LLAMA_WEIGHTS = WeightMap("LLaMA", LLAMA_ATTENTION + LLAMA_MLP, strip=("model.",), ignore=ROTARY_BUFFERS)

MIXTRAL_WEIGHTS = (
    WeightMap("Mixtral", LLAMA_ATTENTION + (
        row("layers.{}.mlp.gate.weight", DEC + "mlp.router.weight"),
        # transformers 5 keeps the experts stacked, gate and up fused: (E, 2 * d_expert, d_model)
        row("layers.{}.mlp.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"),
            "split"),
        row("layers.{}.mlp.experts.down_proj", DEC + "mlp.experts.down.weight"),
    ), strip=("model.",)),
    # the published checkpoints: one w1 (gate), w3 (up), w2 (down) per expert
    WeightMap("Mixtral (per-expert checkpoint)", LLAMA_ATTENTION + (
        row("layers.{}.block_sparse_moe.gate.weight", DEC + "mlp.router.weight"),
        row("layers.{}.block_sparse_moe.experts.{e}.w1.weight", DEC + "mlp.experts.gate.weight", "stack"),
        row("layers.{}.block_sparse_moe.experts.{e}.w3.weight", DEC + "mlp.experts.up.weight", "stack"),
        row("layers.{}.block_sparse_moe.experts.{e}.w2.weight", DEC + "mlp.experts.down.weight", "stack"),
    ), strip=("model.",), ignore=ROTARY_BUFFERS),
)  # fmt: skip

# OLMo 2: no norm before a sub-layer; q_norm and k_norm over all heads at once, before the rotation
OLMO2_WEIGHTS = WeightMap("OLMo 2", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "attention_post_norm.weight"),
    *LLAMA_MLP,
    row("layers.{}.post_feedforward_layernorm.weight", DEC + "mlp_post_norm.weight"),
    row("norm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


# Llama 4: a dense MLP or experts on each layer (feed_forward); the experts stored as x @ w computes,
# gate_up_proj (E, d, 2·d_ff) as [gate | up] and down_proj (E, d_ff, d), beside a shared expert
LLAMA4_WEIGHTS = WeightMap("Llama 4", strip=("model.",), rows=(
    *LLAMA_ATTENTION,
    *(row(f"layers.{{}}.feed_forward.{x}_proj.weight", DEC + f"mlp.{x}.weight") for x in ("gate", "up", "down")),
    row("layers.{}.feed_forward.router.weight", DEC + "mlp.router.weight"),
    row("layers.{}.feed_forward.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight",
                                                        DEC + "mlp.experts.up.weight"), "split_io"),
    row("layers.{}.feed_forward.experts.down_proj", DEC + "mlp.experts.down.weight", "io"),
    *(row(f"layers.{{}}.feed_forward.shared_expert.{x}_proj.weight", DEC + f"mlp.shared.{x}.weight")
      for x in ("gate", "up", "down")),
))  # fmt: skip

# gpt-oss: attention with biases and one sink logit per head; every MLP a mixture of experts with biases,
# stored as x @ w computes: gate_up_proj (E, d, 2·d_ff) with gate and up interleaved, down_proj (E, d_ff, d)
GPT_OSS_WEIGHTS = WeightMap("gpt-oss", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.self_attn.sinks", DEC + "attention.sinks"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight"),
    row("layers.{}.mlp.router.{w}", DEC + "mlp.router.{w}"),
    row("layers.{}.mlp.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"),
        "interleaved"),
    row("layers.{}.mlp.experts.gate_up_proj_bias", (DEC + "mlp.experts.gate.bias", DEC + "mlp.experts.up.bias"),
        "interleaved"),
    row("layers.{}.mlp.experts.down_proj", DEC + "mlp.experts.down.weight", "io"),
    row("layers.{}.mlp.experts.down_proj_bias", DEC + "mlp.experts.down.bias"),
    row("norm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


# fmt: off
CHECKPOINTS = [
    Checkpoint(
        "LLaMA", "llama",
        LLAMA_LIKE,
        (one_attention_bias, d_value_is_d_head, default_scale, embedding_is_d_model),
        {**LLAMA_CONFIG, "attention_bias": lambda s: s.biases.qkv, "mlp_bias": lambda s: s.biases.mlp},
        (LLAMA_WEIGHTS,),
    ),
    Checkpoint(
        "Mixtral", "mixtral",
        {**LLAMA_LIKE, "mixer.sliding_window": None, "mlp.kind": ("moe",), "mlp.d_shared": (0,),
         "mlp.shared_gate": (False,), "mlp.router_bias": (False,), "mlp.normalize": (True,), "mlp.dense_layers": (0,)},
        (window_on_every_layer, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "intermediate_size": lambda s: s.mlp.d_expert,  # every layer is a mixture of experts
            "num_local_experts": lambda s: s.mlp.experts,
            "num_experts_per_tok": lambda s: s.mlp.top_k,
            "sliding_window": window,
            "router_jitter_noise": lambda s: 0.0,
        },
        MIXTRAL_WEIGHTS,
    ),
    Checkpoint(
        "Qwen2", "qwen2",
        {**LLAMA_LIKE, "mixer.sliding_window": None},
        (one_window, d_value_is_d_head, default_scale, embedding_is_d_model),
        {**LLAMA_CONFIG, "use_sliding_window": lambda s: window(s) is not None, "sliding_window": window,
         "layer_types": layer_types},
        (WeightMap("Qwen2", LLAMA_WEIGHTS.rows, strip=("model.",)),),
    ),
    Checkpoint(
        "OLMo 2", "olmo2",
        {**LLAMA_LIKE, "bias.mlp": (False,), "mixer.scale": None},  # default_scale says it
        (one_attention_bias, d_value_is_d_head, default_scale, embedding_is_d_model),
        {**LLAMA_CONFIG, "attention_bias": lambda s: s.biases.qkv},
        (OLMO2_WEIGHTS,),
    ),
    Checkpoint(
        "Llama 4", "llama4_text",
        {**LLAMA_LIKE, **NO_BIASES, "activation": ("swiglu",), "position.interleaved": (True,),
         "mixer.qk_norm": None, "mlp.kind": None},
        (llama4_layers, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "rope_theta": None,
            "rope_parameters": lambda s: {"rope_type": "default", "rope_theta": s.position.base},  # not llama3's
            "intermediate_size": lambda s: moe(s).d_expert if moe(s) else 1,
            "intermediate_size_mlp": lambda s: (dense_kind(s) or s).d_ff,
            "num_local_experts": lambda s: moe(s).experts if moe(s) else 1,
            "num_experts_per_tok": lambda s: moe(s).top_k if moe(s) else 1,
            "moe_layers": lambda s: [i for i, k in enumerate(layer_specs(s)) if k.mlp.kind == "moe"],
            "no_rope_layers": lambda s: [int(k.position.kind == "rotary") for k in layer_specs(s)],
            "use_qk_norm": lambda s: any(getattr(k.mixer, "qk_norm", False) == "l2" for k in layer_specs(s)),
            "attention_chunk_size": lambda s: next((k.mixer.chunk for k in layer_specs(s) if k.mixer.chunk),
                                                   None),
            "layer_types": lambda s: ["chunked_attention" if k.mixer.chunk else "full_attention"
                                      for k in layer_specs(s)],
            "attention_bias": lambda s: s.biases.qkv,
            "router_jitter_noise": lambda s: 0.0,
        },
        (LLAMA4_WEIGHTS,),
        input_weighting=True,
    ),
    Checkpoint(
        "gpt-oss", "gpt_oss",
        {**LLAMA_LIKE, "activation": ("clamped_swiglu",), "bias.mlp": (True,), "mixer.sinks": (True,),
         "mixer.sliding_window": None, "mlp.kind": ("moe",), "mlp.d_shared": (0,), "mlp.shared_gate": (False,),
         "mlp.router_bias": (True,), "mlp.normalize": (True,), "mlp.dense_layers": (0,), "mlp.scoring": ("softmax",),
         "mlp.correction_bias": (False,), "mlp.routed_scale": (1.0,)},
        (one_window, one_attention_bias, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            **LLAMA_CONFIG,
            "rope_theta": None,
            "rope_parameters": lambda s: {"rope_type": "default", "rope_theta": s.position.base},  # not its yarn
            "hidden_act": None,
            "intermediate_size": lambda s: s.mlp.d_expert,  # every layer is a mixture of experts
            "num_local_experts": lambda s: s.mlp.experts,
            "num_experts_per_tok": lambda s: s.mlp.top_k,
            "swiglu_limit": lambda s: s.swiglu_limit,
            "attention_bias": lambda s: s.biases.qkv,
            "sliding_window": window,
            "layer_types": layer_types,
        },
        (GPT_OSS_WEIGHTS,),
    ),
]
# fmt: on
