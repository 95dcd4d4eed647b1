"""The rules of a spec that read two of its tables or more: one small check per concept, run in the
order of CHECKS by ModelSpec's validator. A rule on one sub-table's own fields is that sub-table's
(archspec.spec.subtables); these take the spec, whatever its class, and import nothing of archspec.spec.model."""

import re
from typing import Any

from pydantic import ValidationError

from archspec.core.tracing import recording
from archspec.spec.subtables import MIXERS, SUBTABLES


def _names(names) -> str:
    return f" ({', '.join(names)})" if names else " (none are defined)"


def check_widths(spec: Any) -> None:
    if spec.encoder_layers == 0 and spec.decoder_layers == 0:
        raise ValueError(
            "encoder_layers and decoder_layers are both 0; set at least one of them to a positive number"
        )
    if "d_head" not in spec.model_fields_set and spec.d_model % spec.n_heads:
        raise ValueError(
            f"d_model={spec.d_model} is not divisible by n_heads={spec.n_heads}; "
            "change one of them or set d_head explicitly"
        )
    if spec.n_heads % spec.n_kv_heads:
        raise ValueError(
            f"n_heads={spec.n_heads} is not divisible by n_kv_heads={spec.n_kv_heads}; "
            "n_kv_heads must divide n_heads"
        )

def check_position(spec: Any) -> None:
    p = spec.position
    if p.kind == "sinusoidal" and spec.d_model % 2:
        raise ValueError(f"sinusoidal positions need an even d_model, got d_model={spec.d_model}")
    if p.kind == "rotary":
        check_rotary(spec)
    elif p.kind == "disentangled":
        if spec.decoder_layers or spec.mixer.kind != "standard":
            raise ValueError("disentangled positions (DeBERTa) are for an encoder of standard attention; set "
                             "decoder_layers=0")  # fmt: skip
        if spec.n_kv_heads != spec.n_heads:
            raise ValueError(f"disentangled positions project the table to every head: n_kv_heads="
                             f"{spec.n_kv_heads} must equal n_heads={spec.n_heads}")  # fmt: skip
    elif p.kind == "transformer_xl":
        if spec.encoder_layers:
            raise ValueError("transformer_xl positions (relative attention, Dai et al. 2019) are for a "
                             "decoder-only model; set encoder_layers=0")  # fmt: skip
        if spec.mixer.kind != "standard":
            raise ValueError("transformer_xl positions score the queries of standard attention; mixer kind "
                             f"{spec.mixer.kind!r} has none to score")  # fmt: skip
        if spec.d_model % 2:
            raise ValueError(f"transformer_xl positions need an even d_model for their sinusoidal encodings, got "
                             f"d_model={spec.d_model}")  # fmt: skip

def check_rotary(spec: Any) -> None:
    if spec.position.proportional and spec.mixer.kind == "latent":
        raise ValueError("position.proportional is for standard attention, not mixer kind 'latent'")
    if spec.rotary_dims % 2 or spec.rotary_dims < 2:
        if spec.position.fraction == 1:
            raise ValueError(f"rotary positions need an even d_head, got d_head={spec.d_head}")
        raise ValueError(
            f"rotary positions need an even rotated width of at least 2, got d_head={spec.d_head} x "
            f"position.fraction={spec.position.fraction} = {spec.d_head * spec.position.fraction:g}"
        )

def check_blocks(spec: Any) -> None:
    if spec.pooler and spec.encoder_layers == 0:
        raise ValueError("pooler=true needs an encoder (encoder_layers > 0)")
    if spec.block.kind == "parallel" and spec.encoder_layers and spec.decoder_layers:
        raise ValueError("block kind 'parallel' has no place for cross-attention; use it without an encoder")
    if spec.block.kind == "parallel" and spec.norm_position != "pre":
        raise ValueError(f"block kind 'parallel' needs norm_position='pre', got {spec.norm_position!r}")
    if spec.share_layers and spec.mlp.kind == "moe" and spec.mlp.dense_layers:
        raise ValueError("share_layers=true needs every layer alike; mlp.dense_layers makes them differ")

