"""The entry types of the model's description, each owning its formulas.

An entry is one thing a component holds or does: a linear map, a lookup table, a norm, the
attention products, a depthwise convolution, a bare parameter, element-wise work. Each type says
its parameter tensors (``tensors``), its matmul-class FLOPs (``matmul``: what torch's
FlopCounterMode counts) and its share of the non-matmul estimate (``non_matmul``), for one run of
its part over a workload (``Work``). The folds in archspec.count.params, archspec.count.flops and
archspec.memory sum these and never dispatch on an entry's type or a module's name: a new kind of
tensor is a new entry type here.

Conventions: 2 FLOPs per multiply-accumulate; attention counts the full score matrix (or, with
``causal_half``, the pairs a causal mask keeps); non-matmul costs per element are the rough figures
of ``NON_MATMUL_COST``, labelled as an estimate.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from collections.abc import Iterator
from typing import Literal, NamedTuple

from archspec.core.vocab import ACTIVATIONS

# What an entry runs over, per sequence: the stack's own tokens, the source (the encoder output
# that cross-attention reads), or the first token only (the pooler).
Rows = Literal["tokens", "source", "first"]
Shape = tuple[int, ...]

# Per-element costs of non-matmul work. Rough by nature and labelled as an estimate.
NON_MATMUL_COST = {
    "layernorm": 7,  # mean 1, subtract 1, square-and-sum 2, divide 1, scale 1, shift 1
    "rmsnorm": 4,  # square-and-sum 2, divide 1, scale 1
    "l2norm": 4,  # square-and-sum 2, divide 1, (no scale) 1 for the epsilon and root
    "softmax": 5,  # max 1, subtract 1, exp 1, sum 1, divide 1 (per score)
    "score_scale": 1,  # the 1/sqrt(dk) scaling (per score)
    **{a.op: a.cost for a in ACTIVATIONS.values()},  # the MLP's activations: relu 1, gelu 8, silu 4, ...
    "sigmoid": 4,
    "gate": 1,  # the elementwise product of a gated MLP or attention gate
    "residual": 1,
    "scale": 1,
    "bias": 1,
    "position_add": 1,
    "rotary": 3,  # per query/key element: two multiplies, one add
    "softplus": 4,
    # One step of a recurrence, per state element and token: the element-wise operations on the
    # state-sized tensors of the step, as the reference model (and transformers' PyTorch path) runs
    # them; work per channel or per head (softplus of dt, the D skip, beta, the gate) is left out
    # here and counted with the activations. Tested by counting the reference scan's operations.
    "mamba_scan": 8,  # dt·A, exp, dt·B, ·x, decay·h, + input, C·h, sum over the state (Mamba, Jamba)
    "mamba2_scan": 5,  # (dt·B)·x, decay·h (a scalar per head), + input, C·h, sum over the state (Mamba-2)
    "deltanet_scan": 7,  # decay·S, k·S and its sum, k·delta and its add, q·S and its sum (Gated DeltaNet)
}
NON_MATMUL_CATEGORIES = ("norms", "softmax", "activations", "residual_adds", "bias_adds", "positions", "recurrence")


class StackShape(NamedTuple):
    """One stack of blocks: its name, depth, masking, cross-attention and the input it reads."""

    name: Literal["encoder", "decoder"]
    layers: int
    causal: bool
    cross: bool  # a decoder with an encoder before it attends to the encoder output
    reads: Literal["source", "target"]  # which token sequence is this stack's input
    first: bool  # the first stack takes the token-type table


class Lengths(NamedTuple):
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


class Work(NamedTuple):
    """One run of a part over a workload: the lengths, the part's stack, whether causal attention
    counts only the pairs its mask keeps."""

    lengths: Lengths
    stack: StackShape | None
    causal_half: bool = False

    def rows(self, rows: Rows = "tokens") -> int:
        """Rows of the whole batch."""
        return self.lengths.batch * self.lengths.rows(rows, self.stack)


def matmul_flops(m: int, k: int, n: int) -> int:
    """(m × k) @ (k × n): m·n dot products of length k, 2 FLOPs per multiply-accumulate."""
    return 2 * m * k * n


def score_pairs(T: int, S: int, causal_half: bool) -> int:
    """Query-key pairs per head: the full T × S matrix, or the causal lower triangle."""
    if causal_half:
        if T != S:
            from archspec.core.errors import SpecError

            raise SpecError("causal_half needs equal query and key lengths")
        return T * (T + 1) // 2
    return T * S


class _Defaults:
    """What every entry answers; an entry type that has no parameters or no work of a kind takes
    these (named tuples cannot inherit, so `_answers` copies them onto each type)."""

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        return iter(())

    def matmul(self, w: Work) -> dict[str, int]:
        return {}

    def non_matmul(self, w: Work) -> dict[str, int]:
        return {}

    def inactive(self) -> int:
        """Parameters a token does not use (routed experts it is not sent to)."""
        return 0


def _answers(cls):
    for name in ("tensors", "matmul", "non_matmul", "inactive"):
        if name not in cls.__dict__:
            setattr(cls, name, getattr(_Defaults, name))
    return cls


@_answers
class Linear(NamedTuple):
    """y = x Wᵀ + b: weight (n_out, n_in), bias (n_out,). A tied one multiplies by `tied` (the path
    of another part's table) and owns no parameters. `copies` stacked maps (experts) of which each
    row passes through `uses`."""

    name: str
    n_in: int
    n_out: int
    bias: bool
    rows: Rows = "tokens"
    tied: str | None = None
    copies: int = 1  # experts: `copies` maps stacked as (copies, n_out, n_in)
    uses: int | None = None  # how many of the copies each row passes through (experts: top_k)

    @property
    def per_row(self) -> int:
        """Copies each row passes through."""
        return self.copies if self.uses is None else self.uses

    @property
    def per_copy(self) -> int:
        """Parameters of one copy (a tied weight is another part's)."""
        return self.n_in * self.n_out * (self.tied is None) + self.n_out * self.bias

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        stacked = (self.copies,) if self.copies > 1 else ()
        if self.tied is None:
            yield "weight", (*stacked, self.n_out, self.n_in)
        if self.bias:
            yield "bias", (*stacked, self.n_out)

    def matmul(self, w: Work) -> dict[str, int]:
        return {self.name: matmul_flops(w.rows(self.rows) * self.per_row, self.n_in, self.n_out)}

    def non_matmul(self, w: Work) -> dict[str, int]:
        return {"bias_adds": w.rows(self.rows) * self.per_row * self.n_out * self.bias * NON_MATMUL_COST["bias"]}

    def inactive(self) -> int:
        return (self.copies - self.per_row) * self.per_copy if self.copies > self.per_row else 0


@_answers
class Table(NamedTuple):
    """A learned lookup table of `rows` vectors of `width`: weight (rows, width)."""

    name: str
    rows: int
    width: int

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        yield "weight", (self.rows, self.width)


@_answers
class Norm(NamedTuple):
    """A norm over `width` values: LayerNorm (weight and bias, or as `affine` says), RMSNorm (weight),
    the weightless L2 norm (kind 'l2norm'); `per_row` values are normalised per row when the norm
    runs over several widths (per-head norms)."""

    name: str
    width: int
    kind: Literal["layernorm", "rmsnorm", "l2norm"]
    per_row: int | None = None
    affine: Literal["weight_bias", "weight", "none", None] = None  # None: the kind's own parameters

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        affine = self.affine or {"layernorm": "weight_bias", "rmsnorm": "weight", "l2norm": "none"}[self.kind]
        if affine != "none":
            yield "weight", (self.width,)
        if affine == "weight_bias":
            yield "bias", (self.width,)

    def non_matmul(self, w: Work) -> dict[str, int]:
        return {"norms": w.rows() * (self.per_row or self.width) * NON_MATMUL_COST[self.kind]}


@_answers
class Param(NamedTuple):
    """A bare parameter tensor of `shape` (Mamba's A_log, D and dt_bias; attention sinks; a router's
    score-correction bias)."""

    name: str
    shape: Shape

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        yield "", self.shape  # the parameter is the entry itself: `<part>.<name>`


@_answers
class Conv(NamedTuple):
    """A depthwise causal conv1d over `channels` with a kernel of `kernel` (weight (channels, 1,
    kernel), an optional bias), padded by kernel - 1 on both sides and cut to the sequence, as
    Mamba's reference implementation runs it: FlopCounterMode counts the padded output's
    channels x (T + kernel - 1) positions x kernel multiply-accumulates."""

    name: str
    channels: int
    kernel: int
    bias: bool

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        yield "weight", (self.channels, 1, self.kernel)
        if self.bias:
            yield "bias", (self.channels,)

    def matmul(self, w: Work) -> dict[str, int]:
        T = w.lengths.rows("tokens", w.stack)
        return {self.name: 2 * w.lengths.batch * self.channels * (T + self.kernel - 1) * self.kernel}


@_answers
class Attend(NamedTuple):
    """softmax(Q·Kᵀ / √d_head)·V for `heads` query heads over keys of `keys` rows: the score product
    (`d_head` per pair and head) and the value product (`d_value` per pair and head)."""

    name: str
    heads: int
    d_head: int
    d_value: int
    causal: bool
    keys: Rows = "tokens"
    score_bias: bool = False  # ALiBi or T5's relative bias, added to every score

    def _pairs(self, w: Work) -> tuple[int, int]:
        T, S = w.lengths.rows("tokens", w.stack), w.lengths.rows(self.keys, w.stack)
        return T * S, score_pairs(T, S, w.causal_half and self.causal)

    def matmul(self, w: Work) -> dict[str, int]:
        _, pairs = self._pairs(w)
        B, h = w.lengths.batch, self.heads
        return {"scores": 2 * B * h * pairs * self.d_head, "values": 2 * B * h * pairs * self.d_value}

    def non_matmul(self, w: Work) -> dict[str, int]:
        full, _ = self._pairs(w)
        n = w.lengths.batch * self.heads * full
        c = NON_MATMUL_COST
        return {"softmax": n * (c["softmax"] + c["score_scale"]), "positions": n * self.score_bias * c["position_add"]}


@_answers
class Disentangled(NamedTuple):
    """DeBERTa's position terms in one layer's attention: the stack's `rows` (2 · span) relative-position
    embeddings projected to position keys (c2p) and queries (p2c), once per forward pass whatever the batch
    (with the layer's own query and key projections, both of which run even for one term, as DeBERTa's code
    and transformers' run them; or, `own`, with pos_key / pos_query of its own, for its terms only); then,
    per head, q · k_posᵀ and k · q_posᵀ over every token and relative row (d_head per product), each
    gathered at the pairs' relative positions and added to the scores."""

    name: str
    d_model: int
    heads: int
    d_head: int
    rows: int  # relative rows: 2 · span
    c2p: bool
    p2c: bool
    own: bool  # pos_key / pos_query of its own (else the layer's q and k projections)
    bias: bool

    @property
    def terms(self) -> tuple[str, ...]:
        return tuple(t for t, on in (("c2p", self.c2p), ("p2c", self.p2c)) if on)

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        if not self.own:
            return
        for term, proj in (("c2p", "pos_key"), ("p2c", "pos_query")):
            if term in self.terms:
                yield f"{proj}.weight", (self.heads * self.d_head, self.d_model)
                if self.bias:
                    yield f"{proj}.bias", (self.heads * self.d_head,)

    def matmul(self, w: Work) -> dict[str, int]:
        B, T = w.lengths.batch, w.lengths.rows("tokens", w.stack)
        out = {}
        for term in ("c2p", "p2c"):  # the table's projection (once), then every head's product with it
            if term in self.terms or not self.own:  # shared projections both run, as DeBERTa's code does
                out[f"{term}_projection"] = matmul_flops(self.rows, self.d_model, self.heads * self.d_head)
            if term in self.terms:
                out[term] = 2 * B * self.heads * T * self.rows * self.d_head
        return out

    def non_matmul(self, w: Work) -> dict[str, int]:
        B, T = w.lengths.batch, w.lengths.rows("tokens", w.stack)
        return {"positions": len(self.terms) * B * self.heads * T * T * NON_MATMUL_COST["position_add"]}


@_answers
class RelativeXL(NamedTuple):
    """Transformer-XL's position term in one layer's attention (Dai et al. 2019, section 3.3): the sinusoidal
    encodings of the distances to every key (one row per key, d_model wide) projected by the layer's W_r
    (`r_proj`, no bias) once per forward pass whatever the batch; per head, (q + v) . W_r R over every query and
    key row (d_head per product), shifted to each pair's distance and added to the scores; u added to the
    queries of the content term. The layer's own u and v with `biases` (else the stack's)."""

    name: str
    d_model: int
    heads: int
    d_head: int
    biases: bool

    def tensors(self) -> Iterator[tuple[str, Shape]]:
        yield "r_proj.weight", (self.heads * self.d_head, self.d_model)
        if self.biases:
            yield "u", (self.heads, self.d_head)
            yield "v", (self.heads, self.d_head)

    def matmul(self, w: Work) -> dict[str, int]:
        B, T = w.lengths.batch, w.lengths.rows("tokens", w.stack)
        return {"relative_projection": matmul_flops(T, self.d_model, self.heads * self.d_head),
                "relative_scores": 2 * B * self.heads * T * T * self.d_head}  # fmt: skip

    def non_matmul(self, w: Work) -> dict[str, int]:
        # u and v added to every query (the term's addition to the scores is the Attend's score bias)
        return {"positions": 2 * w.rows() * self.heads * self.d_head * NON_MATMUL_COST["position_add"]}


@_answers
class Pointwise(NamedTuple):
    """Element-wise work on `width` values per row, `cost` a key of NON_MATMUL_COST, filed under
    `category` of the non-matmul estimate."""

    name: str
    cost: str
    width: int
    category: str
    rows: Rows = "tokens"

    def non_matmul(self, w: Work) -> dict[str, int]:
        return {self.category: w.rows(self.rows) * self.width * NON_MATMUL_COST[self.cost]}


Entry = Linear | Table | Norm | Param | Conv | Attend | Disentangled | RelativeXL | Pointwise


# ---------------------------------------------------------------- what is kept for decoding


class Cached(NamedTuple):
    """What a layer keeps for incremental decoding. Keys and values: `width` values per cached token
    of `rows`, at most `limit` tokens (a sliding window or chunk of w keeps the w - 1 tokens before
    the next query, as transformers' cache does). A recurrent state (`rows='state'`): `width`
    values per sequence, whatever the length (Mamba's conv and SSM states, DeltaNet's). `dtype`:
    the cache's dtype, or fp32 whatever the model's (transformers keeps the recurrent states of
    Mamba, Mamba-2 and Gated DeltaNet in fp32; their conv states in the model's dtype)."""

    width: int
    rows: Rows | Literal["state"] = "tokens"
    limit: int | None = None
    dtype: Literal["cache", "fp32"] = "cache"

    def values(self, lengths: Lengths, stack: StackShape | None) -> int:
        """Values cached per sequence after the workload's tokens."""
        if self.rows == "state":
            return self.width
        tokens = lengths.rows(self.rows, stack)
        return self.width * (tokens if self.limit is None else min(tokens, self.limit - 1))
