"""Cohere's Command R (cohere) and Command R7B (cohere2): parallel blocks under one LayerNorm without bias,
interleaved rotary positions, logits times `logit_scale`; cohere2 alternates sliding-window layers with
rotary positions and global layers without positions (NoPE)."""

from __future__ import annotations

from typing import Any

from archspec.hf.decoders import FULL, SLIDING, _types_ok, _windows
from archspec.hf.engine import Config, Family, Refusal, biases, combine, gated_mlp, kv_heads, must_be_falsy, rope
from archspec.hf.llama import _LLAMA_FIELDS


def _cohere(cfg: Config, where: str) -> dict[str, Any]:
    """CohereForCausalLM multiplies the logits by logit_scale: the head's input scaled by it (no head bias)."""
    out: dict[str, Any] = {
        "position": rope(cfg, default_theta=500000.0, interleaved=True),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
    }
    if cfg["logit_scale"] not in (None, 1):
        out["head"] = {"kind": "lm", "scale": float(cfg["logit_scale"])}
    return out


def _cohere2_types(cfg: Config) -> list[str]:
    """Cohere2Config: layer_types, else the hub files' sliding_window_pattern (every n-th layer full; 4)."""
    if cfg.get("layer_types") is not None:
        return list(cfg["layer_types"])
    every = cfg.get("sliding_window_pattern", 4)
    return [SLIDING if (i + 1) % every else FULL for i in range(cfg["num_hidden_layers"])]


def _pattern_ok(cfg: Config) -> bool:
    p = cfg.get("sliding_window_pattern", 4)
    return cfg.get("layer_types") is not None or (isinstance(p, int) and not isinstance(p, bool) and p > 0)


def _cohere2(cfg: Config, where: str) -> dict[str, Any]:
    """Cohere2Attention rotates queries and keys on the sliding layers only."""
    sliding = [t == SLIDING and bool(cfg.get("sliding_window")) for t in _cohere2_types(cfg)]
    return {**_cohere(cfg, where), **_windows(cfg, sliding, sliding)}


_FIELDS = {**_LLAMA_FIELDS, "norm_eps": "layer_norm_eps"}
# CohereLayerNorm: a weight, no bias; one norm feeds attention and the MLP of each parallel block
_FIXED = {"norm": "layernorm", "norm_affine": "weight", "norm_position": "pre",
          "block": {"kind": "parallel", "shared_norm": True}}  # fmt: skip
_DEFAULTS = {
    "vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "logit_scale": 0.0625,
    "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": None, "hidden_act": "silu",
    "max_position_embeddings": 8192, "layer_norm_eps": 1e-5, "tie_word_embeddings": True, "attention_bias": False,
}  # fmt: skip

FAMILIES = [
    Family(
        "cohere",
        "Cohere",
        ("ForCausalLM", "Model"),
        _FIELDS,
        {**_DEFAULTS, "use_qk_norm": False},
        fixed=_FIXED,
        refuse=(
            must_be_falsy(
                "use_qk_norm", "a LayerNorm with its own weight per head on queries and keys is not represented"
            ),
        ),
        derive=combine(gated_mlp(), kv_heads, _cohere),
    ),
    Family(
        "cohere2",
        "Cohere2",
        ("ForCausalLM", "Model"),
        _FIELDS,
        {**_DEFAULTS, "sliding_window": 4096, "layer_types": None},
        fixed=_FIXED,
        refuse=(
            Refusal("layer_types", _types_ok, "layer types other than sliding_attention and full_attention"),
            Refusal("sliding_window_pattern", _pattern_ok, "the pattern must be a positive int"),
        ),
        derive=combine(gated_mlp(), kv_heads, _cohere2),
    ),
]