def check_latent(spec: Any) -> None:
    a = spec.mixer
    if a.kind != "latent":
        return
    if spec.encoder_layers:
        raise ValueError("latent attention is a decoder-only feature; set encoder_layers=0")
    if spec.n_kv_heads != spec.n_heads:
        raise ValueError(f"latent attention has n_kv_heads = n_heads; got n_kv_heads={spec.n_kv_heads}")
    if a.rope_dims >= spec.d_head or a.rope_dims % 2:
        raise ValueError(
            f"mixer.rope_dims={a.rope_dims} must be even and smaller than d_head={spec.d_head} "
            "(d_head = the no-rope width + rope_dims)"
        )
    if spec.position.kind != "rotary":
        raise ValueError("latent attention rotates its decoupled part: set position='rotary'")

def check_moe(spec: Any) -> None:
    m = spec.mlp
    if m.kind != "moe":
        return
    if m.dense_layers > max(spec.encoder_layers, spec.decoder_layers):
        raise ValueError(f"mlp.dense_layers={m.dense_layers} is more than the stack has layers")
    if m.d_dense and spec.norm_position != "sandwich":
        raise ValueError(
            f"mlp.d_dense (Gemma 4's dense MLP beside the experts) needs norm_position='sandwich', "
            f"not {spec.norm_position!r}"
        )

def check_embedding(spec: Any) -> None:
    emb = spec.embedding
    if emb.d_embed not in (None, spec.d_model):
        if spec.encoder_layers and spec.decoder_layers:
            raise ValueError(
                "embedding.d_embed (factorised embeddings) is for one stack; this is an encoder-decoder"
            )
        if spec.head.kind == "lm" and spec.tie_embeddings and not emb.project_out:
            raise ValueError(
                f"a tied lm head reads the d_embed={emb.d_embed} wide token table: it needs "
                "embedding.project_out=true (OPT's d_model -> d_embed projection) or tie_embeddings=false"
            )
    elif emb.project_out or emb.position_width != "d_embed" or not emb.projection_bias:
        raise ValueError(
            "embedding.project_out, embedding.position_width and embedding.projection_bias shape the "
            "projections of factorised embeddings: set embedding.d_embed to a width other than d_model"
        )
    if emb.project_out and spec.kind != "decoder-only":
        raise ValueError("embedding.project_out (OPT's projection back to d_embed) is for a decoder-only model")
    if emb.project_out and spec.head.kind not in ("lm", "none"):
        raise ValueError(f"embedding.project_out feeds an lm head (or none), not head kind {spec.head.kind!r}")

def check_head(spec: Any) -> None:
    if spec.head.kind == "discriminator" and spec.tie_embeddings:
        raise ValueError("head kind 'discriminator' has no vocabulary projection to tie: set tie_embeddings=false")
    if spec.head.kind == "mlm" and not spec.tie_embeddings:
        raise ValueError("head kind 'mlm' decodes with the token table: it needs tie_embeddings=true")

def check_norms(spec: Any) -> None:
    if spec.norm == "rmsnorm" and spec.norm_affine == "weight_bias":
        raise ValueError("norm_affine='weight_bias' needs norm='layernorm'; RMSNorm has no bias")
    if spec.swiglu_limit != 7.0 and spec.activation != "clamped_swiglu":
        raise ValueError(f"swiglu_limit is the clamp of activation='clamped_swiglu', not of {spec.activation!r}")
    if not spec.attention_norm and (spec.norm_position != "pre" or spec.block.kind != "sequential"):
        raise ValueError(
            "attention_norm=false (no norm before the token mixer) needs norm_position='pre' and a sequential "
            f"block, not norm_position={spec.norm_position!r} with block kind {spec.block.kind!r}"
        )
    if spec.norm_position == "post_sublayer" and spec.block.kind == "parallel":
        raise ValueError("norm_position='post_sublayer' is for sequential blocks, not block kind 'parallel'")

def check_mixer(spec: Any) -> None:
    """The token mixer against the rest of the model."""
    a = spec.mixer
    if a.kind == "standard":
        if a.shared_kv and spec.d_value != spec.d_head:
            raise ValueError(
                f"mixer.shared_kv=true needs d_value = d_head, got {spec.d_value} and {spec.d_head}"
            )
        if a.ssm is not None and spec.encoder_layers:
            raise ValueError("mixer.ssm (a Mamba-2 mixer beside the attention) is for decoder layers; "
                             "set encoder_layers=0")  # fmt: skip
        if a.ssm is not None and spec.block.kind == "parallel":
            raise ValueError("mixer.ssm runs beside the attention in the mixer sub-layer; it needs block "
                             "kind 'sequential', not 'parallel'")  # fmt: skip
    elif (a.kind in MIXERS or a.kind == "none") and spec.encoder_layers:
        raise ValueError(f"mixer kind {a.kind!r} is for decoder layers; set encoder_layers=0")
    if a.kind == "none" and spec.mlp.kind == "none":
        raise ValueError("a layer with mixer='none' and mlp='none' does nothing; give it one of them")

