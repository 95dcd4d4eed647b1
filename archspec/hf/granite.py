"""IBM Granite 3: Llama's blocks with muP multipliers; the MoE variants (granitemoe) and their shared expert
(granitemoeshared).

transformers' Granite modelling code applies the four multipliers at these places: the token embeddings
times `embedding_multiplier` (GraniteModel), every sub-layer's output times `residual_multiplier` before its
residual add (GraniteDecoderLayer), the attention scores scaled by `attention_multiplier` instead of
1/sqrt(head_dim) (GraniteAttention.scaling), and the logits divided by `logits_scaling` (GraniteForCausalLM),
which is the head's input scaled by 1/logits_scaling. None of them changes a shape.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import Config, Family, biases, combine, gated_mlp, kv_heads, rope
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _multipliers(cfg: Config, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "position": rope(cfg),
        "attention": {"kind": "standard", "scale": float(cfg["attention_multiplier"])},
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


_GRANITE_DEFAULTS = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False, "embedding_multiplier": 1.0,
    "logits_scaling": 1.0, "residual_multiplier": 1.0, "attention_multiplier": 1.0,
}  # fmt: skip
_MOE_DEFAULTS = {**_GRANITE_DEFAULTS, "num_local_experts": 8, "num_experts_per_tok": 2}

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
]
