"""The Qwen hybrids: Qwen3-Next (``qwen3_next``), Qwen3.5 (``qwen3_5_text``, ``qwen3_5_moe_text``).

Gated DeltaNet layers and gated full attention (its query projection also emits a sigmoid output gate;
per-head QK-norm) every ``full_attention_interval``-th layer, each config's ``layer_types`` (or the
interval) and ``mlp_only_layers`` / ``decoder_sparse_step`` resolved into one per-layer list of kinds, then
compacted into ``kinds`` and ``[layers]`` (archspec.hf.engine.layered). Their RMSNorms are zero-centred
(``1 + w``): the same parameters as a plain RMSNorm. The Mamba hybrids are archspec.hf.hybrids.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from archspec.hf.engine import Config, Family, Refusal, activation, biases, layered, rope
from archspec.hf.llama import _LLAMA_FIELDS


def _qwen_layer_types(cfg: Config) -> list[str]:
    """layer_types, or (absent) linear attention with full attention on every full_attention_interval-th layer."""
    types = cfg.get("layer_types")
    if types is None:
        every = cfg.get("full_attention_interval", 4)
        n = cfg["num_hidden_layers"]
        unit = ["linear_attention"] * (every - 1) + ["full_attention"]  # (i + 1) % every == 0: full attention
        types = (unit * (n // every + 1))[:n]
    return list(types)


def _qwen_types_ok(cfg: Config) -> bool:
    types = cfg.get("layer_types")
    return types is None or (
        isinstance(types, list)
        and len(types) == cfg["num_hidden_layers"]
        and set(types) <= {"linear_attention", "full_attention"}
    )


def _qwen_moe_layers(cfg: Config) -> list[bool]:
    """Qwen3-Next: a mixture of experts on layer i unless i is in mlp_only_layers, there are no experts,
    or (i + 1) is not a multiple of decoder_sparse_step."""
    dense = set(cfg.get("mlp_only_layers") or [])
    step, n = cfg.get("decoder_sparse_step", 1), cfg["num_hidden_layers"]
    if not cfg["num_experts"] > 0:
        return [False] * n
    moe = ([False] * (step - 1) + [True]) * (n // step + 1)  # (i + 1) % step == 0: experts
    for i in dense:
        if i in range(n):
            moe[int(i)] = False
    return moe[:n]


def _qwen_hybrid(moe_layers: Any, projections: str):
    """Qwen3-Next / Qwen3.5: `moe_layers(cfg)` says which layers hold experts (None: a dense model);
    the Gated DeltaNet's projections are fused (Qwen3-Next) or split (Qwen3.5)."""

    def derive(cfg: Config, where: str) -> dict[str, Any]:
        deltanet: dict[str, Any] = {
            "kind": "gated_deltanet",
            "key_heads": cfg["linear_num_key_heads"],
            "value_heads": cfg["linear_num_value_heads"],
            "d_key": cfg["linear_key_head_dim"],
            "d_value_head": cfg["linear_value_head_dim"],
            "d_conv": cfg["linear_conv_kernel_dim"],
        }
        if projections != "fused":
            deltanet["projections"] = projections
        base: dict[str, Any] = {
            "activation": activation(cfg, "hidden_act", True, where),
            "d_head": cfg["head_dim"],
            "n_kv_heads": cfg["num_key_value_heads"],
            "bias": biases(cfg["attention_bias"], cfg["attention_bias"], False),
            "position": rope(cfg, default_theta=10000.0, default_fraction=0.25),
            "mixer": {"kind": "standard", "qk_norm": "head", "gate": True},
        }
        moe = moe_layers(cfg) if moe_layers else [False] * cfg["num_hidden_layers"]
        has_moe = any(moe)  # once: asked again per layer, a 10^6-layer config took minutes
        if has_moe:
            base["mlp"] = {
                "kind": "moe",
                "experts": cfg["num_experts"],
                "top_k": cfg["num_experts_per_tok"],
                "d_expert": cfg["moe_intermediate_size"],
                "normalize": bool(cfg.get("norm_topk_prob", True)),
                "d_shared": cfg["shared_expert_intermediate_size"],
                "shared_gate": True,
            }
        kinds: dict[str, dict[str, Any]] = {}
        name_of = {}  # (layer type, experts?) -> the kind's name, each kind made once
        for mixer, expert in itertools.product(("linear_attention", "full_attention"), (True, False)):
            dense = has_moe and not expert
            name = ("deltanet" if mixer == "linear_attention" else "attention") + ("-dense" if dense else "")
            kinds[name] = {"mixer": deltanet} if mixer == "linear_attention" else {}
            if dense:
                kinds[name]["mlp"] = "dense"
            name_of[mixer, expert] = name
        types = _qwen_layer_types(cfg)
        # without layer_types or mlp_only_layers the kinds repeat every lcm(interval, sparse step) layers: three
        # of those units say what the whole stack says (its compact pattern), in time of the unit, not the depth
        n = cfg["num_hidden_layers"]
        if cfg.get("layer_types") is None and not cfg.get("mlp_only_layers"):
            n = min(n, 3 * math.lcm(cfg.get("full_attention_interval", 4), cfg.get("decoder_sparse_step", 1)))
        names = list(map(name_of.__getitem__, zip(types[:n], moe[:n], strict=True)))
        return layered(names, kinds, base)

    return derive