def check_mtp(spec: Any) -> None:
    if spec.mtp is not None and spec.kind != "decoder-only":
        raise ValueError("mtp (multi-token prediction) is a decoder-only feature; set encoder_layers=0")
    if spec.mtp is not None and spec.mtp.kind is not None and spec.mtp.kind not in spec.kinds:
        raise ValueError(f"mtp.kind={spec.mtp.kind!r} is not one of the kinds{_names(spec.kinds)}")

def check_kinds(spec: Any) -> None:
    """Layer kinds and the pattern that places them; every kind is validated as the spec it makes."""
    if not spec.kinds and spec.layers is None:
        return
    check_placement(spec)
    for name, kind in spec.kinds.items():
        seen = validated_kind(spec, name)
        if kind.position is not None and seen.position.kind not in ("rotary", "none"):
            raise ValueError(
                f"kinds.{name}.position: a kind may set rotary options or 'none', not {seen.position.kind!r}"
            )
        if kind.position is not None and spec.position.kind not in ("rotary", "none"):
            raise ValueError(
                f"kinds.{name}.position: the model's {spec.position.kind!r} positions serve every layer alike; "
                "a kind can change rotary positions only"
            )


def check_placement(spec: Any) -> None:
    """[layers] names the kinds there are, uses each, fits the stacks, and replaces the older placements."""
    if spec.layers is None:
        raise ValueError("kinds are placed by [layers]: give layers.pattern (and layers.prefix) with their names")
    unknown = [k for k in (*spec.layers.prefix, *spec.layers.pattern) if k not in spec.kinds]
    if unknown:
        raise ValueError(f"layers names kind {unknown[0]!r}, which is not one of the kinds{_names(spec.kinds)}")
    used = {*spec.layers.prefix, *spec.layers.pattern}
    unused = [k for k in spec.kinds if k not in used]
    if unused:
        raise ValueError(f"kinds.{unused[0]} is never used: layers.prefix and layers.pattern do not name it")
    for stack, depth in (("encoder_layers", spec.encoder_layers), ("decoder_layers", spec.decoder_layers)):
        fit = len(spec.layers.prefix) + len(spec.layers.pattern)
        if depth and fit > depth:
            raise ValueError(
                f"layers.prefix and layers.pattern name {fit} layers, more than {stack}={depth}; the pattern "
                "repeats over the stack and must fit in it"
            )
    a = spec.mixer
    if a.kind == "standard" and a.sliding_window and a.sliding_layers != "all":
        raise ValueError(
            "mixer.sliding_layers places windows by parity; with [layers], give the window to a kind"
        )
    if spec.mlp.kind == "moe" and spec.mlp.dense_layers:
        raise ValueError("mlp.dense_layers places dense layers first; with [layers], give them a kind of their own")
    if spec.share_layers and len(spec.kinds) > 1:
        raise ValueError("share_layers=true needs every layer alike; [layers] gives them different kinds")

def validated_kind(spec: Any, name: str) -> Any:
    """The spec of kind `name`, validated; its first error named under kinds.NAME."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", name):
        raise ValueError(f"kind name {name!r} must be lowercase letters, digits, '_' or '-'")
    if recording():  # the rules recorded per structure (archspec.core.compiled): what varies is checked
        return spec._recorded_kind(name)
    try:
        return type(spec).model_validate(spec._kind_data(name))
    except ValidationError as err:
        first = err.errors()[0]
        loc = [str(x) for x in first["loc"] if not str(x).startswith(("function-", "tagged-"))]
        if len(loc) >= 2 and loc[0] in SUBTABLES and loc[1] in SUBTABLES[loc[0]]:
            del loc[1]  # the member's kind: 'mixer.mamba2.groups' is 'mixer.groups'
        where = ".".join(loc)
        msg = first["msg"].removeprefix("Value error, ")
        raise ValueError(f"kinds.{name}: {where + ': ' if where else ''}{msg}") from None


CHECKS = (check_widths, check_position, check_blocks, check_latent, check_moe, check_embedding, check_head,
          check_norms, check_mixer, check_mtp, check_kinds)  # fmt: skip


def check_spec(spec: Any) -> None:
    """Every rule across tables, in order; the first broken one raises ValueError naming its fields."""
    for rule in CHECKS:
        rule(spec)
