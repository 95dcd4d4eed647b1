"""The parts of attention: projection widths (``AttentionShape``, ``LatentShape``) and the attention
sub-layer's entries (``attention_part``: standard, cross and latent attention with their options).
What each keeps for backward is the rule sets' (archspec.memory.saved.attention).
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from typing import NamedTuple

from archspec.describe.entries import (
    Attend,
    Cached,
    Disentangled,
    Entry,
    Linear,
    Norm,
    Param,
    Pointwise,
    RelativeXL,
    Rows,
    StackShape,
)
from archspec.describe.parts import Part
from archspec.spec.model import ModelSpec

# positions that add a bias of their own to the self-attention scores (ALiBi's is added in every attention)
SCORE_BIASES = ("relative", "disentangled", "transformer_xl")


class AttentionShape(NamedTuple):
    """Projection widths of one attention sublayer (grouped-query aware, d_head and d_value apart)."""

    d_model: int
    heads: int
    kv_heads: int
    d_head: int
    d_value: int
    qkv_bias: bool
    out_bias: bool
    rotary_dims: int = 0  # per head, of queries and keys (the whole head for proportional rotary: see `of`)
    gated: bool = False  # the query projection also emits an output gate (heads · d_value)
    shared_kv: bool = False  # the keys serve as values: no value projection

    @classmethod
    def of(cls, spec: ModelSpec) -> "AttentionShape":
        b, att = spec.biases, spec.mixer
        gated, shared = (att.gate, att.shared_kv) if att.kind == "standard" else (False, False)
        # proportional rotary turns the whole head (its unrotated pairs at frequency 0), as transformers does
        p = spec.position
        rotated = spec.d_head if p.kind == "rotary" and p.proportional else spec.rotary_dims
        return cls(spec.d_model, spec.n_heads, spec.n_kv_heads, spec.d_head, spec.d_value, b.qkv, b.out,
                   rotated, gated, shared)  # fmt: skip

    @property
    def gate(self) -> int:
        """Width of the output gate the query projection emits: heads · d_value, or 0."""
        return self.heads * self.d_value if self.gated else 0

    @property
    def q(self) -> int:
        """Width of all query heads: heads · d_head."""
        return self.heads * self.d_head

    @property
    def k(self) -> int:
        """Width of all key heads: kv_heads · d_head."""
        return self.kv_heads * self.d_head

    @property
    def v(self) -> int:
        """Width of the value projection: kv_heads · d_value, or 0 when the keys serve as values."""
        return 0 if self.shared_kv else self.kv_heads * self.d_value

    @property
    def out_in(self) -> int:
        """Width of the concatenated head outputs, the output projection's input: heads · d_value."""
        return self.heads * self.d_value

    @property
    def kv_per_token(self) -> int:
        """Values cached per token: keys and values of every key/value head. When the keys serve as
        values, the cache still holds both (transformers' Gemma 4 caches the rotated, normed keys and,
        apart, the values taken from the raw keys): kv_heads · (d_head + d_value)."""
        return self.k + self.kv_heads * self.d_value


class LatentShape(NamedTuple):
    """Multi-head latent attention (DeepSeek-V2/V3): the query path d -> q_rank -> heads · d_head (or
    d -> heads · d_head without q_rank); keys and values d -> kv_rank + rope_dims, then kv_rank ->
    heads · (d_head - rope_dims + d_value); the cache keeps the latent and the shared rotary key."""

    d_model: int
    heads: int
    d_head: int
    d_value: int
    q_rank: int | None
    kv_rank: int
    rope_dims: int
    qkv_bias: bool
    out_bias: bool

    @classmethod
    def of(cls, spec: ModelSpec) -> "LatentShape":
        a, b = spec.mixer, spec.biases
        return cls(spec.d_model, spec.n_heads, spec.d_head, spec.d_value, a.q_rank, a.kv_rank, a.rope_dims,
                   b.qkv, b.out)  # fmt: skip

    @property
    def q(self) -> int:
        return self.heads * self.d_head

    @property
    def kv_a(self) -> int:
        """The down projection's width: the latent and the shared rotary key."""
        return self.kv_rank + self.rope_dims

    @property
    def kv_b(self) -> int:
        """The up projection's width: per head, the no-rope key part and the value."""
        return self.heads * (self.d_head - self.rope_dims + self.d_value)

    @property
    def out_in(self) -> int:
        return self.heads * self.d_value

    @property
    def kv_per_token(self) -> int:
        """Values cached per token: the latent and the rotary key."""
        return self.kv_rank + self.rope_dims

    def attend_shape(self) -> AttentionShape:
        """The score and value products: every head has its own keys (d_head) and values (d_value)."""
        return AttentionShape(self.d_model, self.heads, self.heads, self.d_head, self.d_value, False, False,
                              self.rope_dims)  # fmt: skip


def _qk_norms(spec: ModelSpec, a: AttentionShape) -> tuple[Entry, ...]:
    """QK-norm: per head over d_head with one weight shared by the heads (true or 'head'), over all
    heads at once ('full': one weight of heads x d_head), or the weightless L2 norm per head ('l2')."""
    mode = spec.mixer.qk_norm
    if not mode:
        return ()
    if mode == "full":
        return (Norm("q_norm", a.q, spec.norm, affine=spec.norm_affine),
                Norm("k_norm", a.k, spec.norm, affine=spec.norm_affine))  # fmt: skip
    kind = "l2norm" if mode == "l2" else spec.norm
    affine = None if mode == "l2" else spec.norm_affine
    return (Norm("q_norm", a.d_head, kind, per_row=a.q, affine=affine),
            Norm("k_norm", a.d_head, kind, per_row=a.k, affine=affine))  # fmt: skip


