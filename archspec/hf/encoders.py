"""BERT, RoBERTa, XLM-RoBERTa, DistilBERT, ALBERT, ELECTRA, ModernBERT and DeBERTa-v2: encoders."""

from __future__ import annotations

from typing import Any

from archspec.hf.engine import (
    PLAIN_ACTIVATIONS,
    Config,
    Family,
    Refusal,
    activation,
    biases,
    combine,
    must_be,
    must_be_falsy,
    place,
    plain_mlp,
)


def _distilbert_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    if not cfg["sinusoidal_pos_embds"]:
        return []
    return [
        "sinusoidal_pos_embds: transformers 5 fills the position table with sinusoids but keeps it a trainable "
        'nn.Embedding, so this spec counts a learned table (position = "sinusoidal" would count none)'
    ]


def _electra_embedding(cfg: Config, where: str) -> dict[str, Any]:
    """Embedding tables embedding_size wide, projected to hidden_size only where the two differ."""
    e = cfg["embedding_size"]
    return {"embedding": {"d_embed": e}} if e != cfg["hidden_size"] else {}


def _electra_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    if data.get("head") != "mlm" or PLAIN_ACTIVATIONS.get(cfg["hidden_act"]) == "gelu":
        return []
    return [
        f"ElectraForMaskedLM's generator head applies GELU whatever hidden_act says ({cfg['hidden_act']!r}); this "
        "spec's masked-LM head applies the blocks' activation (counts and matmul FLOPs are the same)"
    ]


_MODERNBERT_TYPES = ("full_attention", "sliding_attention")


def _modernbert_types(cfg: Config) -> list[str]:
    """layer_types, or the list ModernBertConfig derives: full attention every global_attn_every_n_layers-th
    layer from the first (the key is read by __post_init__, default 3), sliding attention between."""
    types = cfg.get("layer_types")
    if types is not None:
        return list(types)
    every = cfg.get("global_attn_every_n_layers", 3)
    return ["sliding_attention" if i % every else "full_attention" for i in range(cfg["num_hidden_layers"])]


def _modernbert_types_ok(cfg: Config) -> bool:
    types = cfg.get("layer_types")
    return types is None or (isinstance(types, list) and len(types) == cfg["num_hidden_layers"]
                             and all(t in _MODERNBERT_TYPES for t in types))  # fmt: skip


def _modernbert_every_ok(cfg: Config) -> bool:
    every = cfg.get("global_attn_every_n_layers", 3)
    return cfg.get("layer_types") is not None or (isinstance(every, int) and not isinstance(every, bool) and every >= 1)


def _modernbert_theta(cfg: Config, layer_type: str, flat: str, default: float) -> float:
    """The rotary base of one layer type: rope_parameters[type].rope_theta, else the flat key of older files
    (global_rope_theta / local_rope_theta), else ModernBertConfig's default."""
    params = cfg.get("rope_parameters") or {}
    own = params.get(layer_type) if isinstance(params, dict) else None
    own = own if isinstance(own, dict) else {}
    return float(own.get("rope_theta", cfg.get(flat, default)))


