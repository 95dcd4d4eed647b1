"""The Llama lineage: Llama, Llama 4, Mistral, Mixtral, Phi-3, StarCoder2 (Qwen: archspec.hf.qwen)."""

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
    place,
    plain_mlp,
    rope,
    window,
)


def _llama(cfg: Config, where: str) -> dict[str, Any]:
    return {
        "position": rope(cfg),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"]),
    }


def _mixtral(cfg: Config, where: str) -> dict[str, Any]:
    return {
        "position": rope(cfg, default_theta=1e6),
        "mlp": {
            "kind": "moe",
            "experts": cfg["num_local_experts"],
            "top_k": cfg["num_experts_per_tok"],
            "d_expert": cfg["intermediate_size"],
        },
    }


def _llama4_layers(cfg: Config, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Llama4TextDecoderLayer i: rotary unless no_rope_layers[i] is 0 (by default every fourth layer is NoPE),
    the weightless L2 QK-norm on rotary layers (use_qk_norm), chunked attention where layer_types says so (by
    default the rotary layers, with attention_chunk_size), experts on moe_layers (by default every
    interleave_moe_layer_step-th layer), else a dense MLP of intermediate_size_mlp."""
    n = cfg["num_hidden_layers"]
    rope_on = cfg.get("no_rope_layers") or [int((i + 1) % cfg["no_rope_layer_interval"] != 0) for i in range(n)]
    step = cfg["interleave_moe_layer_step"]
    moe_layers = cfg["moe_layers"] if cfg.get("moe_layers") is not None else list(range(step - 1, n, step))
    chunk = cfg["attention_chunk_size"]
    default = ["chunked_attention" if r and chunk is not None else "full_attention" for r in rope_on]
    types = layer_types(cfg, default)
    if len(rope_on) != n:
        raise TypeError(f"no_rope_layers must list one flag per layer ({n})")
    out = []
    for i in range(n):
        if types[i] not in ("full_attention", "chunked_attention"):
            raise SpecError(f"{where}: layer_types entry {types[i]!r} is not supported; supported: full_attention, "
                            "chunked_attention")  # fmt: skip
        attention: dict[str, Any] = {}
        if types[i] == "chunked_attention" and chunk is not None:
            attention["chunk"] = chunk
        if rope_on[i] and cfg["use_qk_norm"]:
            attention["qk_norm"] = "l2"
        kind: dict[str, Any] = {"mixer": attention} if attention else {}
        if not rope_on[i]:
            kind["position"] = "none"
        if i not in moe_layers:
            kind["mlp"] = "dense"
        name = ("rope" if rope_on[i] else "nope") + ("-chunked" if "chunk" in attention else "")
        out.append((name + ("-moe" if i in moe_layers else "-dense"), kind))
    return out


def _llama4(cfg: Config, where: str) -> dict[str, Any]:
    """Experts of intermediate_size beside a shared expert of the same width, a sigmoid of each chosen
    expert's logit as its weight (not renormalised) scaling the expert's input, a router without bias;
    rotary on interleaved pairs (Llama 4 rotates (x0, x1), (x2, x3), ... as complex numbers)."""
    data: dict[str, Any] = {
        "position": rope(cfg, default_theta=500000.0, interleaved=True),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "d_ff": cfg["intermediate_size_mlp"],
        "mixer": {"kind": "standard"},
        "mlp": {"kind": "moe", "experts": cfg["num_local_experts"], "top_k": cfg["num_experts_per_tok"],
                "d_expert": cfg["intermediate_size"], "d_shared": cfg["intermediate_size"], "scoring": "sigmoid",
                "normalize": False, "weight_input": True},
    }  # fmt: skip
    return data | place(data, _llama4_layers(cfg, where))


_LLAMA_FIELDS = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "decoder_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "d_ff": "intermediate_size",
    "max_positions": "max_position_embeddings",
    "norm_eps": "rms_norm_eps",
}


_LLAMA_FIXED = {"norm": "rmsnorm", "norm_position": "pre"}

# fmt: off
FAMILIES = [
    Family(
        "llama",
        "Llama",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
         "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False,
         "mlp_bias": False, "head_dim": None},
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), head_dim, kv_heads, _llama),
    ),
    Family(
        "llama4_text",
        "Llama4",
        ("ForCausalLM",),
        _LLAMA_FIELDS,
        {"vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
         "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
         "hidden_act": "silu", "max_position_embeddings": 4096 * 32, "rms_norm_eps": 1e-5,
         "tie_word_embeddings": False, "num_experts_per_tok": 1, "num_local_experts": 16, "moe_layers": None,
         "interleave_moe_layer_step": 1, "use_qk_norm": True, "no_rope_layers": None, "no_rope_layer_interval": 4,
         "attention_chunk_size": 8192, "layer_types": None, "attention_bias": False},
        fixed=_LLAMA_FIXED,
        refuse=(Refusal("interleave_moe_layer_step", lambda c: isinstance(c["interleave_moe_layer_step"], int)
                        and c["interleave_moe_layer_step"] >= 1, "the step between MoE layers must be a positive "
                        "integer"),),
        derive=combine(gated_mlp(), head_dim, kv_heads, _llama4),
    ),
    Family(
        "mistral",
        "Mistral",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "hidden_act": "silu",
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "sliding_window": 4096},
        fixed={**_LLAMA_FIXED, "bias": False},
        derive=combine(gated_mlp(), head_dim, kv_heads, window(), lambda cfg, where: {"position": rope(cfg)}),
    ),
    Family(
        "mixtral",
        "Mixtral",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "hidden_act": "silu",
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
         "sliding_window": None, "num_experts_per_tok": 2, "num_local_experts": 8},
        fixed={**_LLAMA_FIXED, "bias": False},
        aliases={"num_experts": "num_local_experts"},
        derive=combine(gated_mlp(), head_dim, kv_heads, window(), _mixtral),
    ),
    Family(
        "phi3",
        "Phi3",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu",
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "sliding_window": None},
        fixed={**_LLAMA_FIXED, "bias": False},
        derive=combine(gated_mlp(), kv_heads, window(), lambda cfg, where: {"position": rope(cfg)}),
    ),
    Family(
        "starcoder2",
        "Starcoder2",
        ("ForCausalLM", "Model"),
        {**_LLAMA_FIELDS, "norm_eps": "norm_epsilon", "bias": "use_bias"},
        {"vocab_size": 49152, "hidden_size": 3072, "intermediate_size": 12288, "num_hidden_layers": 30,
         "num_attention_heads": 24, "num_key_value_heads": 2, "hidden_act": "gelu_pytorch_tanh",
         "max_position_embeddings": 4096, "norm_epsilon": 1e-5, "sliding_window": None, "use_bias": True,
         "tie_word_embeddings": True},
        fixed={"norm": "layernorm", "norm_position": "pre"},
        derive=combine(plain_mlp("hidden_act"), kv_heads, window(), lambda cfg, where: {"position": rope(cfg)}),
    ),
]
# fmt: on

# multimodal wrappers counted as their text model (archspec.hf.engine.Wrapper)
WRAPPERS = [
    Wrapper("llama4", "Llama4", "llama4_text", head="text", tie=False, towers="vision tower"),
    Wrapper("mistral3", "Mistral3", "mistral", head="wrapper", tie=True, towers="vision tower"),
]
