"""Counting conventions: the ways a paper's parameter count may differ from a unique-tensor count.

archspec counts every unique parameter tensor once (docs/architecture.md, "Conventions that
everything shares"). Papers do not always: some leave the norms' weights out, count a tied matrix
twice (as the input table and as the output head) or leave an untied head out, print the count of
a vocabulary padded for the hardware, count a model without the biases it has, or leave out the
relative position terms (Transformer-XL's per-layer W_r and u, v biases, as Gopher and Chinchilla have
them). Each convention
here is named, says in words what it does, and recomputes the counts of a spec under it; a claim
names the conventions its source followed (``conventions = ["norms_left_out"]``) and is then
recomputed under them, and `validate` searches them, alone and together, for a figure that stays
off.

A convention changes the spec (``vocab_padded_to_128``, ``biases_left_out``) or the count
(``norms_left_out``, ``head_left_out``, ``head_in_non_embedding``, ``tied_counted_twice``,
``positions_left_out``, ``relative_positions_left_out``); the changes compose.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archspec.spec.model import ModelSpec

PADDINGS = (64, 128, 256)  # vocabulary multiples searched (Megatron pads to 128 times the tensor-parallel size)


@dataclass(frozen=True)
class Counts:
    """The counts a claim can print, for one spec under some conventions."""

    params: int
    active_params: int
    non_embedding_params: int

    @property
    def embedding_params(self) -> int:
        return self.params - self.non_embedding_params

    def of(self, quantity: str) -> int:
        return getattr(self, quantity)


@dataclass(frozen=True)
class Convention:
    """One counting convention: its name, what it says, whether a spec has anything for it to change,
    and the change (to the spec, before counting; or to the counts: added to total and to N)."""

    name: str
    says: str
    applies: Callable[[ModelSpec, dict[str, Any]], bool]
    spec_change: Callable[[ModelSpec], dict[str, Any]] | None = None
    count_change: Callable[[dict[str, Any]], tuple[int, int]] | None = None  # (to total, to non-embedding)


def _facts(spec: ModelSpec) -> dict[str, Any]:
    """What the conventions read of a spec's description: norm parameters inside and outside N, the
    untied head, the tied matrix, the position tables."""
    from archspec.count.params import count_params
    from archspec.describe.blocks import Linear, describe
    from archspec.describe.entries import RelativeXL

    parts = describe(spec)
    by_path = {p.path: p for p in parts}
    pc = count_params(spec)
    norm = sum(p.copies * p.params() for p in parts if p.component == "norm")
    norm_n = sum(p.copies * p.params() for p in parts if p.component == "norm" and p.role not in ("embedding", "head"))
    tied = sum(by_path[e.tied].params() for p in parts if p.component == "head" for e in p.entries
               if isinstance(e, Linear) and e.tied is not None)  # fmt: skip
    table = sum(p.copies * p.params() for p in parts if p.component == "position" and p.role == "embedding")
    # Transformer-XL's terms: each layer's W_r (and u, v), and the u, v a stack's layers share
    relative = sum(p.copies * sum(_numel(shape) for _, shape in e.tensors()) for p in parts for e in p.entries
                   if isinstance(e, RelativeXL))  # fmt: skip
    relative += sum(p.copies * p.params() for p in parts if p.component == "position" and p.role == "dense")
    return {"count": pc, "norm": norm, "norm_n": norm_n, "head": pc.components["head"], "tied": tied,
            "position": table, "relative": relative}  # fmt: skip


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _has_bias(spec: ModelSpec) -> bool:
    b = spec.bias
    return b if isinstance(b, bool) else any((b.qkv, b.out, b.mlp))


def _padded(multiple: int) -> Convention:
    return Convention(
        f"vocab_padded_to_{multiple}",
        f"the vocabulary padded to a multiple of {multiple}",
        lambda spec, f: spec.vocab_size % multiple != 0,
        spec_change=lambda spec: {"vocab_size": -(-spec.vocab_size // multiple) * multiple},
    )


CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        Convention("norms_left_out", "norm weights left out", lambda s, f: f["norm"] > 0,
                   count_change=lambda f: (-f["norm"], -f["norm_n"])),
        Convention("head_left_out", "the untied output head left out", lambda s, f: f["head"] > 0,
                   count_change=lambda f: (-f["head"], 0)),
        Convention("head_in_non_embedding", "the untied output head counted among the non-embedding parameters",
                   lambda s, f: f["head"] > 0, count_change=lambda f: (0, f["head"])),
        Convention("tied_counted_twice", "the tied embedding counted twice (as the input table and as the head)",
                   lambda s, f: f["tied"] > 0, count_change=lambda f: (f["tied"], 0)),
        Convention("positions_left_out", "the learned position table left out", lambda s, f: f["position"] > 0,
                   count_change=lambda f: (-f["position"], 0)),
        Convention("relative_positions_left_out", "the relative position terms left out (Transformer-XL's W_r, u, v)",
                   lambda s, f: f["relative"] > 0, count_change=lambda f: (-f["relative"], -f["relative"])),
        Convention("biases_left_out", "biases left out", lambda s, f: _has_bias(s),
                   spec_change=lambda s: {"bias": False}),
        Convention("biases_counted", "biases on every attention and MLP projection", lambda s, f: not _has_bias(s),
                   spec_change=lambda s: {"bias": True}),
        *(_padded(m) for m in PADDINGS),
    )
}  # fmt: skip


def unknown(names) -> list[str]:
    return [n for n in names if n not in CONVENTIONS]


def counts_under(spec: ModelSpec, names: tuple[str, ...] | list[str] = ()) -> Counts:
    """The counts of `spec` under the named conventions (none: archspec's own exact counts)."""
    chosen = [CONVENTIONS[n] for n in names]
    for c in chosen:
        if c.spec_change is not None:
            spec = spec.replace(**c.spec_change(spec))
    facts = _facts(spec)
    pc = facts["count"]
    total, active, n = pc.total, pc.active, pc.non_embedding
    for c in chosen:
        if c.count_change is not None:
            dt, dn = c.count_change(facts)
            total, active, n = total + dt, active + dt, n + dn
    return Counts(total, active, n)


def applicable(spec: ModelSpec) -> list[str]:
    facts = _facts(spec)
    return [c.name for c in CONVENTIONS.values() if c.applies(spec, facts)]


def _compatible(names: tuple[str, ...]) -> bool:
    """At most one vocabulary padding, and not both biases_left_out and biases_counted."""
    return sum(n.startswith("vocab_padded_to_") for n in names) <= 1


def search(spec: ModelSpec, quantity: str, reproduces: Callable[[int], bool], most: int = 3) -> list[tuple[str, ...]]:
    """The smallest sets of conventions (at most `most`) under which `quantity` reproduces the printed
    figure; a set is left out when a smaller one inside it already reproduces it."""
    names = applicable(spec)
    found: list[tuple[str, ...]] = []
    for size in range(1, most + 1):
        for combo in itertools.combinations(names, size):
            if not _compatible(combo) or any(set(f) <= set(combo) for f in found):
                continue
            if reproduces(counts_under(spec, combo).of(quantity)):
                found.append(combo)
    return found


def described(names) -> str:
    """'norm weights left out and biases left out' for a set of convention names."""
    return " and ".join(CONVENTIONS[n].says for n in names)
