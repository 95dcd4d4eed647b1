"""BART, mBART and Marian: encoder-decoders with learned or sinusoidal positions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from archspec.hf.engine import (
    Config,
    Family,
    Refusal,
    combine,
    plain_mlp,
)


def _encoder_decoder(cfg: Config, where: str) -> dict[str, Any]:
    """BART and Marian: one spec n_heads and d_ff for both stacks."""
    return {"embedding_scale": "sqrt_d_model" if cfg["scale_embedding"] else "none"}


def _same(a: str, b: str) -> Refusal:
    why = f"the spec has one value for both stacks: {a}"
    return Refusal(b, lambda cfg: cfg.get(b) is None or cfg[b] == cfg[a], why)


# transformers 5 ties the encoder's and decoder's token tables to `shared` only when the head is tied too


_UNTIED_SHARED = "untied, transformers builds an unused shared table beside the encoder's and decoder's"


def _marian(cfg: Config, where: str) -> dict[str, Any]:
    return _encoder_decoder(cfg, where) | {"share_embeddings": bool(cfg["share_encoder_decoder_embeddings"])}


# fmt: off
FAMILIES = [
    Family(
        "bart",
        "Bart",
        ("ForConditionalGeneration", "Model"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "encoder_layers": "encoder_layers",
         "decoder_layers": "decoder_layers", "n_heads": "encoder_attention_heads", "d_ff": "encoder_ffn_dim",
         "max_positions": "max_position_embeddings"},
        {"vocab_size": 50265, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
         "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096, "decoder_attention_heads": 16,
         "activation_function": "gelu", "d_model": 1024, "scale_embedding": False, "tie_word_embeddings": True},
        # post-norm blocks, a norm on the embeddings of each stack, learned positions with 2 extra rows,
        # one token table for encoder and decoder; final_logits_bias is a buffer
        fixed={"position": {"kind": "learned", "offset": 2}, "norm": "layernorm", "norm_position": "post",
               "final_norm": False, "embedding_norm": True, "bias": True, "share_embeddings": True, "norm_eps": 1e-5},
        aliases={"num_attention_heads": "encoder_attention_heads", "hidden_size": "d_model",
                 "num_hidden_layers": "encoder_layers"},
        refuse=(
            _same("encoder_attention_heads", "decoder_attention_heads"),
            _same("encoder_ffn_dim", "decoder_ffn_dim"),
            Refusal("tie_word_embeddings", lambda c: c["tie_word_embeddings"] is not False, _UNTIED_SHARED),
        ),
        derive=combine(plain_mlp("activation_function"), _encoder_decoder),
    ),
    Family(
        "marian",
        "Marian",
        ("MTModel", "Model"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "encoder_layers": "encoder_layers",
         "decoder_layers": "decoder_layers", "n_heads": "encoder_attention_heads", "d_ff": "encoder_ffn_dim",
         "max_positions": "max_position_embeddings"},
        {"vocab_size": 58101, "decoder_vocab_size": None, "max_position_embeddings": 1024, "encoder_layers": 12,
         "encoder_ffn_dim": 4096, "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096,
         "decoder_attention_heads": 16, "activation_function": "gelu", "d_model": 1024, "scale_embedding": False,
         "share_encoder_decoder_embeddings": True, "tie_word_embeddings": True},
        # sinusoidal positions: transformers keeps them as frozen nn.Parameters (requires_grad=False), which
        # archspec, like the Transformer paper, counts as the constants they are
        fixed={"position": "sinusoidal", "norm": "layernorm", "norm_position": "post", "final_norm": False,
               "bias": True, "norm_eps": 1e-5},
        aliases={"num_attention_heads": "encoder_attention_heads", "hidden_size": "d_model",
                 "num_hidden_layers": "encoder_layers"},
        refuse=(
            _same("encoder_attention_heads", "decoder_attention_heads"),
            _same("encoder_ffn_dim", "decoder_ffn_dim"),
            _same("vocab_size", "decoder_vocab_size"),
            Refusal("tie_word_embeddings",
                    lambda c: c["tie_word_embeddings"] is not False or not c["share_encoder_decoder_embeddings"],
                    _UNTIED_SHARED),
        ),
        derive=combine(plain_mlp("activation_function"), _marian),
    ),
]
# fmt: on

# mBART (Liu et al. 2020): BART's layers made pre-norm, a LayerNorm on the embeddings (layernorm_embedding) and
# one after the last layer (layer_norm) of each stack; its keys, transformers' defaults and refusals are BART's
_BART = FAMILIES[0]
FAMILIES.insert(1, replace(_BART, model_type="mbart", prefix="MBart",
                           fixed={**_BART.fixed, "norm_position": "pre", "final_norm": True}))  # fmt: skip
