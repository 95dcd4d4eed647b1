"""Gemma and Gemma 2."""

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
    kv_heads,
    must_be_falsy,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _gemma(cfg: Config, where: str) -> dict[str, Any]:
    return {"position": rope(cfg), "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False)}


def _gemma2_alternating(cfg: Config) -> bool:
    types = cfg.get("layer_types")
    if types is None:
        return True
    expected = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(cfg["num_hidden_layers"])]
    return list(types) == expected


def _gemma2(cfg: Config, where: str) -> dict[str, Any]:
    attention: dict[str, Any] = {"kind": "standard", "scale": cfg["query_pre_attn_scalar"] ** -0.5}
    if cfg.get("attn_logit_softcapping"):
        attention["softcap"] = float(cfg["attn_logit_softcapping"])
    if cfg.get("sliding_window"):
        # layer_types: sliding_attention on layers 0, 2, 4, ..., full attention on the others
        attention.update(sliding_window=cfg["sliding_window"], sliding_layers="even")
    out = _gemma(cfg, where) | {"attention": attention}
    if cfg.get("final_logit_softcapping"):
        out["head"] = {"kind": "lm", "softcap": float(cfg["final_logit_softcapping"])}
    return out


# fmt: off
FAMILIES = [
    Family(
        "gemma",
        "Gemma",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
         "max_position_embeddings": 8192, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "attention_bias": False},
        fixed={**_LLAMA_FIXED, "embedding_scale": "sqrt_d_model"},
        refuse=(must_be_falsy("use_bidirectional_attention", "bidirectional Gemma is not represented"),),
        derive=combine(gated_mlp(), head_dim, kv_heads, _gemma),
    ),
    Family(
        "gemma2",
        "Gemma2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
         "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 8192, "rms_norm_eps": 1e-6,
         "tie_word_embeddings": True, "attention_bias": False, "query_pre_attn_scalar": 256, "sliding_window": 4096,
         "layer_types": None, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
        # four RMSNorms per layer: before and after attention, before and after the MLP
        fixed={**_LLAMA_FIXED, "norm_position": "sandwich", "embedding_scale": "sqrt_d_model"},
        refuse=(
            Refusal("layer_types", _gemma2_alternating, "only alternating sliding and full layers are represented"),
            must_be_falsy("use_bidirectional_attention", "bidirectional Gemma is not represented"),
        ),
        derive=combine(gated_mlp("hidden_activation"), head_dim, kv_heads, _gemma2),
    ),
]
# fmt: on
