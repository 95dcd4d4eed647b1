"""The Qwen lineage: Qwen2 (and its MoE), Qwen3 (and its MoE)."""

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
    must_be,
    must_be_falsy,
    place,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _dense_prefix(cfg: Config) -> int | None:
    """Qwen2-MoE's mlp_only_layers as a count of leading dense layers, or None when it is not a prefix."""
    layers = sorted(cfg.get("mlp_only_layers") or [])
    return len(layers) if layers == list(range(len(layers))) else None


def _qwen2_moe(cfg: Config, where: str) -> dict[str, Any]:
    moe: dict[str, Any] = {
        "kind": "moe",
        "experts": cfg["num_experts"],
        "top_k": cfg["num_experts_per_tok"],
        "d_expert": cfg["moe_intermediate_size"],
        "normalize": bool(cfg["norm_topk_prob"]),
    }
    if cfg["shared_expert_intermediate_size"]:
        moe.update(d_shared=cfg["shared_expert_intermediate_size"], shared_gate=True)
    if _dense_prefix(cfg):
        moe["dense_layers"] = _dense_prefix(cfg)
    return {
        "position": rope(cfg),
        "bias": biases(cfg["qkv_bias"], False, False),
        "mlp": moe,
    }


def _window(cfg: Config) -> int | None:
    """Qwen3's sliding_window counts only with use_sliding_window (the config class nulls it otherwise)."""
    return cfg["sliding_window"] if cfg["use_sliding_window"] else None


def _qwen3_attention(cfg: Config, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Per layer: full attention, or the window on the layers that layer_types (by default: those from
    max_window_layers on, with use_sliding_window) names sliding."""
    window = _window(cfg)
    n = cfg["num_hidden_layers"]
    default = ["sliding_attention" if window is not None and i >= cfg["max_window_layers"] else "full_attention"
               for i in range(n)]  # fmt: skip
    out = []
    for t in layer_types(cfg, default):
        if t not in ("full_attention", "sliding_attention"):
            raise SpecError(f"{where}: layer_types entry {t!r} is not supported; supported: full_attention, "
                            "sliding_attention")  # fmt: skip
        windowed = t == "sliding_attention" and window is not None
        out.append(("sliding", {"mixer": {"sliding_window": window}}) if windowed else ("full", {}))
    return out


def _qwen2(cfg: Config, where: str) -> dict[str, Any]:
    """Qwen2: full attention, or a window on the layers layer_types names (Qwen3's rule, _qwen3_attention)."""
    data: dict[str, Any] = {"position": rope(cfg)}
    return data | place(data, _qwen3_attention(cfg, where))


def _qwen3(cfg: Config, where: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "position": rope(cfg, default_theta=10000.0),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "mixer": {"kind": "standard", "qk_norm": "head"},  # RMSNorm over each head's d_head, shared weights
    }
    return data | place(data, _qwen3_attention(cfg, where))


def _qwen3_moe(cfg: Config, where: str) -> dict[str, Any]:
    """Qwen3MoeDecoderLayer: experts on layer i unless i is in mlp_only_layers or (i + 1) is not a multiple of
    decoder_sparse_step; the other layers have a dense MLP of intermediate_size."""
    moe = {"kind": "moe", "experts": cfg["num_experts"], "top_k": cfg["num_experts_per_tok"],
           "d_expert": cfg["moe_intermediate_size"], "normalize": bool(cfg["norm_topk_prob"])}  # fmt: skip
    attention: dict[str, Any] = {"kind": "standard", "qk_norm": "head"}
    if _window(cfg) is not None:
        attention["sliding_window"] = _window(cfg)
    data: dict[str, Any] = {
        "position": rope(cfg, default_theta=10000.0),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "mixer": attention,
        "mlp": moe,
    }
    dense = set(cfg.get("mlp_only_layers") or [])
    step = cfg["decoder_sparse_step"]
    per_layer = [("moe", {}) if i not in dense and cfg["num_experts"] > 0 and (i + 1) % step == 0
                 else ("dense", {"mlp": "dense"}) for i in range(cfg["num_hidden_layers"])]  # fmt: skip
    return data | place(data, per_layer)


# fmt: off
FAMILIES = [
    Family(
        "qwen2",
        "Qwen2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 32768,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "use_sliding_window": False, "sliding_window": 4096,
         "max_window_layers": 28, "layer_types": None},
        # Qwen2Attention: q, k, v with bias, o_proj without
        fixed={**_LLAMA_FIXED, "bias": {"qkv": True, "out": False, "mlp": False}},
        derive=combine(gated_mlp(), kv_heads, _qwen2),
    ),
    Family(
        "qwen2_moe",
        "Qwen2Moe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
         "num_attention_heads": 16, "num_key_value_heads": 16, "hidden_act": "silu", "max_position_embeddings": 32768,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "use_sliding_window": False, "decoder_sparse_step": 1,
         "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4,
         "num_experts": 60, "mlp_only_layers": None, "qkv_bias": True,
         "norm_topk_prob": False},
        fixed=_LLAMA_FIXED,
        refuse=(
            must_be_falsy("use_sliding_window", "windows on some layers are not represented"),
            must_be("decoder_sparse_step", 1, "MoE on every n-th layer only is not represented"),
            Refusal(
                "mlp_only_layers",
                lambda c: _dense_prefix(c) is not None,
                "dense layers other than the first ones are not represented",
            ),
            Refusal("num_experts", lambda c: bool(c["num_experts"]), "a model without experts is a qwen2 model"),
            Refusal("shared_expert_intermediate_size", lambda c: bool(c["shared_expert_intermediate_size"]),
                    "transformers keeps the shared expert's gate without a shared expert"),
        ),
        derive=combine(gated_mlp(), kv_heads, _qwen2_moe),
    ),
    Family(
        "qwen3",
        "Qwen3",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "hidden_act": "silu",
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
         "attention_bias": False, "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 28,
         "layer_types": None},
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), head_dim, kv_heads, _qwen3),
    ),
    Family(
        "qwen3_moe",
        "Qwen3Moe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        # no head_dim field: Qwen3MoeAttention reads getattr(config, "head_dim", hidden_size // heads)
        {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
         "num_attention_heads": 32, "num_key_value_heads": 4, "hidden_act": "silu",
         "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
         "attention_bias": False, "use_sliding_window": False, "sliding_window": 4096, "decoder_sparse_step": 1,
         "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128, "norm_topk_prob": False,
         "mlp_only_layers": None},
        fixed=_LLAMA_FIXED,
        refuse=(Refusal("decoder_sparse_step", lambda c: isinstance(c["decoder_sparse_step"], int)
                        and c["decoder_sparse_step"] >= 1, "the step between MoE layers must be a positive integer"),),
        derive=combine(gated_mlp(), head_dim, kv_heads, _qwen3_moe),
    ),
]
# fmt: on

# multimodal wrappers counted as their text model (archspec.hf.engine.Wrapper)
WRAPPERS = [
    Wrapper("qwen3_5", "Qwen3_5", "qwen3_5_text", head="wrapper", tie=False, towers="vision tower"),
    Wrapper("qwen3_5_moe", "Qwen3_5Moe", "qwen3_5_moe_text", head="wrapper", tie=False, towers="vision tower"),
]
