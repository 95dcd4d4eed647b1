"""Gemma, Gemma 2 and Gemma 3 (and the Gemma 3 wrapper)."""

from __future__ import annotations

from typing import Any

from archspec.core.errors import SpecError
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
    out = _gemma(cfg, where) | {"mixer": attention}
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
        "mixer": attention,
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
            per_layer.append(("local", {"mixer": {"sliding_window": cfg["sliding_window"]},
                                        "position": {"base": local_base}}))  # fmt: skip
        elif t == "sliding_attention":
            per_layer.append(("local", {"position": {"base": local_base}}))
        else:
            per_layer.append(("global", {}))
    return data | place(data, per_layer)


def _gemma4_rope(cfg: Config, layer_type: str, where: str) -> dict[str, Any]:
    """The rotary options of one layer type from rope_parameters[layer_type]: 'default' rotates the whole head
    (Gemma4TextRotaryEmbedding's default ignores partial_rotary_factor); 'proportional' rotates the first
    partial_rotary_factor * head_dim / 2 pairs of the two halves at frequencies taken over the whole head
    (transformers' _compute_proportional_rope_parameters), the other pairs not at all."""
    params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else None
    table = (params or _GEMMA4_ROPE)[layer_type] if params is None or layer_type in params else None
    if not isinstance(table, dict):
        raise SpecError(f"{where}: gemma4_text rope_parameters has no table for {layer_type!r}")
    kind = table.get("rope_type", "default")
    if kind not in ("default", "proportional"):
        raise SpecError(f"{where}: gemma4_text rope_parameters.{layer_type}.rope_type={kind!r} is not supported; "
                        "supported: default, proportional")  # fmt: skip
    out: dict[str, Any] = {"base": float(table.get("rope_theta", 10000.0))}
    fraction = table.get("partial_rotary_factor", 1.0)
    if kind == "proportional" and fraction != 1.0:
        out.update(fraction=float(fraction), proportional=True)
    return out


# Gemma4TextConfig.__post_init__'s rope_parameters when the file gives none
_GEMMA4_ROPE = {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                   "rope_theta": 1_000_000.0}}  # fmt: skip


def _gemma4(cfg: Config, where: str) -> dict[str, Any]:
    """Gemma4TextDecoderLayer: Gemma 3's four norms (x * w, no offset), a per-head QK-norm with weights, a
    weightless RMSNorm on each value head (v_norm), an attention scale of 1, a window on the sliding layers and their
    own rotary; the full-attention layers with global_head_dim wide heads, num_global_key_value_heads key/value
    heads where attention_k_eq_v (whose keys serve as values: no v_proj), and their own rotary (proportional, on
    a quarter of each head, by default). With enable_moe_block, a dense MLP of intermediate_size beside experts
    of moe_intermediate_size (router with a weightless norm, a per-channel scale and a scale per expert)."""
    attention: dict[str, Any] = {"kind": "standard", "qk_norm": "head", "value_norm": True, "scale": 1.0}
    data: dict[str, Any] = {
        "position": {"kind": "rotary", **_gemma4_rope(cfg, "sliding_attention", where)},
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "mixer": attention,
    }
    if cfg.get("final_logit_softcapping"):
        data["head"] = {"kind": "lm", "softcap": float(cfg["final_logit_softcapping"])}
    if cfg["enable_moe_block"]:
        data["mlp"] = {"kind": "moe", "experts": cfg["num_experts"], "top_k": cfg["top_k_experts"],
                       "d_expert": cfg["moe_intermediate_size"], "d_dense": cfg["intermediate_size"],
                       "router_norm": True, "expert_scales": True, "normalize": True}  # fmt: skip
    n = cfg["num_hidden_layers"]
    types = layer_types(cfg, ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)])
    types[-1] = "full_attention"  # __post_init__ forces the last layer to full attention
    global_kind: dict[str, Any] = {"d_head": cfg["global_head_dim"],
                                   "position": _gemma4_rope(cfg, "full_attention", where)}  # fmt: skip
    if cfg["attention_k_eq_v"]:
        global_kind["mixer"] = {"shared_kv": True}
        if cfg.get("num_global_key_value_heads") is not None:
            global_kind["n_kv_heads"] = cfg["num_global_key_value_heads"]
    per_layer = []
    for t in types:
        if t not in ("full_attention", "sliding_attention"):
            raise SpecError(
                f"{where}: layer_types entry {t!r} is not supported; supported: full_attention, sliding_attention"
            )
        per_layer.append(("local", {"mixer": {"sliding_window": cfg["sliding_window"]}}) if t == "sliding_attention"
                         else ("global", global_kind))  # fmt: skip
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
    Family(
        "gemma4_text",
        "Gemma4",
        ("ForCausalLM",),
        _LLAMA_FIELDS,
        # global_head_dim and num_global_key_value_heads are not fields: __post_init__ pops them (512, None)
        {"vocab_size": 262_144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
         "max_position_embeddings": 131_072, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
         "attention_bias": False, "sliding_window": 512, "layer_types": None, "final_logit_softcapping": None,
         "use_bidirectional_attention": None, "hidden_size_per_layer_input": 256, "attention_k_eq_v": False,
         "num_kv_shared_layers": 0, "enable_moe_block": False, "use_double_wide_mlp": False, "num_experts": None,
         "top_k_experts": None, "moe_intermediate_size": None, "global_head_dim": 512,
         "num_global_key_value_heads": None},
        fixed={**_LLAMA_FIXED, "norm_position": "sandwich", "embedding_scale": "sqrt_d_model"},
        refuse=(
            Refusal("use_bidirectional_attention", lambda c: c["use_bidirectional_attention"] in (None, "vision"),
                    "bidirectional attention over every token is not represented ('vision' concerns image tokens "
                    "only)"),
            must_be_falsy("hidden_size_per_layer_input", "per-layer embeddings (PLE: embed_tokens_per_layer, "
                          "per_layer_model_projection and each layer's per-layer input gate) are not represented"),
            must_be_falsy("num_kv_shared_layers", "layers reusing an earlier layer's keys and values (and their "
                          "double-wide MLPs) are not represented"),
        ),
        derive=combine(gated_mlp("hidden_activation"), head_dim, kv_heads, _gemma4),
    ),
]
# fmt: on

# multimodal wrappers counted as their text model (archspec.hf.engine.Wrapper)
WRAPPERS = [
    Wrapper("gemma3", "Gemma3", "gemma3_text", head="wrapper", tie=True, towers="vision tower"),
    Wrapper("gemma4", "Gemma4", "gemma4_text", head="wrapper", tie=True, towers="vision and audio towers"),
]
