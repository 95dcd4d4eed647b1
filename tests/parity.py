"""The tests' one parity harness: a case (a spec, the implementation it is checked against, the parameter
whose nudge must show, and the changes that must break parity), weights moved off their initial values, a
cache of the other implementation's models, and the largest difference between two outputs.
tests/test_parity_families.py (transformers' families, torch.nn.Transformer) and
tests/test_parity_hybrids.py (the hybrids) check the reference model through it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from archspec import ModelSpec


@dataclass(frozen=True)
class Case:
    spec: ModelSpec
    family: str  # a checkpoint of archspec.reference.families (or torch.nn.Transformer)
    nudge: str  # the reference parameter whose nudge must show
    # changes of the spec that keep every shape but change the computation: the same weights no longer match
    features: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)  # changes of the weight map that keep shapes


def randomize(model, std: float = 0.02):
    """Every parameter moved off its initial value (biases off 0, norm weights off 1 or 0), seeded."""
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * std)
    return model


def cached(make: Callable[[str], tuple]) -> Callable[[str], tuple]:
    """`make(key)` (an implementation, its inputs, its outputs) built once per key."""
    cache: dict[str, tuple] = {}

    def get(key: str) -> tuple:
        if key not in cache:
            cache[key] = make(key)
        return cache[key]

    return get


def max_diff(a, b) -> float:
    """The largest difference between two outputs (tensors, or tuples of tensors of the same shapes)."""
    a, b = ((a,) if isinstance(a, torch.Tensor) else a), ((b,) if isinstance(b, torch.Tensor) else b)
    assert len(a) == len(b)
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))
