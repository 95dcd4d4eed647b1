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
- ``Cached``: keys and values kept for incremental decoding (the KV cache).

Parameters (archspec.count.params), matmul FLOPs and the non-matmul estimate (archspec.count.flops), activation
bytes (through the rule sets of archspec.memory.saved, which read each part's ``form``) and the KV cache
(archspec.memory) are all sums over this one description; the reference
model (archspec.reference) builds its modules from the same shapes (``AttentionShape``,
``MLPShape``, ``stack_shapes``) and a test holds every instantiated tensor equal, by path and shape,
to ``tensors(describe(spec))``.

Widths are written in exactly one place each:

- attention widths: ``AttentionShape`` (q, k, v, out_in), ``LatentShape`` (archspec.describe.attention);
- MLP widths and the gate factor: ``MLPShape`` (inputs, d_ff) (archspec.describe.mlp);
- which stacks exist, what each reads and whether it has cross-attention: ``stack_shapes``;
- the lengths a workload gives each stack: ``Lengths`` (archspec.describe.entries).

This module lays the model out: embeddings, positions, the stacks and their blocks, the head and the
MTP modules. The parts of one concept live beside it: ``Part`` and ``norm_part`` in archspec.describe.parts,
attention in archspec.describe.attention, the MLP and experts in archspec.describe.mlp, the recurrent mixers in
archspec.describe.mixers. Every public name of those is importable from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, wraps
from threading import Lock
from typing import Any, TypeVar

from archspec.core.vocab import ACTIVATIONS
from archspec.describe.attention import AttentionShape, LatentShape, attention_part
from archspec.describe.entries import (
    Attend,
    Cached,
    Conv,
    Entry,
    Lengths,
    Linear,
    Norm,
    Param,
    Pointwise,
    StackShape,
    Table,
    Work,
)
from archspec.describe.mlp import MLPShape, mlp_part, moe_parts
from archspec.describe.parts import COMPONENTS, ROLES, Part, Role, Tensor, norm_part, tensors
from archspec.spec.layers import LayerGroup, layer_groups
from archspec.spec.model import MIXERS, ModelSpec

__all__ = ["COMPONENTS", "MIXER_PARTS", "ROLES", "Attend", "AttentionShape", "Cached", "Conv", "LatentShape",
           "Lengths", "Linear", "MLPShape", "Norm", "Param", "Part", "Pointwise", "Role", "StackShape",
           "Table", "Tensor", "Work", "describe", "describing", "stack_shapes", "tensors"]  # fmt: skip


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


# ---------------------------------------------------------------- the model, part by part


# Inside `describing(spec)`, the parts of that spec are described once: a caller that asks several
# figures of one spec in a row (compare: its parameters, FLOPs, weights and KV cache each start from
# the parts) makes one description. A spec never changes once made (frozen), so the same object has
# the same parts. The held specs are keyed by identity (the entry keeps the spec, so its id is not
# reused while held) and counted by the blocks open on them, so blocks may nest, interleave (threads,
# generators) and close in any order: an entry goes when its last block closes.
T = TypeVar("T")
_held: dict[int, list] = {}  # id(spec) -> [spec, open blocks, {mtp: parts}]
_holding = Lock()  # opening and closing blocks from several threads


@contextmanager
def describing(spec: ModelSpec, carry: dict | None = None) -> Iterator[None]:
    """Within the block, describe(spec) is computed once (per `mtp`) and reused. `carry` (a dict a caller
    keeps for this one spec across calls, such as fit's memo over accelerators): what the block holds is
    kept there, and found again by the next block that carries it."""
    key = id(spec)
    with _holding:
        entry = _held.setdefault(key, [spec, 0, {} if carry is None else carry])
        entry[1] += 1
    try:
        yield
    finally:
        with _holding:
            entry[1] -= 1
            if entry[1] == 0:
                del _held[key]


def described(fold: Callable[..., T]) -> Callable[..., T]:
    """`fold(spec, ...)` runs inside describing(spec): every figure it asks starts from one description."""

    @wraps(fold)
    def run(spec: ModelSpec, *args: Any, **kwargs: Any) -> T:
        with describing(spec):
            return fold(spec, *args, **kwargs)

    return run


def held(spec: ModelSpec, key: Any, make: Callable[[], T]) -> T:
    """make(), once per `key` while describing(spec) holds the spec (a figure several folds ask, such as
    the parameter count FLOPs and weights both start from); make() each time otherwise."""
    entry = _held.get(id(spec))
    if entry is None:
        return make()
    memo = entry[2]
    try:
        if key not in memo:
            memo[key] = make()
    except TypeError:  # a key of numbers archspec.core.tracing records (unhashable): made each time
        return make()
    return memo[key]


def describe(spec: ModelSpec, mtp: bool = False) -> list[Part]:
    """The whole model as parts, in data-flow order; with `mtp`, the multi-token-prediction modules
    after the head (only when asked: transformers does not build them)."""
    entry = _held.get(id(spec))  # while held, no other object can have the spec's id
    if entry is None:
        return _describe(spec, mtp)
    memo, key = entry[2], bool(mtp)
    if key not in memo:
        memo[key] = tuple(_describe(spec, mtp))
    return list(memo[key])


def _describe(spec: ModelSpec, mtp: bool) -> list[Part]:
    d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
    stacks = stack_shapes(spec)
    first = stacks[0]
    parts = [Part("embed", "embed", "embedding", (Table("", V, e),))]
    if spec.kind == "encoder-decoder" and not spec.share_embeddings:
        parts.append(Part("target_embed", "embed", "embedding", (Table("", V, e),)))
    if spec.type_vocab_size:
        parts.append(Part("token_type", "token_type", "embedding", (Table("", spec.type_vocab_size, spec.d_position),)))
    for stack in stacks:
        parts += stack_parts(spec, stack)
    if spec.embedding.project_out:  # OPT: d_model -> d_embed after the last stack, which keeps its input
        parts.append(Part("project_out", "embed", "dense", (Linear("", d, e, spec.embedding.projection_bias),),
                          stack=stacks[-1], form="projection"))  # fmt: skip
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
    from archspec.spec.layers import Placement

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
    """The output head over the last stack: a linear map to the vocabulary (tied or not), ELECTRA's
    discriminator (dense, activation, one logit) or BERT's masked-LM head (dense, activation,
    LayerNorm, then the tied table with a vocabulary bias)."""
    d, V, e = spec.d_model, spec.vocab_size, spec.d_embed
    h_in = spec.d_head_input  # d_model, or d_embed after OPT's project_out
    tied = "embed" if spec.tie_embeddings else None
    act = ACTIVATIONS[spec.activation].function  # applied alone (of a gated one, its gate's function)
    if spec.head.kind == "discriminator":
        entries: tuple[Entry, ...] = (Linear("dense", d, d, True), Pointwise("act", act, d, "activations"),
                                      Linear("out", d, 1, True))  # fmt: skip
    elif spec.head.kind == "mlm":
        h = spec.head
        entries = (
            Linear("dense", d, e, h.dense_bias),
            Pointwise("act", act, e, "activations"),
            Norm("norm", e, "layernorm", affine="weight_bias" if h.norm_bias else "weight"),
            Linear("", e, V, h.bias, tied="embed"),
        )
    else:
        entries = (Linear("", h_in, V, spec.head.bias, tied=tied),)
    return Part("head", "head", "head", entries, stack=last, form="head")


def stack_parts(spec: ModelSpec, stack: StackShape) -> list[Part]:
    """Positions, the embedding norm, the blocks (one set of parts per layer kind) and the final norm
    of one stack."""
    d, e, joined = spec.d_model, spec.d_embed, spec.d_position  # joined: where positions join the tokens
    out: list[Part] = []
    at = stack.name
    kind = spec.position.kind
    position = dict(stack=stack, form="position")
    if kind == "alibi":  # no table: the bias is computed (what it keeps is the rule sets')
        out.append(Part(f"{at}.position", "position", "embedding", (), **position))
    if kind in ("learned", "sinusoidal"):
        table = (Table("", spec.max_positions + spec.position.offset, joined),) if kind == "learned" else ()
        out.append(Part(f"{at}.position", "position", "embedding", (*table, Pointwise("add", "position_add", joined,
                        "positions")), **position))  # fmt: skip
    elif kind == "disentangled":  # DeBERTa: one relative-position table per stack (and its LayerNorm)
        p = spec.position
        out.append(Part(f"{at}.position", "position", "embedding", (Table("", 2 * p.span, d),), **position))
        if p.norm:
            out.append(Part(f"{at}.position_norm", "norm", "dense", (Norm("", d, "layernorm"),), stack=stack))
    elif kind == "transformer_xl":  # the encodings of the distances; u and v when the layers share them
        heads = (spec.n_heads, spec.d_head)
        shared = (Param("u", heads), Param("v", heads)) if not spec.position.per_layer else ()
        out.append(Part(f"{at}.position", "position", "dense", shared, **position))
    elif kind == "relative":  # T5: one bias table per stack, shared by its layers' self-attention (umT5: the
        # layers' own tables, looked up by the stack's one bucket index: relative_bias_part)
        table: tuple[Entry, ...] = ()
        if not spec.position.per_layer:
            table = (Table("", spec.position.buckets, spec.n_heads),)
        out.append(Part(f"{at}.position", "position", "embedding", table, **position))
    if spec.embedding_norm:
        out.append(norm_part(spec, f"{at}.embedding_norm", stack, width=joined))
    if e != d and stack.first:  # factorised embeddings: d_embed -> d_model
        bias = spec.embedding.projection_bias
        out.append(Part("embed_proj", "embed", "dense", (Linear("", e, d, bias),), stack=stack, form="projection"))
    # the stack's input: the token ids (and token types) looked up, the summed embeddings
    out.append(Part(at, "embed", "embedding", (), stack=stack, form="stack_input"))
    for n, group in enumerate(layer_groups(spec, stack.layers)):
        parts = block_parts(group.spec, stack, group, shared=spec.share_layers)
        out += [p._replace(holds=False) for p in parts] if spec.share_layers and n else parts
    if spec.final_norm:
        out.append(norm_part(spec, f"{at}.final_norm", stack))
    return out


# A sweep describes many specs whose layers repeat (the same widths at another depth, or the same
# kind in a new model): the parts of one layer kind depend on the spec's fields but not on its name
# or depth, so they are made once per kind and reused (measured in benchmarks/planning.py).
_BLOCKS: dict[tuple, tuple[Part, ...]] = {}
_BLOCKS_MAX = 4096  # kinds kept; the table is emptied when it is full, so memory stays bounded
_NOT_READ = frozenset({"name", "encoder_layers", "decoder_layers", "kinds", "layers", "mtp"})  # by a block


def block_parts(spec: ModelSpec, stack: StackShape, group: LayerGroup, shared: bool = False,
                layer: str | None = None) -> list[Part]:  # fmt: skip
    """The layers of one kind in a stack (`spec` is the spec that kind sees), `group.count` of them."""
    unplaced = stack._replace(layers=0)
    try:
        values = tuple(map(spec.__dict__.__getitem__, _block_fields()))
        # with the values' types: an int subclass (archspec.count.formula's traced ints) is described afresh
        key = (values, tuple(map(type, values)), unplaced, layer)
        body = _BLOCKS.get(key)
    except TypeError:  # a field that cannot be hashed: described afresh
        key, body = None, None
    if body is None:
        body = tuple(_block_body(spec, unplaced, layer))
        if key is not None:
            if len(_BLOCKS) >= _BLOCKS_MAX:
                _BLOCKS.clear()
            _BLOCKS[key] = body
    return [p._replace(stack=stack, repeat=group.count, group=group, shared=shared) for p in body]


@cache
def _block_fields() -> tuple[str, ...]:
    return tuple(f for f in ModelSpec.model_fields if f not in _NOT_READ)


def _block_body(spec: ModelSpec, stack: StackShape, layer: str | None) -> list[Part]:
    """The layers of one kind in a stack (`spec` is the spec that kind sees): each sub-layer with its
    norm(s) and residual add; a kind without a mixer or without an MLP has that sub-layer left out.

    pre/post: one norm per sublayer; sandwich: a norm before and after each sublayer (Gemma 2);
    post_sublayer: a norm after each sublayer only (OLMo 2); parallel: attention and MLP read the same
    input, through one shared norm or one each. Attention with a Mamba-2 mixer beside it (attention.ssm,
    Falcon-H1) is one sub-layer of two parts, the attention and the mixer, on one norm and one residual."""
    layer = layer or f"{stack.name}.layers.{{i}}"
    sublayers: list[tuple[str, list[Part]]] = []
    mixer = spec.mixer.kind
    if mixer in MIXERS:
        sublayers.append(("mixer", [MIXER_PARTS[mixer](spec, stack, layer)]))
    elif mixer != "none":
        parts = [attention_part(spec, stack, cross=False, layer=layer)]
        p = spec.position  # umT5: the layer's own relative bias table
        if p.kind == "relative" and p.per_layer:
            parts.append(relative_bias_part(spec, stack, layer))
        if mixer == "standard" and spec.mixer.ssm is not None:  # Falcon-H1: a Mamba-2 mixer beside it
            ssm = MIXER_PARTS["mamba2"](spec, stack, layer, spec.mixer.ssm)
            parts.append(ssm._replace(shares_input=True))  # its input: the normalised x the attention reads
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
            parts = [parts[0]._replace(shares_input=True)] + parts[1:]
        out += parts
        if position in ("sandwich", "post_sublayer"):
            out.append(norm_part(spec, f"{layer}.{name}_post_norm", stack))
        if spec.residual_scale != 1:
            scale = Pointwise("residual_scale", "scale", spec.d_model, "residual_adds")
            out.append(Part(f"{layer}.{name}", parts[0].component, "dense", (scale,), stack=stack))
    out[0] = out[0]._replace(first=True)  # the layer's input enters here
    return out


def relative_bias_part(spec: ModelSpec, stack: StackShape, layer: str) -> Part:
    """umT5's relative bias of one layer (position.per_layer): its own table of buckets x n_heads, looked up
    by the stack's one bucket index; it gives the scores a (heads, T, T) bias."""
    table = Table("", spec.position.buckets, spec.n_heads)
    return Part(f"{layer}.position", "position", "embedding", (table,), stack=stack, form="position")


def _mixer_parts():
    from archspec.describe import mixers

    return mixers.PARTS


class _Registry(dict):
    """kind -> the function that describes a recurrent mixer (archspec.describe.mixers), loaded on first use."""

    def __missing__(self, kind):
        self.update(_mixer_parts())
        return dict.__getitem__(self, kind)


MIXER_PARTS = _Registry()
