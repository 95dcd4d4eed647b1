"""T5 (v1.0 and v1.1, Flan-T5), mT5 and umT5."""

from __future__ import annotations

from typing import Any

from archspec.core.errors import SpecError, shown
from archspec.hf.engine import (
    Config,
    Family,
)

# T5's feed_forward_proj -> the spec's activation, plain and gated
T5_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "silu": "silu", "swish": "silu"}
T5_GATED = {"gated-gelu": "geglu", "gated-gelu_new": "geglu", "gated-silu": "swiglu", "gated-swish": "swiglu"}


def _tied(cfg: Config) -> bool:
    """The file's tie_word_embeddings (missing: tied, as every T5 config class defaults)."""
    return cfg.get("tie_word_embeddings", True) is not False


def _stacks(cfg: Config, where: str) -> dict[str, Any]:
    """What T5 and mT5 share: the activation, the decoder depth, the relative bias, the head's tying.

    The head follows the file, as the released checkpoint does: `tie_word_embeddings: false` (v1.1,
    Flan-T5, mT5) is a separate lm_head tensor in the checkpoint. transformers 5 ties the head
    whatever the file says (T5Config and MT5Config force tie_word_embeddings = True), so its meta
    model is one vocab_size x d_model matrix smaller than the checkpoint it loads; archspec counts
    the checkpoint and says so (a note)."""
    proj = cfg["feed_forward_proj"]
    act = {**T5_ACTIVATIONS, **T5_GATED}.get(proj)
    if act is None:
        supported = ", ".join(sorted({**T5_ACTIVATIONS, **T5_GATED}))
        raise SpecError(f"{where}: feed_forward_proj={shown(proj)} is not supported; supported: {supported}")
    return {
        "activation": act,
        "decoder_layers": cfg["num_decoder_layers"] if cfg.get("num_decoder_layers") is not None else cfg["num_layers"],
        "position": {
            "kind": "relative",
            "buckets": cfg["relative_attention_num_buckets"],
            "max_distance": cfg["relative_attention_max_distance"],
        },
        "tie_embeddings": _tied(cfg),
    }


def _t5(cfg: Config, where: str) -> dict[str, Any]:
    """A tied T5 head reads the decoder output rescaled by d_model**-0.5: transformers 5's
    scale_decoder_outputs, which it derives from the file's tie_word_embeddings and writes into the
    configs it saves (with tie_word_embeddings forced true); read where a file has it."""
    out = _stacks(cfg, where)
    scaled = cfg.get("scale_decoder_outputs")
    if scaled is None:
        scaled = _tied(cfg)
    if scaled:
        out["head"] = {"kind": "lm", "scale": cfg["d_model"] ** -0.5}
    return out


def _umt5(cfg: Config, where: str) -> dict[str, Any]:
    """umT5: mT5's blocks with a relative bias table in every layer's self-attention; as T5, a tied head reads
    the decoder output rescaled by d_model**-0.5 (transformers' scale_decoder_outputs follows the file)."""
    out = _t5(cfg, where)
    out["position"] = {**out["position"], "per_layer": True}
    return out


def _untied_note(cfg: Config, data: dict[str, Any]) -> list[str]:
    if _tied(cfg) or data.get("head") == "none":
        return []
    extra = data["vocab_size"] * data["d_model"]
    return [
        "the file says tie_word_embeddings = false: counted with the released checkpoint's separate lm_head "
        f"(+{extra:,} parameters); transformers 5 builds this class with the head tied to the shared "
        "embedding whatever the file says (set tie_embeddings = true to count that model)"
    ]


_T5_FIELDS = {
    "vocab_size": "vocab_size", "d_model": "d_model", "d_head": "d_kv", "d_ff": "d_ff", "encoder_layers": "num_layers",
    "n_heads": "num_heads", "max_positions": "n_positions", "norm_eps": "layer_norm_epsilon",
}  # fmt: skip
# no score scaling, no biases, RMS norms, one token table for encoder and decoder, unscaled embeddings
_T5_FIXED = {"norm": "rmsnorm", "norm_position": "pre", "bias": False, "share_embeddings": True,
             "mixer": {"kind": "standard", "scale": 1.0}, "embedding_scale": "none"}  # fmt: skip
_T5_ALIASES = {"hidden_size": "d_model", "num_attention_heads": "num_heads", "num_hidden_layers": "num_layers",
               "head_dim": "d_kv"}  # fmt: skip


# fmt: off
FAMILIES = [
    Family(
        "t5",
        "T5",
        ("ForConditionalGeneration", "Model", "EncoderModel"),
        _T5_FIELDS,
        {"vocab_size": 32128, "d_model": 512, "d_kv": 64, "d_ff": 2048, "num_layers": 6, "num_decoder_layers": None,
         "num_heads": 8, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
         "layer_norm_epsilon": 1e-6, "feed_forward_proj": "relu", "n_positions": 512},
        # (n_positions: the released files' pre-training length; T5 has no position table)
        fixed=_T5_FIXED,
        aliases=_T5_ALIASES,
        derive=_t5,
        tie_lm=False,
        notes=_untied_note,
    ),
    Family(
        # mT5 (Xue et al. 2021): T5 v1.1's blocks over a 250k vocabulary. transformers' MT5 never rescales
        # the head's input, tied or not; the head's tying follows the file as for T5.
        "mt5",
        "MT5",
        ("ForConditionalGeneration", "Model", "EncoderModel"),
        _T5_FIELDS,
        {"vocab_size": 250112, "d_model": 512, "d_kv": 64, "d_ff": 1024, "num_layers": 8, "num_decoder_layers": None,
         "num_heads": 6, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
         "layer_norm_epsilon": 1e-6, "feed_forward_proj": "gated-gelu", "tie_word_embeddings": True,
         "n_positions": 512},
        # (n_positions: not a key of MT5Config; 512 is mT5's pre-training length, Xue et al. 2021, section 3)
        fixed=_T5_FIXED,
        aliases=_T5_ALIASES,
        derive=_stacks,
        tie_lm=False,
        notes=_untied_note,
    ),
    Family(
        # umT5 (Chung et al. 2023, UniMax): mT5's blocks, each self-attention with its own relative bias table
        "umt5",
        "UMT5",
        ("ForConditionalGeneration", "Model", "EncoderModel"),
        _T5_FIELDS,
        {"vocab_size": 250112, "d_model": 512, "d_kv": 64, "d_ff": 1024, "num_layers": 8, "num_decoder_layers": None,
         "num_heads": 6, "relative_attention_num_buckets": 32, "relative_attention_max_distance": 128,
         "layer_norm_epsilon": 1e-6, "feed_forward_proj": "gated-gelu", "n_positions": 512},
        # (n_positions: not a key of UMT5Config; no table has that many rows: 512, as for mT5, is only the default
        # sequence length of archspec's figures)
        fixed=_T5_FIXED,
        aliases=_T5_ALIASES,
        derive=_umt5,
        tie_lm=False,
        notes=_untied_note,
    ),
]
# fmt: on
