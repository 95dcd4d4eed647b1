"""One description of every block: the tensors and operations of each component, written once.

``describe(spec)`` lays a model out as a list of ``Part``s — the token embedding, a position table,
one attention sublayer of a decoder layer, a norm, the output head — each with its component name
(the breakdown's key and the reference model's module name), its role, its module path and how
many layers repeat it. A part holds typed entries:

- ``Linear``: a dense map n_in -> n_out over some rows (weight, optional bias; a tied one reuses
  another part's table and has no parameters of its own);
- ``Table``: a learned lookup table (token, position and token-type embeddings);
- ``Norm``: LayerNorm (weight and bias) or RMSNorm (weight);
- ``Attend``: softmax(Q·Kᵀ)·V over all heads, the two products whose FLOPs grow with length;
- ``Pointwise``: element-wise work (activations, residual adds, position adds, rotations);
- ``Saved``: a tensor autograd keeps for backward (activation memory);
- ``Cached``: keys and values kept for incremental decoding (the KV cache).

Parameters (archspec.params), matmul FLOPs and the non-matmul estimate (archspec.flops), activation
bytes and the KV cache (archspec.memory) are all sums over this one description; the reference
model (archspec.reference) builds its modules from the same shapes (``AttentionShape``,
``MLPShape``, ``stack_shapes``) and a test holds every instantiated tensor equal, by path and shape,
to ``tensors(describe(spec))``.

Widths are written in exactly one place each:

- attention widths: ``AttentionShape`` (q, k, v, out_in);
- MLP widths and the gate factor: ``MLPShape`` (inputs, d_ff);
- which stacks exist, what each reads and whether it has cross-attention: ``stack_shapes``;
- the lengths a workload gives each stack: ``Lengths``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, NamedTuple

from archspec.entries import (
    ALWAYS,
    CHECKPOINT,
    LAYER,
    SCORES,
    SELECTIVE,
    Attend,
    Cached,
    Conv,
    Disentangled,
    Entry,
    Lengths,
    Linear,
    Norm,
    Param,
    Pointwise,
    Rows,
    Saved,
    StackShape,
    Table,
    Work,
)
from archspec.layers import LayerGroup, layer_groups
from archspec.spec import MIXERS, ModelSpec
from archspec.vocab import Role

__all__ = ["Attend", "Cached", "Conv", "Lengths", "Linear", "Norm", "Param", "Part", "Pointwise", "Saved",
           "StackShape", "Table", "Work", "describe", "stack_shapes", "tensors"]  # fmt: skip

# the breakdown's components and roles (Part.component, Part.role): archspec.vocab.COMPONENTS and ROLES


# ---------------------------------------------------------------- shapes (each width written once)


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
    def of(cls, spec: ModelSpec) -> AttentionShape:
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
    def of(cls, spec: ModelSpec) -> LatentShape:
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


class MLPShape(NamedTuple):
    """d_model -> d_ff (two input projections, gate and up, for gated activations) -> d_model."""

    d_model: int
    d_ff: int
    activation: str
    gated: bool
    bias: bool

    @classmethod
    def of(cls, spec: ModelSpec, d_ff: int | None = None) -> MLPShape:
        """The dense MLP of `spec` (or, with d_ff, an expert or shared expert of that width)."""
        return cls(spec.d_model, d_ff or spec.d_ff, spec.activation, spec.gated, spec.biases.mlp)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input projections: ('gate', 'up') for gated activations, ('up',) otherwise."""
        return ("gate", "up") if self.gated else ("up",)

    @property
    def pointwise(self) -> str:
        """The element-wise non-linearity: relu, gelu (gelu, geglu) or silu (silu, swiglu)."""
        return {"swiglu": "silu", "geglu": "gelu"}.get(self.activation, self.activation)


def stack_shapes(spec: ModelSpec) -> list[StackShape]:
    """The stacks present, in data-flow order. An encoder reads the source (the only input of an
    encoder-only model); a decoder reads the target and, after an encoder, cross-attends to it."""
    out = []
    if spec.encoder_layers:
        out.append(StackShape("encoder", spec.encoder_layers, causal=False, cross=False, reads="source", first=True))
    if spec.decoder_layers:
        enc = bool(spec.encoder_layers)
        out.append(StackShape("decoder", spec.decoder_layers, causal=True, cross=enc, reads="target", first=not enc))
    return out


