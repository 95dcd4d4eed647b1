"""IBM Granite 3: Llama's blocks with muP multipliers; the MoE variants (granitemoe) and their shared expert
(granitemoeshared); Granite 4.0's hybrids (granitemoehybrid): Mamba-2 or attention layers by `layer_types`.

transformers' Granite modelling code applies the four multipliers at these places: the token embeddings
times `embedding_multiplier` (GraniteModel), every sub-layer's output times `residual_multiplier` before its
residual add (GraniteDecoderLayer), the attention scores scaled by `attention_multiplier` instead of
1/sqrt(head_dim) (GraniteAttention.scaling), and the logits divided by `logits_scaling` (GraniteForCausalLM),
which is the head's input scaled by 1/logits_scaling. None of them changes a shape.

Granite 4.0 (GraniteMoeHybridDecoderLayer): every layer is a mixer sub-layer (a Mamba-2 mixer, Bamba's, on
layer_types "mamba" / "linear_attention"; attention on "attention" / "full_attention", rotary only when
position_embedding_type is "rope") and an MLP sub-layer: with num_local_experts > 0 the experts and the shared
MLP (shared_intermediate_size) summed, without a gate; with none, the shared MLP alone, a dense MLP of
shared_intermediate_size. The Mamba-2 mixer's dt is clamped to time_step_limit.
"""

from __future__ import annotations

import math
from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    biases,
    combine,
    gated_mlp,
    kv_heads,
    layered,
    mamba2_of_prefixed_keys,
    must_be,
    rope,
    time_step_limit_ok,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _multipliers(cfg: Config, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "position": rope(cfg),
        "mixer": {"kind": "standard", "scale": float(cfg["attention_multiplier"])},
    }
    if cfg["embedding_multiplier"] != 1:
        out["embedding_scale"] = float(cfg["embedding_multiplier"])
    if cfg["residual_multiplier"] != 1:
        out["residual_scale"] = float(cfg["residual_multiplier"])
    if cfg["logits_scaling"] != 1:
        out["head"] = {"kind": "lm", "scale": 1.0 / cfg["logits_scaling"]}
    return out


def _granite(cfg: Config, where: str) -> dict[str, Any]:
    return {**_multipliers(cfg, where), "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"])}


def _granitemoe(cfg: Config, where: str) -> dict[str, Any]:
    """GraniteMoeMoE: a router without bias (block_sparse_moe.router), top-k softmax weights, experts of
    intermediate_size; granitemoeshared adds one gated MLP of shared_intermediate_size (shared_mlp)."""
    moe: dict[str, Any] = {
        "kind": "moe",
        "experts": cfg["num_local_experts"],
        "top_k": cfg["num_experts_per_tok"],
        "d_expert": cfg["intermediate_size"],
    }
    if cfg.get("shared_intermediate_size"):
        moe["d_shared"] = cfg["shared_intermediate_size"]
    return {
        **_multipliers(cfg, where),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "mlp": moe,
    }


_HYBRID_TYPES = {"mamba": "mamba", "linear_attention": "mamba", "attention": "attention", "full_attention": "attention"}


def _hybrid_types_ok(cfg: Config) -> bool:
    types = cfg.get("layer_types")
    return types is None or (isinstance(types, list) and len(types) == cfg["num_hidden_layers"]
                             and all(t in _HYBRID_TYPES for t in types))  # fmt: skip


def _experts_ok(cfg: Config) -> bool:
    n = cfg["num_local_experts"]
    return isinstance(n, int) and n >= 0 and (n == 0 or cfg["num_experts_per_tok"] >= 1)


def _mamba_head_dim(cfg: Config) -> int:
    head = cfg["mamba_d_head"]
    return cfg["mamba_expand"] * cfg["hidden_size"] // cfg["mamba_n_heads"] if head == "auto" else head


def _granitemoehybrid(cfg: Config, where: str) -> dict[str, Any]:
    """Granite 4.0: per-layer Mamba-2 or attention kinds; experts beside the shared MLP, or the shared MLP alone."""
    out = _multipliers(cfg, where)
    if cfg.get("position_embedding_type") != "rope":
        out["position"] = "none"
    out["d_head"] = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    out["bias"] = biases(cfg["attention_bias"], cfg["attention_bias"], False)
    if cfg["num_local_experts"] > 0:
        out["mlp"] = {"kind": "moe", "experts": cfg["num_local_experts"], "top_k": cfg["num_experts_per_tok"],
                      "d_expert": cfg["intermediate_size"], "d_shared": cfg["shared_intermediate_size"]}  # fmt: skip
    else:
        out["d_ff"] = cfg["shared_intermediate_size"]
    mamba = mamba2_of_prefixed_keys(cfg, _mamba_head_dim(cfg))
    types = cfg.get("layer_types") or ["linear_attention"] * cfg["num_hidden_layers"]
    per_layer = [_HYBRID_TYPES[t] for t in types]
    kinds = {"mamba": {"mixer": mamba}, "attention": {}}
    return layered(per_layer, {k: v for k, v in kinds.items() if k in per_layer}, out)


_GRANITE_DEFAULTS = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False, "embedding_multiplier": 1.0,
    "logits_scaling": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0,
}  # fmt: skip
_MOE_DEFAULTS = {**_GRANITE_DEFAULTS, "num_local_experts": 8, "num_experts_per_tok": 2}

# fmt: off
FAMILIES = [
    Family(
        "granite",
        "Granite",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_GRANITE_DEFAULTS, "mlp_bias": False},
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), kv_heads, _granite),
    ),
    Family(
        "granitemoe",
        "GraniteMoe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        _MOE_DEFAULTS,
        fixed=_LLAMA_FIXED,
        aliases={"num_experts": "num_local_experts"},
        derive=combine(gated_mlp(), kv_heads, _granitemoe),
    ),
    Family(
        "granitemoeshared",
        "GraniteMoeShared",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_MOE_DEFAULTS, "shared_intermediate_size": 0},
        fixed=_LLAMA_FIXED,
        aliases={"num_experts": "num_local_experts"},
        derive=combine(gated_mlp(), kv_heads, _granitemoe),
    ),
    Family(
        "granitemoehybrid",
        "GraniteMoeHybrid",
        ("ForCausalLM", "Model"),
        {k: v for k, v in _LLAMA_FIELDS.items() if k != "d_ff"},
        {**_MOE_DEFAULTS, "shared_intermediate_size": 1024, "position_embedding_type": None, "layer_types": None,
         "mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_head": "auto", "mamba_d_conv": 4,
         "mamba_expand": 2, "mamba_conv_bias": True, "mamba_proj_bias": False, "time_step_limit": (0.0, math.inf)},
        fixed=_LLAMA_FIXED,
        aliases={"num_experts": "num_local_experts", "layers_block_type": "layer_types"},
        refuse=(
            Refusal("layer_types", _hybrid_types_ok, "a list of mamba / attention (or linear_attention / "
                    "full_attention), one per layer"),
            Refusal("position_embedding_type", lambda c: c.get("position_embedding_type") in (None, "nope", "rope"),
                    "rope, nope or null"),
            must_be("hidden_act", "silu", "the Mamba-2 mixer's activation is hidden_act, and the spec's is silu"),
            Refusal("num_local_experts", _experts_ok,
                    "a number of experts >= 0, with num_experts_per_tok >= 1 when there are experts"),
            Refusal("time_step_limit", time_step_limit_ok, "a pair (min, max) of dt with 0 <= min <= max"),
        ),
        derive=combine(gated_mlp(), kv_heads, _granitemoehybrid),
    ),
]
# fmt: on
