"""Which weight maps name a checkpoint's tensors: a model_type's layouts, newest first.

The families the reference model loads carry their own maps (archspec.reference.families, each
``Checkpoint``'s ``weights``, proven by loading transformers' weights). The model_types below have a
names table only: the rows that name their released tensors for the spec's, held by the tests against
the names and shapes of transformers' own model built on the meta device (tests/test_sources.py).
Each has transformers 5's layout (experts stacked) and the released one (one tensor per expert).
"""

from __future__ import annotations

from functools import cache

from archspec.sources.weightmap import WeightMap, row

DEC = "decoder.layers.{}."  # the reference model's decoder layers (archspec.reference.families.engine.DEC)

QK_NORM = (
    row("layers.{}.self_attn.q_norm.weight", DEC + "attention.q_norm.weight"),
    row("layers.{}.self_attn.k_norm.weight", DEC + "attention.k_norm.weight"),
)


def _experts(at: str, router: str = "gate") -> tuple[tuple, tuple]:
    """Rows of a mixture of experts under `at` ('layers.{}.mlp'): transformers 5's stacked experts
    (gate_up_proj (E, 2·F, d) as [gate | up], down_proj (E, d, F)), and the released per-expert tensors."""
    common = (row(f"{at}.{router}.weight", DEC + "mlp.router.weight"),)
    stacked = common + (
        row(f"{at}.experts.gate_up_proj", (DEC + "mlp.experts.gate.weight", DEC + "mlp.experts.up.weight"), "split"),
        row(f"{at}.experts.down_proj", DEC + "mlp.experts.down.weight"),
    )
    per_expert = common + tuple(
        row(f"{at}.experts.{{e}}.{x}_proj.weight", DEC + f"mlp.experts.{x}.weight", "stack")
        for x in ("gate", "up", "down")
    )
    return stacked, per_expert


def _both(name: str, rows: tuple, moe_at: str | None, extra: tuple = (), ignore: tuple = ()) -> tuple[WeightMap, ...]:
    from archspec.reference.families.llama import ROTARY_BUFFERS

    if moe_at is None:
        return (WeightMap(name, rows + extra, strip=("model.",), ignore=ROTARY_BUFFERS + ignore),)
    stacked, per_expert = _experts(moe_at)
    return (
        WeightMap(name, rows + stacked + extra, strip=("model.",), ignore=ignore),
        WeightMap(
            f"{name} (per-expert checkpoint)",
            rows + per_expert + extra,
            strip=("model.",),
            ignore=ROTARY_BUFFERS + ignore,
        ),
    )


SHARED = tuple(
    row(f"layers.{{}}.mlp.shared_experts.{x}_proj.weight", DEC + f"mlp.shared.{x}.weight")
    for x in ("gate", "up", "down")
)


@cache
def names() -> dict[str, tuple[WeightMap, ...]]:
    """model_type -> its layouts; the rows of LLaMA where the family is LLaMA's with other names (the
    reference's tables are imported here, where they are used: the layer rule keeps them out of module level)."""
    from archspec.reference.families.llama import LLAMA_ATTENTION, LLAMA_MLP

    mla = (  # DeepSeek-V3: latent attention
        row("embed_tokens.weight", "embed.weight"),
        row("layers.{}.input_layernorm.weight", DEC + "attention_norm.weight"),
        row("layers.{}.self_attn.q_a_proj.weight", DEC + "attention.q_a.weight"),
        row("layers.{}.self_attn.q_a_layernorm.weight", DEC + "attention.q_norm.weight"),
        row("layers.{}.self_attn.q_b_proj.weight", DEC + "attention.q_b.weight"),
        row("layers.{}.self_attn.q_proj.weight", DEC + "attention.q.weight"),  # V2-Lite: no query compression
        row("layers.{}.self_attn.kv_a_proj_with_mqa.weight", DEC + "attention.kv_a.weight"),
        row("layers.{}.self_attn.kv_a_layernorm.weight", DEC + "attention.kv_norm.weight"),
        row("layers.{}.self_attn.kv_b_proj.weight", DEC + "attention.kv_b.weight"),
        row("layers.{}.self_attn.o_proj.weight", DEC + "attention.out.weight"),
        row("layers.{}.post_attention_layernorm.weight", DEC + "mlp_norm.weight"),
        *LLAMA_MLP,
        row("norm.weight", "decoder.final_norm.weight"),
        row("lm_head.weight", "head.weight"),
    )

    return {
        "mistral": _both("Mistral", LLAMA_ATTENTION + LLAMA_MLP, None),
        "qwen3": _both("Qwen3", LLAMA_ATTENTION + QK_NORM + LLAMA_MLP, None),
        "qwen3_moe": _both("Qwen3-MoE", LLAMA_ATTENTION + QK_NORM, "layers.{}.mlp"),
        "deepseek_v3": _both(
            "DeepSeek-V3", mla, "layers.{}.mlp", SHARED, ignore=(r"layers\.\d+\.mlp\.gate\.e_score_correction_bias",)
        ),  # a buffer
    }


def layouts(model_type: str | None) -> tuple[WeightMap, ...]:
    """The weight maps of a model_type (empty where archspec has none)."""
    if model_type in names():
        return names()[model_type]
    from archspec.reference.families import CHECKPOINTS

    for c in CHECKPOINTS.values():
        if c.model_type == model_type:
            return c.weights
    return ()


def known_types() -> list[str]:
    from archspec.reference.families import CHECKPOINTS

    return sorted({*names(), *(c.model_type for c in CHECKPOINTS.values())})
