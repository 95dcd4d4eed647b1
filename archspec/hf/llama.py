"""The Llama lineage: Llama, Mistral, Mixtral, Qwen2 (and its MoE), Phi-3, StarCoder2."""

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
    must_be,
    must_be_falsy,
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
        "qwen2",
        "Qwen2",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 32768,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "use_sliding_window": False},
        # Qwen2Attention: q, k, v with bias, o_proj without
        fixed={**_LLAMA_FIXED, "bias": {"qkv": True, "out": False, "mlp": False}},
        refuse=(must_be_falsy("use_sliding_window", "windows after max_window_layers are not represented"),),
        derive=combine(gated_mlp(), kv_heads, lambda cfg, where: {"position": rope(cfg)}),
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
