"""Llama-like decoders of 2024-2025: Seed-OSS, Ministral, SmolLM3, Hunyuan (dense and MoE), EXAONE 4,
StableLM, Nemotron, Phi-3.5-MoE.

Per-layer keys (`layer_types`, `no_rope_layers`, `sliding_window_pattern`) are resolved here into one
per-layer list of kinds (archspec.hf.engine.place): a sliding layer has its window, a NoPE layer
has no rotary positions.
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
    head_dim,
    kv_heads,
    must_be_falsy,
    place,
    plain_mlp,
    rope,
)
from archspec.hf.llama import _LLAMA_FIELDS, _LLAMA_FIXED

SLIDING, FULL = "sliding_attention", "full_attention"


def _types_ok(cfg: Config) -> bool:
    types = cfg.get("layer_types")
    return types is None or (
        isinstance(types, list) and len(types) == cfg["num_hidden_layers"] and set(types) <= {SLIDING, FULL}
    )


_LAYER_TYPES = Refusal("layer_types", _types_ok, "layer types other than sliding_attention and full_attention")


def _windows(cfg: Config, sliding: list[bool], rotary: list[bool]) -> dict[str, Any]:
    """Kinds of a stack whose layer i has a window (sliding[i]) and rotary positions (rotary[i])."""
    window = cfg.get("sliding_window")
    names = []
    kinds: dict[str, dict[str, Any]] = {}
    for s, r in zip(sliding, rotary):
        name = ("sliding" if s else "full") + ("" if r else "-nope")
        names.append(name)
        kind: dict[str, Any] = {}
        if s:
            kind["mixer"] = {"sliding_window": window}
        if not r:
            kind["position"] = "none"
        kinds[name] = kind
    return place({}, [(name, kinds[name]) for name in names])  # one kind: its changes are the model's own


def _merge_attention(out: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Add attention fields (qk_norm, scale) to the model's attention table, kinds left alone."""
    table = dict(out.get("mixer") or {"kind": "standard"})
    table.update(fields)
    return {**out, "mixer": table}


# ---------------------------------------------------------------- Seed-OSS, Ministral, SmolLM3


def _seed_oss(cfg: Config, where: str) -> dict[str, Any]:
    return {
        "position": rope(cfg),
        # q, k, v biases (attention_bias), o_proj's its own (attention_out_bias), MLP biases (mlp_bias)
        "bias": biases(cfg["attention_bias"], cfg["attention_out_bias"], cfg["mlp_bias"]),
    }


def _ministral_types(cfg: Config) -> list[str]:
    """MinistralConfig: layer_types, else every layer sliding when sliding_window is set."""
    return cfg.get("layer_types") or [SLIDING if cfg.get("sliding_window") else FULL] * cfg["num_hidden_layers"]


def _ministral(cfg: Config, where: str) -> dict[str, Any]:
    sliding = [t == SLIDING and bool(cfg.get("sliding_window")) for t in _ministral_types(cfg)]
    return {"position": rope(cfg), **_windows(cfg, sliding, [True] * len(sliding))}


def _smollm3_rope(cfg: Config) -> list[bool]:
    """SmolLM3Config: no_rope_layers (1: rotary, 0: NoPE), else NoPE on every no_rope_layer_interval-th layer."""
    layers = cfg.get("no_rope_layers")
    if layers is None:
        every = cfg["no_rope_layer_interval"]
        return [(i + 1) % every != 0 for i in range(cfg["num_hidden_layers"])]
    return [bool(x) for x in layers]


def _smollm3_rope_ok(cfg: Config) -> bool:
    layers = cfg.get("no_rope_layers")
    if layers is None:
        return isinstance(cfg["no_rope_layer_interval"], int) and cfg["no_rope_layer_interval"] > 0
    return isinstance(layers, list) and len(layers) == cfg["num_hidden_layers"] and set(layers) <= {0, 1}


def _smollm3(cfg: Config, where: str) -> dict[str, Any]:
    """A window only where use_sliding_window is on and the layer type is sliding (SmolLM3Attention)."""
    rotary = _smollm3_rope(cfg)
    if cfg.get("layer_types") is not None:
        types = list(cfg["layer_types"])
    else:  # SmolLM3Config.__post_init__: sliding on the NoPE layers when windows are on
        on = bool(cfg["use_sliding_window"] and cfg.get("sliding_window"))
        types = [SLIDING if on and not r else FULL for r in rotary]
    sliding = [bool(cfg["use_sliding_window"] and cfg.get("sliding_window")) and t == SLIDING for t in types]
    return {
        "position": rope(cfg),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"]),
        **_windows(cfg, sliding, rotary),
    }


# ---------------------------------------------------------------- Hunyuan, EXAONE 4


