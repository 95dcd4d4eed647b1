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
from dataclasses import dataclass, replace
from typing import Literal

from archspec.spec import ModelSpec

# What an entry runs over, per sequence: the stack's own tokens, the source (the encoder output
# that cross-attention reads), or the first token only (the pooler).
Rows = Literal["tokens", "source", "first"]
Role = Literal["embedding", "dense", "head"]

COMPONENTS = ("embed", "position", "token_type", "attention", "cross_attention", "mlp", "norm", "pooler", "head")
ROLES = ("embedding", "dense", "head")


# ---------------------------------------------------------------- shapes (each width written once)


@dataclass(frozen=True)
class AttentionShape:
    """Projection widths of one attention sublayer (grouped-query aware, d_head and d_value apart)."""

    d_model: int
    heads: int
    kv_heads: int
    d_head: int
    d_value: int
    bias: bool

    @classmethod
    def of(cls, spec: ModelSpec) -> AttentionShape:
        return cls(spec.d_model, spec.n_heads, spec.n_kv_heads, spec.d_head, spec.d_value, spec.bias)

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
        """Width of all value heads: kv_heads · d_value."""
        return self.kv_heads * self.d_value

    @property
    def out_in(self) -> int:
        """Width of the concatenated head outputs, the output projection's input: heads · d_value."""
        return self.heads * self.d_value

    @property
    def kv_per_token(self) -> int:
        """Values cached per token: keys and values of every key/value head."""
        return self.k + self.v


@dataclass(frozen=True)
class MLPShape:
    """d_model -> d_ff (two input projections, gate and up, for gated activations) -> d_model."""

    d_model: int
    d_ff: int
    activation: str
    gated: bool
    bias: bool

    @classmethod
    def of(cls, spec: ModelSpec) -> MLPShape:
        return cls(spec.d_model, spec.d_ff, spec.activation, spec.gated, spec.bias)

    @property
    def inputs(self) -> tuple[str, ...]:
        """The input projections: ('gate', 'up') for gated activations, ('up',) otherwise."""
        return ("gate", "up") if self.gated else ("up",)

    @property
    def pointwise(self) -> str:
        """The element-wise non-linearity: relu, gelu (gelu, geglu) or silu (silu, swiglu)."""
        return {"swiglu": "silu", "geglu": "gelu"}.get(self.activation, self.activation)


@dataclass(frozen=True)
class StackShape:
    """One stack of blocks: its name, depth, masking, cross-attention and the input it reads."""

    name: Literal["encoder", "decoder"]
    layers: int
    causal: bool
    cross: bool  # a decoder with an encoder before it attends to the encoder output
    reads: Literal["source", "target"]  # which token sequence is this stack's input
    first: bool  # the first stack takes the token-type table


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


@dataclass(frozen=True)
class Lengths:
    """A workload: batch B, target (or only) length T, source length S (encoder-decoder only)."""

    batch: int
    target: int
    source: int | None = None

    def of_stack(self, stack: StackShape) -> int:
        """Tokens per sequence that a stack runs over."""
        if stack.reads == "source" and self.source is not None:
            return self.source
        return self.target

    def rows(self, rows: Rows, stack: StackShape | None) -> int:
        """Rows per sequence of an entry: its stack's tokens, the source, or the first token."""
        if rows == "first":
            return 1
        if rows == "source":
            return self.source if self.source is not None else self.target
        return self.of_stack(stack) if stack is not None else self.target


# ---------------------------------------------------------------- entries