# ---------------------------------------------------------------- parts


class Part(NamedTuple):
    """One component at one place in the model: `path` is the reference module's path, with `{i}`
    standing for the layer index when `repeat` layers each hold one."""

    path: str
    component: str
    role: Role
    entries: tuple[Entry, ...]
    repeat: int = 1  # layers that run it
    stack: StackShape | None = None
    saved: tuple[Saved, ...] = ()
    cached: tuple[Cached, ...] = ()
    group: LayerGroup | None = None  # the layers that hold it: their kind, spec and indices
    shared: bool = False  # one copy of the parameters serves every layer (ALBERT)
    holds: bool = True  # False: its parameters are another kind's (shared layers of kinds that differ in no tensor)

    @property
    def layered(self) -> bool:
        return "{i}" in self.path

    @property
    def kind(self) -> str | None:
        """The layer kind of a layered part (DeepSeek-V3: 'dense' or 'moe')."""
        return self.group.kind if self.group is not None else None

    @property
    def copies(self) -> int:
        """Copies of its parameters: one per layer, or one for all when shared."""
        if not self.holds:
            return 0
        return 1 if self.shared else self.repeat

    def params(self) -> int:
        """Parameters of one copy of this part."""
        return sum(_numel(shape) for e in self.entries for _, shape in e.tensors())

    def inactive(self) -> int:
        """Parameters of one copy that a token does not use: the experts it is not routed to."""
        return sum(e.inactive() for e in self.entries)

    def paths(self) -> Iterator[str]:
        """The module path of every copy (walks the layers: for checking tensor by tensor, not counting)."""
        if not self.holds:
            return
        if not self.layered:
            yield self.path
        elif self.shared:
            yield self.path.format(i=0)
        else:
            for i in self.group.indices():
                yield self.path.format(i=i)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _join(*names: str) -> str:
    return ".".join(n for n in names if n)


class Tensor(NamedTuple):
    """One parameter tensor of the model: its full module path, shape, component and role."""

    path: str
    shape: tuple[int, ...]
    component: str
    role: Role


def tensors(parts: list[Part]) -> Iterator[Tensor]:
    """Every parameter tensor, by full path (`decoder.layers.3.attention.qkv.weight`)."""
    for part in parts:
        for path in part.paths():
            for entry in part.entries:
                for name, shape in entry.tensors():
                    yield Tensor(_join(path, entry.name, name), shape, part.component, part.role)


# ---------------------------------------------------------------- the model, part by part


def describe(spec: ModelSpec, mtp: bool = False) -> list[Part]:
    """The whole model as parts, in data-flow order; with `mtp`, the multi-token-prediction modules
    after the head (only when asked: transformers does not build them)."""
    d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
    stacks = stack_shapes(spec)
    first = stacks[0]
    parts = [Part("embed", "embed", "embedding", (Table("", V, e),))]
    if spec.kind == "encoder-decoder" and not spec.share_embeddings:
        parts.append(Part("target_embed", "embed", "embedding", (Table("", V, e),)))
    if spec.type_vocab_size:
        parts.append(Part("token_type", "token_type", "embedding", (Table("", spec.type_vocab_size, e),)))
    for stack in stacks:
        parts += stack_parts(spec, stack)
    if spec.pooler:
        parts.append(Part("pooler", "pooler", "dense", (Linear("dense", d, d, True, rows="first"),)))
    if spec.head.kind != "none":
        parts.append(head_part(spec, stacks[-1] if stacks else first))
    if mtp and spec.mtp is not None:
        parts += mtp_parts(spec, stacks[-1])
    return parts


