"""T5 (v1.0 and v1.1)."""

from __future__ import annotations

from typing import Any

from archspec.errors import SpecError, shown
from archspec.hf.engine import (
    Config,
    Family,
)

# T5's feed_forward_proj -> the spec's activation, plain and gated
T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "silu": "silu", "swish": "silu"}
T5_GATED = {"gated-gelu": "geglu", "gated-gelu_new": "geglu", "gated-silu": "swiglu", "gated-swish": "swiglu"}


def _t5(cfg: Config, where: str) -> dict[str, Any]:
    proj = cfg["feed_forward_proj"]
    act = {**T5_ACTIVATIONS, **T5_GATED}.get(proj)
    if act is None:
        supported = ", ".join(sorted({**T5_ACTIVATIONS, **T5_GATED}))
        raise SpecError(f"{where}: feed_forward_proj={shown(proj)} is not supported; supported: {supported}")
    # transformers 5 ties T5's head to the shared embedding whatever the file says; a file with
    # tie_word_embeddings=false (v1.1, Flan-T5, mT5) only turns off the d_model**-0.5 rescaling of the
    # decoder output that tying brings (T5Config.scale_decoder_outputs).
    scaled = cfg.get("tie_word_embeddings", True) is not False
    out: dict[str, Any] = {
        "activation": act,
        "decoder_layers": cfg["num_decoder_layers"] if cfg.get("num_decoder_layers") is not None else cfg["num_layers"],
        "position": {
            "kind": "relative",
            "buckets": cfg["relative_attention_num_buckets"],
            "max_distance": cfg["relative_attention_max_distance"],
        },
        "tie_embeddings": True,
    }
    if scaled:
        out["head"] = {"kind": "lm", "scale": cfg["d_model"] ** -0.5}
    return out


def _t5_notes(cfg: Config, data: dict[str, Any]) -> list[str]:
    if cfg.get("tie_word_embeddings", True) is not False:
        return []
    extra = data["vocab_size"] * data["d_model"]
    return [
        "the file says tie_word_embeddings = false, but transformers 5 builds T5 with its output head tied to the "
        "shared embedding (the file's value only turns off the d_model**-0.5 rescaling), and this spec counts what "
        f"transformers builds; the released checkpoint has a separate head: set tie_embeddings = false to count "
        f"it (+{extra:,} parameters)"
    ]


# fmt: off
FAMILIES = [
    Family(
        "t5",
        "T5",
        ("ForConditionalGeneration", "Model", "EncoderModel"),
        {"vocab_size": "vocab_size", "d_model": "d_model", "d_head": "d_kv", "d_ff": "d_ff",
         "encoder_layers": "num_layers", "n_heads": "num_heads", "max_positions": "n_positions",
         "norm_eps": "layer_norm_epsilon"},
        {"vocab_size": 32128, "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_decoder_layers": None,
         "num_heads": 8, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
         "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu", "n_positions": 512},
        # (n_positions: the released files' pre-training length; T5 has no position table)
        # no score scaling, no biases, RMS norms, one token table for encoder and decoder, unscaled embeddings
        fixed={"norm": "rmsnorm", "norm_position": "pre", "bias": False, "share_embeddings": True,
               "attention": {"kind": "standard", "scale": 1.0}, "embedding_scale": "none"},
        aliases={"hidden_size": "d_model", "num_attention_heads": "num_heads", "num_hidden_layers": "num_layers",
                 "head_dim": "d_kv"},
        derive=_t5,
        tie_lm=False,
        notes=_t5_notes,
    ),
]
# fmt: on
