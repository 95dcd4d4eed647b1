"""The T5 checkpoints (their adapter: archspec.hf.t5)."""

from __future__ import annotations

from archspec.reference.families.engine import (
    ACT,
    BASE,
    DEC,
    GATED,
    NON_GATED,
    Checkpoint,
    d_value_is_d_head,
    embedding_is_d_model,
    mha,
    scale,
)
from archspec.sources.weightmap import WeightMap, each, row
from archspec.spec.model import ModelSpec


def unscaled(s: ModelSpec) -> str | None:
    return None if scale(s) == 1.0 else f"mixer.scale={scale(s)!r} (needs 1.0: T5 does not scale scores)"


def _t5_rows(gated: bool) -> tuple:
    """T5's encoder and decoder blocks: layer.0 self-attention, (decoder) layer.1 cross-attention, then
    the feed-forward layer; the relative bias table lives in block 0 and serves the whole stack."""
    gated_ff = ((".DenseReluDense.wi_0.weight", "mlp.gate.weight"), (".DenseReluDense.wi_1.weight", "mlp.up.weight"))
    ff = gated_ff if gated else ((".DenseReluDense.wi.weight", "mlp.up.weight"),)
    rows = [
        row("shared.weight", "embed.weight"),
        row("encoder.embed_tokens.weight", "embed.weight", "tied"),
        row("decoder.embed_tokens.weight", "embed.weight", "tied"),
    ]
    for stack in ("encoder", "decoder"):
        block, layer, ff_at = stack + ".block.{}.layer.", stack + ".layers.{}.", "2" if stack == "decoder" else "1"
        rows += [
            row(stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight", stack + ".position.weight"),
            row(block + "0.layer_norm.weight", layer + "attention_norm.weight"),
            row(each(block + "0.SelfAttention.{x}.weight", "q", "k", "v"), layer + "attention.qkv.weight", "cat"),
            row(block + "0.SelfAttention.o.weight", layer + "attention.out.weight"),
            row(block + ff_at + ".layer_norm.weight", layer + "mlp_norm.weight"),
            *(row(block + ff_at + src, layer + dst) for src, dst in ff),
            row(block + ff_at + ".DenseReluDense.wo.weight", layer + "mlp.down.weight"),
            row(stack + ".final_layer_norm.weight", stack + ".final_norm.weight"),
        ]
    rows += [
        row("decoder.block.{}.layer.1.layer_norm.weight", DEC + "cross_attention_norm.weight"),
        row("decoder.block.{}.layer.1.EncDecAttention.q.weight", DEC + "cross_attention.q.weight"),
        row(each("decoder.block.{}.layer.1.EncDecAttention.{x}.weight", "k", "v"), DEC + "cross_attention.kv.weight",
            "cat"),
        row("decoder.block.{}.layer.1.EncDecAttention.o.weight", DEC + "cross_attention.out.weight"),
        row("lm_head.weight", "head.weight"),
    ]  # fmt: skip
    return tuple(rows)


# a table some old checkpoints carry and T5 never reads
T5_UNUSED = (r"decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias\.weight",)
T5_WEIGHTS = (
    WeightMap("T5 (gated feed-forward)", _t5_rows(gated=True), ignore=T5_UNUSED),
    WeightMap("T5", _t5_rows(gated=False), ignore=T5_UNUSED),
)

# fmt: off
CHECKPOINTS = [
    Checkpoint(
        "T5", "t5",
        # the adapter fixes mixer.scale = 1.0; `unscaled` names the scale the spec computes with
        {**BASE, "kind": ("encoder-decoder",), "position.kind": ("relative",), "activation": NON_GATED + GATED,
         "head.scale": lambda s: (1.0, s.d_model**-0.5), "mixer.scale": None},
        (unscaled, mha, d_value_is_d_head, embedding_is_d_model),
        {
            "num_decoder_layers": lambda s: s.decoder_layers,
            "relative_attention_num_buckets": lambda s: s.position.buckets,
            "relative_attention_max_distance": lambda s: s.position.max_distance,
            "feed_forward_proj": lambda s: ("gated-" if s.gated else "") + ACT[s.activation],
            "tie_word_embeddings": lambda s: s.tie_embeddings,
            "dropout_rate": lambda s: 0.0,
        },
        T5_WEIGHTS,
        after={
            "dense_act_fn": lambda s: ACT[s.activation],  # gated-gelu means the tanh approximation to T5
            "scale_decoder_outputs": lambda s: s.head.scale != 1.0,  # the head's input times d_model^-0.5
        },
        untie="lm_head",
    ),
]
# fmt: on