def _modernbert(cfg: Config, where: str) -> dict[str, Any]:
    """Alternating global and local attention as layer kinds, each with its rotary base; the local window
    is bidirectional, |i - j| <= local_attention // 2 (transformers' sliding_window), so the spec's window is
    local_attention // 2 + 1; the first layer has no norm before its attention (it reads the embedding
    norm's output). GeGLU from a fused Wi (input and gate halves), biases by attention_bias / mlp_bias,
    LayerNorms with a bias only with norm_bias, and the masked-LM head's biases."""
    norm_bias = bool(cfg["norm_bias"])
    data: dict[str, Any] = {
        "activation": activation(cfg, "hidden_activation", True, where),
        "bias": biases(cfg["attention_bias"], cfg["attention_bias"], cfg["mlp_bias"]),
        "norm_affine": "weight_bias" if norm_bias else "weight",
        "position": {"kind": "rotary", "base": _modernbert_theta(cfg, "full_attention", "global_rope_theta", 160000.0)},
        "head": {"kind": "mlm", "dense_bias": bool(cfg["classifier_bias"]), "norm_bias": norm_bias,
                 "bias": bool(cfg["decoder_bias"])},
    }  # fmt: skip
    local = {
        "mixer": {"sliding_window": cfg["local_attention"] // 2 + 1},
        "position": {"base": _modernbert_theta(cfg, "sliding_attention", "local_rope_theta", 10000.0)},
    }
    kinds = {"full_attention": ("global", {}), "sliding_attention": ("local", local)}
    per_layer = []
    for i, layer_type in enumerate(_modernbert_types(cfg)):
        name, overrides = kinds[layer_type]
        per_layer.append((f"{name}_first", {**overrides, "attention_norm": False}) if i == 0 else (name, overrides))
    data.update(place(data, per_layer))
    return data


def _modernbert_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    act = cfg["classifier_activation"]
    if not isinstance(data.get("head"), dict) or PLAIN_ACTIVATIONS.get(act) == PLAIN_ACTIVATIONS.get(
        cfg["hidden_activation"]
    ):
        return []
    return [
        f"the masked-LM head applies classifier_activation={act!r}, the blocks' GeGLU {cfg['hidden_activation']!r}; "
        "this spec's head applies the blocks' (counts and matmul FLOPs are the same)"
    ]


def _deberta_att_types(cfg: Config) -> list[str]:
    """pos_att_type as DebertaV2Config reads it: a list, or a string such as "p2c|c2p" (None: none)."""
    types = cfg.get("pos_att_type")
    if isinstance(types, str):
        return [t.strip() for t in types.lower().split("|")]
    return list(types or [])


def _deberta(cfg: Config, where: str) -> dict[str, Any]:
    """BERT's post-norm blocks with absolute positions where position_biased_input says so, or, with
    relative_attention, the disentangled terms over a table of 2 * position_buckets rows (2 *
    max_relative_positions without buckets; -1 means max_position_embeddings), normalised where norm_rel_ebd
    says layer_norm, projected by the layers' own q and k (share_att_key) or by pos_key_proj / pos_query_proj;
    the score scale is 1 / sqrt(d_head * (1 + the c2p and p2c terms of pos_att_type)), even without relative
    attention (DisentangledSelfAttention's scale_factor)."""
    data: dict[str, Any] = {"position": "learned" if cfg["position_biased_input"] else "none"}
    d_head = cfg["hidden_size"] // cfg["num_attention_heads"]
    types = _deberta_att_types(cfg)
    if cfg["relative_attention"]:  # the disentangled terms over the relative-position table
        max_distance = cfg.get("max_relative_positions", -1)
        if max_distance is None or max_distance < 1:
            max_distance = cfg["max_position_embeddings"]
        buckets = cfg.get("position_buckets", -1)
        data["position"] = {"kind": "disentangled", "buckets": max(buckets or 0, 0), "max_distance": max_distance,
                            "c2p": "c2p" in types, "p2c": "p2c" in types, "share_key": bool(cfg.get("share_att_key")),
                            "norm": "layer_norm" in str(cfg.get("norm_rel_ebd") or "none").lower()}  # fmt: skip
    factor = 1 + sum(t in types for t in ("c2p", "p2c"))
    if factor > 1:
        data["mixer"] = {"kind": "standard", "scale": (d_head * factor) ** -0.5}
    return data


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


_ROBERTA_REFUSE = (
    *_BERT_REFUSE,
    Refusal(
        "max_position_embeddings",
        lambda c: c["max_position_embeddings"] > (c.get("pad_token_id") or 0) + 1,
        "the table must be longer than the padding offset",
    ),
)


_DEBERTA_REFUSE = (
    Refusal(
        "relative_attention",
        lambda c: not c["relative_attention"] or any(t in _deberta_att_types(c) for t in ("c2p", "p2c")),
        "relative attention without a c2p or p2c term in pos_att_type builds an unused table",
    ),
    Refusal(
        "position_biased_input",
        lambda c: not (c["relative_attention"] and c["position_biased_input"]),
        "an absolute position table beside the disentangled terms is not represented (DeBERTa-v2/v3 files say false)",
    ),
    Refusal(
        "norm_rel_ebd",
        lambda c: c["relative_attention"] or "layer_norm" not in str(c.get("norm_rel_ebd") or "none").lower(),
        "a relative-embedding LayerNorm without relative attention is built and never used",
    ),
    must_be_falsy("conv_kernel_size", "DeBERTa-v2's convolution beside the first layer (ConvLayer) is not represented"),
    Refusal(
        "embedding_size",
        lambda c: c.get("embedding_size") in (None, c["hidden_size"]),
        "a bias-free projection of narrower embeddings is not represented",
    ),
    Refusal(
        "attention_head_size",
        lambda c: c.get("attention_head_size") in (None, c["hidden_size"] // c["num_attention_heads"]),
        "heads of another width than hidden_size / num_attention_heads (the output dense reads hidden_size)",
    ),
    Refusal(
        "pos_att_type",
        lambda c: set(_deberta_att_types(c)) <= {"c2p", "p2c"},
        "the position terms are c2p and p2c (they scale the scores even without relative attention)",
    ),
    _BERT_REFUSE[-1],
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
        refuse=_ROBERTA_REFUSE,
        derive=combine(plain_mlp("hidden_act"), _roberta),
        pooler=True,
    ),
    Family(
        "xlm-roberta",
        "XLMRoberta",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "type_vocab_size": "type_vocab_size",
         "norm_eps": "layer_norm_eps"},
        {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 2,
         "layer_norm_eps": 1e-12, "tie_word_embeddings": True, "pad_token_id": 1},
        # RoBERTa's modules under other names: positions after the padding offset, a tied masked-LM head
        fixed=_BERT_FIXED,
        refuse=_ROBERTA_REFUSE,
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
    Family(
        "electra",
        "Electra",
        ("ForMaskedLM", "ForPreTraining", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "type_vocab_size": "type_vocab_size", "norm_eps": "layer_norm_eps"},
        {"vocab_size": 30522, "embedding_size": 128, "hidden_size": 256, "num_hidden_layers": 12,
         "num_attention_heads": 4, "intermediate_size": 1024, "hidden_act": "gelu", "max_position_embeddings": 512,
         "type_vocab_size": 2, "layer_norm_eps": 1e-12, "tie_word_embeddings": True},
        # BERT's blocks under embedding tables embedding_size wide (with their norm), projected to hidden_size
        # when the widths differ (ElectraModel's embeddings_project); no pooler. ElectraForMaskedLM is the
        # generator: dense hidden -> embedding_size, GELU, LayerNorm, the tied table with a vocabulary bias;
        # ElectraForPreTraining the discriminator
        fixed=_BERT_FIXED,
        refuse=_BERT_REFUSE,
        derive=combine(plain_mlp("hidden_act"), _electra_embedding),
        notes=_electra_notes,
        pretraining="discriminator",  # ElectraForPreTraining: dense, hidden_act, one logit per token
    ),
    Family(
        "modernbert",
        "ModernBert",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "norm_eps": "norm_eps"},
        {"vocab_size": 50368, "hidden_size": 768, "intermediate_size": 1152, "num_hidden_layers": 22,
         "num_attention_heads": 12, "hidden_activation": "gelu", "max_position_embeddings": 8192, "norm_eps": 1e-5,
         "norm_bias": False, "attention_bias": False, "local_attention": 128, "mlp_bias": False,
         "decoder_bias": True, "classifier_bias": False, "classifier_activation": "gelu", "tie_word_embeddings": True},
        # pre-norm blocks over rotary positions (no position table, no token types), an embedding norm and a
        # final norm; the masked-LM head reads the final norm's output
        fixed={"norm": "layernorm", "norm_position": "pre", "final_norm": True, "embedding_norm": True},
        refuse=(
            Refusal("layer_types", _modernbert_types_ok,
                    "one full_attention or sliding_attention per layer (or global_attn_every_n_layers >= 1)"),
            Refusal("global_attn_every_n_layers", _modernbert_every_ok, "a positive whole number of layers"),
            _BERT_REFUSE[-1],
        ),
        derive=_modernbert,
        notes=_modernbert_notes,
    ),
    Family(
        "deberta-v2",
        "DebertaV2",
        ("ForMaskedLM", "Model"),
        {"vocab_size": "vocab_size", "d_model": "hidden_size", "encoder_layers": "num_hidden_layers",
         "n_heads": "num_attention_heads", "d_ff": "intermediate_size", "max_positions": "max_position_embeddings",
         "type_vocab_size": "type_vocab_size", "norm_eps": "layer_norm_eps"},
        {"vocab_size": 128100, "hidden_size": 1536, "num_hidden_layers": 24, "num_attention_heads": 24,
         "intermediate_size": 6144, "hidden_act": "gelu", "max_position_embeddings": 512, "type_vocab_size": 0,
         "layer_norm_eps": 1e-7, "relative_attention": False, "position_biased_input": True, "pos_att_type": None,
         "tie_word_embeddings": True},
        # BERT's post-norm blocks (an embedding LayerNorm, no pooler in DebertaV2Model), DeBERTa's disentangled
        # attention where relative_attention says so (position "disentangled"), the masked-LM head of either
        # layout (legacy cls.predictions or lm_predictions: the same tensors, tied)
        fixed=_BERT_FIXED,
        refuse=_DEBERTA_REFUSE,
        derive=combine(plain_mlp("hidden_act"), _deberta),
    ),
]
# fmt: on
