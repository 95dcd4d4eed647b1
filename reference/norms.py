"""Norms of the reference model: LayerNorm and RMSNorm over the spec's widths, tagged "norm".

Every norm takes the spec's parameters (``norm_affine``: weight and bias, weight only — LayerNorm
without a bias, as Cohere and OLMo 2 — or none) and epsilon; the weightless L2 norm of Llama 4's
QK-norm has no parameters at all.
"""

from __future__ import annotations

import torch
from torch import nn

from archspec.spec.model import ModelSpec


class LayerNorm(nn.LayerNorm):
    component = "norm"


class RMSNorm(nn.RMSNorm):
    component = "norm"


def make_norm(spec: ModelSpec, width: int | None = None, kind: str | None = None, inside: bool = False,
              affine: str | None = None) -> nn.Module:  # fmt: skip
    """A norm of the spec's kind, parameters (`norm_affine`, or `affine`) and epsilon over d_model
    (or `width`). `inside` a component (QK-norm, latent attention, the masked-LM head) it is
    untagged, so its parameters count with that component."""
    layernorm = (kind or spec.norm) == "layernorm"
    affine = affine or spec.norm_affine
    width = width or spec.d_model
    if layernorm:
        cls = nn.LayerNorm if inside else LayerNorm
        return cls(width, eps=spec.norm_eps, elementwise_affine=affine != "none", bias=affine == "weight_bias")
    cls = nn.RMSNorm if inside else RMSNorm
    return cls(width, eps=spec.norm_eps, elementwise_affine=affine != "none")


class L2Norm(nn.Module):
    """x / sqrt(mean(x²) + eps) over the last dimension, in fp32, with no weight (Llama 4's QK-norm,
    transformers' Llama4TextL2Norm)."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x)