@dataclass(frozen=True)
class Linear:
    """y = x Wᵀ + b: weight (n_out, n_in), bias (n_out,). A tied one multiplies by `tied` (the path
    of another part's table) and owns no parameters."""

    name: str
    n_in: int
    n_out: int
    bias: bool
    rows: Rows = "tokens"
    tied: str | None = None

    def tensors(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        if self.tied is None:
            yield "weight", (self.n_out, self.n_in)
        if self.bias:
            yield "bias", (self.n_out,)


@dataclass(frozen=True)
class Table:
    """A learned lookup table of `rows` vectors of `width`: weight (rows, width)."""

    name: str
    rows: int
    width: int

    def tensors(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        yield "weight", (self.rows, self.width)


@dataclass(frozen=True)
class Norm:
    """LayerNorm: weight and bias of `width`; RMSNorm: weight only."""

    name: str
    width: int
    kind: Literal["layernorm", "rmsnorm"]

    def tensors(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        yield "weight", (self.width,)
        if self.kind == "layernorm":
            yield "bias", (self.width,)


@dataclass(frozen=True)
class Attend:
    """softmax(Q·Kᵀ / √d_head)·V for `heads` query heads over keys of `keys` rows: the score product
    (d_head per pair and head) and the value product (d_value per pair and head)."""

    name: str
    shape: AttentionShape
    causal: bool
    keys: Rows = "tokens"

    def tensors(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        return iter(())


@dataclass(frozen=True)
class Pointwise:
    """Element-wise work on `width` values per row, `cost` a key of archspec.flops.NON_MATMUL_COST,
    filed under `category` of the non-matmul estimate."""

    name: str
    cost: str
    width: int
    category: str
    rows: Rows = "tokens"

    def tensors(self) -> Iterator[tuple[str, tuple[int, ...]]]:
        return iter(())


# Which recomputation modes keep a saved tensor (Korthikanti et al. 2022, section 5): selective
# recomputation drops the tensors that grow with length squared; full recomputation keeps only each
# layer's input; tensors outside the blocks are kept in every mode.
LAYER = ("none", "selective")
SCORES = ("none",)
CHECKPOINT = ("full",)
ALWAYS = ("none", "selective", "full")


@dataclass(frozen=True)
class Saved:
    """A tensor autograd keeps for backward: `width` values per row (per query-key pair for
    rows='pairs'), in the computation's dtype ('act'), as one-byte dropout masks ('mask', only with
    dropout) or in fp32 ('fp32'). `group` files it in the breakdown; a `shared` tensor (the encoder
    output that every cross-attention reads) counts once, not once per layer; `kept` lists the
    recomputation modes that keep it."""

    group: str
    width: int
    rows: Rows | Literal["pairs"] = "tokens"
    dtype: Literal["act", "mask", "fp32"] = "act"
    kept: tuple[str, ...] = LAYER
    keys: Rows = "tokens"  # for rows='pairs': what the keys run over
    shared: bool = False


@dataclass(frozen=True)
class Cached:
    """Keys and values kept per token for incremental decoding."""

    width: int
    rows: Rows = "tokens"


Entry = Linear | Table | Norm | Attend | Pointwise


@dataclass(frozen=True)
class Part:
    """One component at one place in the model: `path` is the reference module's path, with `{i}`
    standing for the layer index when `repeat` layers each hold one."""

    path: str
    component: str
    role: Role
    entries: tuple[Entry, ...]
    repeat: int = 1
    stack: StackShape | None = None
    saved: tuple[Saved, ...] = ()
    cached: tuple[Cached, ...] = ()

    @property
    def layered(self) -> bool:
        return "{i}" in self.path

    def params(self) -> int:
        """Parameters of one copy of this part."""
        return sum(_numel(shape) for e in self.entries for _, shape in e.tensors())

    def paths(self) -> Iterator[str]:
        """The module path of every copy."""
        if self.layered:
            for i in range(self.repeat):
                yield self.path.format(i=i)
        else:
            yield self.path


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _join(*names: str) -> str:
    return ".".join(n for n in names if n)


@dataclass(frozen=True)
class Tensor:
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


def describe(spec: ModelSpec) -> list[Part]:
    """The whole model as parts, in data-flow order."""
    d, V = spec.d_model, spec.vocab_size
    stacks = stack_shapes(spec)
    parts = [Part("embed", "embed", "embedding", (Table("", V, d),))]
    if spec.kind == "encoder-decoder" and not spec.tie_embeddings:
        parts.append(Part("target_embed", "embed", "embedding", (Table("", V, d),)))
    if spec.type_vocab_size:
        parts.append(Part("token_type", "token_type", "embedding", (Table("", spec.type_vocab_size, d),)))
    for stack in stacks:
        parts += stack_parts(spec, stack)
    if spec.pooler:
        parts.append(Part("pooler", "pooler", "dense", (Linear("dense", d, d, True, rows="first"),)))
    if spec.head.kind == "lm":
        last = stacks[-1]
        tied = "embed" if spec.tie_embeddings else None
        parts.append(
            Part(
                "head",
                "head",
                "head",
                (Linear("", d, V, spec.head.bias, tied=tied),),
                stack=last,
                # the head's input and the logits, kept in fp32 for the loss (Korthikanti et al. 4.3)
                saved=(Saved("head_input", d, kept=ALWAYS), Saved("logits_fp32", V, dtype="fp32", kept=ALWAYS)),
            )
        )
    return parts


def stack_parts(spec: ModelSpec, stack: StackShape) -> list[Part]:
    """Positions, the embedding norm, the blocks and the final norm of one stack."""
    d = spec.d_model
    out: list[Part] = []
    at = stack.name
    if spec.position in ("learned", "sinusoidal"):
        table = (Table("", spec.max_positions, d),) if spec.position == "learned" else ()
        add = Pointwise("add", "position_add", d, "positions")
        out.append(Part(f"{at}.position", "position", "embedding", (*table, add), stack=stack))
    if spec.embedding_norm:
        out.append(norm_part(spec, f"{at}.embedding_norm", stack))
    # the stack's input: the dropout mask on the summed embeddings and, after an encoder, its output,
    # which every cross-attention reads and which is therefore kept once for the whole stack
    saved = (Saved("dropout_mask", d, dtype="mask", kept=ALWAYS),)
    if stack.cross:
        saved += (Saved("memory", d, rows="source", kept=ALWAYS, shared=True),)
    out.append(Part(at, "embed", "embedding", (), stack=stack, saved=saved))
    out += block_parts(spec, stack)
    if spec.final_norm:
        out.append(norm_part(spec, f"{at}.final_norm", stack))
    return out


def block_parts(spec: ModelSpec, stack: StackShape) -> list[Part]:
    """One block (repeated `stack.layers` times): each sublayer with its norm and residual add."""
    layer = f"{stack.name}.layers.{{i}}"
    sublayers = [("attention", attention_part(spec, stack, cross=False))]
    if stack.cross:
        sublayers.append(("cross_attention", attention_part(spec, stack, cross=True)))
    sublayers.append(("mlp", mlp_part(spec, stack)))
    out = []
    for name, part in sublayers:
        out.append(norm_part(spec, f"{layer}.{name}_norm", stack, repeat=stack.layers))
        out.append(part)
    # what full recomputation keeps of each layer: its input
    out[0] = replace(out[0], saved=out[0].saved + (Saved("layer_input", spec.d_model, kept=CHECKPOINT),))
    return out


def norm_part(spec: ModelSpec, path: str, stack: StackShape, repeat: int = 1) -> Part:
    """A norm over d_model; autograd keeps its input."""
    kept = LAYER if repeat > 1 or "{i}" in path else ALWAYS
    return Part(path, "norm", "dense", (Norm("", spec.d_model, spec.norm),), repeat=repeat, stack=stack,
                saved=(Saved("norms", spec.d_model, kept=kept),))  # fmt: skip


def attention_part(spec: ModelSpec, stack: StackShape, cross: bool) -> Part:
    """Self-attention (fused Q/K/V projection) or cross-attention (Q from the stack, K and V from
    the encoder output), the two attention products, the output projection."""
    a, d = AttentionShape.of(spec), spec.d_model
    component = "cross_attention" if cross else "attention"
    keys: Rows = "source" if cross else "tokens"
    if cross:
        projections = (Linear("q", d, a.q, a.bias), Linear("kv", d, a.k + a.v, a.bias, rows="source"))
    else:
        projections = (Linear("qkv", d, a.q + a.k + a.v, a.bias),)
    entries: tuple[Entry, ...] = (
        *projections,
        Attend("", a, causal=stack.causal and not cross, keys=keys),
        Linear("out", a.out_in, d, a.bias),
        Pointwise("residual", "residual", d, "residual_adds"),
    )
    if spec.position == "rotary" and not cross:
        entries += (Pointwise("rotary", "rotary", a.q + a.k, "positions"),)
    # Korthikanti et al. 2022, section 4, tensor by tensor: the projections' input, Q and K for
    # the scores, V, the output projection's input, the dropout mask after it; with the score
    # matrix kept, softmax output, its dropout mask and dropout output (2 + 1 + 2 bytes in 16 bits).
    saved = (
        Saved(component, d),
        Saved(component, a.q),
        Saved(component, a.k, rows=keys),
        Saved(component, a.v, rows=keys),
        Saved(component, a.out_in),
        Saved(component, d, dtype="mask"),
        Saved(f"{component}_scores", 2 * a.heads, rows="pairs", keys=keys, kept=SCORES),
        Saved(f"{component}_scores", a.heads, rows="pairs", keys=keys, dtype="mask", kept=SCORES),
    )
    cached = (Cached(a.kv_per_token, rows=keys),) if stack.name == "decoder" else ()
    return Part(f"{stack.name}.layers.{{i}}.{component}", component, "dense", entries, repeat=stack.layers,
                stack=stack, saved=saved, cached=cached)  # fmt: skip


def mlp_part(spec: ModelSpec, stack: StackShape) -> Part:
    """Input projection(s) to d_ff, the activation (times the gate), the down projection."""
    m = MLPShape.of(spec)
    entries: tuple[Entry, ...] = tuple(Linear(name, m.d_model, m.d_ff, m.bias) for name in m.inputs)
    entries += (Pointwise("act", m.pointwise, m.d_ff, "activations"),)
    if m.gated:
        entries += (Pointwise("gate_product", "gate", m.d_ff, "activations"),)
    entries += (
        Linear("down", m.d_ff, m.d_model, m.bias),
        Pointwise("residual", "residual", m.d_model, "residual_adds"),
    )
    # the input; per input projection its output and the activation's output (the down projection's
    # input): 2 · d_ff, or 4 · d_ff gated; the dropout mask after the block
    per_input = tuple(Saved("mlp", 2 * m.d_ff) for _ in m.inputs)
    saved = (Saved("mlp", m.d_model), *per_input, Saved("mlp", m.d_model, dtype="mask"))
    return Part(f"{stack.name}.layers.{{i}}.mlp", "mlp", "dense", entries, repeat=stack.layers, stack=stack,
                saved=saved)  # fmt: skip
