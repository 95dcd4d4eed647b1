"""Baidu's ERNIE 4.5 text models: the dense ERNIE 4.5 and its mixture of experts."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    combine,
    gated_mlp,
    kv_heads,
    must_be_falsy,
    place,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _head_dim(cfg: Config, where: str) -> dict[str, Any]:
    """Ernie4_5Config.__post_init__: head_dim, or hidden_size // num_attention_heads when it is null."""
    return {"d_head": cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]}


def _ernie(cfg: Config, where: str) -> dict[str, Any]:
    """Ernie4_5DecoderLayer: Llama's block with use_bias on every projection (q, k, v, o and the MLP's);
    rotary on interleaved pairs (apply_rotary_pos_emb repeats each frequency twice and rotates (x0, x1),
    (x2, x3), ..., GLM's layout)."""
    return {"position": rope(cfg, default_theta=500000.0, interleaved=True), "bias": bool(cfg["use_bias"])}


def _moe_layers(cfg: Config) -> list[bool]:
    """Ernie4_5_MoeDecoderLayer i has experts when (i + 1) is a multiple of moe_layer_interval and i lies in
    moe_layer_start_index .. moe_layer_end_index (-1: the last layer, as __post_init__ resolves it)."""
    n = cfg["num_hidden_layers"]
    end = n - 1 if cfg["moe_layer_end_index"] == -1 else cfg["moe_layer_end_index"]
    start, step = cfg["moe_layer_start_index"], cfg["moe_layer_interval"]
    return [(i + 1) % step == 0 and start <= i <= end for i in range(n)]


def _ernie_moe(cfg: Config, where: str) -> dict[str, Any]:
    """Ernie4_5_MoeSparseMoeBlock: a router without bias (softmax over the experts, in fp32) picks moe_k experts
    by the softmax plus e_score_correction_bias (moe_statics, one per expert: a parameter of the checkpoint),
    weighted by the chosen softmax scores renormalised (clamped below at moe_norm_min, which changes no shape);
    experts of moe_intermediate_size beside one ungated shared MLP moe_num_shared_experts times as wide; the
    layers without experts have a dense MLP of intermediate_size."""
    moe: dict[str, Any] = {"kind": "moe", "experts": cfg["moe_num_experts"], "top_k": cfg["moe_k"],
                           "d_expert": cfg["moe_intermediate_size"], "normalize": True,
                           "correction_bias": True}  # fmt: skip
    if cfg["moe_num_shared_experts"]:
        moe["d_shared"] = cfg["moe_intermediate_size"] * cfg["moe_num_shared_experts"]
    data = _ernie(cfg, where) | {"mlp": moe}
    per_layer = [("moe", {}) if routed else ("dense", {"mlp": "dense"}) for routed in _moe_layers(cfg)]
    return data | place(data, per_layer)


def _positive_int(key: str) -> Refusal:
    return Refusal(key, lambda c: isinstance(c[key], int) and c[key] >= 1, "must be a positive integer")


_ERNIE_DEFAULTS = {"vocab_size": 103424, "hidden_act": "silu", "max_position_embeddings": 131072,
                   "rms_norm_eps": 1e-05, "tie_word_embeddings": True, "use_bias": False}  # fmt: skip

# fmt: off
FAMILIES = [
    Family(
        "ernie4_5",
        "Ernie4_5",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_ERNIE_DEFAULTS, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18,
         "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128},
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), _head_dim, kv_heads, _ernie),
    ),
    Family(
        "ernie4_5_moe",
        "Ernie4_5_Moe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        # no head_dim field: Ernie4_5_MoeAttention reads getattr(config, "head_dim", hidden_size // heads)
        {**_ERNIE_DEFAULTS, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
         "num_attention_heads": 20, "num_key_value_heads": 4, "moe_intermediate_size": 1536, "moe_k": 6,
         "moe_num_experts": 64, "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_layer_end_index": -1,
         "moe_layer_interval": 1},
        fixed=_LLAMA_FIXED,
        # Ernie4_5_MoeConfig.attribute_map
        aliases={"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k"},
        refuse=(
            must_be_falsy("use_bias", "use_bias puts biases on the dense and shared MLPs but not on the routed "
                          "experts, which the spec cannot say"),
            _positive_int("moe_num_experts"),
            _positive_int("moe_layer_interval"),
        ),
        derive=combine(gated_mlp(), _head_dim, kv_heads, _ernie_moe),
    ),
]
# fmt: on
