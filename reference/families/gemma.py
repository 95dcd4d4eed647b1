"""The Gemma lineage's checkpoints: Gemma 2 and Gemma 3 (their adapters: archspec.hf.gemma)."""

from __future__ import annotations

from archspec.reference.families.engine import (
    ACT,
    DEC,
    LLAMA_LIKE,
    Checkpoint,
    d_value_is_d_head,
    embedding_is_d_model,
    layer_specs,
    layer_types,
    layer_windows,
    one_attention_bias,
    one_window,
    scale,
    window,
)
from archspec.reference.families.llama import LLAMA_CONFIG, LLAMA_MLP
from archspec.sources.weightmap import WeightMap, each, row
from archspec.spec.model import ModelSpec


def query_pre_attn_scalar(s: ModelSpec) -> int:
    """Gemma 2 scales scores by query_pre_attn_scalar^-0.5, an integer."""
    return round(scale(s) ** -2)


def integer_query_scalar(s: ModelSpec) -> str | None:
    ok = abs(query_pre_attn_scalar(s) ** -0.5 - scale(s)) <= 1e-12 * scale(s)
    return None if ok else f"mixer.scale={scale(s)!r} (needs n^-0.5 for an integer query_pre_attn_scalar n)"


def gemma3_layers(s: ModelSpec) -> str | None:
    """Gemma 3: the layers differ only in their window and rotary base, one window and one base for the
    sliding layers, one base for the global ones (rope_parameters per layer type)."""
    first: dict[bool, int] = {}
    layers = layer_specs(s)
    unwindowed = s.mixer.model_copy(update={"sliding_window": None})
    for i, k in enumerate(layers):
        sliding = k.mixer.kind == "standard" and k.mixer.sliding_window is not None
        f = layers[first.setdefault(sliding, i)]
        if k.mixer != f.mixer or k.position != f.position:
            kind = "sliding" if sliding else "global"
            return f"layer {i}: attention or position differs from layer {first[sliding]}'s (one per {kind} type)"
        widths = (k.d_ff, k.d_head, k.n_heads, k.n_kv_heads) == (s.d_ff, s.d_head, s.n_heads, s.n_kv_heads)
        if not widths or k.mlp != s.mlp or k.mixer.model_copy(update={"sliding_window": None}) != unwindowed:
            return f"layer {i}: differs from the model in more than its window and rotary base"
    return None


def gemma2_layers(s: ModelSpec) -> str | None:
    """Gemma 2: a window on the even layers and none on the odd ones (layer_types as Gemma2Config derives
    them, the only layout its adapter reads), or no window at all."""
    windows = layer_windows(s)
    ok = not any(windows) or all(bool(w) == (i % 2 == 0) for i, w in enumerate(windows))
    return None if ok else "mixer.sliding_layers (needs the window on the even layers: sliding, full, ...)"


def _kind_base(s: ModelSpec, sliding: bool) -> float:
    """The rotary base of Gemma 3's sliding (or global) layers; the model's where it has none."""
    for k in layer_specs(s):
        if (k.mixer.kind == "standard" and k.mixer.sliding_window is not None) == sliding:
            return k.position.base
    return s.position.base


GEMMA2_WEIGHTS = WeightMap("Gemma 2", strip=("model.",), rows=(
    row("embed_tokens.weight", "embed.weight"),
    # Gemma's RMSNorm stores w and scales by 1 + w
    row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight", "plus_one"),
    row(each("layers.{}.self_attn.{x}_proj.{w}", "q", "k", "v"), DEC + "attention.qkv.{w}", "cat"),
    row("layers.{}.self_attn.o_proj.{w}", DEC + "attention.out.{w}"),
    row("layers.{}.post_attention_layernorm.weight", DEC + "attention_post_norm.weight", "plus_one"),
    row("layers.{}.pre_feedforward_layernorm.weight", DEC + "mlp_norm.weight", "plus_one"),
    *LLAMA_MLP,
    row("layers.{}.post_feedforward_layernorm.weight", DEC + "mlp_post_norm.weight", "plus_one"),
    row("norm.weight", "decoder.final_norm.weight", "plus_one"),
    row("lm_head.weight", "head.weight"),
))  # fmt: skip


# Gemma 3: Gemma 2's four (1 + w) norms, and a per-head QK-norm stored the same way
GEMMA3_WEIGHTS = WeightMap("Gemma 3", strip=("model.",), rows=(
    *GEMMA2_WEIGHTS.rows,
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight", "plus_one"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight", "plus_one"),
))  # fmt: skip


# Gemma 2 and 3 keys beyond the adapter's fields
GEMMA_CONFIG = {
    **LLAMA_CONFIG,
    "hidden_activation": lambda s: ACT[s.activation],  # Gemma's own default is gelu_pytorch_tanh
    "hidden_act": None,
    "attention_bias": lambda s: s.biases.qkv,
    "query_pre_attn_scalar": query_pre_attn_scalar,
    "attn_logit_softcapping": lambda s: s.mixer.softcap,
    "final_logit_softcapping": lambda s: s.head.softcap,
    "sliding_window": window,
    "layer_types": layer_types,
}

# fmt: off
CHECKPOINTS = [
    Checkpoint(
        "Gemma 2", "gemma2",
        {**LLAMA_LIKE, "bias.mlp": (False,), "mixer.softcap": None, "mixer.sliding_window": None,
         "head.softcap": None},
        (gemma2_layers, one_window, one_attention_bias, integer_query_scalar, d_value_is_d_head,
         embedding_is_d_model),
        GEMMA_CONFIG,
        (GEMMA2_WEIGHTS,),
    ),
    Checkpoint(
        "Gemma 3", "gemma3_text",
        {**LLAMA_LIKE, "bias.mlp": (False,), "mixer.qk_norm": ("head", True), "mixer.softcap": None,
         "mixer.sliding_window": None, "head.softcap": None},
        (gemma3_layers, one_attention_bias, integer_query_scalar, d_value_is_d_head, embedding_is_d_model),
        {
            **GEMMA_CONFIG,
            "rope_theta": None,
            "rope_parameters": lambda s: {
                "full_attention": {"rope_type": "default", "rope_theta": _kind_base(s, False)},
                "sliding_attention": {"rope_type": "default", "rope_theta": _kind_base(s, True)},
            },
        },
        (GEMMA3_WEIGHTS,),
    ),
]
# fmt: on
