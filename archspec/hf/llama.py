"""The Llama lineage: Llama, Mistral, Mixtral, Phi-3, StarCoder2 (Qwen: archspec.hf.qwen)."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    biases,
    combine,
    gated_mlp,
    head_dim,
    kv_heads,
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