def mtp_parts(spec: ModelSpec, stack: StackShape) -> list[Part]:
    """DeepSeek-V3's multi-token-prediction modules (section 2.2): per module, norms of the hidden
    state and of the next token's embedding, a projection of the two (2 d_model -> d_model), one
    block of the module's kind, a final norm and, in released checkpoints, the module's own copies
    of the token table and output head. Every part is filed under the component 'mtp'."""
    from archspec.layers import Placement

    d, V = spec.d_model, spec.vocab_size
    m = spec.mtp
    if m.kind is not None:
        kind, kind_spec = m.kind, spec.kind_spec(m.kind)
    else:  # the last layer's kind
        groups = layer_groups(spec, stack.layers)
        kind = groups[0].placement.kind_at(stack.layers - 1)
        kind_spec = next(g.spec for g in groups if g.kind == kind)
    group = LayerGroup(kind, kind_spec, Placement((), (kind,), m.modules))
    at = "mtp.{i}"
    norm = Norm("", d, spec.norm, affine=spec.norm_affine)
    own: list[Part] = [Part(f"{at}.{n}", "mtp", "dense", (norm,), stack=stack) for n in ("embed_norm", "hidden_norm")]
    own += [Part(f"{at}.proj", "mtp", "dense", (Linear("", 2 * d, d, False),), stack=stack),
            Part(f"{at}.final_norm", "mtp", "dense", (norm,), stack=stack)]  # fmt: skip
    if m.own_tables:
        own += [Part(f"{at}.embed", "mtp", "embedding", (Table("", V, d),), stack=stack),
                Part(f"{at}.head", "mtp", "head", (Linear("", d, V, False),), stack=stack)]  # fmt: skip
    blocks = block_parts(kind_spec, stack, group, layer=f"{at}.block")
    return [p._replace(repeat=m.modules, group=group) for p in own] + [p._replace(component="mtp") for p in blocks]


def head_part(spec: ModelSpec, last: StackShape) -> Part:
    """The output head over the last stack: a linear map to the vocabulary (tied or not), or BERT's
    masked-LM head (dense, activation, LayerNorm, then the tied table with a vocabulary bias)."""
    d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
    tied = "embed" if spec.tie_embeddings else None
    # the head's input; the loss (cross-entropy in fp32, as trainers compute it): the log-softmax of
    # the logits (one storage for both of its users), the int64 targets and a 0-d fp32 weight
    saved = (Saved("head_input", d, kept=ALWAYS), Saved("loss", V, dtype="fp32", kept=ALWAYS),
             Saved("loss", 1, dtype="int64", kept=ALWAYS), Saved("loss", 1, rows="first", dtype="fp32", kept=ALWAYS,
                                                                 per_batch=False))  # fmt: skip
    if spec.head.kind == "discriminator":
        # ELECTRA: the dense layer keeps its input, the activation its input and output (ReLU its output), the
        # binary cross-entropy the fp32 logits and the fp32 labels, one value each per token
        act = {"swiglu": "silu", "geglu": "gelu", "clamped_swiglu": "silu"}.get(spec.activation, spec.activation)
        saved = (Saved("head_input", d, kept=ALWAYS), Saved("head", HIDDEN_KEPT[act] * d, kept=ALWAYS),
                 Saved("loss", 2, dtype="fp32", kept=ALWAYS))  # fmt: skip
        entries = (Linear("dense", d, d, True), Pointwise("act", MLPShape.of(spec).pointwise, d, "activations"),
                   Linear("out", d, 1, True))  # fmt: skip
        return Part("head", "head", "head", entries, stack=last, saved=saved)
    if spec.head.kind == "mlm":
        m = MLPShape.of(spec)
        # the activation (the element-wise function of a gated one) keeps its input and output (ReLU
        # its output only, which the LayerNorm keeps too); the LayerNorm its mean and 1/std per row (in
        # the input's dtype, CPU) and the tied map its input
        act = {"swiglu": "silu", "geglu": "gelu", "clamped_swiglu": "silu"}.get(spec.activation, spec.activation)
        saved += (Saved("head", HIDDEN_KEPT[act] * e, kept=ALWAYS), Saved("head", 2, kept=ALWAYS),
                  Saved("head", e, kept=ALWAYS))  # fmt: skip
        h = spec.head
        entries: tuple[Entry, ...] = (
            Linear("dense", d, e, h.dense_bias),
            Pointwise("act", m.pointwise, e, "activations"),
            Norm("norm", e, "layernorm", affine="weight_bias" if h.norm_bias else "weight"),
            Linear("", e, V, h.bias, tied="embed"),
        )
    else:
        entries = (Linear("", d, V, spec.head.bias, tied=tied),)
    return Part("head", "head", "head", entries, stack=last, saved=saved)


