"""A decoder's cache as the reference model keeps it: what each layer holds, its length and its bytes."""

from __future__ import annotations

import torch
from torch import nn

from archspec.reference.attention import CrossAttention, LatentAttention, SelfAttention


def _cache_shapes(layer: nn.Module) -> dict[str, dict[str, tuple]]:
    """What one decoder layer keeps in its cache, by part and key: shapes with None for the batch and
    the cached length (see the forward passes of the attention modules)."""
    out: dict[str, dict[str, tuple]] = {}
    for m in layer.modules():
        if isinstance(m, LatentAttention):
            out["self"] = {"latent": (None, None, m.kv_rank), "k_rope": (None, 1, None, m.rope)}
            if m.indexer is not None:
                out["self"]["index_k"] = (None, None, m.indexer.dk)
        elif isinstance(m, (SelfAttention, CrossAttention)):
            part = "self" if isinstance(m, SelfAttention) else "cross"
            out[part] = {"k": (None, m.nkv, None, m.dk), "v": (None, m.nkv, None, m.dv)}
        elif getattr(m, "component", None) == "mixer":  # its own conv and recurrent states: shapes not checked
            out["self"] = None
    return out


def _shape_of(t) -> tuple | None:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else None


def _fits(shape: tuple | None, expected: tuple | None) -> bool:
    return (shape is not None and expected is not None and len(shape) == len(expected)
            and all(e is None or e == d for e, d in zip(expected, shape)))  # fmt: skip


def cache_length(cache: list[dict]) -> int:
    """Positions a cache has seen (a windowed layer holds fewer)."""
    first = cache[0]["self"] if cache else {}
    if "latent" in first:
        return first["latent"].shape[1]
    return first.get("seen", 0)


def cache_bytes(cache: list[dict]) -> int:
    """Bytes held by the tensors of a cache (keys and values, self- and cross-attention)."""
    return sum(t.numel() * t.element_size() for layer in cache for part in layer.values() for t in part.values()
               if isinstance(t, torch.Tensor))  # fmt: skip
