"""The output heads of the reference model, and BERT's pooler: a projection to the vocabulary (tied or
not), BERT's masked-LM head, ELECTRA's discriminator, each built from the spec's fields."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from archspec.reference.mlp import ACTIVATIONS
from archspec.reference.norms import make_norm
from archspec.spec.model import ModelSpec


class Head(nn.Module):
    """The output projection d -> V (with an optional bias, an input scale and a logit soft-cap);
    with tied embeddings its weight is the token embedding."""

    component = "head"
    role = "head"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        h = spec.head
        self.scale, self.softcap = h.scale, h.softcap
        width = spec.d_embed if spec.embedding.project_out else spec.d_model  # OPT: after project_out
        self.weight = nn.Parameter(torch.empty(spec.vocab_size, width))
        self.bias = nn.Parameter(torch.empty(spec.vocab_size)) if h.bias else None

    def forward(self, x):
        logits = F.linear(x * self.scale if self.scale != 1.0 else x, self.weight, self.bias)  # (B, T, V)
        return self.softcap * torch.tanh(logits / self.softcap) if self.softcap else logits


class MLMHead(nn.Module):
    """BERT's masked-LM head: LayerNorm(act(dense(x))) @ token tableᵀ + bias (the dense layer's, the
    norm's and the vocabulary's biases as the head's options say: ModernBERT keeps only the last)."""

    component = "head"
    role = "head"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        e, h = spec.d_embed, spec.head
        self.dense = nn.Linear(spec.d_model, e, bias=h.dense_bias)
        self.act = ACTIVATIONS[spec.activation]
        self.norm = make_norm(spec, e, "layernorm", inside=True, affine="weight_bias" if h.norm_bias else "weight")
        self.weight = nn.Parameter(torch.empty(spec.vocab_size, e))
        self.bias = nn.Parameter(torch.empty(spec.vocab_size)) if h.bias else None

    def forward(self, x):
        return F.linear(self.norm(self.act(self.dense(x))), self.weight, self.bias)  # (B, T, V)


class DiscriminatorHead(nn.Module):
    """ELECTRA's replaced-token detection: one logit per token, out(act(dense(x))) (B, T)."""

    component = "head"
    role = "head"

    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.dense = nn.Linear(spec.d_model, spec.d_model)
        self.act = ACTIVATIONS[spec.activation]
        self.out = nn.Linear(spec.d_model, 1)

    def forward(self, x):
        return self.out(self.act(self.dense(x))).squeeze(-1)  # (B, T)



class Pooler(nn.Module):
    """tanh(W h[:, 0] + b): BERT's pooled first token."""

    component = "pooler"

    def __init__(self, d_model: int):
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, h):
        return torch.tanh(self.dense(h[:, 0]))  # (B, d)


# ---------------------------------------------------------------- the model
