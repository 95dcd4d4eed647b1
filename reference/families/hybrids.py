"""The hybrids' checkpoints: recurrent mixers among attention layers, Qwen3-Next, Nemotron-H and Jamba (their
adapters: archspec.hf.qwen_hybrids and archspec.hf.hybrids)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archspec.reference.families.engine import (
    DEC,
    HYBRID_BASE,
    Checkpoint,
    d_value_is_d_head,
    default_scale,
    dense_kind,
    embedding_is_d_model,
    heads_span_d_model,
    layer_specs,
    mixer,
    moe,
    one_attention_bias,
)
from archspec.reference.families.llama import LLAMA_CONFIG, LLAMA_MLP
from archspec.sources.weightmap import WeightMap, each, row
from archspec.spec.model import ModelSpec, StandardAttention


def qwen3_next_layers(s: ModelSpec) -> str | None:
    """Qwen3-Next: Gated DeltaNet (fused projections) or gated attention with per-head QK-norm; dense or
    MoE MLPs with a gated shared expert, all experts alike."""
    for i, k in enumerate(layer_specs(s)):
        a, m = k.mixer, k.mlp
        if a.kind == "gated_deltanet" and a.projections != "fused":
            return f"layer {i}: mixer.projections={a.projections!r} (needs 'fused')"
        if a.kind == "standard" and (a.qk_norm not in (True, "head") or not a.gate or a.scale is not None or
                                     a.sliding_window or a.chunk or a.sinks or a.shared_kv or a.softcap):  # fmt: skip
            return f"layer {i}: attention (needs gate=true, qk_norm='head', nothing else)"
        if a.kind not in ("standard", "gated_deltanet"):
            return f"layer {i}: mixer.kind={a.kind!r} (needs 'standard' or 'gated_deltanet')"
        if m.kind == "moe" and (m != moe(s) or not m.shared_gate or not m.d_shared or m.router_bias or
                                m.scoring != "softmax" or m.correction_bias or m.routed_scale != 1):  # fmt: skip
            return f"layer {i}: mlp (needs one softmax MoE with a gated shared expert)"
        if m.kind == "dense" and k.d_ff != dense_kind(s).d_ff:
            return f"layer {i}: d_ff={k.d_ff} (one intermediate_size for dense layers)"
        if m.kind == "none" or k.d_head != s.d_head or k.n_heads != s.n_heads or k.n_kv_heads != s.n_kv_heads:
            return f"layer {i}: mlp or heads differ from the model's"
    return None


def nemotron_h_layers(s: ModelSpec) -> str | None:
    """Nemotron-H: each layer one sub-layer: a Mamba-2 mixer, attention (no positions), or a dense MLP."""
    for i, k in enumerate(layer_specs(s)):
        a, m = k.mixer, k.mlp
        one = (a.kind in ("mamba2", "standard")) != (m.kind == "dense")
        if not one or a.kind not in ("mamba2", "standard", "none") or m.kind not in ("dense", "none"):
            return f"layer {i}: mixer={a.kind!r}, mlp={m.kind!r} (needs one of a Mamba-2 mixer, attention, MLP)"
        if a.kind == "mamba2" and (a != mixer(s, "mamba2") or a.dt_max is not None):
            return f"layer {i}: one Mamba-2 mixer without dt_max for every such layer"
        if a.kind == "standard" and a != StandardAttention.model_construct():
            return f"layer {i}: attention (needs plain attention)"
        if m.kind == "dense" and k.d_ff != dense_kind(s).d_ff:
            return f"layer {i}: d_ff={k.d_ff} (one intermediate_size)"
    return None


def _qwen3_next_types(s: ModelSpec) -> list[str]:
    return ["linear_attention" if k.mixer.kind == "gated_deltanet" else "full_attention" for k in layer_specs(s)]


def _nemotron_h_types(s: ModelSpec) -> list[str]:
    names = {"mamba2": "linear_attention", "standard": "full_attention"}
    return [names.get(k.mixer.kind, "mlp") for k in layer_specs(s)]


def _deltanet(s: ModelSpec, name: str, default: int = 1):
    a = mixer(s, "gated_deltanet")
    return getattr(a, name) if a is not None else default


def _mamba2(s: ModelSpec, name: str, default=1):
    a = mixer(s, "mamba2")
    return getattr(a, name) if a is not None else default


QWEN3_NEXT_CONFIG: dict[str, Callable[[ModelSpec], Any] | None] = {
    **LLAMA_CONFIG,
    "rope_theta": None,
    "attention_bias": lambda s: s.biases.qkv,
    "rope_parameters": lambda s: {"rope_type": "default", "rope_theta": s.position.base,
                                  "partial_rotary_factor": s.position.fraction},
    "layer_types": _qwen3_next_types,
    "linear_num_key_heads": lambda s: _deltanet(s, "key_heads"),
    "linear_num_value_heads": lambda s: _deltanet(s, "value_heads"),
    "linear_key_head_dim": lambda s: _deltanet(s, "d_key"),
    "linear_value_head_dim": lambda s: _deltanet(s, "d_value_head"),
    "linear_conv_kernel_dim": lambda s: _deltanet(s, "d_conv", 4),
    "intermediate_size": lambda s: (dense_kind(s) or s).d_ff,
    "num_experts": lambda s: moe(s).experts if moe(s) else 0,
    "num_experts_per_tok": lambda s: moe(s).top_k if moe(s) else 1,
    "moe_intermediate_size": lambda s: moe(s).d_expert if moe(s) else 1,
    "shared_expert_intermediate_size": lambda s: moe(s).d_shared if moe(s) else 1,
    "norm_topk_prob": lambda s: moe(s).normalize if moe(s) else True,
    "mlp_only_layers": lambda s: [i for i, k in enumerate(layer_specs(s)) if k.mlp.kind == "dense"],
    "decoder_sparse_step": lambda s: 1,
}  # fmt: skip

NEMOTRON_H_CONFIG: dict[str, Callable[[ModelSpec], Any] | None] = {
    "layers_block_type": _nemotron_h_types,
    "num_key_value_heads": lambda s: s.n_kv_heads,
    "head_dim": lambda s: s.d_head,
    "intermediate_size": lambda s: (dense_kind(s) or s).d_ff,
    "mlp_hidden_act": lambda s: s.activation,
    "mlp_bias": lambda s: s.biases.mlp,
    "mamba_num_heads": lambda s: _mamba2(s, "heads"),
    "mamba_head_dim": lambda s: _mamba2(s, "head_dim"),
    "ssm_state_size": lambda s: _mamba2(s, "d_state"),
    "n_groups": lambda s: _mamba2(s, "groups"),
    "conv_kernel": lambda s: _mamba2(s, "d_conv", 4),
    "use_conv_bias": lambda s: _mamba2(s, "conv_bias", True),
    "use_bias": lambda s: _mamba2(s, "bias", False),
    "time_step_min": lambda s: _mamba2(s, "dt_min", 0.0),
    "chunk_size": lambda s: 4,  # several chunks at toy lengths: the chunked scan's joins are exercised
    "tie_word_embeddings": lambda s: s.tie_embeddings,
    "attention_dropout": lambda s: 0.0,
}

# zero-centred RMSNorms (1 + w) around the layers; the Gated DeltaNet's own gated norm stores w
QWEN3_NEXT_WEIGHTS = WeightMap("Qwen3-Next", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight", "plus_one"),
    row("layers.{}.input_layernorm.weight", DEC + "mixer_norm.weight", "plus_one"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "q_gate"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight", "plus_one"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight", "plus_one"),
    row("layers.{}.linear_attn.{w}", DEC + "mixer.{w}"),  # dt_bias, A_log
    *(row(f"layers.{{}}.linear_attn.{m}.{{w}}", DEC + f"mixer.{m}.{{w}}")
      for m in ("in_proj_qkvz", "in_proj_ba", "conv1d", "norm", "out_proj")),
    row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight", "plus_one"),
    *LLAMA_MLP,
    row("layers.{}.mlp.gate.weight", DEC + "mlp.router.weight"),
    row("layers.{}.mlp.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"),
        "split"),
    row("layers.{}.mlp.experts.down_proj", DEC + "mlp.experts.down.weight"),
    *(row(f"layers.{{}}.mlp.shared_expert.{x}_proj.weight", DEC + f"mlp.shared.{x}.weight")
      for x in ("gate", "up", "down")),
    row("layers.{}.mlp.shared_expert_gate.weight", DEC + "mlp.shared_gate.weight"),
    row("norm.weight", "decoder.final_norm.weight", "plus_one"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip

# every layer is `mixer` with one norm before it: a Mamba-2 mixer, attention or an MLP by its tensors
NEMOTRON_H_WEIGHTS = WeightMap("Nemotron-H", strip=("model.", "backbone."), rows=(
    row("embeddings.weight", "embed.weight"),
    *(row("layers.{}.norm.weight", DEC + f"{n}_norm.weight") for n in ("mixer", "attention", "mlp")),
    row("layers.{}.mixer.{w}", DEC + "mixer.{w}"),  # dt_bias, A_log, D
    *(row(f"layers.{{}}.mixer.{m}.{{w}}", DEC + f"mixer.{m}.{{w}}") for m in ("in_proj", "conv1d", "norm", "out_proj")),
    row(each("layers.{}.mixer.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.mixer.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.mixer.up_proj.{w}", DEC + "mlp.up.{w}"),
    row("layers.{}.mixer.down_proj.{w}", DEC + "mlp.down.{w}"),
    row("norm_f.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


def jamba_layers(s: ModelSpec) -> str | None:
    """Jamba: Mamba (with dt/B/C norms) or plain attention without positions; a dense MLP or one MoE of
    un-renormalised softmax top-k, experts as wide as the dense MLP."""
    for i, k in enumerate(layer_specs(s)):
        a, m = k.mixer, k.mlp
        if a.kind == "mamba" and (a != mixer(s, "mamba") or not a.dt_norms):
            return f"layer {i}: one Mamba mixer with dt_norms for every such layer"
        if a.kind == "standard" and a != StandardAttention.model_construct():
            return f"layer {i}: attention (needs plain attention)"
        if a.kind not in ("mamba", "standard"):
            return f"layer {i}: mixer.kind={a.kind!r} (needs 'mamba' or 'standard')"
        if m.kind == "none" or k.d_ff != s.d_ff:
            return f"layer {i}: mlp (needs a dense MLP or experts of d_ff={s.d_ff})"
        if m.kind == "moe" and (m != moe(s) or m.normalize or m.d_shared or m.router_bias or m.d_expert != s.d_ff
                                or m.scoring != "softmax" or m.correction_bias or m.routed_scale != 1):  # fmt: skip
            return f"layer {i}: mlp (needs one softmax MoE, not renormalised, experts of d_ff)"
    return None


def _period(s: ModelSpec, hit) -> tuple[int, int]:
    """(period, offset) with layer i a hit exactly when i % period == offset; (n + 1, n) when none is."""
    hits = [i for i, k in enumerate(layer_specs(s)) if hit(k)]
    n = s.decoder_layers
    if not hits:
        return n + 1, n
    period = hits[1] - hits[0] if len(hits) > 1 else n + 1
    return period, hits[0]


def jamba_periodic(s: ModelSpec) -> str | None:
    checks = (("attention", lambda k: k.mixer.kind == "standard"), ("experts", lambda k: k.mlp.kind == "moe"))
    for what, hit in checks:
        period, offset = _period(s, hit)
        if [hit(k) for k in layer_specs(s)] != [i % period == offset for i in range(s.decoder_layers)]:
            return f"layers: {what} must sit on the layers i % period == offset"
    return None


JAMBA_CONFIG: dict[str, Callable[[ModelSpec], Any] | None] = {
    **LLAMA_CONFIG,
    "rope_theta": None,
    "head_dim": None,
    "num_experts": lambda s: moe(s).experts if moe(s) else 1,
    "num_experts_per_tok": lambda s: moe(s).top_k if moe(s) else 1,
    "attn_layer_period": lambda s: _period(s, lambda k: k.mixer.kind == "standard")[0],
    "attn_layer_offset": lambda s: _period(s, lambda k: k.mixer.kind == "standard")[1],
    "expert_layer_period": lambda s: _period(s, lambda k: k.mlp.kind == "moe")[0],
    "expert_layer_offset": lambda s: _period(s, lambda k: k.mlp.kind == "moe")[1],
    "mamba_d_state": lambda s: mixer(s, "mamba").d_state,
    "mamba_d_conv": lambda s: mixer(s, "mamba").d_conv,
    "mamba_expand": lambda s: mixer(s, "mamba").d_inner // s.d_model,
    "mamba_dt_rank": lambda s: mixer(s, "mamba").dt_rank,
    "mamba_conv_bias": lambda s: mixer(s, "mamba").conv_bias,
    "mamba_proj_bias": lambda s: mixer(s, "mamba").bias,
    "use_mamba_kernels": lambda s: False,
}


def jamba_expand(s: ModelSpec) -> str | None:
    a = mixer(s, "mamba")
    ok = a is not None and a.d_inner % s.d_model == 0
    return None if ok else "mixer.d_inner (needs a Mamba mixer, d_inner a multiple of d_model: mamba_expand)"


JAMBA_WEIGHTS = WeightMap("Jamba", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
    row("layers.{}.input_layernorm.weight", DEC + "mixer_norm.weight"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.mamba.{w}", DEC + "mixer.{w}"),  # A_log, D
    *(row(f"layers.{{}}.mamba.{m}.{{w}}", DEC + f"mixer.{m}.{{w}}") for m in (
        "in_proj", "conv1d", "x_proj", "dt_proj", "out_proj", "dt_layernorm", "b_layernorm", "c_layernorm")),
    row("layers.{}.pre_ff_layernorm.weight", DEC + "mlp_norm.weight"),
    *(row(f"layers.{{}}.feed_forward.{x}_proj.{{w}}", DEC + f"mlp.{x}.{{w}}") for x in ("gate", "up", "down")),
    row("layers.{}.feed_forward.router.weight", DEC + "mlp.router.weight"),
    row("layers.{}.feed_forward.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight",
                                                        DEC + "mlp.experts.up.weight"), "split"),
    row("layers.{}.feed_forward.experts.down_proj", DEC + "mlp.experts.down.weight"),
    row("final_layernorm.weight", "decoder.final_norm.weight"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


# fmt: off
CHECKPOINTS = [
    Checkpoint(
        "Qwen3-Next", "qwen3_next",
        {**HYBRID_BASE, "position.kind": ("rotary",), "position.interleaved": (False,), "activation": ("swiglu",),
         "bias.mlp": (False,)},
        (qwen3_next_layers, one_attention_bias, d_value_is_d_head, embedding_is_d_model),
        QWEN3_NEXT_CONFIG,
        (QWEN3_NEXT_WEIGHTS,),
    ),
    Checkpoint(
        "Nemotron-H", "nemotron_h",
        {**HYBRID_BASE, "activation": ("relu2", "relu", "silu", "gelu"), "bias.qkv": (False,), "bias.out": (False,)},
        (nemotron_h_layers, d_value_is_d_head, embedding_is_d_model),
        NEMOTRON_H_CONFIG,
        (NEMOTRON_H_WEIGHTS,),
    ),
    Checkpoint(
        "Jamba", "jamba",
        {**HYBRID_BASE, "activation": ("swiglu",)},
        (jamba_layers, jamba_periodic, jamba_expand, heads_span_d_model, d_value_is_d_head, default_scale,
         embedding_is_d_model),
        JAMBA_CONFIG,
        (JAMBA_WEIGHTS,),
    ),
]
# fmt: on