def stack_parts(spec: ModelSpec, stack: StackShape) -> list[Part]:
    """Positions, the embedding norm, the blocks (one set of parts per layer kind) and the final norm
    of one stack."""
    d, e = spec.d_model, spec.d_embed
    out: list[Part] = []
    at = stack.name
    kind = spec.position.kind
    # a bias on the scores is an input of every recomputed region (selective: the core; full: the
    # block), which keeps it, once per stack: ALiBi's (heads, keys) before its expansion over the
    # queries, T5's (heads, T, T) from its table
    recomputed = SELECTIVE + CHECKPOINT
    if kind == "alibi":
        keep = (Saved("positions", spec.n_heads, kept=recomputed, per_batch=False),)
        out.append(Part(f"{at}.position", "position", "embedding", (), stack=stack, saved=keep))
    if kind in ("learned", "sinusoidal"):
        table = (Table("", spec.max_positions + spec.position.offset, e),) if kind == "learned" else ()
        out.append(Part(f"{at}.position", "position", "embedding", (*table, Pointwise("add", "position_add", e,
                        "positions")), stack=stack))  # fmt: skip
    elif kind == "disentangled":  # DeBERTa: one relative-position table per stack (and its LayerNorm)
        p = spec.position
        out.append(Part(f"{at}.position", "position", "embedding", (Table("", 2 * p.span, d),), stack=stack,
                        saved=disentangled_stack_saved(spec)))  # fmt: skip
        if p.norm:
            out.append(Part(f"{at}.position_norm", "norm", "dense", (Norm("", d, "layernorm"),), stack=stack))
    elif kind == "relative":  # T5: one bias table per stack, shared by its layers' self-attention
        # the lookup keeps its (T, T) bucket index (int64), once per stack (every layer's lookup reads the one
        # index with per_layer tables: their bias_part)
        index = (Saved("positions", 1, rows="pairs", dtype="int64", per_batch=False, kept=ALWAYS),)
        table: tuple[Entry, ...] = ()
        if not spec.position.per_layer:
            table = (Table("", spec.position.buckets, spec.n_heads),)
            index += (Saved("positions", spec.n_heads, rows="pairs", per_batch=False, kept=recomputed),)
        out.append(Part(f"{at}.position", "position", "embedding", table, stack=stack, saved=index))
    if spec.embedding_norm:
        out.append(norm_part(spec, f"{at}.embedding_norm", stack, width=e))
    if e != d and stack.first:  # ALBERT's factorised embeddings: d_embed -> d_model, which keeps its input
        out.append(Part("embed_proj", "embed", "dense", (Linear("", e, d, True),), stack=stack,
                        saved=(Saved("embed_proj", e, kept=ALWAYS),)))  # fmt: skip
    # the stack's input: the token ids the lookup keeps (int64), the token types of the first stack,
    # and the dropout mask on the summed embeddings (with dropout only)
    saved = (Saved("ids", 1, dtype="int64", kept=ALWAYS), Saved("dropout_mask", d, dtype="mask", kept=ALWAYS))
    if spec.type_vocab_size and stack.first:
        saved += (Saved("ids", 1, dtype="int64", kept=ALWAYS),)
    out.append(Part(at, "embed", "embedding", (), stack=stack, saved=saved))
    for n, group in enumerate(layer_groups(spec, stack.layers)):
        parts = block_parts(group.spec, stack, group, shared=spec.share_layers)
        out += [p._replace(holds=False) for p in parts] if spec.share_layers and n else parts
    if spec.final_norm:
        out.append(norm_part(spec, f"{at}.final_norm", stack))
    return out