def _hunyuan(cfg: Config, where: str) -> dict[str, Any]:
    """RMSNorms on each head's queries and keys (query_layernorm, key_layernorm), one weight of head_dim."""
    out = {"position": rope(cfg), "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False)}
    return _merge_attention(out, qk_norm="head")


def _hunyuan_moe(cfg: Config, where: str) -> dict[str, Any]:
    """HunYuanMoEV1Moe: num_experts routed experts (top moe_topk) and one shared MLP, every one
    intermediate_size wide; the router (gate.wg) has no bias."""
    moe = {
        "kind": "moe",
        "experts": cfg["num_experts"],
        "top_k": cfg["moe_topk"],
        "d_expert": cfg["intermediate_size"],
        "d_shared": cfg["intermediate_size"],
    }
    return {**_hunyuan(cfg, where), "mlp": moe}


def _exaone4_types(cfg: Config) -> list[str]:
    """Exaone4Config: layer_types, else sliding_window_pattern (an int n: every n-th layer full; a string
    such as "LLLG": L sliding, G full, repeated)."""
    if cfg.get("layer_types") is not None:
        return list(cfg["layer_types"])
    n, pattern = cfg["num_hidden_layers"], cfg["sliding_window_pattern"]
    if isinstance(pattern, str):
        return [SLIDING if pattern[i % len(pattern)] == "L" else FULL for i in range(n)]
    return [SLIDING if (i + 1) % pattern else FULL for i in range(n)]


def _exaone4_pattern_ok(cfg: Config) -> bool:
    if cfg.get("layer_types") is not None or not cfg.get("sliding_window"):
        return True
    p = cfg["sliding_window_pattern"]
    return (isinstance(p, int) and not isinstance(p, bool) and p > 0) or (
        isinstance(p, str) and p != "" and set(p) <= {"L", "G"}
    )


def _exaone4(cfg: Config, where: str) -> dict[str, Any]:
    """Exaone4Attention: QK-norm per head; with a window, the sliding layers rotate and the global ones have
    no positions (NoPE); without one, every layer is full attention with rotary positions. Norms after
    each sub-layer (post_attention_layernorm, post_feedforward_layernorm), none before."""
    layout: dict[str, Any] = {}
    if cfg.get("sliding_window"):
        sliding = [t == SLIDING for t in _exaone4_types(cfg)]
        layout = _windows(cfg, sliding, sliding)
    out = {"position": rope(cfg), **layout}
    return _merge_attention(out, qk_norm="head")


# ---------------------------------------------------------------- StableLM, Nemotron, Phi-3.5-MoE


def _stablelm(cfg: Config, where: str) -> dict[str, Any]:
    """q, k, v biases by use_qkv_bias, o_proj without; one LayerNorm feeding both branches when
    use_parallel_residual (StableLmDecoderLayer drops post_attention_layernorm)."""
    out: dict[str, Any] = {
        "position": rope(cfg, default_fraction=0.25),
        "bias": biases(cfg["use_qkv_bias"], False, False),
    }
    if cfg["use_parallel_residual"]:
        out["block"] = {"kind": "parallel", "shared_norm": True}
    return out


def _nemotron(cfg: Config, where: str) -> dict[str, Any]:
    """NemotronMLP: up_proj, squared ReLU, down_proj. NemotronLayerNorm1P scales by (1 + weight): the same
    weight and bias as a LayerNorm (a reparametrisation), counted as one."""
    return {
        "position": rope(cfg, default_fraction=0.5),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"]),
    }


def _nemotron_act(cfg: Config, where: str) -> dict[str, Any]:
    act = cfg["hidden_act"]
    return {"activation": "relu2"} if act == "relu2" else plain_mlp("hidden_act")(cfg, where)


def _phimoe(cfg: Config, where: str) -> dict[str, Any]:
    """Mixtral's experts behind a router without bias (sparsemixer routing changes the weights only);
    LayerNorms with biases; attention biases by attention_bias; an lm_head bias by lm_head_bias."""
    out: dict[str, Any] = {
        "position": rope(cfg, default_theta=1e6),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
        "mlp": {
            "kind": "moe",
            "experts": cfg["num_local_experts"],
            "top_k": cfg["num_experts_per_tok"],
            "d_expert": cfg["intermediate_size"],
        },
    }
    if cfg["lm_head_bias"]:
        out["head"] = {"kind": "lm", "bias": True}
    if cfg.get("sliding_window"):
        out["mixer"] = {"kind": "standard", "sliding_window": cfg["sliding_window"]}
    return out


def _uniform(key: str) -> Refusal:
    return Refusal(key, lambda c: isinstance(c.get(key), int), "a different value per layer is not represented")


# fmt: off
FAMILIES = [
    Family(
        "seed_oss",
        "SeedOss",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 155136, "hidden_size": 4096, "intermediate_size": 27648, "num_hidden_layers": 64,
         "num_attention_heads": 80, "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 524288,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": True, "attention_out_bias": False,
         "mlp_bias": False, "head_dim": 128},
        fixed=_LLAMA_FIXED,
        derive=combine(gated_mlp(), head_dim, kv_heads, _seed_oss),
    ),
    Family(
        "ministral",
        "Ministral",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None, "hidden_act": "silu",
         "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
         "sliding_window": 4096, "layer_types": None},
        fixed={**_LLAMA_FIXED, "bias": False},
        refuse=(_LAYER_TYPES,),
        derive=combine(gated_mlp(), head_dim, kv_heads, _ministral),
    ),
    Family(
        "smollm3",
        "SmolLM3",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
         "num_attention_heads": 16, "num_key_value_heads": 4, "hidden_act": "silu", "max_position_embeddings": 32768,
         "rms_norm_eps": 1e-6, "use_sliding_window": False, "sliding_window": None, "no_rope_layers": None,
         "no_rope_layer_interval": 4, "layer_types": None, "attention_bias": False, "mlp_bias": False,
         "tie_word_embeddings": True},
        fixed=_LLAMA_FIXED,
        refuse=(_LAYER_TYPES, Refusal("no_rope_layers", _smollm3_rope_ok,
                                      "no_rope_layers must hold a 0 or 1 for every layer")),
        derive=combine(gated_mlp(), kv_heads, _smollm3),
    ),
    Family(
        "hunyuan_v1_dense",
        "HunYuanDenseV1",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "attention_bias": False, "head_dim": None},
        fixed={**_LLAMA_FIXED},
        derive=combine(gated_mlp(), head_dim, kv_heads, _hunyuan),
    ),
    Family(
        "hunyuan_v1_moe",
        "HunYuanMoEV1",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": None, "hidden_act": "silu", "max_position_embeddings": 2048,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "attention_bias": False, "num_experts": 1,
         "moe_topk": 1, "head_dim": None},
        fixed={**_LLAMA_FIXED},
        aliases={"num_local_experts": "num_experts"},
        refuse=(_uniform("num_experts"), _uniform("moe_topk")),
        derive=combine(gated_mlp(), head_dim, kv_heads, _hunyuan_moe),
    ),
    Family(
        "exaone4",
        "Exaone4",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 2048,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "sliding_window": 4096, "sliding_window_pattern": 4,
         "layer_types": None},
        fixed={**_LLAMA_FIXED, "norm_position": "post_sublayer", "bias": False},
        refuse=(_LAYER_TYPES, Refusal("sliding_window_pattern", _exaone4_pattern_ok,
                                      "a pattern is a positive int or a string of L and G")),
        derive=combine(gated_mlp(), head_dim, kv_heads, _exaone4),
    ),
    Family(
        "stablelm",
        "StableLm",
        ("ForCausalLM", "Model"),
        {**_LLAMA_FIELDS, "norm_eps": "layer_norm_eps"},
        {"vocab_size": 50304, "intermediate_size": 6912, "hidden_size": 2560, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "hidden_act": "silu", "max_position_embeddings": 4096,
         "layer_norm_eps": 1.0e-5, "tie_word_embeddings": False, "use_qkv_bias": False, "qk_layernorm": False,
         "use_parallel_residual": False},
        fixed={"norm": "layernorm", "norm_position": "pre"},
        refuse=(must_be_falsy("qk_layernorm", "a LayerNorm of its own for every head (StableLmLayerNormPerHead) is "
                                              "not represented"),),
        derive=combine(gated_mlp(), kv_heads, _stablelm),
    ),
    Family(
        "nemotron",
        "Nemotron",
        ("ForCausalLM", "Model"),
        {**_LLAMA_FIELDS, "norm_eps": "norm_eps"},
        {"vocab_size": 256000, "hidden_size": 6144, "intermediate_size": 24576, "num_hidden_layers": 32,
         "num_attention_heads": 48, "head_dim": None, "num_key_value_heads": None, "hidden_act": "relu2",
         "max_position_embeddings": 4096, "norm_eps": 1e-5, "tie_word_embeddings": False, "attention_bias": False,
         "mlp_bias": False},
        fixed={"norm": "layernorm", "norm_position": "pre"},
        derive=combine(_nemotron_act, head_dim, kv_heads, _nemotron),
    ),
    Family(
        "phimoe",
        "Phimoe",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 32064, "hidden_size": 4096, "intermediate_size": 6400, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu", "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "sliding_window": None, "num_experts_per_tok": 2,
         "num_local_experts": 16, "attention_bias": False, "lm_head_bias": False},
        # PhimoeDecoderLayer's norms are nn.LayerNorm(eps=rms_norm_eps), with biases
        fixed={"norm": "layernorm", "norm_position": "pre"},
        derive=combine(gated_mlp(), kv_heads, _phimoe),
    ),
]
# fmt: on
