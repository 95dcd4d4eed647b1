"""OpenAI's open-weight models: gpt-oss."""

from __future__ import annotations

from typing import Any

from archspec.core.errors import SpecError
from archspec.hf.engine import Config, Family, biases, combine, head_dim, kv_heads, layer_types, must_be, place, rope
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _gpt_oss(cfg: Config, where: str) -> dict[str, Any]:
    """GptOssDecoderLayer: attention with sinks (one logit per head) and biases, windowed on the layers that
    layer_types names sliding (by default every other layer from the first); every MLP is a mixture of
    experts with biases, a router with a bias (softmax over the top-k logits: the top-k of a softmax,
    renormalised) and the clamped SwiGLU."""
    data: dict[str, Any] = {
        "position": rope(cfg, default_theta=150000.0),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], True),
        "mixer": {"kind": "standard", "sinks": True},
        "activation": "clamped_swiglu",
        "swiglu_limit": float(cfg["swiglu_limit"]),
        "mlp": {"kind": "moe", "experts": cfg["num_local_experts"], "top_k": cfg["num_experts_per_tok"],
                "d_expert": cfg["intermediate_size"], "router_bias": True, "normalize": True},
    }  # fmt: skip
    n = cfg["num_hidden_layers"]
    default = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    per_layer = []
    for t in layer_types(cfg, default):
        if t not in ("full_attention", "sliding_attention"):
            raise SpecError(
                f"{where}: layer_types entry {t!r} is not supported; supported: full_attention, sliding_attention"
            )
        windowed = t == "sliding_attention" and cfg["sliding_window"]
        per_layer.append(("sliding", {"mixer": {"sliding_window": cfg["sliding_window"]}}) if windowed
                         else ("full", {}))  # fmt: skip
    return data | place(data, per_layer)


# fmt: off
FAMILIES = [
    Family(
        "gpt_oss",
        "GptOss",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"num_hidden_layers": 36, "num_local_experts": 128, "vocab_size": 201088, "hidden_size": 2880,
         "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
         "sliding_window": 128, "tie_word_embeddings": False, "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-5, "num_experts_per_tok": 4, "swiglu_alpha": 1.702, "swiglu_limit": 7.0,
         "layer_types": None, "attention_bias": True},
        fixed=_LLAMA_FIXED,
        aliases={"num_experts": "num_local_experts"},
        refuse=(must_be("swiglu_alpha", 1.702, "the clamped SwiGLU's sigmoid gain is 1.702"),),
        derive=combine(head_dim, kv_heads, _gpt_oss),
    ),
]
# fmt: on
