"""What each device of a serving layout holds beside the engine's reserve (archspec/memory): its stage's
weights and the batch's KV cache paged as the engine pages it (archspec.memory.paging), and the largest
batch that fits in what the reserve (archspec.memory.runtime) leaves.
"""

from __future__ import annotations

from dataclasses import dataclass

from archspec.memory.paging import Paging, paging
from archspec.memory.runtime import Reserve, reserve


@dataclass(frozen=True)
class Serving:
    """The engine and its settings; None: the engine's default."""

    engine: str | None = None
    fraction: float | None = None
    max_batched_tokens: int | None = None
    context_bytes: int | None = None

    def reserve(self, spec, acc, tp: int) -> Reserve:
        return reserve(spec, acc, self.engine, tp, self.fraction, self.max_batched_tokens, self.context_bytes)


@dataclass(frozen=True)
class Stage:
    """One device of a pipeline stage: the weights it holds and its layer caches, paged."""

    weights: int
    pages: Paging

    def cache_bytes(self, sequences: int, tokens: int) -> int:
        return sequences * self.pages.sequence_bytes(tokens)


def stage(spec, slots, weights: int, kv_dtype: str, engine: str, tp: int) -> Stage:
    return Stage(weights, paging(spec, slots, kv_dtype, engine, tp))


def max_batch(stages: list[Stage], usable: int, tokens: int, expert_parallel: int = 1) -> int:
    """The most sequences of `tokens` tokens whose paged cache fits on every device beside its stage's
    weights in `usable` bytes; each of the expert-parallel ranks serves its own sequences."""
    if any(usable < s.weights for s in stages):
        return 0
    # a stage that caches nothing (only MLP layers) limits no batch once its weights fit
    caching = [s.pages.max_sequences(usable - s.weights, tokens) for s in stages if s.pages.caches]
    return min(caching) * expert_parallel if caching else 0


def reserve_note(r: Reserve, human) -> str:
    """One line: the usable bytes and what the reserve holds back, item by item."""
    items = "; ".join(f"{i.name} {human(i.bytes)}" for i in r.items)
    return f"{human(r.usable_bytes)} of {human(r.capacity_bytes)} after the {r.engine} reserve ({items})"
