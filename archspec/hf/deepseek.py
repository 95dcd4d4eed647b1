"""DeepSeek-V2, V3 and V3.2: latent attention (V3.2 with its sparse-attention indexer) and fine-grained experts."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    biases,
    combine,
    gated_mlp,
    must_be_falsy,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED


def _latent(cfg: Config, where: str) -> dict[str, Any]:
    """DeepSeek-V2/V3: multi-head latent attention and mixture of experts after `first_k_dense_replace` dense
    layers. The router's `e_score_correction_bias` (V3) is a buffer, not a parameter; the multi-token-
    prediction layers (`num_nextn_predict_layers`), which transformers does not build, are the spec's `mtp`,
    counted only when asked."""
    attention: dict[str, Any] = {
        "kind": "latent",
        "kv_rank": cfg["kv_lora_rank"],
        "rope_dims": cfg["qk_rope_head_dim"],
    }
    if cfg.get("q_lora_rank"):
        attention["q_rank"] = cfg["q_lora_rank"]
    moe: dict[str, Any] = {
        "kind": "moe",
        "experts": cfg["n_routed_experts"],
        "top_k": cfg["num_experts_per_tok"],
        "d_expert": cfg["moe_intermediate_size"],
        "normalize": bool(cfg["norm_topk_prob"]),
    }
    if cfg.get("n_shared_experts"):
        moe["d_shared"] = cfg["n_shared_experts"] * cfg["moe_intermediate_size"]
    if cfg.get("first_k_dense_replace"):
        moe["dense_layers"] = cfg["first_k_dense_replace"]
    if cfg["routed_scaling_factor"] != 1:  # the routed experts' weights times this (the TopkRouter's)
        moe["routed_scale"] = float(cfg["routed_scaling_factor"])
    interleaved = cfg.get("rope_interleave", True)
    out = {
        # attention_bias: on q_a (or none on a full q projection), kv_a and o_proj, as bias.qkv and bias.out
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "d_head": cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"],
        "d_value": cfg["v_head_dim"],
        "mixer": attention,
        "mlp": moe,
        "position": rope(cfg, interleaved=bool(interleaved)),
    }
    if cfg.get("num_nextn_predict_layers"):  # DeepSeek-V3's multi-token-prediction modules: the spec's `mtp`
        out["mtp"] = {"modules": cfg["num_nextn_predict_layers"]}
    return out


def _v3(cfg: Config, where: str) -> dict[str, Any]:
    """DeepSeek-V3 (and Kimi K2): V2's shapes with a sigmoid router (DeepseekV3TopkRouter scores every
    expert with a sigmoid, whatever the file's scoring_func; the group-limited choice picks experts only)."""
    out = _latent(cfg, where)
    out["mlp"]["scoring"] = "sigmoid"
    return out


def _dense_prefix(cfg: Config) -> int | None:
    """DeepSeek-V3.2's mlp_layer_types (default: first_k_dense_replace dense layers, then sparse) as a count of
    leading dense layers, or None when the dense layers are not a prefix."""
    types = cfg.get("mlp_layer_types")
    if types is None:
        return min(cfg["first_k_dense_replace"] or 0, cfg["num_hidden_layers"])
    n = next((i for i, t in enumerate(types) if t != "dense"), len(types))
    ok = len(types) == cfg["num_hidden_layers"] and all(t == "sparse" for t in types[n:])
    return n if ok else None


def _v32(cfg: Config, where: str) -> dict[str, Any]:
    """DeepSeek-V3.2: V3's latent attention and experts plus the sparse-attention indexer (DeepseekV32Indexer:
    index_n_heads x index_head_dim, top index_topk keys per query) on every layer; the MLPs follow
    mlp_layer_types. The multi-token-prediction layers (num_nextn_predict_layers) are the spec's `mtp`."""
    out = _latent({**cfg, "first_k_dense_replace": _dense_prefix(cfg)}, where)
    out["mixer"]["indexer"] = {"heads": cfg["index_n_heads"], "d_head": cfg["index_head_dim"],
                                   "topk": cfg["index_topk"]}  # fmt: skip
    out["mlp"].update(scoring="sigmoid")
    return out


T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "silu": "silu", "swish": "silu"}
T5_GATED = {"gated-gelu": "geglu", "gated-gelu_new": "geglu", "gated-silu": "swiglu", "gated-swish": "swiglu"}


# fmt: off
FAMILIES = [
    *(
        Family(
            model_type,
            prefix,
            ("ForCausalLM", "Model"),
            _LLAMA_FIELDS,
            defaults,
            fixed={**_LLAMA_FIXED, "bias": False},
            aliases=aliases,
            refuse=(
                must_be_falsy("mlp_bias", "biases on the MLPs of a mixture of experts are not represented"),
                Refusal("n_routed_experts", lambda c: bool(c.get("n_routed_experts")), "a model without experts"),
                Refusal(
                    "num_experts_per_tok",
                    lambda c: bool(c.get("num_experts_per_tok")),
                    "experts per token must be given",
                ),
            ),
            derive=combine(gated_mlp(), derive),
        )
        for model_type, prefix, defaults, aliases, derive in (
            (
                "deepseek_v2",
                "DeepseekV2",
                {"vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
                 "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                 "first_k_dense_replace": 0, "kv_lora_rank": 512, "q_lora_rank": 1536, "n_routed_experts": 64,
                 "n_shared_experts": 2, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                 "num_experts_per_tok": None, "moe_intermediate_size": 1407, "norm_topk_prob": False,
                 "rope_interleave": True, "routed_scaling_factor": 1.0},
                {"num_experts": "n_routed_experts"},
                _latent,
            ),
            (
                "deepseek_v3",
                "DeepseekV3",
                {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
                 "num_hidden_layers": 61, "num_attention_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
                 "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "v_head_dim": 128,
                 "qk_nope_head_dim": 128, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "hidden_act": "silu",
                 "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                 "rope_interleave": True, "attention_bias": False, "norm_topk_prob": True,
                 "routed_scaling_factor": 2.5},
                {"num_local_experts": "n_routed_experts"},
                _v3,
            ),
        )
    ),
    Family(
        "deepseek_v32",
        "DeepseekV32",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "moe_intermediate_size": 2048,
         "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1,
         "n_routed_experts": 256, "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536,
         "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "num_experts_per_tok": 8,
         "norm_topk_prob": True, "hidden_act": "silu", "max_position_embeddings": 163840, "rms_norm_eps": 1e-6,
         "tie_word_embeddings": False, "mlp_layer_types": None, "attention_bias": False, "index_topk": 2048,
         "index_head_dim": 128, "index_n_heads": 64, "mlp_bias": False, "first_k_dense_replace": 3},
        fixed={**_LLAMA_FIXED, "bias": False},
        aliases={"num_local_experts": "n_routed_experts", "num_experts": "n_routed_experts"},
        refuse=(
            must_be_falsy("mlp_bias", "biases on the MLPs of a mixture of experts are not represented"),
            Refusal("n_routed_experts", lambda c: bool(c.get("n_routed_experts")), "a model without experts"),
            Refusal("q_lora_rank", lambda c: bool(c.get("q_lora_rank")),
                    "transformers' DeepseekV32Attention always projects queries through q_lora_rank"),
            Refusal("mlp_layer_types", lambda c: _dense_prefix(c) is not None,
                    "dense layers other than the first ones are not represented"),
        ),
        derive=combine(gated_mlp(), _v32),
    ),
]
# fmt: on