def _indexer(spec: ModelSpec, lat: LatentShape, keys: Rows) -> tuple[tuple[Entry, ...], tuple[Cached, ...]]:
    """DeepSeek-V3.2's indexer beside latent attention: its own query heads and one shared key (its entries),
    and the keys it caches."""
    ix, d = spec.mixer.indexer, spec.d_model
    entries = (Linear("indexer.wq_b", lat.q_rank, ix.heads * ix.d_head, False),
               Linear("indexer.wk", d, ix.d_head, False),
               Norm("indexer.k_norm", ix.d_head, "layernorm", affine="weight_bias"),
               Linear("indexer.weights_proj", d, ix.heads, False),
               # q . k per head over every key, then the weighted sum over heads (a product of width 1)
               Attend("indexer", ix.heads, ix.d_head, 1, causal=False, keys=keys),
               Pointwise("indexer_rotary", "rotary", (ix.heads + 1) * lat.rope_dims, "positions"))  # fmt: skip
    return entries, (Cached(ix.d_head, rows=keys),)


def _self_attention_options(spec: ModelSpec, a: AttentionShape) -> tuple[Entry, ...]:
    """The entries of standard self-attention's options: sinks, DeBERTa's and Transformer-XL's position
    terms, the output gate."""
    att, p, d = spec.mixer, spec.position, spec.d_model
    extra: tuple[Entry, ...] = ()
    if att.sinks:
        extra += (Param("sinks", (a.heads,)),)
    if p.kind == "disentangled":
        extra += (Disentangled("", d, a.heads, a.d_head, 2 * p.span, p.c2p, p.p2c, not p.share_key, a.qkv_bias),)
    if p.kind == "transformer_xl":
        extra += (RelativeXL("", d, a.heads, a.d_head, p.per_layer),)
    if att.gate:
        extra += (Pointwise("gate", "sigmoid", a.gate, "activations"),
                  Pointwise("gate_product", "gate", a.gate, "activations"))  # fmt: skip
    return extra


def attention_part(spec: ModelSpec, stack: StackShape, cross: bool, layer: str | None = None) -> Part:
    """Self-attention (fused Q/K/V projection) or cross-attention (Q from the stack, K and V from
    the encoder output), the two attention products, the output projection; latent attention
    (DeepSeek) through its low-rank projections, with DeepSeek-V3.2's indexer where it has one (its
    projections wq_b, wk, weights_proj, the key's LayerNorm, the full index-score product and its cached
    keys). Options of standard attention: an output gate from the query projection, keys as values,
    sinks, QK-norm, the value norm; a window or chunk bounds the cache."""
    d = spec.d_model
    layer = layer or f"{stack.name}.layers.{{i}}"
    component = "cross_attention" if cross else "attention"
    keys: Rows = "source" if cross else "tokens"
    score_bias = spec.position.kind == "alibi" or (spec.position.kind in SCORE_BIASES and not cross)
    limit = None
    extra: tuple[Entry, ...] = ()
    index_keys: tuple[Cached, ...] = ()
    if spec.mixer.kind == "latent":
        lat = LatentShape.of(spec)
        a = lat.attend_shape()
        if lat.q_rank:
            query: tuple[Entry, ...] = (
                Linear("q_a", d, lat.q_rank, lat.qkv_bias),
                Norm("q_norm", lat.q_rank, spec.norm, affine=spec.norm_affine),
                Linear("q_b", lat.q_rank, lat.q, False),
            )
        else:
            query = (Linear("q", d, lat.q, False),)
        projections = (*query, Linear("kv_a", d, lat.kv_a, lat.qkv_bias),
                       Norm("kv_norm", lat.kv_rank, spec.norm, affine=spec.norm_affine),
                       Linear("kv_b", lat.kv_rank, lat.kv_b, False))  # fmt: skip
        rotated = (a.heads + 1) * lat.rope_dims  # every query head and the one shared rotary key
        kv_per_token = lat.kv_per_token
        out_bias = lat.out_bias
        if spec.mixer.indexer is not None:
            extra, index_keys = _indexer(spec, lat, keys)
    else:
        att = spec.mixer
        a = AttentionShape.of(spec)
        if cross:
            projections = (Linear("q", d, a.q, a.qkv_bias), Linear("kv", d, a.k + a.v, a.qkv_bias, rows="source"))
        else:
            projections = (Linear("qkv", d, a.q + a.gate + a.k + a.v, a.qkv_bias), *_qk_norms(spec, a))
            if att.value_norm:  # weightless, per value head
                projections += (Norm("v_norm", a.d_value, "l2norm", per_row=a.kv_heads * a.d_value),)
            limit = att.sliding_window or att.chunk
            extra = _self_attention_options(spec, a)
        rotated = (a.heads + a.kv_heads) * a.rotary_dims
        kv_per_token = a.kv_per_token
        out_bias = a.out_bias
    entries: tuple[Entry, ...] = (
        *projections,
        Attend("", a.heads, a.d_head, a.d_value, causal=stack.causal and not cross, keys=keys, score_bias=score_bias),
        *extra,
        Linear("out", a.out_in, d, out_bias),
        Pointwise("residual", "residual", d, "residual_adds"),
    )
    if rotated and not cross:
        entries += (Pointwise("rotary", "rotary", rotated, "positions"),)
    cached = (Cached(kv_per_token, rows=keys, limit=limit), *index_keys) if stack.name == "decoder" else ()
    return Part(f"{layer}.{component}", component, "dense", entries, stack=stack, form=component, cached=cached)