def block_parts(spec: ModelSpec, stack: StackShape, group: LayerGroup, shared: bool = False,
                layer: str | None = None) -> list[Part]:  # fmt: skip
    """The layers of one kind in a stack (`spec` is the spec that kind sees): each sub-layer with its
    norm(s) and residual add; a kind without a mixer or without an MLP has that sub-layer left out.

    pre/post: one norm per sublayer; sandwich: a norm before and after each sublayer (Gemma 2);
    post_sublayer: a norm after each sublayer only (OLMo 2); parallel: attention and MLP read the same
    input, through one shared norm or one each. Attention with a Mamba-2 mixer beside it (attention.ssm,
    Falcon-H1) is one sub-layer of two parts, the attention and the mixer, on one norm and one residual."""
    layer = layer or f"{stack.name}.layers.{{i}}"
    sublayers: list[tuple[str, list[Part]]] = []
    mixer = spec.attention.kind
    if mixer in MIXERS:
        sublayers.append(("mixer", [MIXER_PARTS[mixer](spec, stack, layer)]))
    elif mixer != "none":
        parts = [attention_part(spec, stack, cross=False, layer=layer)]
        p = spec.position  # umT5: the layer's own relative bias table
        if p.kind == "relative" and p.per_layer:
            parts.append(relative_bias_part(spec, stack, layer))
        if mixer == "standard" and spec.attention.ssm is not None:  # Falcon-H1: a Mamba-2 mixer beside it
            ssm = MIXER_PARTS["mamba2"](spec, stack, layer, spec.attention.ssm)
            parts.append(ssm._replace(saved=ssm.saved[1:]))  # its input: the normalised x the attention keeps
        sublayers.append(("attention", parts))
    if stack.cross:
        sublayers.append(("cross_attention", [attention_part(spec, stack, cross=True, layer=layer)]))
    if spec.mlp.kind == "moe":
        sublayers.append(("mlp", moe_parts(spec, stack, layer)))
    elif spec.mlp.kind == "dense":
        sublayers.append(("mlp", [mlp_part(spec, stack, layer)]))
    position = spec.norm_position
    out = []
    for name, parts in sublayers:
        shared_norm = spec.block.kind == "parallel" and spec.block.shared_norm and name == "mlp"
        parallel = spec.block.kind == "parallel" and name == "mlp" and len(sublayers) > 1
        bare = name in ("attention", "mixer") and not spec.attention_norm  # the mixer reads the stream itself
        if not shared_norm and position != "post_sublayer" and not bare:
            out.append(norm_part(spec, f"{layer}.{name}_norm", stack, shared_input=parallel))
        if parallel and shared_norm:  # the MLP reads the norm's output the mixer's projection keeps
            parts = [parts[0]._replace(saved=parts[0].saved[1:])] + parts[1:]
        out += parts
        if position in ("sandwich", "post_sublayer"):
            out.append(norm_part(spec, f"{layer}.{name}_post_norm", stack))
        if spec.residual_scale != 1:
            scale = Pointwise("residual_scale", "scale", spec.d_model, "residual_adds")
            out.append(Part(f"{layer}.{name}", parts[0].component, "dense", (scale,), stack=stack))
    # what full recomputation keeps of each layer: its input (and the encoder output it reads)
    keep = (Saved("layer_input", spec.d_model, kept=CHECKPOINT),)
    if stack.cross:
        keep += (Saved("memory", spec.d_model, rows="source", kept=CHECKPOINT, shared=True),)
    out[0] = out[0]._replace(saved=out[0].saved + keep)
    return [p._replace(repeat=group.count, group=group, shared=shared) for p in out]


def relative_bias_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """umT5's relative bias of one layer (position.per_layer): its own table of buckets x n_heads, looked up
    by the stack's one bucket index; the (heads, T, T) bias it gives the scores is an input of the core that
    selective recomputation keeps (full recomputation runs the lookup again)."""
    table = Table("", spec.position.buckets, spec.n_heads)
    saved = (Saved("positions", spec.n_heads, rows="pairs", per_batch=False, kept=SELECTIVE),)
    return Part(f"{layer}.position", "position", "embedding", (table,), stack=stack, saved=saved)