def _all_moe(cfg: Config) -> list[bool]:
    return [True] * cfg["num_hidden_layers"]


_QWEN_TYPES = Refusal("layer_types", _qwen_types_ok, "a list of linear_attention / full_attention, one per layer")
_QWEN_DEFAULTS = {
    "vocab_size": 151936, "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False, "attention_bias": False, "head_dim": 256, "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "layer_types": None,
}  # fmt: skip
_QWEN35_DEFAULTS = {**_QWEN_DEFAULTS, "vocab_size": 248320, "num_attention_heads": 16}


# fmt: off
FAMILIES = [
    Family(
        "qwen3_next",
        "Qwen3Next",
        ("ForCausalLM", "Model"),
        _LLAMA_FIELDS,
        {**_QWEN_DEFAULTS, "intermediate_size": 5632, "decoder_sparse_step": 1, "moe_intermediate_size": 512,
         "shared_expert_intermediate_size": 512, "num_experts_per_tok": 10, "num_experts": 512,
         "norm_topk_prob": True, "mlp_only_layers": None},
        fixed={"norm": "rmsnorm", "norm_position": "pre"},
        refuse=(
            _QWEN_TYPES,
            Refusal("shared_expert_intermediate_size", lambda c: bool(c["shared_expert_intermediate_size"]),
                    "transformers keeps the shared expert's gate without a shared expert"),
            Refusal("decoder_sparse_step", lambda c: isinstance(c["decoder_sparse_step"], int)
                    and c["decoder_sparse_step"] >= 1, "a positive integer"),
        ),
        derive=_qwen_hybrid(_qwen_moe_layers, "fused"),
    ),
    Family(
        "qwen3_5_text",
        "Qwen3_5",
        ("ForCausalLM",),
        _LLAMA_FIELDS,
        {**_QWEN35_DEFAULTS, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 32,
         "num_key_value_heads": 4},
        fixed={"norm": "rmsnorm", "norm_position": "pre"},
        refuse=(_QWEN_TYPES,),
        derive=_qwen_hybrid(None, "split"),
    ),
    Family(
        "qwen3_5_moe_text",
        "Qwen3_5Moe",
        ("ForCausalLM",),
        {k: v for k, v in _LLAMA_FIELDS.items() if k != "d_ff"},
        {**_QWEN35_DEFAULTS, "hidden_size": 2048, "num_hidden_layers": 40, "num_key_value_heads": 2,
         "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 8,
         "num_experts": 256},
        fixed={"norm": "rmsnorm", "norm_position": "pre"},
        refuse=(
            _QWEN_TYPES,
            Refusal("shared_expert_intermediate_size", lambda c: bool(c["shared_expert_intermediate_size"]),
                    "transformers keeps the shared expert's gate without a shared expert"),
            Refusal("num_experts", lambda c: bool(c["num_experts"]), "every layer of Qwen3.5-MoE has experts"),
        ),
        derive=_qwen_hybrid(_all_moe, "split"),
    ),
]
# fmt: on
