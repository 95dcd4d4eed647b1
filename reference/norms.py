"""Norms of the reference model: LayerNorm and RMSNorm over the spec's widths, tagged "norm"."""

from __future__ import annotations

from torch import nn

from archspec.spec import ModelSpec


class LayerNorm(nn.LayerNorm):
    component = "norm"


class RMSNorm(nn.RMSNorm):
    component = "norm"


def make_norm(spec: ModelSpec, width: int | None = None, kind: str | None = None, inside: bool = False) -> nn.Module:
    """A norm of the spec's kind and epsilon over d_model (or `width`). `inside` a component (QK-norm,
    latent attention, the masked-LM head) it is untagged, so its parameters count with that component."""
    layernorm = (kind or spec.norm) == "layernorm"
    cls = (nn.LayerNorm if layernorm else nn.RMSNorm) if inside else (LayerNorm if layernorm else RMSNorm)
    return cls(width or spec.d_model, eps=spec.norm_eps)
