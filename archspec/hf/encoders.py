"""BERT, RoBERTa, DistilBERT and ALBERT: encoders."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    combine,
    must_be,
    must_be_falsy,
    plain_mlp,
)


def _distilbert_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    if not cfg["sinusoidal_pos_embds"]:
        return []
    return [
        "sinusoidal_pos_embds: transformers 5 fills the position table with sinusoids but keeps it a trainable "
        'nn.Embedding, so this spec counts a learned table (position = "sinusoidal" would count none)'
    ]


def _roberta(cfg: Config, where: str) -> dict[str, Any]:
    # position ids start after the padding index: max_position_embeddings rows, the first pad_token_id + 1 unused
    offset = (cfg.get("pad_token_id") or 0) + 1
    return {
        "max_positions": cfg["max_position_embeddings"] - offset,
        "position": {"kind": "learned", "offset": offset},
    }


_BERT_REFUSE = (
    must_be("position_embedding_type", "absolute", "relative position embeddings are not represented"),
    must_be_falsy("is_decoder", "a causal BERT is not represented"),
    must_be_falsy("add_cross_attention", "cross-attention in an encoder-only model is not represented"),
    Refusal(
        "tie_word_embeddings",
        lambda cfg: cfg.get("tie_word_embeddings", True) is not False,
        "the masked-LM decoder is tied to the token embedding",
    ),
)


_BERT_FIXED = {
    "position": "learned",
    "norm": "layernorm",
    "norm_position": "post",
    "final_norm": False,
    "embedding_norm": True,
    "bias": True,
}


# fmt: off
FAMILIES = [
    Family(
        "bert",
        "Bert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "type_vocab_size": "type_vocab_size", "norm_eps": "layer_norm_eps"},
        {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
         "layer_norm_eps": 1e-12, "tie_word_embeddings": True},
        fixed=_BERT_FIXED,
        refuse=_BERT_REFUSE,
        derive=plain_mlp("hidden_act"),
        pooler=True,
    ),
    Family(
        "roberta",
        "Roberta",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "type_vocab_size": "type_vocab_size",
         "norm_eps": "layer_norm_eps"},
        {"vocab_size": 50265, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
         "layer_norm_eps": 1e-12, "tie_word_embeddings": True, "pad_token_id": 1},
        fixed=_BERT_FIXED,
        refuse=(
            *_BERT_REFUSE,
            Refusal(
                "max_position_embeddings",
                lambda c: c["max_position_embeddings"] > (c.get("pad_token_id") or 0) + 1,
                "the table must be longer than the padding offset",
            ),
        ),
        derive=combine(plain_mlp("hidden_act"), _roberta),
        pooler=True,
    ),
    Family(
        "distilbert",
        "DistilBert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "dim", "encoder_layers": "n_layers", "n_heads": "n_heads",
         "d_ff": "hidden_dim", "max_positions": "max_position_embeddings"},
        {"vocab_size": 30522, "max_position_embeddings": 512, "sinusoidal_pos_embds": False, "n_layers": 6,
         "n_heads": 12, "dim": 768, "hidden_dim": 3072, "activation": "gelu", "tie_word_embeddings": True},
        # no token types; the LayerNorm eps is fixed at 1e-12 in the modelling code
        fixed={**_BERT_FIXED, "norm_eps": 1e-12},
        aliases={"hidden_size": "dim", "num_attention_heads": "n_heads", "num_hidden_layers": "n_layers"},
        refuse=(_BERT_REFUSE[-1],),
        derive=plain_mlp("activation"),
        notes=_distilbert_notes,  # sinusoidal_pos_embds: a trainable table in transformers 5, counted as learned
    ),
    Family(
        "albert",
        "Albert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "type_vocab_size": "type_vocab_size", "norm_eps": "layer_norm_eps"},
        {"vocab_size": 30000, "embedding_size": 128, "hidden_size": 4096, "num_hidden_layers": 12,
         "num_hidden_groups": 1, "num_attention_heads": 64, "intermediate_size": 16384, "inner_group_num": 1,
         "hidden_act": "gelu_new", "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
         "tie_word_embeddings": True},
        # factorised embeddings (embedding_size wide, then a Linear to hidden_size) and one layer's
        # parameters shared by every layer
        fixed={**_BERT_FIXED, "share_layers": True},
        refuse=(
            must_be("num_hidden_groups", 1, "more than one group of shared layers is not represented"),
            must_be("inner_group_num", 1, "more than one layer per shared group is not represented"),
            _BERT_REFUSE[-1],
        ),
        derive=combine(plain_mlp("hidden_act"), lambda cfg, where: {"embedding": {"d_embed": cfg["embedding_size"]}}),
        pooler=True,
    ),
]
# fmt: on