def norm_part(spec: ModelSpec, path: str, stack: StackShape, width: int | None = None,
              shared_input: bool = False) -> Part:  # fmt: skip
    """A norm over d_model (or `width`); autograd keeps its input (`shared_input`: another norm of
    the same input keeps it already, as the two norms of a parallel block)."""
    w = width or spec.d_model
    kept = LAYER if "{i}" in path else ALWAYS
    if spec.norm == "layernorm":  # the input, and mean and 1/std per row in the input's dtype (CPU)
        saved = (Saved("norms", 2, kept=kept),) + (() if shared_input else (Saved("norms", w, kept=kept),))
    else:  # torch's composite RMSNorm: the fp32 input, 1/rms per row and, with a weight, the normalised x (fp32)
        own = 1 + w * (spec.norm_affine != "none")
        upcast = Saved("norms", w, dtype="fp32_copy" if shared_input else "fp32", kept=kept)
        saved = (Saved("norms", own, dtype="fp32", kept=kept), upcast)
    return Part(path, "norm", "dense", (Norm("", w, spec.norm, affine=spec.norm_affine),), stack=stack, saved=saved)


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
    score_bias = spec.position.kind == "alibi" or (spec.position.kind in ("relative", "disentangled") and not cross)
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
    return "fallback" if not cross and spec.position.kind in ("alibi", "relative", "disentangled") else None


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
    if not cross and causal and spec.position.kind == "relative":  # the bias masked inside the core
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


def _mlp_entries(m: MLPShape, prefix: str = "", copies: int = 1, uses: int | None = None) -> tuple[Entry, ...]:
    """Input projection(s) to d_ff, the activation (times the gate), the down projection; `copies`
    stacked experts of which each token passes through `uses`."""
    per_token = copies if uses is None else uses
    entries: tuple[Entry, ...] = tuple(Linear(prefix + n, m.d_model, m.d_ff, m.bias, copies=copies, uses=uses)
                                       for n in m.inputs)  # fmt: skip
    entries += (Pointwise(prefix + "act", m.pointwise, per_token * m.d_ff, "activations"),)
    if m.gated:
        entries += (Pointwise(prefix + "gate_product", "gate", per_token * m.d_ff, "activations"),)
    return entries + (Linear(prefix + "down", m.d_ff, m.d_model, m.bias, copies=copies, uses=uses),)


# values per row of d_ff that an MLP's hidden layer keeps: relu its output (shared with the down
# projection); gelu, silu, relu2 the projection's output and the activation's; gated: the gate's and
# up's outputs, act(gate) and the product; clamped SwiGLU the two outputs, the clamped gate,
# sigmoid(1.702 gate), their product, up + 1 and the product of the two
HIDDEN_KEPT = {"relu": 1, "gelu": 2, "silu": 2, "relu2": 2, "swiglu": 4, "geglu": 4, "clamped_swiglu": 7}


def _mlp_saved(m: MLPShape, per_token: int = 1) -> tuple[Saved, ...]:
    """The input and the hidden layer's tensors (HIDDEN_KEPT), `per_token` times per token (an
    expert: once per routed row); the dropout mask after the block (with dropout)."""
    return (Saved("mlp", per_token * m.d_model), Saved("mlp", HIDDEN_KEPT[m.activation] * per_token * m.d_ff),
            Saved("mlp", m.d_model, dtype="mask"))  # fmt: skip


def mlp_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """The dense MLP of one block, with its residual add."""
    m = MLPShape.of(spec)
    entries = _mlp_entries(m) + (Pointwise("residual", "residual", m.d_model, "residual_adds"),)
    return Part(f"{layer}.mlp", "mlp", "dense", entries, stack=stack, saved=_mlp_saved(m))


