"""The GLM lineage (Zhipu AI / Z.ai): GLM-4 (glm), GLM-4-0414 (glm4) and GLM-4.5 (glm4_moe)."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    biases,
    combine,
    gated_mlp,
    head_dim,
    head_dim_or_quotient,
    kv_heads,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _glm(cfg: Config, where: str) -> dict[str, Any]:
    """GLM-4 and GLM-4-0414: biases on q, k and v only (o_proj has none), a fused gate_up_proj, and rotary
    positions on half of each head (`partial_rotary_factor`, 0.5 when absent: the config class's
    __post_init__), rotating interleaved pairs (GlmRotaryEmbedding's rotate_half takes x[0::2], x[1::2])."""
    return {
        "position": rope(cfg, default_fraction=0.5, interleaved=True),
        "bias": biases(cfg["attention_bias"], False, False),
    }


def _glm4_moe(cfg: Config, where: str) -> dict[str, Any]:
    """GLM-4.5: GQA with q/k/v biases and an optional per-head QK-norm, rotary on half of each head (two
    halves, as Llama), a sigmoid router over `n_routed_experts` with a shared expert of n_shared_experts x
    moe_intermediate_size, after `first_k_dense_replace` dense layers. The router's e_score_correction_bias
    is a buffer (nn.Buffer), not a parameter; group-limited routing (n_group, topk_group) picks experts
    only. The multi-token-prediction layers (num_nextn_predict_layers, num_mtp_layers) are not built by
    transformers: they are the spec's `mtp`, counted only when asked."""
    moe: dict[str, Any] = {
        "kind": "moe",
        "experts": cfg["n_routed_experts"],
        "top_k": cfg["num_experts_per_tok"],
        "d_expert": cfg["moe_intermediate_size"],
        "normalize": bool(cfg["norm_topk_prob"]),
        "scoring": "sigmoid",
    }
    if cfg["n_shared_experts"]:
        moe["d_shared"] = cfg["n_shared_experts"] * cfg["moe_intermediate_size"]
    if cfg["routed_scaling_factor"] != 1:
        moe["routed_scale"] = float(cfg["routed_scaling_factor"])
    if cfg["first_k_dense_replace"]:
        moe["dense_layers"] = cfg["first_k_dense_replace"]
    out: dict[str, Any] = {
        "position": rope(cfg, default_fraction=0.5),
        "bias": biases(cfg["attention_bias"], False, False),
        "mlp": moe,
    }
    if cfg["use_qk_norm"]:
        out["mixer"] = {"kind": "standard", "qk_norm": "head"}
    if cfg["num_mtp_layers"]:
        out["mtp"] = {"modules": cfg["num_mtp_layers"]}
    return out


_GLM_DEFAULTS = {
    "vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "hidden_act": "silu",
    "max_position_embeddings": 131072, "rms_norm_eps": 0.00000015625, "tie_word_embeddings": False,
    "attention_bias": True,
}  # fmt: skip


# fmt: off
FAMILIES = [
    Family(
        "glm",
        "Glm",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        _GLM_DEFAULTS,
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), head_dim, kv_heads, _glm),
    ),
    Family(
        "glm4",
        "Glm4",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        _GLM_DEFAULTS,
        # Glm4DecoderLayer: input_layernorm, post_self_attn_layernorm, post_attention_layernorm (before the MLP),
        # post_mlp_layernorm: a norm before and after each sub-layer
        fixed={**_LLAMA_FIXED, "norm_position": "sandwich"},
        derive=combine(gated_mlp(), head_dim, kv_heads, _glm),
    ),
    Family(
        "glm4_moe",
        "Glm4Moe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 10944, "num_hidden_layers": 46,
         "num_attention_heads": 96, "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "attention_bias": False, "moe_intermediate_size": 1408,
         "num_experts_per_tok": 8, "n_shared_experts": 1, "n_routed_experts": 128, "routed_scaling_factor": 1.0,
         "first_k_dense_replace": 1, "norm_topk_prob": True, "use_qk_norm": False, "num_mtp_layers": 1},
        fixed={**_LLAMA_FIXED, "bias": False},
        aliases={"num_local_experts": "n_routed_experts", "num_nextn_predict_layers": "num_mtp_layers"},
        refuse=(
            Refusal("n_routed_experts", lambda c: bool(c["n_routed_experts"]), "a model without experts"),
            Refusal("num_experts_per_tok", lambda c: bool(c["num_experts_per_tok"]), "experts per token must be given"),
        ),
        derive=combine(gated_mlp(), head_dim_or_quotient, kv_heads, _glm4_moe),
    ),
]
# fmt: on
