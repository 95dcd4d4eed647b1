"""One tensor autograd keeps for backward (``Saved``) and the recomputation modes that keep it.

A rule set (archspec.memory.saved) turns each part of the description into these records; the fold
(archspec.memory.activations.saved_bytes) sums their bytes over a workload.
"""

# Annotations are objects, not strings (no `from __future__ import annotations`): typing.NamedTuple
# compiles a ForwardRef for every string field when the class is made, at every start-up.
from typing import Literal, NamedTuple

from archspec.core.vocab import RECOMPUTE, Attention
from archspec.describe.entries import Rows

# Which recomputation modes keep a saved tensor: selective recomputation (the attention core
# checkpointed) keeps its inputs and output but not what lies inside it; full recomputation keeps
# only each layer's input; tensors outside the blocks are kept in every mode.
LAYER = ("none", "selective")
SCORES = ("none",)
SELECTIVE = ("selective",)
CHECKPOINT = ("full",)
ALWAYS = RECOMPUTE


class Saved(NamedTuple):
    """A tensor autograd keeps for backward in one training step (what archspec.reference.memory_measure
    measures, storage by storage): `width` values per row (per query-key pair for rows='pairs', per
    sequence for rows='sequence'), in the computation's dtype ('act'), in fp32, as int64 token ids, or
    as one-byte dropout masks ('mask', only with dropout, which the reference model does not run), as
    booleans ('bool', one byte), or as the fp32 copy of a 16-bit input ('fp32_copy': nothing in fp32,
    where the input itself is kept and counted where it was first saved), or as a tensor kept only when
    the computation is fp32 ('fp32_self': an upcasting op keeps its input itself in fp32, an fp32 copy
    in 16 bits). `group` files it in the breakdown; `kept` lists the recomputation modes that keep it;
    `attention` limits it to one attention mode ('flash': the fused kernel keeps its inputs, output and
    log-sum-exp; 'eager': head-major copies and the probabilities); a `shared` tensor (the encoder
    output every cross-attention reads) counts once; `per_batch` False for tensors that do not grow
    with the batch (rotary cos/sin)."""

    group: str
    width: int
    rows: Rows | Literal["pairs", "sequence"] = "tokens"
    dtype: Literal["act", "fp32", "int64", "mask", "bool", "fp32_copy", "fp32_self"] = "act"
    kept: tuple[str, ...] = LAYER
    keys: Rows = "tokens"  # for rows='pairs': what the keys run over
    shared: bool = False
    attention: Attention | None = None
    per_batch: bool = True
