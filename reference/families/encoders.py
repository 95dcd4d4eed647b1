"""The encoders' checkpoints: BERT (its adapter: archspec.hf.encoders)."""

from __future__ import annotations

from archspec.reference.families.engine import (
    ACT,
    BASE,
    ENC,
    NON_GATED,
    Checkpoint,
    d_value_is_d_head,
    default_scale,
    embedding_is_d_model,
    heads_span_d_model,
    mha,
)
from archspec.sources.weightmap import WeightMap, each, row
from archspec.spec.model import ModelSpec


def token_types(s: ModelSpec) -> str | None:
    return None if s.type_vocab_size else "type_vocab_size=0 (BertModel always has a token-type table)"


BERT_WEIGHTS = WeightMap("BERT", strip=("bert.",), ignore=(r"embeddings\.(position_ids|token_type_ids)",), rows=(
    row("embeddings.word_embeddings.weight", "embed.weight"),
    row("embeddings.position_embeddings.weight", "encoder.position.weight"),
    row("embeddings.token_type_embeddings.weight", "token_type.weight"),
    row("embeddings.LayerNorm.{w}", "encoder.embedding_norm.{w}"),
    row(each("encoder.layer.{}.attention.self.{x}.{w}", "query", "key", "value"), ENC + "attention.qkv.{w}", "cat"),
    row("encoder.layer.{}.attention.output.dense.{w}", ENC + "attention.out.{w}"),
    row("encoder.layer.{}.attention.output.LayerNorm.{w}", ENC + "attention_norm.{w}"),
    row("encoder.layer.{}.intermediate.dense.{w}", ENC + "mlp.up.{w}"),
    row("encoder.layer.{}.output.dense.{w}", ENC + "mlp.down.{w}"),
    row("encoder.layer.{}.output.LayerNorm.{w}", ENC + "mlp_norm.{w}"),
    row("pooler.dense.{w}", "pooler.dense.{w}"),
))  # fmt: skip

# fmt: off
CHECKPOINTS = [
    Checkpoint(
        "BERT", "bert",
        {**BASE, "kind": ("encoder-only",), "pooler": (True,), "type_vocab_size": None, "head.kind": ("none",),
         "activation": NON_GATED},
        (token_types, mha, heads_span_d_model, d_value_is_d_head, default_scale, embedding_is_d_model),
        {
            "hidden_act": lambda s: ACT[s.activation],
            "hidden_dropout_prob": lambda s: 0.0, "attention_probs_dropout_prob": lambda s: 0.0,
        },
        (BERT_WEIGHTS,),
        suffix="Model",
    ),
]
# fmt: on
