"""MiniMax-M2 (minimax_m2): grouped-query attention with a full-width QK-norm and partial rotary, and a
mixture of experts on every layer with a sigmoid router."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    combine,
    gated_mlp,
    head_dim,
    kv_heads,
    must_be,
    must_be_falsy,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _minimax_m2(cfg: Config, where: str) -> dict[str, Any]:
    """MiniMaxM2Attention: no biases, q_norm over all query heads and k_norm over all key heads (RMSNorm of
    heads x head_dim), rotary on `rotary_dim` of each head (the released files' legacy key; the config class
    turns it into partial_rotary_factor = rotary_dim / head_dim). MiniMaxM2SparseMoeBlock: a sigmoid router
    whose top-k weights are always renormalised; its e_score_correction_bias is a buffer (nn.Buffer), not a
    parameter. The multi-token-prediction modules (use_mtp, num_mtp_modules) are not built by transformers:
    they are the spec's `mtp`, counted only when asked."""
    extra = {}
    if cfg.get("rotary_dim") and "partial_rotary_factor" not in cfg:
        extra = {"partial_rotary_factor": cfg["rotary_dim"] / cfg["head_dim"]}
    out: dict[str, Any] = {
        "position": rope({**cfg, **extra}, default_theta=5e6),
        "mixer": {"kind": "standard", "qk_norm": "full"},
        "mlp": {
            "kind": "moe",
            "experts": cfg["num_local_experts"],
            "top_k": cfg["num_experts_per_tok"],
            "d_expert": cfg["intermediate_size"],
            "scoring": "sigmoid",
        },
    }
    if cfg.get("use_mtp") and cfg.get("num_mtp_modules"):
        out["mtp"] = {"modules": cfg["num_mtp_modules"]}
    return out


# fmt: off
FAMILIES = [
    Family(
        "minimax_m2",
        "MiniMaxM2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 200064, "hidden_size": 3072, "intermediate_size": 1536, "num_hidden_layers": 62,
         "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "hidden_act": "silu",
         "max_position_embeddings": 196608, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
         "num_experts_per_tok": 8, "num_local_experts": 256},
        fixed={**_LLAMA_FIXED, "bias": False},
        aliases={"num_experts": "num_local_experts"},
        refuse=(
            Refusal("num_local_experts", lambda c: bool(c["num_local_experts"]), "a model without experts"),
            # keys of MiniMax's own modelling code that transformers' MiniMaxM2 does not read: refused where
            # they would describe another model than the one transformers builds
            must_be_falsy("shared_intermediate_size", "transformers' MiniMaxM2 builds no shared expert"),
            must_be("use_qk_norm", True, "transformers' MiniMaxM2 always builds its q_norm and k_norm"),
            must_be("qk_norm_type", "per_layer", "only the norm over all heads at once is built by transformers"),
        ),
        derive=combine(gated_mlp(), head_dim, kv_heads, _minimax_m2),
    ),
]
# fmt: on
