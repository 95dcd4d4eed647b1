"""Gemma, Gemma 2 and Gemma 3 (and the Gemma 3 wrapper)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError
from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    Wrapper,
    biases,
    combine,
    gated_mlp,
    head_dim,
    kv_heads,
    layer_types,
    must_be_falsy,
    place,
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


def _gemma3(cfg: Config, where: str) -> dict[str, Any]:
    """Gemma3DecoderLayer: Gemma 2's four norms, scale and soft-caps, a per-head QK-norm, a window on the
    sliding layers (by default five of every sliding_window_pattern = 6) with their own rotary base
    (rope_local_base_freq), the global layers with rope_theta (rope_parameters per layer type first)."""
    params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
    full, local = params.get("full_attention") or {}, params.get("sliding_attention") or {}
    global_base = float(full.get("rope_theta", cfg.get("rope_theta", 1_000_000.0)))
    local_base = float(local.get("rope_theta", cfg.get("rope_local_base_freq", 10_000.0)))
    attention: dict[str, Any] = {"kind": "standard", "qk_norm": "head", "scale": cfg["query_pre_attn_scalar"] ** -0.5}
    if cfg.get("attn_logit_softcapping"):
        attention["softcap"] = float(cfg["attn_logit_softcapping"])
    data: dict[str, Any] = {
        "position": {"kind": "rotary", "base": global_base},
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "attention": attention,
    }
    if cfg.get("final_logit_softcapping"):
        data["head"] = {"kind": "lm", "softcap": float(cfg["final_logit_softcapping"])}
    pattern = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern") or 6
    n = cfg["num_hidden_layers"]
    per_layer = []
    for t in layer_types(cfg, ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]):
        if t not in ("full_attention", "sliding_attention"):
            raise SpecError(
                f"{where}: layer_types entry {t!r} is not supported; supported: full_attention, sliding_attention"
            )
        if t == "sliding_attention" and cfg.get("sliding_window"):
            per_layer.append(("local", {"attention": {"sliding_window": cfg["sliding_window"]},
                                        "position": {"base": local_base}}))  # fmt: skip
        elif t == "sliding_attention":
            per_layer.append(("local", {"position": {"base": local_base}}))
        else:
            per_layer.append(("global", {}))
    return data | place(data, per_layer)


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
    Family(
        "gemma3_text",
        "Gemma3",
        ("ForCausalLM",),
        _LLAMA_FIELDS,
        {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
         "max_position_embeddings": 131_072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
         "attention_bias": False, "query_pre_attn_scalar": 256, "sliding_window": 4096, "layer_types": None,
         "final_logit_softcapping": None, "attn_logit_softcapping": None, "use_bidirectional_attention": False},
        fixed={**_LLAMA_FIXED, "norm_position": "sandwich", "embedding_scale": "sqrt_d_model"},
        refuse=(must_be_falsy("use_bidirectional_attention", "bidirectional Gemma is not represented"),),
        derive=combine(gated_mlp("hidden_activation"), head_dim, kv_heads, _gemma3),
    ),
]
# fmt: on

# multimodal wrappers counted as their text model (archspec.hf.engine.Wrapper)
WRAPPERS = [
    Wrapper("gemma3", "Gemma3", "gemma3_text", head="wrapper", tie=True, towers="vision tower"),
    Wrapper("gemma4", "Gemma4", "gemma4_text", head="wrapper", tie=True, towers="vision and audio towers"),
]
