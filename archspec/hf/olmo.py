"""The OLMo lineage (Allen AI): OLMo (olmo), OLMo 2 (olmo2), OLMo 3 (olmo3) and OLMoE (olmoe).

OLMo 1 normalises with a LayerNorm that has no weight and no bias (OlmoLayerNorm, eps 1e-5). OLMo 2
and 3 put an RMSNorm after each sub-layer and none before it, x + N(f(x)), and normalise queries and
keys over all heads at once (q_norm over heads x d_head, k_norm over kv_heads x d_head). OLMo 3 adds
sliding-window layers (layer_types). OLMoE is pre-norm with the full-width QK-norm and a softmax router.
`clip_qkv` (OLMo 1, OLMoE) clamps q, k and v: it changes the computation, not a shape or a matmul,
and is not represented.
"""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    biases,
    combine,
    gated_mlp,
    head_dim_or_quotient,
    kv_heads,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS
from archspec.spec.layers import compact


def _olmo(cfg: Config, where: str) -> dict[str, Any]:
    """q, k, v and o_proj biases from attention_bias; the MLP has none."""
    ab = cfg["attention_bias"]
    return {"position": rope(cfg), "bias": biases(ab, ab, False)}


def _sliding_types(cfg: Config) -> list[str]:
    """Olmo3Config: layer_types, or three sliding-window layers then one full-attention layer."""
    types = cfg.get("layer_types")
    if types is None:
        n = cfg["num_hidden_layers"]
        types = ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(n)]
    return list(types)


def _layer_types_ok(cfg: Config) -> bool:
    types = _sliding_types(cfg)
    return len(types) == cfg["num_hidden_layers"] and set(types) <= {"sliding_attention", "full_attention"}


def _olmo3_rope(cfg: Config, layer_type: str) -> dict[str, Any]:
    """Olmo3Config keeps rope_parameters per layer type ({"full_attention": ..., "sliding_attention": ...});
    a flat rope_theta fills both."""
    params = cfg.get("rope_parameters") or {}
    nested = params.get(layer_type) if isinstance(params, dict) else None
    if isinstance(nested, dict):
        return rope({**cfg, "rope_parameters": nested})
    return rope({**cfg, "rope_parameters": None})


def _olmo3(cfg: Config, where: str) -> dict[str, Any]:
    """OLMo 3: OLMo 2's block, a sliding window (`sliding_window`) on the layers that layer_types calls
    sliding_attention, each kind with its own rotary table."""
    out = _olmo(cfg, where)
    types = _sliding_types(cfg)
    window = cfg["sliding_window"]
    names = {"sliding_attention": "sliding", "full_attention": "full"}
    per_layer = [names[t] for t in types]
    out["position"] = _olmo3_rope(cfg, "full_attention")
    if window is None or "sliding" not in per_layer:
        return out
    kinds: dict[str, Any] = {"sliding": {"mixer": {"sliding_window": window}}}
    sliding_rope = _olmo3_rope(cfg, "sliding_attention")
    if sliding_rope != out["position"]:
        kinds["sliding"]["position"] = sliding_rope
    if "full" in per_layer:
        kinds["full"] = {}
    prefix, pattern = compact(per_layer)
    out["kinds"] = kinds
    out["layers"] = {"prefix": prefix, "pattern": pattern} if prefix else {"pattern": pattern}
    return out


def _olmoe(cfg: Config, where: str) -> dict[str, Any]:
    """OLMoE: every layer a mixture of num_experts experts (intermediate_size wide), a softmax router
    without bias, top-k weights renormalised when norm_topk_prob."""
    return _olmo(cfg, where) | {
        "mlp": {
            "kind": "moe",
            "experts": cfg["num_experts"],
            "top_k": cfg["num_experts_per_tok"],
            "d_expert": cfg["intermediate_size"],
            "normalize": bool(cfg["norm_topk_prob"]),
        }
    }


_OLMO_DEFAULTS = {
    "vocab_size": 50304, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
    "tie_word_embeddings": False, "attention_bias": False,
}  # fmt: skip
_FIELDS = {k: v for k, v in _LLAMA_FIELDS.items() if k != "norm_eps"}
# OLMo 2 and 3: no norm before a sub-layer, an RMSNorm after it; QK-norm over all heads at once
_POST = {"norm": "rmsnorm", "norm_position": "post_sublayer", "mixer": {"kind": "standard", "qk_norm": "full"}}


# fmt: off
FAMILIES = [
    Family(
        "olmo",
        "Olmo",
        ("ForCausalLM", "Model"),
        _FIELDS,
        _OLMO_DEFAULTS,
        # OlmoLayerNorm: F.layer_norm(x, shape, None, None, eps=1e-5), before each sub-layer and at the end
        fixed={"norm": "layernorm", "norm_affine": "none", "norm_eps": 1e-5, "norm_position": "pre"},
        derive=combine(gated_mlp(), head_dim_or_quotient, kv_heads, _olmo),
    ),
    Family(
        "olmo2",
        "Olmo2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_OLMO_DEFAULTS, "rms_norm_eps": 1e-5},
        fixed=_POST,
        derive=combine(gated_mlp(), head_dim_or_quotient, kv_heads, _olmo),
    ),
    Family(
        "olmo3",
        "Olmo3",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_OLMO_DEFAULTS, "rms_norm_eps": 1e-5, "sliding_window": 4096, "layer_types": None},
        fixed=_POST,
        refuse=(Refusal("layer_types", _layer_types_ok,
                        "one of sliding_attention or full_attention per layer is represented"),),
        derive=combine(gated_mlp(), head_dim_or_quotient, kv_heads, _olmo3),
    ),
    Family(
        "olmoe",
        "Olmoe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_OLMO_DEFAULTS, "hidden_size": 2048, "intermediate_size": 2048, "num_hidden_layers": 16,
         "num_attention_heads": 16, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "num_experts_per_tok": 8,
         "num_experts": 64, "norm_topk_prob": False},
        fixed={"norm": "rmsnorm", "norm_position": "pre", "mixer": {"kind": "standard", "qk_norm": "full"}},
        aliases={"num_local_experts": "num_experts"},
        refuse=(Refusal("num_experts", lambda c: bool(c["num_experts"]), "a model without experts"),),
        derive=combine(gated_mlp(), head_dim_or_quotient, kv_heads, _olmoe),
    ),
]
# fmt: on