def moe_parts(spec: ModelSpec, stack: StackShape, layer: str) -> list[Part]:
    """A mixture of experts: the router d_model -> experts (with a score-correction bias where it is
    a parameter), the routed experts (stacked, each token through top_k of them) and the shared
    expert with its optional gate. Gemma 4's options: the router's weightless RMSNorm with its
    per-channel scale (`router_scale`) and d_model^-0.5, a scale per expert on the routing weights
    (`expert_scale`); a dense MLP beside the experts (`dense`, component 'mlp') with a norm after it
    (`dense_post_norm`) and the experts' own norms before and after them (`experts_norm`,
    `experts_post_norm`), the block's mlp_norm and mlp_post_norm around the sum. What these options
    keep for backward is measured in fp32 only (the 16-bit rows of the router's and the experts'
    norm inputs are not)."""
    moe, d = spec.mlp, spec.d_model
    path = f"{layer}.mlp"
    expert = MLPShape.of(spec, moe.d_expert)
    router: tuple[Entry, ...] = ()
    if moe.router_norm:
        router += (Norm("router_norm", d, "rmsnorm", affine="none"), Param("router_scale", (d,)),
                   Pointwise("router_scale", "scale", 2 * d, "norms"))  # fmt: skip
    router += (Linear("router", d, moe.experts, moe.router_bias),)
    if moe.correction_bias:
        router += (Param("router_correction", (moe.experts,)),)
    router += (Pointwise("router_scores", "sigmoid" if moe.scoring == "sigmoid" else "softmax", moe.experts,
                         "softmax"),)  # fmt: skip
    k = moe.top_k
    if moe.expert_scales:
        router += (Param("expert_scale", (moe.experts,)), Pointwise("expert_scale", "scale", k, "softmax"))
    # the router keeps its input, the fp32 scores, the chosen experts (int64) and, renormalising,
    # the chosen scores and their sum (fp32)
    # (beside a dense MLP, its input is the block's input, which the block's norm keeps already)
    routed = (() if moe.d_dense else (Saved("router", d),)) + (Saved("router", moe.experts, dtype="fp32"),
                                                               Saved("router", k, dtype="int64"))  # fmt: skip
    if moe.normalize:
        routed += (Saved("router", k + 1, dtype="fp32"),)
    if moe.router_norm:  # 1/rms per row (fp32), the normalised input and the scaled one the router reads
        routed += (Saved("router", 1, dtype="fp32"), Saved("router", 2 * d))
    if moe.expert_scales:  # the weights and the chosen experts' scales they are multiplied by
        routed += (Saved("router", 2 * k, dtype="fp32"),)
    # per routed row (N·k rows in all, however the router spreads them: every tensor an expert keeps
    # has one row per routed row): the expert's input and hidden tensors, the row and slot indices
    # (int64), the routing weight, the expert's output and the weighted output added back
    combine = (Saved("experts", 2 * k, dtype="int64"), Saved("experts", k), Saved("experts", 2 * k * d))
    parts = [
        Part(path, "router", "router", router, stack=stack, saved=routed),
        Part(path, "experts", "expert", _mlp_entries(expert, "experts.", moe.experts, moe.top_k)
             + (Pointwise("residual", "residual", d, "residual_adds"),), stack=stack,
             saved=_mlp_saved(expert, k) + combine),
    ]  # fmt: skip
    if moe.d_shared:
        shared = _mlp_entries(MLPShape.of(spec, moe.d_shared), "shared.")
        # its input is the router's; with a gate, sigmoid(gate) and the expert's output it scales
        kept = _mlp_saved(MLPShape.of(spec, moe.d_shared))[1:]
        if moe.shared_gate:
            shared += (Linear("shared_gate", d, 1, False),)
            kept += (Saved("shared_experts", 1), Saved("shared_experts", d))
        parts.append(Part(path, "shared_experts", "shared_expert", shared, stack=stack, saved=kept))
    if moe.d_dense:
        dense = MLPShape.of(spec, moe.d_dense)
        parts += [Part(path, "mlp", "dense", _mlp_entries(dense, "dense."), stack=stack, saved=_mlp_saved(dense)),
                  norm_part(spec, f"{path}.dense_post_norm", stack),
                  norm_part(spec, f"{path}.experts_norm", stack, shared_input=True),  # the input mlp_norm keeps
                  norm_part(spec, f"{path}.experts_post_norm", stack)]  # fmt: skip
    return parts


def _mixer_parts():
    from archspec import mixers

    return mixers.PARTS


class _Registry(dict):
    """kind -> the function that describes a recurrent mixer (archspec.mixers), loaded on first use."""

    def __missing__(self, kind):
        self.update(_mixer_parts())
        return dict.__getitem__(self, kind)


MIXER_PARTS = _Registry()
