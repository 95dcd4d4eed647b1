"""Mamba's lineage and its hybrids: layers of Mamba or Mamba-2 mixers, alone or among attention layers,
each config's per-layer key (``hybrid_override_pattern``, ``attn_layer_period``...) resolved here into
one per-layer list of kinds, then compacted into ``kinds`` and ``[layers]`` (archspec.hf.engine.layered).

- Jamba (``jamba``): Mamba (RMSNorms on dt, B, C) or attention, experts or a dense MLP, by periods.
- Nemotron-H (``nemotron_h``): every layer is one sub-layer, named by ``hybrid_override_pattern``:
  ``M`` a Mamba-2 mixer, ``*`` attention (no positions), ``-`` a squared-ReLU MLP, ``E`` a mixture
  of squared-ReLU experts (Nemotron 3).
- Mamba-2 (``mamba2``): a stack of Mamba-2 mixers alone (Mamba-Codestral), each behind an RMSNorm, a final
  RMSNorm (norm_f), no positions.
- Falcon-H1 (``falcon_h1``): in every layer attention (rotary) and a Mamba-2 mixer run side by side on
  the same normalised input and their outputs add (``attention.ssm``), then a SwiGLU MLP.

The Gated DeltaNet hybrids of the Qwen lineage (Qwen3-Next, Qwen3.5) are archspec.hf.qwen_hybrids.
"""

from __future__ import annotations

import math
from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    activation,
    biases,
    dt_clamp,
    layered,
    mamba2_of_prefixed_keys,
    must_be,
    must_be_falsy,
    rope,
    time_step_limit_ok,
)
from archspec.hf.llama import _LLAMA_FIELDS

# ---------------------------------------------------------------- Nemotron-H

_NEMOTRON_ACTIVATIONS = {"relu2": "relu2", "relu": "relu", "silu": "silu", "gelu": "gelu"}  # ungated MLPs
_NEMOTRON_LAYERS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_NEMOTRON_TYPES = {"linear_attention": "mamba", "full_attention": "attention", "mlp": "mlp", "moe": "moe"}


def _nemotron_layers(cfg: Config) -> list[str] | None:
    """The kind of each layer: hybrid_override_pattern (one character a layer), or layers_block_type /
    layer_types (transformers 5's names); None when neither reads."""
    types = cfg.get("layers_block_type")
    if types is not None:
        ok = isinstance(types, list) and all(t in _NEMOTRON_TYPES for t in types)
        return [_NEMOTRON_TYPES[t] for t in types] if ok else None
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is None:
        return ["mamba", "moe", "attention", "mlp"]  # transformers' default layers_block_type
    if not isinstance(pattern, str) or not pattern or set(pattern) - set(_NEMOTRON_LAYERS):
        return None
    return [_NEMOTRON_LAYERS[c] for c in pattern]


def _nemotron_h(cfg: Config, where: str) -> dict[str, Any]:
    """Nemotron-H: one norm and one sub-layer per layer, no positions (its attention has no rotary
    embedding); the number of layers is the pattern's length (transformers ignores num_hidden_layers)."""
    per_layer = _nemotron_layers(cfg)
    mamba = {
        "kind": "mamba2",
        "heads": cfg["mamba_num_heads"],
        "head_dim": cfg["mamba_head_dim"],
        "d_state": cfg["ssm_state_size"],
        "groups": cfg["n_groups"],
        "d_conv": cfg["conv_kernel"],
        "conv_bias": bool(cfg["use_conv_bias"]),
        "bias": bool(cfg["use_bias"]),
        "dt_min": float(cfg["time_step_min"]),  # transformers' mixer clamps dt to (time_step_min, inf)
    }
    base: dict[str, Any] = {
        "decoder_layers": len(per_layer),
        "activation": _NEMOTRON_ACTIVATIONS[cfg["mlp_hidden_act"]],
        "d_head": cfg["head_dim"],
        "n_kv_heads": cfg["num_key_value_heads"],
        "bias": biases(False, False, cfg["mlp_bias"]),
    }
    kinds: dict[str, dict[str, Any]] = {
        "mamba": {"mixer": mamba, "mlp": "none"},
        "attention": {"mlp": "none"},
        "mlp": {"mixer": "none"},
    }
    if "moe" in per_layer:
        moe: dict[str, Any] = {
            "kind": "moe",
            "experts": cfg["n_routed_experts"],
            "top_k": cfg["num_experts_per_tok"],
            "d_expert": cfg["moe_intermediate_size"],
            "normalize": bool(cfg["norm_topk_prob"]),
            "scoring": "sigmoid",
            "routed_scale": float(cfg["routed_scaling_factor"]),
        }
        if cfg["n_shared_experts"]:
            moe["d_shared"] = cfg["moe_shared_expert_intermediate_size"]
        kinds["moe"] = {"mixer": "none", "mlp": moe}
    return layered(per_layer, {k: v for k, v in kinds.items() if k in per_layer}, base)


