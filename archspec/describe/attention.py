"""The parts of attention: projection widths (``AttentionShape``, ``LatentShape``), the attention
sub-layer's entries (``attention_part``: standard, cross and latent attention with their options) and
what each keeps for backward (``attention_saved``, ``latent_saved``, the QK- and value-norm and
DeBERTa's position terms), measured storage by storage on the reference model.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from typing import Literal, NamedTuple

from archspec.describe.entries import (
    ALWAYS,
    LAYER,
    SCORES,
    SELECTIVE,
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
    Saved,
    StackShape,
)
from archspec.describe.parts import Part, norm_part
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
        b, att = spec.biases, spec.attention
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
        a, b = spec.attention, spec.biases
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
    mode = spec.attention.qk_norm
    if not mode:
        return ()
    if mode == "full":
        return (Norm("q_norm", a.q, spec.norm, affine=spec.norm_affine),
                Norm("k_norm", a.k, spec.norm, affine=spec.norm_affine))  # fmt: skip
    kind = "l2norm" if mode == "l2" else spec.norm
    affine = None if mode == "l2" else spec.norm_affine
    return (Norm("q_norm", a.d_head, kind, per_row=a.q, affine=affine),
            Norm("k_norm", a.d_head, kind, per_row=a.k, affine=affine))  # fmt: skip


def attention_part(spec: ModelSpec, stack: StackShape, cross: bool, layer: str | None = None) -> Part:
    """Self-attention (fused Q/K/V projection) or cross-attention (Q from the stack, K and V from
    the encoder output), the two attention products, the output projection; latent attention
    (DeepSeek) through its low-rank projections, with DeepSeek-V3.2's indexer where it has one (its
    projections wq_b, wk, weights_proj, the key's LayerNorm, the full index-score product and its cached
    keys). Options of standard attention: an output gate from
    the query projection, keys as values, sinks, QK-norm; a window or chunk bounds the cache."""
    d = spec.d_model
    layer = layer or f"{stack.name}.layers.{{i}}"
    component = "cross_attention" if cross else "attention"
    keys: Rows = "source" if cross else "tokens"
    score_bias = spec.position.kind == "alibi" or (spec.position.kind in SCORE_BIASES and not cross)
    limit = None
    extra: tuple[Entry, ...] = ()
    index_keys = ()
    if spec.attention.kind == "latent":
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
        ix = spec.attention.indexer
        if ix is not None:  # DeepSeek-V3.2's indexer: its own query heads and one shared key
            extra += (Linear("indexer.wq_b", lat.q_rank, ix.heads * ix.d_head, False),
                      Linear("indexer.wk", d, ix.d_head, False),
                      Norm("indexer.k_norm", ix.d_head, "layernorm", affine="weight_bias"),
                      Linear("indexer.weights_proj", d, ix.heads, False),
                      # q . k per head over every key, then the weighted sum over heads (a product of width 1)
                      Attend("indexer", ix.heads, ix.d_head, 1, causal=False, keys=keys),
                      Pointwise("indexer_rotary", "rotary", (ix.heads + 1) * lat.rope_dims, "positions"))  # fmt: skip
            index_keys: tuple[Cached, ...] = (Cached(ix.d_head, rows=keys),)
    else:
        att = spec.attention
        a = AttentionShape.of(spec)
        if cross:
            projections = (Linear("q", d, a.q, a.qkv_bias), Linear("kv", d, a.k + a.v, a.qkv_bias, rows="source"))
        else:
            projections = (Linear("qkv", d, a.q + a.gate + a.k + a.v, a.qkv_bias), *_qk_norms(spec, a))
            if att.value_norm:  # weightless, per value head
                projections += (Norm("v_norm", a.d_value, "l2norm", per_row=a.kv_heads * a.d_value),)
            limit = att.sliding_window or att.chunk
            if att.sinks:
                extra += (Param("sinks", (a.heads,)),)
            if spec.position.kind == "disentangled":
                p = spec.position
                extra += (Disentangled("", d, a.heads, a.d_head, 2 * p.span, p.c2p, p.p2c, not p.share_key,
                                       a.qkv_bias),)  # fmt: skip
            if spec.position.kind == "transformer_xl":
                extra += (RelativeXL("", d, a.heads, a.d_head, spec.position.per_layer),)
            if att.gate:
                extra += (Pointwise("gate", "sigmoid", a.gate, "activations"),
                          Pointwise("gate_product", "gate", a.gate, "activations"))  # fmt: skip
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
    if spec.attention.kind == "latent":
        saved = latent_saved(spec, LatentShape.of(spec), a, component, stack)
    else:
        saved = attention_saved(spec, a, component, keys, cross, causal=stack.causal)
        if spec.position.kind == "disentangled" and not cross:
            saved += disentangled_saved(spec, a, component)
        if spec.position.kind == "transformer_xl" and not cross:
            saved += relative_xl_saved(a, component)
    cached = (Cached(kv_per_token, rows=keys, limit=limit), *index_keys) if stack.name == "decoder" else ()
    return Part(f"{layer}.{component}", component, "dense", entries, stack=stack, saved=saved, cached=cached)


def explicit_attention(spec: ModelSpec, a: AttentionShape, cross: bool) -> Literal["explicit", "fallback", None]:
    """How this attention runs when the fused kernel is asked for: 'explicit' when it always runs
    the explicit products (soft-capped scores and sinks have no fused kernel; the CPU's fused kernel
    needs d_head = d_value, and in training the reference model then runs eager attention);
    'fallback' when a bias on the scores (ALiBi, T5's relative bias) sends torch's fused call to its
    math fallback, which keeps what the explicit products keep, in fp32 (it upcasts 16-bit inputs
    on the CPU); None: the fused kernel."""
    att = spec.attention
    if a.d_head != a.d_value or (att.kind == "standard" and (att.softcap is not None or att.sinks)):
        return "explicit"
    return "fallback" if not cross and (spec.position.kind == "alibi" or spec.position.kind in SCORE_BIASES) else None


def attention_saved(spec: ModelSpec, a: AttentionShape, component: str, keys: Rows, cross: bool,
                    causal: bool = True) -> tuple[Saved, ...]:  # fmt: skip
    """What one attention sublayer keeps for backward, measured storage by storage on the reference
    model (torch's CPU kernels): always the projection's input and the output projection's input;
    with the fused kernel ('flash') the fused Q/K/V output (the rotated q and k besides, with rotary)
    and the fp32 log-sum-exp; with explicit attention ('eager') head-major copies of q, of k and v
    expanded to every query head, and the probabilities; selective recomputation keeps the core's
    inputs and output, in either mode. Rotary keeps its cos and sin (per position, not per batch).
    A layer that always runs explicit products (explicit_attention) keeps the eager tensors in
    either mode. Options: a window or chunk hands the fused kernel a mask, which it keeps as a
    (T, S) tensor of the computation's dtype; sinks keep one more probability per row and the
    argmax of each row (int64); an output gate keeps sigmoid(gate) and the heads' output it scales;
    T5's relative bias, masked to the causal triangle inside the core, keeps the (T, S) boolean mask."""
    d, nh, dk, dv = spec.d_model, a.heads, a.d_head, a.d_value
    att = spec.attention
    std = att.kind == "standard" and not cross
    kv = (a.k + a.v) if cross else (a.q + a.gate + a.k + a.v)
    saved = [Saved(component, d), Saved(component, a.out_in), Saved(component, d, dtype="mask")]
    if cross:  # the query projection's own output (K and V come from the encoder output)
        saved += [Saved(component, a.q, attention="flash", kept=SCORES), Saved(component, a.q, kept=SELECTIVE),
                  Saved(component, d, rows="source", kept=LAYER, shared=True)]  # fmt: skip
    saved += [
        Saved(component, kv, rows=keys, attention="flash", kept=SCORES),  # the fused projection's output
        Saved(component, kv, rows=keys, kept=SELECTIVE),
        Saved(component, nh, dtype="fp32", attention="flash", kept=SCORES),  # log-sum-exp per head
        Saved(component, nh * dk, attention="eager", kept=SCORES),  # q, head-major
        Saved(component, nh * (dk + dv), rows=keys, attention="eager", kept=SCORES),  # k and v, every head
        Saved(f"{component}_scores", nh, rows="pairs", keys=keys, attention="eager", kept=SCORES),  # probabilities
        Saved(f"{component}_scores", 2 * nh, rows="pairs", keys=keys, dtype="mask", kept=SCORES),  # with dropout
    ]
    if a.rotary_dims and not cross:
        rotated = a.q + a.k  # the rotated q and k: storages of their own
        saved += [Saved(component, rotated, attention="flash", kept=SCORES), Saved(component, rotated, kept=SELECTIVE),
                  Saved("positions", 4 * a.rotary_dims, per_batch=False)]  # fmt: skip
        if a.rotary_dims < dk:  # a partial rotation makes the output head-major: the out projection copies it
            saved += [Saved(component, a.out_in, attention="flash", kept=SCORES)]
    if std and att.qk_norm:
        saved += _qk_norm_saved(spec, a, component, kv)
    if std and (att.sliding_window or att.chunk):  # the fused kernel's mask, one (T, S) per layer
        saved += [Saved(component, 1, rows="pairs", keys=keys, per_batch=False, attention="flash", kept=SCORES)]
    if std and att.sinks:  # the sink's probability per row and head, the row maxima's indices
        saved += [Saved(f"{component}_scores", nh, attention="eager", kept=SCORES),
                  Saved(component, nh, dtype="int64", attention="eager", kept=SCORES)]  # fmt: skip
    if std and att.gate:  # sigmoid(gate) and the heads' output before the gate
        saved += [Saved(component, a.gate), Saved(component, a.out_in)]
    if std and att.value_norm:
        saved = _value_norm_saved(spec, a, component, kv, keys, saved)
    runs = explicit_attention(spec, a, cross)
    if runs == "explicit":  # the eager tensors in either mode, never the fused kernel's
        saved = [s._replace(attention=None) if s.attention == "eager" else s for s in saved if s.attention != "flash"]
    elif runs == "fallback":  # asked for 'flash': the eager tensors, in fp32
        fused = [s._replace(attention="flash", dtype="fp32") for s in saved if s.attention == "eager"]
        saved = [s for s in saved if s.attention != "flash"] + fused
    if not cross and causal and spec.position.kind in ("relative", "transformer_xl"):  # the bias masked in the core
        saved += [Saved(component, 1, rows="pairs", keys=keys, dtype="bool", per_batch=False, attention="flash",
                        kept=SCORES)]  # fmt: skip
    return tuple(saved)


def disentangled_stack_saved(spec: ModelSpec) -> tuple[Saved, ...]:
    """What DeBERTa's relative-position table keeps, once per stack whatever the batch (measured on the
    reference model): its LayerNorm's mean and 1/std per row (outside the blocks: in every mode), the
    normalised table that the layers' projections read (an unnormalised one is the parameter itself) and
    the (T, T) row index of each term, which the layers' gathers share."""
    p, d = spec.position, spec.d_model
    rows = 2 * p.span
    saved = (Saved("positions", 2 * rows, rows="first", per_batch=False, kept=ALWAYS),) if p.norm else ()
    if p.norm:
        saved += (Saved("positions", rows * d, rows="first", per_batch=False),)
    terms = int(p.c2p) + int(p.p2c)
    return saved + (Saved("positions", terms, rows="pairs", dtype="int64", per_batch=False),)


def disentangled_saved(spec: ModelSpec, a: AttentionShape, component: str) -> tuple[Saved, ...]:
    """What one layer's position terms keep (measured on the reference model): per term, the batched
    product's copies of the projected table (heads · d_head · 2 · span per sequence) and of q (c2p) or
    k (p2c), and the product itself, which the gather keeps; with the core recomputed (selective), the
    bias it adds to the scores, one per head and pair."""
    rows = 2 * spec.position.span
    per_term = (Saved(component, a.heads * a.d_head * rows, rows="first"), Saved(component, a.heads * a.d_head),
                Saved(component, a.heads * rows))  # fmt: skip
    terms = int(spec.position.c2p) + int(spec.position.p2c)
    return per_term * terms + (Saved(component, a.heads, rows="pairs", kept=SELECTIVE),)


def relative_xl_stack_saved(spec: ModelSpec) -> tuple[Saved, ...]:
    """What Transformer-XL's relative encodings keep, once per stack whatever the batch (measured on the
    reference model): the encodings of the distances, the input of every layer's W_r (one storage), and the
    relative shift's (T, S) row index, which every layer's gather keeps."""
    return (Saved("positions", spec.d_model, per_batch=False),
            Saved("positions", 1, rows="pairs", dtype="int64", per_batch=False))  # fmt: skip


def relative_xl_saved(a: AttentionShape, component: str) -> tuple[Saved, ...]:
    """What one layer's relative term keeps (measured on the reference model): the batched product's q + v and
    its copy of the projected encodings over the batch (heads · d_head per key), the product by distance,
    which the gather keeps; with the core recomputed (selective), the core's inputs that are new tensors:
    q + u and the shifted term added to the scores."""
    return (Saved(component, a.q), Saved(component, a.q), Saved(component, a.heads, rows="pairs"),
            Saved(component, a.q, kept=SELECTIVE), Saved(component, a.heads, rows="pairs", kept=SELECTIVE))  # fmt: skip


def latent_saved(spec: ModelSpec, lat: LatentShape, a: AttentionShape, component: str,
                 stack: StackShape) -> tuple[Saved, ...]:  # fmt: skip
    """What latent attention keeps for backward, measured storage by storage on the reference model:
    the input, the query's norm over q_rank (as a norm sub-layer keeps it) and q_b's input; the
    latent's norm, whose input is a view of kv_a's output (so in fp32, and for a LayerNorm in any
    dtype, the whole of kv_a's output with the rotary key; a 16-bit RMSNorm keeps an fp32 copy of the
    latent alone), and kv_b's input; cos and sin of the rotations of q and of the shared key; the
    output projection's input. The core's q and k are new tensors (the concatenations of their
    rotary and no-rope parts), its v a view of kv_b's output: the fused kernel keeps q, k, kv_b's
    output, its own output (the output projection reads a copy) and the log-sum-exp; selective
    recomputation keeps q, k and kv_b's output; explicit products (d_head != d_value, or asked for)
    q, k, a copy of v and the probabilities."""
    d, nh, dk, dv = spec.d_model, a.heads, a.d_head, a.d_value
    kv_norm = norm_part(spec, "", stack, width=lat.kv_rank).saved
    if spec.norm == "layernorm":  # LayerNorm keeps its input: the view, so the whole of kv_a's output
        kv_norm = (kv_norm[0], Saved("norms", lat.kv_a))
    else:  # fp32 keeps the view's storage (the rotary key besides); 16 bits an fp32 copy of the latent
        kv_norm += (Saved("norms", lat.rope_dims, dtype="fp32_self"),)
    q_norm = norm_part(spec, "", stack, width=lat.q_rank).saved + (Saved("norms", lat.q_rank),) if lat.q_rank else ()
    saved = [Saved(component, d), Saved(component, a.out_in), Saved(component, d, dtype="mask"),
             *(s._replace(group=component, kept=LAYER) for s in (*q_norm, *kv_norm)), Saved(component, lat.kv_rank),
             Saved("positions", 4 * lat.rope_dims, per_batch=False)]  # fmt: skip
    core = nh * dk * 2 + lat.kv_b  # q, k, and kv_b's output which v is a view of
    explicit = explicit_attention(spec, a, False) == "explicit"
    eager = None if explicit else "eager"
    if not explicit:
        saved += [Saved(component, core, attention="flash", kept=SCORES),
                  Saved(component, nh, dtype="fp32", attention="flash", kept=SCORES),
                  Saved(component, a.out_in, attention="flash", kept=SCORES)]  # fmt: skip
    saved += [Saved(component, core, kept=SELECTIVE),
              Saved(component, nh * (2 * dk + dv), attention=eager, kept=SCORES),
              Saved(f"{component}_scores", nh, rows="pairs", attention=eager, kept=SCORES),
              Saved(f"{component}_scores", 2 * nh, rows="pairs", dtype="mask", attention=eager,
                    kept=SCORES)]  # fmt: skip
    return tuple(saved)


def _value_norm_saved(spec: ModelSpec, a: AttentionShape, component: str, kv: int, keys: Rows,
                      saved: list[Saved]) -> list[Saved]:  # fmt: skip
    """What the weightless norm per value head (Gemma 4's v_norm, in fp32) changes: it keeps 1/rms per row and
    its fp32 input, a view of the fused output in fp32 (so kept then in every mode) and a copy in 16 bits; the
    normed v is a new tensor, the core's input in the fused kernel and under selective recomputation. The fused
    output, which the core kept through its v view, stays kept in 16 bits only where q and k are views of it
    too (no rotation and no QK-norm)."""
    v, mode = a.kv_heads * a.d_value, spec.attention.qk_norm
    if a.rotary_dims or mode:  # q and k are new tensors: the fused output is now kept by the norm's input alone
        saved = list(saved)
        # the first of each: a later entry may be alike (with shared_kv, the rotated q and k are as wide)
        for fused in (Saved(component, kv, rows=keys, attention="flash", kept=SCORES),
                      Saved(component, kv, rows=keys, kept=SELECTIVE)):  # fmt: skip
            i = saved.index(fused)
            saved[i] = fused._replace(dtype="fp32_self")
    saved += [Saved(component, v, attention="flash", kept=SCORES), Saved(component, v, kept=SELECTIVE),
              Saved(component, a.kv_heads, dtype="fp32"), Saved(component, v, dtype="fp32_copy")]  # fmt: skip
    if not mode or (mode == "l2" and a.rotary_dims):  # no QK-norm keeps the fused output in eager mode already
        saved += [Saved(component, kv, dtype="fp32_self", attention="eager", kept=SCORES)]
    return saved


def _qk_norm_saved(spec: ModelSpec, a: AttentionShape, component: str, kv: int) -> list[Saved]:
    """What a QK-norm adds. Per head ('head'/true) or over all heads ('full'), before the rotation,
    on views of the fused projection's output: the norm's own tensors (RMSNorm: the fp32 input,
    1/rms per row and, with a weight, the normalised x; LayerNorm: mean and 1/std per row), so the
    fused output is kept in eager mode too; without rotary the normalised q and k are the core's
    inputs; a per-head norm leaves q head-major, and so the fused kernel's output, which the output
    projection then copies. The L2 norm ('l2', after the rotation): its fp32 input and 1/rms per row."""
    mode = "head" if spec.attention.qk_norm is True else spec.attention.qk_norm
    qk, rows = a.q + a.k, a.heads + a.kv_heads
    rotary = a.rotary_dims > 0
    out: list[Saved] = []
    if mode == "l2" or spec.norm == "rmsnorm":
        per_row = 2 if mode == "full" else rows
        weight = qk if mode != "l2" and spec.norm_affine != "none" else 0
        out += [Saved(component, per_row + weight, dtype="fp32"),
                Saved(component, qk, dtype="fp32" if mode == "l2" and rotary else "fp32_copy")]  # fmt: skip
    else:
        out += [Saved(component, 2 * (2 if mode == "full" else rows))]
    if mode != "l2" or not rotary:  # the norm reads the fused output: kept in eager mode too (an
        # upcasting norm keeps it only in fp32, and in 16 bits its fp32 copy instead)
        upcast = mode == "l2" or spec.norm == "rmsnorm"
        out += [Saved(component, kv, dtype="fp32_self" if upcast else "act", attention="eager", kept=SCORES)]
    if not rotary:  # the normalised q and k are the core's inputs
        out += [Saved(component, qk, attention="flash", kept=SCORES), Saved(component, qk, kept=SELECTIVE)]
    if mode == "head" and a.rotary_dims == a.d_head or (mode == "head" and not rotary):
        out += [Saved(component, a.out_in, attention="flash", kept=SCORES)]
    return out