# ---------------------------------------------------------------- Jamba


def _jamba(cfg: Config, where: str) -> dict[str, Any]:
    """Jamba: attention (no positions) on layers i % attn_layer_period == attn_layer_offset, Mamba with
    RMSNorms on dt, B and C elsewhere; experts (top-k of a softmax, not renormalised) on layers
    i % expert_layer_period == expert_layer_offset, a dense MLP elsewhere (or everywhere with one expert)."""
    d, n = cfg["hidden_size"], cfg["num_hidden_layers"]
    rank = cfg["mamba_dt_rank"]
    mamba = {
        "kind": "mamba",
        "d_inner": cfg["mamba_expand"] * d,
        "d_state": cfg["mamba_d_state"],
        "d_conv": cfg["mamba_d_conv"],
        "dt_rank": -(-d // 16) if rank == "auto" else rank,  # ceil(d / 16), exactly
        "conv_bias": bool(cfg["mamba_conv_bias"]),
        "bias": bool(cfg["mamba_proj_bias"]),
        "dt_norms": True,
    }
    experts = cfg["num_experts"] > 1
    base: dict[str, Any] = {
        "activation": activation(cfg, "hidden_act", True, where),
        "n_kv_heads": cfg["num_key_value_heads"] or cfg["num_attention_heads"],
    }
    if experts:
        base["mlp"] = {"kind": "moe", "experts": cfg["num_experts"], "top_k": cfg["num_experts_per_tok"],
                       "d_expert": cfg["intermediate_size"], "normalize": False}  # fmt: skip
    names, kinds = [], {}
    for i in range(n):
        attention = i % cfg["attn_layer_period"] == cfg["attn_layer_offset"]
        moe = experts and i % cfg["expert_layer_period"] == cfg["expert_layer_offset"]
        name = ("attention" if attention else "mamba") + ("" if moe or not experts else "-dense")
        kind: dict[str, Any] = {} if attention else {"mixer": mamba}
        if experts and not moe:
            kind["mlp"] = "dense"
        kinds[name] = kind
        names.append(name)
    return layered(names, kinds, base)


# ---------------------------------------------------------------- Mamba-2


def _mamba2(cfg: Config, where: str) -> dict[str, Any]:
    """Mamba-2: every layer x + mixer(RMSNorm(x)), no MLP, no positions; transformers' mixer clamps dt, after
    its softplus, to time_step_limit (Infinity: no upper limit). The config names no attention, so n_heads
    and d_head restate the mixer's heads (no layer reads them)."""
    mixer = {"kind": "mamba2", "heads": cfg["num_heads"], "head_dim": cfg["head_dim"], "d_state": cfg["state_size"],
             "groups": cfg["n_groups"], "d_conv": cfg["conv_kernel"], "conv_bias": bool(cfg["use_conv_bias"]),
             "bias": bool(cfg["use_bias"]), **dt_clamp(cfg)}  # fmt: skip
    return {"mixer": mixer, "mlp": "none", "n_heads": cfg["num_heads"], "d_head": cfg["head_dim"]}


# ---------------------------------------------------------------- Falcon-H1

# muP multipliers that scale activations inside the layer (FalconH1DecoderLayer, FalconH1Mixer, FalconH1MLP): the
# parameter counts and the matmul FLOPs do not depend on them, and the spec does not represent them
_FALCON_ACTIVATION_MULTIPLIERS = ("attention_in_multiplier", "attention_out_multiplier", "ssm_in_multiplier",
                                  "ssm_out_multiplier")  # fmt: skip


def _falcon_d_ssm(cfg: Config) -> int:
    return cfg["mamba_expand"] * cfg["hidden_size"] if cfg["mamba_d_ssm"] is None else cfg["mamba_d_ssm"]


def _falcon_head_dim(cfg: Config) -> int:
    return _falcon_d_ssm(cfg) // cfg["mamba_n_heads"] if cfg["mamba_d_head"] == "auto" else cfg["mamba_d_head"]


def _falcon_h1(cfg: Config, where: str) -> dict[str, Any]:
    """Falcon-H1 (FalconH1DecoderLayer): x + attention(N(x)) + mamba(N(x)), then x + mlp(N2(x)). The attention is
    Llama's (head_dim, or hidden_size / heads; keys times key_multiplier, which scales the scores as
    attention.scale does); the Mamba-2 mixer is mamba_d_ssm wide (mamba_expand * hidden_size when null), its
    in_proj biased by mamba_proj_bias and its out_proj by projectors_bias, its gated RMSNorm optional
    (mamba_rms_norm) and before or after the gate (mamba_norm_before_gate), dt clamped to time_step_limit. The
    token embeddings are scaled by embedding_multiplier, the logits by lm_head_multiplier."""
    d_head = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    ssm: dict[str, Any] = {
        **mamba2_of_prefixed_keys(cfg, _falcon_head_dim(cfg)),
        "out_bias": bool(cfg["projectors_bias"]),
        "norm": ("before_gate" if cfg["mamba_norm_before_gate"] else "gated") if cfg["mamba_rms_norm"] else "none",
    }
    attention: dict[str, Any] = {"kind": "standard", "ssm": ssm}
    if cfg["key_multiplier"] != 1:
        attention["scale"] = float(cfg["key_multiplier"]) / math.sqrt(d_head)
    out: dict[str, Any] = {
        "activation": activation(cfg, "hidden_act", True, where),
        "d_head": d_head,
        "n_kv_heads": cfg["num_key_value_heads"] or cfg["num_attention_heads"],
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"]),
        "position": rope(cfg),
        "mixer": attention,
    }
    if cfg["embedding_multiplier"] != 1:
        out["embedding_scale"] = float(cfg["embedding_multiplier"])
    if cfg["lm_head_multiplier"] != 1:
        out["head"] = {"kind": "lm", "scale": float(cfg["lm_head_multiplier"])}
    return out


def _falcon_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    scaled = [k for k in _FALCON_ACTIVATION_MULTIPLIERS if cfg.get(k, 1.0) != 1]
    scaled += [k for k in ("mlp_multipliers", "ssm_multipliers") if any(v != 1 for v in cfg.get(k) or ())]
    if not scaled:
        return []
    return [f"Falcon-H1's muP multipliers {', '.join(scaled)} scale activations inside each layer: the counts and "
            "FLOPs do not depend on them and the spec does not represent them"]  # fmt: skip


def _falcon_dims_ok(cfg: Config) -> bool:
    return _falcon_d_ssm(cfg) == cfg["mamba_n_heads"] * _falcon_head_dim(cfg)


def _multipliers_ok(key: str, n: int) -> Refusal:
    return Refusal(key, lambda c: c.get(key) is None or (isinstance(c[key], list) and len(c[key]) == n),
                   f"a list of {n} numbers (transformers unpacks it)")  # fmt: skip


def _nemotron_pattern_ok(cfg: Config) -> bool:
    return _nemotron_layers(cfg) is not None


# fmt: off
FAMILIES = [
    Family(
        "nemotron_h",
        "NemotronH",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "n_heads": "num_attention_heads",
         "d_ff": "intermediate_size", "max_positions": "max_position_embeddings", "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 131072, "hidden_size": 4096, "layers_block_type": None, "tie_word_embeddings": False,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 4096,
         "attention_bias": False, "sliding_window": None, "intermediate_size": 21504, "mlp_hidden_act": "relu2",
         "mlp_bias": False, "ssm_state_size": 128, "mamba_num_heads": 128, "mamba_head_dim": 64,
         "mamba_hidden_act": "silu", "n_groups": 8, "conv_kernel": 4, "time_step_min": 0.001,
         "use_conv_bias": True, "n_routed_experts": 8, "n_shared_experts": 1, "moe_intermediate_size": 7688,
         "moe_shared_expert_intermediate_size": 7688, "moe_latent_size": None, "num_experts_per_tok": 2,
         "routed_scaling_factor": 1.0, "norm_topk_prob": True, "num_nextn_predict_layers": 0, "use_bias": False,
         "layer_norm_epsilon": 1e-5},
        fixed={"norm": "rmsnorm", "norm_position": "pre", "position": "none"},
        aliases={"layer_types": "layers_block_type", "num_local_experts": "n_routed_experts",
                 "mamba_n_groups": "n_groups", "mamba_d_conv": "conv_kernel", "mamba_dt_min": "time_step_min",
                 "mamba_conv_bias": "use_conv_bias"},
        refuse=(
            Refusal("hybrid_override_pattern", _nemotron_pattern_ok,
                    "one of M (Mamba-2), * (attention), - (MLP), E (experts) per layer"),
            Refusal("layers_block_type", _nemotron_pattern_ok,
                    "a list of linear_attention, full_attention, mlp, moe"),
            Refusal("attention_bias", lambda c: not c.get("attention_bias"),
                    "transformers' NemotronHAttention has no biases; the checkpoint's would not be counted"),
            Refusal("attention_head_dim", lambda c: c.get("attention_head_dim") in (None, c["head_dim"]),
                    "transformers reads head_dim; a different attention_head_dim is not represented"),
            must_be_falsy("sliding_window", "a window on Nemotron-H's attention is not represented"),
            Refusal("mlp_bias", lambda c: not c["mlp_bias"] or "moe" not in (_nemotron_layers(c) or []),
                    "transformers' Nemotron-H experts have no biases beside MLPs that have them"),
            must_be_falsy("moe_latent_size", "latent expert projections are not represented"),
            must_be("mamba_hidden_act", "silu", "the Mamba-2 mixer's activation is silu"),
            Refusal("mlp_hidden_act", lambda c: c["mlp_hidden_act"] in _NEMOTRON_ACTIVATIONS,
                    "relu2, relu, gelu or silu"),
        ),
        derive=_nemotron_h,
    ),
    Family(
        "mamba2",
        "Mamba2",
        ("ForCausalLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "decoder_layers": "num_hidden_layers",
         "norm_eps": "layer_norm_epsilon"},
        {"num_heads": 128, "head_dim": 64, "vocab_size": 32768, "hidden_size": 4096, "state_size": 128,
         "num_hidden_layers": 64, "layer_norm_epsilon": 1e-5, "expand": 2, "conv_kernel": 4, "n_groups": 8,
         "use_bias": False, "use_conv_bias": True, "hidden_act": "silu", "time_step_limit": (0.0, float("inf")),
         "tie_word_embeddings": False},
        # no position table and no context length in the config: max_positions is only the default sequence
        # length of archspec's FLOP and memory figures (--seq-len or --set max_positions=... change it)
        fixed={"norm": "rmsnorm", "norm_position": "pre", "position": "none", "max_positions": 2048},
        refuse=(
            Refusal("expand", lambda c: c["expand"] * c["hidden_size"] == c["num_heads"] * c["head_dim"],
                    "transformers' mixer is expand * hidden_size wide, the spec's heads * head_dim: they must agree"),
            must_be("hidden_act", "silu", "the Mamba-2 mixer's activation is silu"),
            Refusal("time_step_limit", lambda c: c.get("time_step_limit") is not None and time_step_limit_ok(c),
                    "a pair [low, high] with 0 <= low <= high (high may be Infinity)"),
            Refusal("rms_norm", lambda c: c.get("rms_norm", True) is not False,
                    "transformers' Mamba-2 builds RMSNorms only; LayerNorms' biases would not be counted"),
        ),
        derive=_mamba2,
    ),
    Family(
        "falcon_h1",
        "FalconH1",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 128000, "tie_word_embeddings": False, "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
         "rms_norm_eps": 1e-5, "max_position_embeddings": 8192, "mamba_d_ssm": 1024, "mamba_n_heads": 128,
         "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2,
         "mamba_conv_bias": True, "mamba_proj_bias": False, "mamba_norm_before_gate": True, "mamba_rms_norm": False,
         "time_step_limit": (0.0, math.inf), "projectors_bias": False, "lm_head_multiplier": 1.0,
         "embedding_multiplier": 1.0, "key_multiplier": 1.0, "attention_bias": False, "mlp_bias": False,
         "mlp_multipliers": None, "ssm_multipliers": None, "attention_in_multiplier": 1.0,
         "attention_out_multiplier": 1.0, "ssm_in_multiplier": 1.0, "ssm_out_multiplier": 1.0},
        fixed={"norm": "rmsnorm", "norm_position": "pre"},
        refuse=(
            must_be("hidden_act", "silu", "the Mamba-2 mixer's activation is hidden_act, and the spec's is silu"),
            Refusal("mamba_d_head", _falcon_dims_ok,
                    "mamba_n_heads x mamba_d_head must be mamba_d_ssm (transformers refuses the config otherwise)"),
            Refusal("time_step_limit", time_step_limit_ok, "a pair (min, max) of dt with 0 <= min <= max"),
            _multipliers_ok("mlp_multipliers", 2),
            _multipliers_ok("ssm_multipliers", 5),
            # keys of TII's own Falcon-H1 code that transformers does not read (it builds both mixers and the MLP
            # in every layer): attention on some layers only, or no MLP, would be another model
            must_be_falsy("attn_layer_indices", "transformers builds attention in every Falcon-H1 layer"),
            must_be("mamba_use_mlp", True, "transformers builds the MLP in every Falcon-H1 layer"),
        ),
        derive=_falcon_h1,
        notes=_falcon_notes,
    ),
    Family(
        "jamba",
        "Jamba",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {"vocab_size": 65536, "tie_word_embeddings": False, "hidden_size": 4096, "intermediate_size": 14336,
         "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_act": "silu",
         "rms_norm_eps": 1e-6, "max_position_embeddings": 262144, "num_experts_per_tok": 2, "num_experts": 16,
         "expert_layer_period": 2, "expert_layer_offset": 1, "attn_layer_period": 8, "attn_layer_offset": 4,
         "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_dt_rank": "auto", "mamba_conv_bias": True,
         "mamba_proj_bias": False},
        fixed={"norm": "rmsnorm", "norm_position": "pre", "position": "none", "bias": False},
        refuse=(
            Refusal("num_experts", lambda c: isinstance(c["num_experts"], int) and c["num_experts"] >= 1,
                    "a positive number of experts"),
            *(Refusal(k, lambda c, k=k: isinstance(c[k], int) and c[k] >= 1, "a positive integer")
              for k in ("attn_layer_period", "expert_layer_period")),
            # the first release's file (AI21's own code) says whether the mixer has its dt/B/C norms; transformers'
            # class always builds them
            must_be("mamba_inner_layernorms", True, "transformers' Jamba mixer always has its dt, B and C norms"),
        ),
        derive=_jamba,
    ),
]
# fmt: on
